"""The counted virtual ESP32-C6's firmware: MicroPython's py/, extmod/ and lib/ from one pinned source release,
built for RV32IMAC with the bench's own port (firmware/esp32c6/counted) and cached by the hash of its inputs. The
same unpacked source gives the release's mpy-cross and its tests/ (bench.bundles.mpy_tests)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.config.fleet import Device
from bench.config.kinds import Esp32c6Settings, runs_counted
from bench.core.cachefiles import build_lock, sha256_file
from bench.core.errors import BenchError, ExitCode
from bench.core.folders import safe_folder
from bench.core.paths import FIRMWARE_DIR, cache_root
from bench.core.steps import Progress, no_progress

PORT_DIR = FIRMWARE_DIR / "esp32c6" / "counted"
IMAGE_NAME = "micropython.bin"  # the flashable image, next to the firmware's ELF
# the header ESP-IDF 5.x writes for MicroPython's ESP32_GENERIC_C6 (as the committed virtual firmware's)
ELF2IMAGE = ("--chip", "esp32c6", "elf2image", "--flash-mode", "dio", "--flash-freq", "80m", "--flash-size", "4MB")


@dataclass(frozen=True)
class Source:
    """A pinned source archive the firmware is built from, fetched by URL and checked by size and sha256."""

    name: str
    version: str
    url: str
    size: int
    sha256: str

    @property
    def filename(self) -> str:
        """The archive's file name (the URL's last part)."""
        return self.url.rsplit("/", 1)[1]


# The whole of MicroPython 1.26.1 (py/, extmod/, lib/, mpy-cross/, ports/, tests/): Debian's orig tarball, the
# one complete source of a release a package archive serves (PyPI's sdists carry py/ alone).
MICROPYTHON = Source(
    "micropython",
    "1.26.1",
    "http://deb.debian.org/debian/pool/main/m/micropython/micropython_1.26.1+ds.orig.tar.xz",
    6_084_116,
    "f5ad2ec89d3e921f753d448955af98b6005655f84ba26087dde6ba0e8d062f34",
)
# lib/mbedtls, the submodule Debian's +ds repack drops (the chip's build has mbedTLS through ESP-IDF: hashlib's md5
# and sha1, cryptolib, tls): Debian's own mbedtls source package, of the 3.6 line MicroPython 1.26's extmod is
# written for. Only its include/ and library/ are unpacked, into the MicroPython source's lib/mbedtls.
MBEDTLS = Source(
    "mbedtls",
    "3.6.7",
    "http://deb.debian.org/debian/pool/main/m/mbedtls/mbedtls_3.6.7.orig.tar.bz2",
    5_473_689,
    "a7e8bcbec0e6f761b4af24f25677626b35f762f68eef79c08677a363212d11f6",
)
MBEDTLS_PARTS = ("include", "library")
COMPILER = "riscv64-unknown-elf-gcc"  # Debian's gcc-riscv64-unknown-elf, with picolibc's rv32imac/ilp32 build
BOARD = "ESP32_GENERIC_C6"  # sys.implementation._build, as the esp32 port's C6 build names itself
BUILD_DATE_EPOCH = 1767225600  # 2026-01-01: the banner's build date, fixed so the build is reproducible
ELF_NAME = "micropython.elf"
MANIFEST_NAME = "firmware.json"
KEEP_OTHER_BUILDS = 2


class FirmwareBuildError(BenchError):
    """The firmware could not be fetched or built (the bench host's tools or downloads, not the product)."""

    exit_code = ExitCode.UNREACHABLE


@dataclass(frozen=True)
class BuiltFirmware:
    """A built firmware: the ELF QEMU loads with -kernel, and what it was built from."""

    folder: Path
    digest: str
    elf_sha256: str
    compiler: str
    built: bool  # False when the cached build was reused
    seconds: float

    @property
    def elf(self) -> Path:
        """The firmware ELF (qemu-system-riscv32 -kernel)."""
        return self.folder / ELF_NAME

    def as_dict(self) -> dict[str, object]:
        """JSON-ready fields (paths as strings)."""
        return {**asdict(self), "folder": str(self.folder), "elf": str(self.elf)}


def firmware_root() -> Path:
    """Where built firmwares are cached, one folder per input digest."""
    return cache_root() / "firmware" / "esp32c6-counted"


def compiler_version() -> str:
    """The cross compiler's first `--version` line (part of the build's digest)."""
    exe = shutil.which(COMPILER)
    if exe is None:
        raise FirmwareBuildError(
            f"{COMPILER} not found: the counted ESP32-C6 firmware is built with it",
            hint="apt-get install -y gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf (or .ci/setup)",
        )
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False)
    return (proc.stdout.splitlines() or ["?"])[0].strip()


