"""An image recipe (firmware/<kind>/recipe.toml) as validated data, and the hash that keys its build."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.core.errors import ConfigError
from bench.core.inputs import load_toml
from bench.core.paths import FIRMWARE_DIR, PACKAGE_DIR

# Bumped when the builder's output changes for the same recipe (so cached images are rebuilt).
BUILDER_VERSION = "3"

_PKG_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
_COMPRESSIONS = ("lz4", "none")
FORMATS = ("initramfs", "disk")  # kernel + initramfs booted directly, or a disk image with /boot inside
PACKAGE_PREFIX = "package:"  # [files] sources shipped inside the bench package (bench/...)
_PATH_FIELDS = ("init", "selftest", "boot_init")  # [image] fields naming files beside their recipe


@dataclass(frozen=True)
class Wheel:
    """A pinned wheel unpacked into the image's site folder."""

    name: str
    version: str
    platform: str
    sha256: str


@dataclass(frozen=True)
class Recipe:
    """Everything that defines one image. `extra_files` maps image paths to host files (agent, model)."""

    path: Path
    name: str
    source_date_epoch: int
    compression: str
    init: Path
    selftest: Path
    arch: str
    keyring: Path
    sources: tuple[str, ...]
    packages: dict[str, str]
    wheels: tuple[Wheel, ...]
    python_version: str
    site: str
    cmdline: str
    modules: tuple[str, ...]
    links: dict[str, str]
    trim: tuple[str, ...]
    extra_files: dict[str, Path] = field(default_factory=dict)
    format: str = "initramfs"
    disk_mb: int = 0  # disk images: the filesystem's size (the file is sparse)
    boot_init: Path | None = None  # disk images: /init of the small boot initramfs that mounts the disk
    files: dict[str, Path] = field(default_factory=dict)  # the recipe's own files: image path -> host file
    chain: tuple[Path, ...] = ()  # the recipe files read, base first (`extends`)
    profile: str | None = None  # "module:NAME" of the board profile its stand-in telemetry tools read

    @property
    def kernel_package(self) -> str:
        """The pinned linux-image-<abi>-<arch> package."""
        return next(p for p in self.packages if p.startswith("linux-image-"))

    @property
    def kernel_release(self) -> str:
        """The kernel's release name (`uname -r`), e.g. 6.1.0-57-arm64."""
        return self.kernel_package.removeprefix("linux-image-")

    def digest(self) -> str:
        """sha256 over the builder version, the recipe file and every file it puts in the image."""
        h = hashlib.sha256()
        h.update(f"builder {BUILDER_VERSION}\n".encode())
        own = [("recipe", p) for p in self.chain or (self.path,)]
        own += [("init", self.init), ("selftest", self.selftest)]
        own += [("boot_init", self.boot_init)] if self.boot_init else []
        for label, path in [*own, *sorted(self.files.items()), *sorted(self.extra_files.items())]:
            h.update(f"{label}\n".encode())
            h.update(hashlib.sha256(Path(path).read_bytes()).digest())
        return h.hexdigest()


def recipe_path(kind: str) -> Path:
    """Where the recipe for image `kind` lives."""
    return FIRMWARE_DIR / kind / "recipe.toml"


