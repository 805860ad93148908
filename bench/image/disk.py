"""Disk images for Linux boards: the root folder on an ext4 filesystem with /boot inside (kernel, a small
boot initramfs, the kernel command line), plus its bmap. Built without root or loop devices: `mke2fs -d`
fills the filesystem from the folder, `bmaptool create` maps it.

Reproducible: fixed UUID and hash seed (from the recipe's digest) and e2fsprogs' fake time
(E2FSPROGS_FAKE_TIME); every file carries the recipe's mtime.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

from bench.core.cachefiles import sha256_file
from bench.core.errors import BenchError
from bench.image import rootfs
from bench.image.cpio import write_archive
from bench.image.recipe import Recipe

DISK_NAME = "disk.img"
BMAP_NAME = "disk.img.bmap"
BOOT_KERNEL = "boot/vmlinuz"  # what the board's boot firmware loads (a real Pi: the FAT boot partition)
BOOT_INITRD = "boot/initrd.img"
BOOT_CMDLINE = "boot/cmdline.txt"
RC_PATH = "etc/npc/rc.sh"  # the recipe's `init`: busybox init's sysinit script on the disk


def build(recipe: Recipe, root_dir: Path, work: Path, out: Path) -> dict[str, object]:
    """Turn the unpacked packages in `root_dir` into `out/disk.img` + `out/disk.img.bmap`; the
    BuiltImage fields that describe them."""
    kernel = root_dir / "boot" / f"vmlinuz-{recipe.kernel_release}"
    if not kernel.is_file():
        raise BenchError(f"{recipe.kernel_package} has no boot/vmlinuz-{recipe.kernel_release}")
    kernel.rename(root_dir / BOOT_KERNEL)
    rootfs.add_links(recipe, root_dir)
    rootfs.trim(recipe, root_dir)
    rootfs.write_boot_config(recipe, root_dir)
    files = {RC_PATH: recipe.init, "opt/npc/selftest.py": recipe.selftest, **recipe.files, **recipe.extra_files}
    executable = {RC_PATH} | {dest for dest, src in recipe.files.items() if os.access(src, os.X_OK)}
    rootfs.place(files, root_dir, executable=executable)
    rootfs.precompile(recipe, root_dir)
    _boot_initrd(recipe, root_dir, work / "bootfs")
    (root_dir / BOOT_CMDLINE).write_text(recipe.cmdline + "\n", encoding="utf-8")
    rootfs.finish(root_dir, recipe.source_date_epoch)
    rootfs_bytes = sum(p.stat().st_size for p in root_dir.rglob("*") if p.is_file() and not p.is_symlink())
    fingerprint = os_fingerprint(recipe, root_dir)
    image = out / DISK_NAME
    make_ext4(recipe, root_dir, image)
    make_bmap(image, out / BMAP_NAME)
    return {
        "format": "disk",
        "kernel_sha256": sha256_file(root_dir / BOOT_KERNEL),
        "initrd_sha256": sha256_file(root_dir / BOOT_INITRD),
        "kernel_bytes": (root_dir / BOOT_KERNEL).stat().st_size,
        "initrd_bytes": (root_dir / BOOT_INITRD).stat().st_size,
        "rootfs_bytes": rootfs_bytes,
        "disk_sha256": sha256_file(image),
        "disk_bytes": image.stat().st_size,
        "fingerprint": fingerprint,
    }


def _boot_initrd(recipe: Recipe, root_dir: Path, bootfs: Path) -> None:
    """/boot/initrd.img: busybox, the recipe's modules and `boot_init` as /init (mounts the disk)."""
    assert recipe.boot_init is not None
    (bootfs / "bin").mkdir(parents=True)
    shutil.copy2(root_dir / "bin" / "busybox", bootfs / "bin" / "busybox")
    shutil.copy2(recipe.boot_init, bootfs / "init")
    modules = Path("lib/modules") / recipe.kernel_release / "kernel"
    for module in recipe.modules:
        (bootfs / modules / module).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root_dir / modules / module, bootfs / modules / module)
    rootfs.write_boot_config(recipe, bootfs)
    rootfs.finish(bootfs, recipe.source_date_epoch)
    write_archive(recipe, bootfs, root_dir / BOOT_INITRD)


def os_fingerprint(recipe: Recipe, root_dir: Path) -> dict[str, object]:
    """What the booted OS will report (bench.provision.fingerprint reads the same on a board)."""
    release = (root_dir / "usr/lib/os-release").read_text(encoding="utf-8")
    fields = dict(line.split("=", 1) for line in release.splitlines() if "=" in line)
    tegra = root_dir / "etc/nv_tegra_release"
    return {
        "os_release": {k: fields[k].strip('"') for k in ("ID", "VERSION_ID", "PRETTY_NAME") if k in fields},
        "kernel_release": recipe.kernel_release,
        "nv_tegra_release": tegra.read_text(encoding="utf-8").splitlines()[0] if tegra.is_file() else None,
    }


def make_ext4(recipe: Recipe, root_dir: Path, image: Path) -> None:
    """`mke2fs -d`: an ext4 filesystem of `disk_mb` filled from `root_dir` (sparse; no root needed)."""
    if shutil.which("mke2fs") is None:
        raise BenchError("mke2fs is not installed", hint="apt-get install e2fsprogs")
    fs_uuid = str(uuid.UUID(recipe.digest()[:32]))
    cmd = ["mke2fs", "-q", "-F", "-t", "ext4", "-b", "4096", "-m", "0", "-L", recipe.name[:16], "-U", fs_uuid]
    cmd += ["-E", f"hash_seed={fs_uuid},root_owner=0:0", "-d", str(root_dir), str(image), f"{recipe.disk_mb}M"]
    env = {**os.environ, "E2FSPROGS_FAKE_TIME": str(recipe.source_date_epoch)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip()[-600:]
        raise BenchError(f"mke2fs failed for {image.name}: {tail}", hint="raise [image] disk_mb if the disk is full")


def make_bmap(image: Path, bmap: Path) -> None:
    """`bmaptool create`: which blocks of the sparse image hold data, with a sha256 per range."""
    if shutil.which("bmaptool") is None:
        raise BenchError("bmaptool is not installed", hint="apt-get install bmap-tools")
    proc = subprocess.run(["bmaptool", "create", "-o", str(bmap), str(image)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(f"bmaptool create failed for {image}: {proc.stderr.strip()[-400:]}")
