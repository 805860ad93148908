"""`hilbench image build`: turn a recipe into a kernel + initramfs, cached by the recipe's digest."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.core.cachefiles import build_lock, sha256_file
from bench.core.errors import BenchError
from bench.core.folders import safe_folder
from bench.core.paths import cache_root
from bench.core.steps import Progress, no_progress
from bench.image import disk, rootfs
from bench.image.cpio import write_archive
from bench.image.disk import BMAP_NAME, DISK_NAME
from bench.image.fetch import fetch_debs, fetch_wheel
from bench.image.guest_files import board_files, guest_files
from bench.image.recipe import Recipe, load_recipe, recipe_path

KERNEL_NAME = "vmlinuz"
INITRD_NAME = "initrd.img"
MANIFEST_NAME = "image.json"
KEEP_OTHER_BUILDS = 2  # earlier recipe versions kept in the cache (other checkouts may still boot them)


@dataclass(frozen=True)
class BuiltImage:
    """A built image: where its files are and what it is."""

    name: str
    folder: Path
    digest: str
    kernel_release: str
    cmdline: str
    initrd_sha256: str
    kernel_sha256: str
    initrd_bytes: int
    kernel_bytes: int
    rootfs_bytes: int
    built: bool  # False when the cached image was reused
    seconds: float
    format: str = "initramfs"
    disk_sha256: str = ""  # disk images: the sha256 a fleet pins ([device.os] sha256)
    disk_bytes: int = 0
    fingerprint: dict[str, object] | None = None  # disk images: what the booted OS reports (bench.provision)

    @property
    def kernel(self) -> Path:
        """The kernel Image QEMU loads with -kernel."""
        return self.folder / KERNEL_NAME

    @property
    def initrd(self) -> Path:
        """The initramfs QEMU loads with -initrd."""
        return self.folder / INITRD_NAME

    @property
    def disk(self) -> Path:
        """Disk images: the raw ext4 image written to the board's storage."""
        return self.folder / DISK_NAME

    @property
    def bmap(self) -> Path:
        """Disk images: the image's block map (bmaptool), with a sha256 per mapped range."""
        return self.folder / BMAP_NAME

    def artefacts(self) -> tuple[Path, ...]:
        """The files the build made (what must exist for the cached build to count)."""
        return (self.disk, self.bmap) if self.format == "disk" else (self.kernel, self.initrd)

    def as_dict(self) -> dict[str, object]:
        """JSON-ready fields (paths as strings)."""
        data = asdict(self)
        data.update(folder=str(self.folder))
        names = ("disk", "bmap") if self.format == "disk" else ("kernel", "initrd")
        data.update({name: str(getattr(self, name)) for name in names})
        return data


def images_root() -> Path:
    """Where built images are cached, one folder per recipe digest."""
    return cache_root() / "images"


def kind_recipe(kind: str) -> Recipe:
    """The recipe for image `kind`, with the bench's files it carries: the agent bundle, model and key for
    a console image; a disk image gets only its board's stand-in profile (the agent is deployed over SSH,
    so agent changes never force a reflash)."""
    path = recipe_path(kind)
    plain = load_recipe(path)
    return load_recipe(path, board_files(plain.profile) if plain.format == "disk" else guest_files(kind))


def image_folder(recipe: Recipe, root: Path | None = None) -> Path:
    """The cache folder a recipe builds into."""
    return (root or images_root()) / recipe.name / recipe.digest()[:16]


def cached_image(kind: str, root: Path | None = None) -> BuiltImage | None:
    """The built image for the current recipe of `kind`, or None when it needs building."""
    folder = image_folder(kind_recipe(kind), root)
    return _read_manifest(folder, built=False, seconds=0.0)


def build_image(
    kind: str,
    *,
    root: Path | None = None,
    downloads: Path | None = None,
    force: bool = False,
    progress: Progress = no_progress,
) -> BuiltImage:
    """Build (or reuse) the image for `kind`. `root`: images folder; `downloads`: download cache."""
    started = time.monotonic()
    recipe = kind_recipe(kind)
    folder = image_folder(recipe, root)
    with build_lock(folder):  # one process builds a recipe; the others wait and take its build
        return _build_locked(recipe, folder, started, downloads, force, progress)


