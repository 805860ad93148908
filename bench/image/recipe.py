"""An image recipe (firmware/<kind>/recipe.toml) as validated data, and the hash that keys its build."""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.errors import ConfigError
from bench.paths import FIRMWARE_DIR

# Bumped when the builder's output changes for the same recipe (so cached images are rebuilt).
BUILDER_VERSION = "2"

_PKG_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
_COMPRESSIONS = ("lz4", "none")


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
        own = [("recipe", self.path), ("init", self.init), ("selftest", self.selftest)]
        for label, path in [*own, *sorted(self.extra_files.items())]:
            h.update(f"{label}\n".encode())
            h.update(hashlib.sha256(Path(path).read_bytes()).digest())
        return h.hexdigest()


def recipe_path(kind: str) -> Path:
    """Where the recipe for image `kind` lives."""
    return FIRMWARE_DIR / kind / "recipe.toml"


def load_recipe(path: Path, extra_files: dict[str, Path] | None = None) -> Recipe:
    """Read and validate a recipe file; `extra_files` (image path -> host file) are added to the image."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"image recipe {path} does not exist", hint="kinds with images: switch-arm64") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
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
        files[key] = path.parent / _field(image, key, str, f"{where}: [image]")
        if not files[key].is_file():
            raise ConfigError(f"{where}: [image] field {key!r}: {files[key]} does not exist")
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
    )


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
