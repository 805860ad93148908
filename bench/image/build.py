"""`hilbench image build`: turn a recipe into a kernel + initramfs, cached by the recipe's digest."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.errors import BenchError
from bench.image import rootfs
from bench.image.cpio import write_cpio
from bench.image.fetch import fetch_debs, fetch_wheel
from bench.image.guest_files import guest_files
from bench.image.recipe import Recipe, load_recipe, recipe_path
from bench.paths import cache_root
from bench.steps import Progress, no_progress

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

    @property
    def kernel(self) -> Path:
        """The kernel Image QEMU loads with -kernel."""
        return self.folder / KERNEL_NAME

    @property
    def initrd(self) -> Path:
        """The initramfs QEMU loads with -initrd."""
        return self.folder / INITRD_NAME

    def as_dict(self) -> dict[str, object]:
        """JSON-ready fields (paths as strings)."""
        data = asdict(self)
        data.update(folder=str(self.folder), kernel=str(self.kernel), initrd=str(self.initrd))
        return data


def images_root() -> Path:
    """Where built images are cached, one folder per recipe digest."""
    return cache_root() / "images"


def kind_recipe(kind: str) -> Recipe:
    """The recipe for image `kind`, with the guest files (agent bundle, model, keys) it carries."""
    return load_recipe(recipe_path(kind), guest_files(kind))


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
    debs = fetch_debs(recipe, downloads)
    wheels = [fetch_wheel(w, recipe.python_version, downloads) for w in recipe.wheels]
    folder.parent.mkdir(parents=True, exist_ok=True)
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
        _take_kernel(recipe, root_dir, out / KERNEL_NAME)
        rootfs.add_links(recipe, root_dir)
        rootfs.trim(recipe, root_dir)
        _write_boot_config(recipe, root_dir)
        rootfs.place(
            {"init": recipe.init, "opt/npc/selftest.py": recipe.selftest, **recipe.extra_files},
            root_dir,
            executable={"init"},
        )
        step("trimmed")
        rootfs.precompile(recipe, root_dir)
        step("precompiled .pyc")
        rootfs.finish(root_dir, recipe.source_date_epoch)
        rootfs_bytes = sum(p.stat().st_size for p in root_dir.rglob("*") if p.is_file() and not p.is_symlink())
        _archive(recipe, root_dir, out / INITRD_NAME)
        step("archived")
        image = BuiltImage(
            name=recipe.name,
            folder=folder,
            digest=recipe.digest(),
            kernel_release=recipe.kernel_release,
            cmdline=recipe.cmdline,
            initrd_sha256=_sha256(out / INITRD_NAME),
            kernel_sha256=_sha256(out / KERNEL_NAME),
            initrd_bytes=(out / INITRD_NAME).stat().st_size,
            kernel_bytes=(out / KERNEL_NAME).stat().st_size,
            rootfs_bytes=rootfs_bytes,
            built=True,
            seconds=round(time.monotonic() - started, 1),
        )
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
    """The kernel and initrd on disk still have the sha256 the build recorded."""
    return _sha256(image.kernel) == image.kernel_sha256 and _sha256(image.initrd) == image.initrd_sha256


def _take_kernel(recipe: Recipe, root_dir: Path, dest: Path) -> None:
    kernel = root_dir / "boot" / f"vmlinuz-{recipe.kernel_release}"
    if not kernel.is_file():
        raise BenchError(f"{recipe.kernel_package} has no boot/vmlinuz-{recipe.kernel_release}")
    shutil.move(kernel, dest)
    shutil.rmtree(root_dir / "boot")


def _write_boot_config(recipe: Recipe, root_dir: Path) -> None:
    """What /init reads: the module load order, as full paths."""
    etc = root_dir / "etc" / "npc"
    etc.mkdir(parents=True, exist_ok=True)
    base = f"/lib/modules/{recipe.kernel_release}/kernel"
    (etc / "modules").write_text("".join(f"{base}/{m}\n" for m in recipe.modules), encoding="utf-8")


def _archive(recipe: Recipe, root_dir: Path, dest: Path) -> None:
    raw = dest.with_suffix(".cpio")
    with raw.open("wb") as out:
        write_cpio(root_dir, out, recipe.source_date_epoch, {"dev/console": (5, 1), "dev/null": (1, 3)})
    if recipe.compression == "none":
        raw.rename(dest)
        return
    try:
        proc = subprocess.run(["lz4", "-l", "-q", "-f", str(raw), str(dest)], capture_output=True, text=True)
    except FileNotFoundError:
        raise BenchError("lz4 is not installed", hint="apt-get install lz4 (or set compression = 'none')") from None
    if proc.returncode != 0:
        raise BenchError(f"lz4 failed: {proc.stderr.strip()}")
    raw.unlink()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _read_manifest(folder: Path, *, built: bool, seconds: float) -> BuiltImage | None:
    try:
        data = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (folder / KERNEL_NAME).is_file() or not (folder / INITRD_NAME).is_file():
        return None
    fields = {k: data[k] for k in BuiltImage.__dataclass_fields__ if k in data}
    fields.update(folder=folder, built=built, seconds=seconds)
    try:
        return BuiltImage(**fields)
    except TypeError:
        return None