def port_files() -> list[Path]:
    """The port's source files, sorted (every one is an input of the build). Python's bytecode caches are not: pip
    compiles an installed package's `.py` files, the manifest's and frozen modules' included, and their `.pyc`
    differ at every install, so an installed bench would otherwise build the firmware again after each one."""
    return sorted(p for p in PORT_DIR.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def firmware_digest(compiler: str) -> str:
    """The hash of everything the build depends on: the source release, the port's files, the compiler."""
    h = hashlib.sha256()
    sources = [f"{src.name}=={src.version} {src.sha256}" for src in (MICROPYTHON, MBEDTLS)]
    for part in (*sources, compiler, BOARD, str(BUILD_DATE_EPOCH)):
        h.update(part.encode() + b"\0")
    for path in port_files():
        h.update(path.relative_to(PORT_DIR).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def fetch_source(source: Source, downloads: Path) -> Path:
    """The pinned archive, downloaded once into the download cache and checked by size and sha256."""
    folder = safe_folder(downloads / "sources", "download cache")
    path = folder / source.filename
    if not path.is_file() or sha256_file(path) != source.sha256:
        part = path.with_name(f".{path.name}.{os.getpid()}.part")
        try:
            with urllib.request.urlopen(source.url, timeout=60) as resp, part.open("wb") as out:
                shutil.copyfileobj(resp, out)
        except OSError as exc:
            part.unlink(missing_ok=True)
            raise FirmwareBuildError(f"downloading {source.url} failed: {exc}") from None
        part.replace(path)
    if path.stat().st_size != source.size or sha256_file(path) != source.sha256:
        raise FirmwareBuildError(
            f"{source.name} {source.version}: {path} does not match its pin ({source.size} bytes, sha256 "
            f"{source.sha256})",
            hint="the server gave other bytes for the pinned URL: check the pins in bench/bundles/c6_firmware.py",
        )
    return path


def source_root() -> Path:
    """Where the pinned MicroPython source is unpacked (one folder per release, shared by every build)."""
    return cache_root() / "sources" / f"{MICROPYTHON.name}-{MICROPYTHON.version}"


def micropython_source(progress: Progress = no_progress) -> Path:
    """The unpacked MicroPython source's top folder (with py/, extmod/, tests/, and mbedTLS in lib/mbedtls),
    fetched and unpacked once."""
    root = source_root()
    done = root / ".unpacked"
    pins = f"{MICROPYTHON.sha256}\n{MBEDTLS.sha256}"
    with build_lock(root):
        if not done.is_file() or done.read_text(encoding="utf-8").strip() != pins:
            archive, mbedtls = (_fetch(src, progress) for src in (MICROPYTHON, MBEDTLS))
            progress(0, 0, f"unpacking {archive.name}")
            if root.exists():
                shutil.rmtree(root)
            _unpack(archive, safe_folder(root, "source cache"))
            progress(0, 0, f"unpacking {mbedtls.name}")
            _unpack_parts(mbedtls, _top(root) / "lib" / "mbedtls", MBEDTLS_PARTS)
            done.write_text(pins + "\n", encoding="utf-8")
    return _top(root)


def _top(root: Path) -> Path:
    (top,) = (p for p in root.iterdir() if p.is_dir())
    return top


def _fetch(source: Source, progress: Progress) -> Path:
    progress(0, 0, f"fetching {source.name} {source.version}")
    downloads = cache_root() / "downloads"
    with build_lock(downloads / "sources" / source.filename):
        return fetch_source(source, downloads)


def mpy_cross(progress: Progress = no_progress) -> Path:
    """The release's mpy-cross (it freezes the firmware's modules and builds .mpy files), built once with the
    host's gcc inside the unpacked source."""
    top = micropython_source(progress)
    exe = top / "mpy-cross" / "build" / "mpy-cross"
    with build_lock(exe):
        if not exe.is_file():
            progress(0, 0, "building mpy-cross")
            proc = subprocess.run(
                ["make", "-C", str(top / "mpy-cross"), f"-j{os.cpu_count() or 1}", f"PYTHON={sys.executable}"],
                capture_output=True, text=True, check=False,
                env={**os.environ, "LC_ALL": "C"},
            )  # fmt: skip
            if proc.returncode != 0:
                tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-12:])
                raise FirmwareBuildError(f"building mpy-cross failed (make exit {proc.returncode}):\n{tail}")
    return exe


def _read_manifest(folder: Path) -> BuiltFirmware | None:
    try:
        data = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
        data.pop("elf", None)
        firmware = BuiltFirmware(**{**data, "folder": folder, "built": False, "seconds": 0.0})
    except (OSError, ValueError, TypeError):
        return None
    if not firmware.elf.is_file() or sha256_file(firmware.elf) != firmware.elf_sha256:
        return None
    return firmware


def cached_firmware(root: Path | None = None) -> BuiltFirmware | None:
    """The built firmware for the current inputs, or None when it needs building."""
    return _read_manifest((root or firmware_root()) / firmware_digest(compiler_version())[:16])