def load_recipe(path: Path, extra_files: dict[str, Path] | None = None) -> Recipe:
    """Read and validate a recipe file; `extra_files` (image path -> host file) are added to the image."""
    data, chain = _read_chain(path, ())
    where = str(path)
    image = _section(data, "image", where)
    apt = _section(data, "apt", where)
    python = _section(data, "python", where)
    kernel = _section(data, "kernel", where)
    compression = _field(image, "compression", str, f"{where}: [image]")
    if compression not in _COMPRESSIONS:
        raise ConfigError(f"{where}: [image] field 'compression': {compression!r}", hint="use 'lz4' or 'none'")
    packages = _field(apt, "packages", dict, f"{where}: [apt]")
    for name, version in packages.items():
        if not _PKG_RE.match(name) or not isinstance(version, str) or not version:
            raise ConfigError(f"{where}: [apt.packages] {name!r} = {version!r}", hint='write "package" = "version"')
    if sum(1 for p in packages if p.startswith("linux-image-")) != 1:
        raise ConfigError(f"{where}: [apt.packages] must pin exactly one linux-image-<abi>-<arch> package")
    wheels = tuple(_wheel(raw, f"{where}: [[wheel]] #{i + 1}") for i, raw in enumerate(data.get("wheel", [])))
    files = {}
    for key in ("init", "selftest"):
        files[key] = Path(_field(image, key, str, f"{where}: [image]"))
        if not files[key].is_file():
            raise ConfigError(f"{where}: [image] field {key!r}: {files[key]} does not exist")
    fmt = image.get("format", "initramfs")
    if fmt not in FORMATS:
        raise ConfigError(f"{where}: [image] field 'format': {fmt!r}", hint="use 'initramfs' or 'disk'")
    boot_init = Path(image["boot_init"]) if "boot_init" in image else None
    if fmt == "disk" and (boot_init is None or not boot_init.is_file()):
        raise ConfigError(f"{where}: [image] field 'boot_init': a disk image needs an existing boot init script")
    own_files = {dest: Path(src) for dest, src in _section_opt(data, "files", where).items()}
    for dest, src in own_files.items():
        if not src.is_file():
            raise ConfigError(f"{where}: [files] {dest!r}: {src} does not exist")
    for dest, src in (extra_files or {}).items():
        if not Path(src).is_file():
            raise ConfigError(f"{where}: image file {dest}: source {src} does not exist")
    return Recipe(
        path=path,
        name=_field(image, "name", str, f"{where}: [image]"),
        source_date_epoch=_field(image, "source_date_epoch", int, f"{where}: [image]"),
        compression=compression,
        init=files["init"],
        selftest=files["selftest"],
        arch=_field(apt, "arch", str, f"{where}: [apt]"),
        keyring=Path(_field(apt, "keyring", str, f"{where}: [apt]")),
        sources=tuple(_field(apt, "sources", list, f"{where}: [apt]")),
        packages=dict(packages),
        wheels=wheels,
        python_version=_field(python, "version", str, f"{where}: [python]"),
        site=_field(python, "site", str, f"{where}: [python]"),
        cmdline=_field(kernel, "cmdline", str, f"{where}: [kernel]"),
        modules=tuple(_field(kernel, "modules", list, f"{where}: [kernel]")),
        links=dict(data.get("links", {})),
        trim=tuple(_section(data, "trim", where).get("remove", [])),
        extra_files={k: Path(v) for k, v in (extra_files or {}).items()},
        format=fmt,
        disk_mb=_field(image, "disk_mb", int, f"{where}: [image]") if fmt == "disk" else 0,
        boot_init=boot_init,
        files=own_files,
        chain=chain,
        profile=image.get("profile"),
    )


def _read_chain(path: Path, seen: tuple[Path, ...]) -> tuple[dict[str, Any], tuple[Path, ...]]:
    """The recipe at `path` merged over the one it `extends` (tables merge, lists extend, values override);
    file names in it made absolute, relative to the file that names them. Returns (data, files base first)."""
    path = path.resolve()
    if path in seen:
        raise ConfigError(f"image recipe {path}: 'extends' loops back to itself")
    data = load_toml(path, "image recipe", hint=f"recipes live in {FIRMWARE_DIR}")
    image = data.get("image", {})
    for key in _PATH_FIELDS:
        if isinstance(image.get(key), str):
            image[key] = str(path.parent / image[key])
    if isinstance(data.get("files"), dict):
        data["files"] = {k: str(_file_source(path, v)) for k, v in data["files"].items()}
    base = image.pop("extends", None)
    if base is None:
        return data, (path,)
    merged, chain = _read_chain(path.parent / base, (*seen, path))
    return _merge(merged, data), (*chain, path)


def _file_source(recipe: Path, value: str) -> Path:
    """A [files] source: relative to the recipe, or "package:PATH" inside the bench package (its tools)."""
    if value.startswith(PACKAGE_PREFIX):
        return PACKAGE_DIR / value.removeprefix(PACKAGE_PREFIX)
    return recipe.parent / value


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        elif isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = out[key] + [v for v in value if v not in out[key]]
        else:
            out[key] = value
    return out


def _section_opt(data: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: [{name}] must be a table")
    return value


def _section(data: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    value = data.get(name)
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: missing table [{name}]")
    return value


def _field(table: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in table:
        raise ConfigError(f"{where}: missing field {key!r}")
    value = table[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(f"{where}: field {key!r}: expected {kind.__name__}, got {value!r}")
    return value


def _wheel(raw: Any, where: str) -> Wheel:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: must be a table")
    wheel = Wheel(**{k: _field(raw, k, str, where) for k in ("name", "version", "platform", "sha256")})
    if not _SHA_RE.match(wheel.sha256):
        raise ConfigError(f"{where}: field 'sha256': not 64 hex digits", hint="pin the wheel's sha256")
    return wheel
