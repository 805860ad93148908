"""Assemble the image's root folder from .debs and wheels: unpack, link, trim, precompile, stamp."""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from bench.core.errors import BenchError
from bench.image.recipe import Recipe

_MADE_DIRS = ("proc", "sys", "dev", "tmp", "run", "mnt", "var/log", "etc", "root")


def unpack_deb(deb: Path, root: Path) -> None:
    """`dpkg-deb -x`: the package's files, without maintainer scripts."""
    proc = subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(f"dpkg-deb -x {deb.name} failed: {proc.stderr.strip()}", hint=f"delete {deb} to re-download")


def unpack_wheel(wheel: Path, site: Path) -> None:
    """A wheel is a zip of site-packages content."""
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            target = zf.extract(info, site)
            mode = (info.external_attr >> 16) & 0o777
            if not info.is_dir():
                os.chmod(target, mode or 0o644)


def add_links(recipe: Recipe, root: Path) -> None:
    """The symlinks Debian's maintainer scripts would have made."""
    for rel, target in recipe.links.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.exists():
            path.unlink()
        path.symlink_to(target)


def trim(recipe: Recipe, root: Path) -> None:
    """Remove what the guest never uses, and every kernel module the recipe does not load."""
    for pattern in recipe.trim:
        for path in root.glob(pattern.rstrip("/")):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif pattern.endswith("/"):
                continue
            else:
                path.unlink()
    modules = root / "lib" / "modules" / recipe.kernel_release
    if not modules.is_dir():
        raise BenchError(f"{recipe.kernel_package} has no lib/modules/{recipe.kernel_release}")
    keep = {modules / "kernel" / m for m in recipe.modules}
    for missing in keep - {p for p in keep if p.is_file()}:
        rel = missing.relative_to(modules / "kernel")
        raise BenchError(f"{recipe.path}: [kernel] modules: {rel} is not in {recipe.kernel_package}")
    for path in sorted(modules.rglob("*"), reverse=True):
        if path.is_file() and path not in keep and fnmatch.fnmatch(path.name, "*.ko*"):
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def place(files: dict[str, Path], root: Path, executable: set[str]) -> None:
    """Copy host files to their image paths (executables 0755, the rest 0644)."""
    for rel, src in sorted(files.items()):
        dest = root / rel.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        dest.chmod(0o755 if rel in executable else 0o644)


def precompile(recipe: Recipe, root: Path) -> None:
    """Compile every .py to .pyc on the host (import time in the guest drops ~5x); hash-checked, so the
    bytes do not depend on file times."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" != recipe.python_version:
        raise BenchError(f"precompiling for the guest's Python {recipe.python_version} needs the same host Python")
    folders = [root / f"usr/lib/python{recipe.python_version}", root / recipe.site, root / "opt"]
    cmd = [sys.executable, "-m", "compileall", "-q", "-s", str(root), "-p", "/"]
    cmd += ["--invalidation-mode", "unchecked-hash", "-j", "2", *[str(f) for f in folders if f.is_dir()]]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        bad = [line for line in proc.stdout.splitlines() if "Error" in line][:5]
        raise BenchError("precompiling the guest's Python files failed:\n" + "\n".join(bad or [proc.stderr[-500:]]))


def finish(root: Path, mtime: int) -> None:
    """The folders /init mounts onto, uniform modes (folders 0755, files 0755 or 0644 by their exec bit, so
    root and non-root builds, whatever their umask, give the same bytes), and one mtime on everything."""
    for rel in _MADE_DIRS:
        (root / rel).mkdir(parents=True, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            path = Path(dirpath) / name
            if not path.is_symlink():
                path.chmod(0o1777 if path == root / "tmp" else 0o755)
        for name in filenames:
            path = Path(dirpath) / name
            if not path.is_symlink():
                path.chmod(0o755 if path.stat().st_mode & 0o111 else 0o644)
        for name in dirnames + filenames:
            os.utime(Path(dirpath) / name, (mtime, mtime), follow_symlinks=False)
    os.utime(root, (mtime, mtime))


def write_boot_config(recipe: Recipe, root_dir: Path) -> None:
    """What /init reads: the module load order, as full paths."""
    etc = root_dir / "etc" / "npc"
    etc.mkdir(parents=True, exist_ok=True)
    base = f"/lib/modules/{recipe.kernel_release}/kernel"
    (etc / "modules").write_text("".join(f"{base}/{m}\n" for m in recipe.modules), encoding="utf-8")