def build_firmware(*, root: Path | None = None, force: bool = False, progress: Progress = no_progress) -> BuiltFirmware:
    """Build (or reuse) the firmware. `root`: firmware cache folder."""
    started = time.monotonic()
    compiler = compiler_version()
    digest = firmware_digest(compiler)
    folder = (root or firmware_root()) / digest[:16]
    with build_lock(folder):  # one process builds; the others wait and take its build
        if not force and (firmware := _read_manifest(folder)) is not None:
            progress(1, 1, f"cached {folder}")
            return firmware
        top = micropython_source(progress)
        cross = mpy_cross(progress)
        safe_folder(folder.parent, "firmware cache")
        with tempfile.TemporaryDirectory(prefix=".build-", dir=folder.parent) as tmp:
            work = Path(tmp)
            shutil.copytree(PORT_DIR, work / "port")
            _make(work / "port", top, cross, work / "build", progress)
            out = work / "out"
            out.mkdir()
            shutil.copy2(work / "build" / ELF_NAME, out / ELF_NAME)
            firmware = BuiltFirmware(
                folder=folder, digest=digest, elf_sha256=sha256_file(out / ELF_NAME),
                compiler=compiler, built=True,
                seconds=round(time.monotonic() - started, 1),
            )  # fmt: skip
            data = {k: v for k, v in firmware.as_dict().items() if k not in ("folder", "elf", "built", "seconds")}
            (out / MANIFEST_NAME).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
            if folder.exists():
                shutil.rmtree(folder)
            out.rename(folder)
    _prune(folder)
    return firmware


def _unpack(archive: Path, dest: Path) -> None:
    """Unpack `archive` (tar, any compression) under `dest`."""
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")


def _unpack_parts(archive: Path, dest: Path, parts: tuple[str, ...]) -> None:
    """Unpack the folders `parts` of `archive`'s one top folder into `dest` (the top folder's name dropped)."""
    with tarfile.open(archive) as tar:
        members = []
        for member in tar.getmembers():
            _, _, inner = member.name.partition("/")
            if inner.split("/", 1)[0] in parts:
                member.name = inner
                members.append(member)
        tar.extractall(dest, members=members, filter="data")


def _make(port: Path, top: Path, cross: Path, build: Path, progress: Progress) -> None:
    """Run the port's Makefile, showing one step per compiled file."""
    sources = sum(len(list(folder.glob("*.c"))) for folder in (top / "py", top / "extmod", port))
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(BUILD_DATE_EPOCH), "LC_ALL": "C"}
    cmd = [
        "make",
        f"-j{os.cpu_count() or 1}",
        f"MPY_DIR={top}",
        f"MICROPY_MPYCROSS={cross}",
        f"BUILD={build}",
        f"BOARD={BOARD}",
    ]
    cmd.append(f"PYTHON={sys.executable}")
    log: list[str] = []
    done = 0
    with subprocess.Popen(cmd, cwd=port, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            log.append(line.rstrip())
            if line.startswith(("CC ", "AS ")):
                done += 1
                progress(min(done, sources), sources, f"compiling {Path(line.split()[1]).name}")
            elif line.startswith("LINK "):
                progress(sources, sources, "linking")
    if proc.returncode != 0:
        tail = "\n".join(log[-12:])
        raise FirmwareBuildError(
            f"building the counted ESP32-C6 firmware failed (make exit {proc.returncode}):\n{tail}"
        )


def _prune(keep: Path) -> None:
    """Drop all but the newest KEEP_OTHER_BUILDS other builds (other checkouts may still use those)."""
    others = sorted(
        (p for p in keep.parent.iterdir() if p.is_dir() and p != keep and not p.name.startswith(".")),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in others[KEEP_OTHER_BUILDS:]:
        shutil.rmtree(old, ignore_errors=True)


def image_for(elf: Path) -> Path:
    """The flashable ESP32-C6 image of the counted firmware `elf`, made once by esptool's `elf2image` next to it."""
    image = elf.with_name(IMAGE_NAME)
    if image.is_file() and image.stat().st_mtime >= elf.stat().st_mtime:
        return image
    part = image.with_name(f".{IMAGE_NAME}.{os.getpid()}.part")  # two processes may make it at once (xdist)
    made = subprocess.run([sys.executable, "-m", "esptool", *ELF2IMAGE, "-o", str(part), str(elf)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if made.returncode != 0:
        part.unlink(missing_ok=True)
        raise FirmwareBuildError(f"esptool elf2image {elf}: {(made.stdout + made.stderr).strip()[-500:]}")
    part.replace(image)
    return image


def counted_image(progress: Progress = no_progress) -> Path:
    """The flashable image of the counted firmware for the current inputs, built first when it is not cached
    (a fleet device's `firmware = "counted"`)."""
    return image_for(build_firmware(progress=progress).elf)


def device_firmware(device: Device, progress: Progress = no_progress) -> Path | None:
    """The firmware image `device` is flashed with: its kind's `firmware_image`, with the keyword "counted" (and a
    virtual board's default) resolved to the counted firmware's image (built when needed); None when the kind
    flashes no firmware."""
    settings = device.settings
    if isinstance(settings, Esp32c6Settings) and runs_counted(settings.firmware, device.virtual):
        return counted_image(progress)
    return device.kind_info.firmware_image(device.settings)