def _build_locked(
    recipe: Recipe, folder: Path, started: float, downloads: Path | None, force: bool, progress: Progress
) -> BuiltImage:
    if not force and (image := _read_manifest(folder, built=False, seconds=0.0)) is not None:
        if intact(image):
            progress(1, 1, f"cached {folder}")
            return image
        progress(0, 1, f"cached {folder} does not match its sha256: rebuilding")
    downloads = downloads or cache_root() / "downloads"
    steps = len(recipe.packages) + len(recipe.wheels) + 5
    done = 0

    def step(what: str) -> None:
        nonlocal done
        done += 1
        progress(done, steps, what)

    progress(0, steps, "downloading packages")
    with build_lock(downloads):  # the download cache is shared by every recipe's build
        debs = fetch_debs(recipe, downloads)
        wheels = [fetch_wheel(w, recipe.python_version, downloads) for w in recipe.wheels]
    safe_folder(folder.parent, "image cache")  # the build's own 0700 temp folder goes in it
    with tempfile.TemporaryDirectory(prefix=".build-", dir=folder.parent) as tmp:
        work = Path(tmp)
        root_dir = work / "root"
        for name, deb in sorted(debs.items()):
            rootfs.unpack_deb(deb, root_dir)
            step(f"unpacked {name}")
        for wheel in wheels:
            rootfs.unpack_wheel(wheel, root_dir / recipe.site)
            step(f"unpacked {wheel.name}")
        out = work / "out"
        out.mkdir()
        if recipe.format == "disk":
            fields = disk.build(recipe, root_dir, work, out)
            image = BuiltImage(
                name=recipe.name, folder=folder, digest=recipe.digest(), kernel_release=recipe.kernel_release,
                cmdline=recipe.cmdline, built=True, seconds=round(time.monotonic() - started, 1), **fields,
            )  # fmt: skip
            step("disk image written")
        else:
            image = _build_initramfs(recipe, root_dir, out, folder, started)
            step("archived")
        (out / MANIFEST_NAME).write_text(json.dumps(image.as_dict(), indent=2) + "\n", encoding="utf-8")
        if folder.exists():
            other = None if force else _read_manifest(folder, built=False, seconds=0.0)
            if other is not None and intact(other):
                return other  # another bench process built the same recipe meanwhile (same bytes): keep its
            shutil.rmtree(folder)
        out.rename(folder)
    prune(folder.parent, keep=folder)
    step("done")
    return image


def _build_initramfs(recipe: Recipe, root_dir: Path, out: Path, folder: Path, started: float) -> BuiltImage:
    """Kernel + initramfs (the console image): the whole root folder becomes the initramfs."""
    _take_kernel(recipe, root_dir, out / KERNEL_NAME)
    rootfs.add_links(recipe, root_dir)
    rootfs.trim(recipe, root_dir)
    rootfs.write_boot_config(recipe, root_dir)
    rootfs.place(
        {"init": recipe.init, "opt/npc/selftest.py": recipe.selftest, **recipe.extra_files},
        root_dir,
        executable={"init"},
    )
    rootfs.precompile(recipe, root_dir)
    rootfs.finish(root_dir, recipe.source_date_epoch)
    rootfs_bytes = sum(p.stat().st_size for p in root_dir.rglob("*") if p.is_file() and not p.is_symlink())
    write_archive(recipe, root_dir, out / INITRD_NAME)
    return BuiltImage(
        name=recipe.name,
        folder=folder,
        digest=recipe.digest(),
        kernel_release=recipe.kernel_release,
        cmdline=recipe.cmdline,
        initrd_sha256=sha256_file(out / INITRD_NAME),
        kernel_sha256=sha256_file(out / KERNEL_NAME),
        initrd_bytes=(out / INITRD_NAME).stat().st_size,
        kernel_bytes=(out / KERNEL_NAME).stat().st_size,
        rootfs_bytes=rootfs_bytes,
        built=True,
        seconds=round(time.monotonic() - started, 1),
    )


def prune(kind_dir: Path, keep: Path, others: int = KEEP_OTHER_BUILDS) -> list[Path]:
    """Delete all but the `others` most recent earlier builds beside `keep` (each is ~80 MB)."""
    old = sorted(
        (p for p in kind_dir.iterdir() if p.is_dir() and p != keep and not p.name.startswith(".")),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    removed = old[others:]
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed


def intact(image: BuiltImage) -> bool:
    """The built files still have the sha256 the build recorded."""
    if image.format == "disk":
        return sha256_file(image.disk) == image.disk_sha256 and image.bmap.is_file()
    return sha256_file(image.kernel) == image.kernel_sha256 and sha256_file(image.initrd) == image.initrd_sha256


def _take_kernel(recipe: Recipe, root_dir: Path, dest: Path) -> None:
    kernel = root_dir / "boot" / f"vmlinuz-{recipe.kernel_release}"
    if not kernel.is_file():
        raise BenchError(f"{recipe.kernel_package} has no boot/vmlinuz-{recipe.kernel_release}")
    shutil.move(kernel, dest)
    shutil.rmtree(root_dir / "boot")


def _read_manifest(folder: Path, *, built: bool, seconds: float) -> BuiltImage | None:
    try:
        data = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    fields = {k: data[k] for k in BuiltImage.__dataclass_fields__ if k in data}
    fields.update(folder=folder, built=built, seconds=seconds)
    try:
        image = BuiltImage(**fields)
    except TypeError:
        return None
    return image if all(p.is_file() for p in image.artefacts()) else None
