"""The model store: signed versions of each model, per format, and bsdiff4 deltas between consecutive versions.

Layout: `ROOT/NAME/FORMAT/VERSION/model.bin` + `manifest.json` (signed), and for each version after the
first `delta-BASEVERSION.bsdiff` + `delta-BASEVERSION.json` (a signed delta manifest), and the same patch in
the microcontroller container as `delta-BASEVERSION.zlib.bsdiff` + `delta-BASEVERSION.zlib.json`. One model name can
have several formats (`tflite-int8` for Linux boards, `npcm-int8` for ESP32-C6), each with its own versions;
a device gets the format it runs. Where a name has a single format, `fmt` may be left out."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec

from bench.core.errors import ConfigError
from bench.core.folders import safe_folder, write_file
from bench.core.inputs import read_input
from bench.core.paths import cache_root
from bench.models.signing import model_manifest, sign_manifest
from bench.ota.delta import ALGOS, delta_manifest, make_patch

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
MAX_FILE = 64 * 1024 * 1024  # the largest file a store serves (a model's limit in bench.core.inputs)
MAX_VERSION = 999_999_999  # the largest version a store holds (nine digits as a path segment)
VERSION_RE = re.compile(r"^(0|[1-9][0-9]{0,8})$")  # a version (or delta base) as a path segment: plain digits


def version_of(segment: str) -> int | None:
    """The version a path segment names (`7`), or None for anything else (`+7`, ` 7`, `07`, `\u0667`, `..`)."""
    return int(segment) if isinstance(segment, str) and VERSION_RE.match(segment) else None


def default_store_dir() -> Path:
    """$HILBENCH_OTA_STORE, else the bench cache's ota-store ($HILBENCH_CACHE_DIR or ~/.cache/npc-hil-bench)."""
    env = os.environ.get("HILBENCH_OTA_STORE")
    return Path(env) if env else cache_root() / "ota-store"


def delta_stem(base_version: int, algo: str) -> str:
    """File name (without extension) of a delta from `base_version` in container `algo`."""
    return f"delta-{base_version}" + ("" if algo == "bsdiff4" else ".zlib")


@dataclass(frozen=True)
class PublishedModel:
    """What `publish` stored: the signed manifest and, when there was a previous version, the signed delta."""

    manifest: dict[str, Any]
    delta: dict[str, Any] | None


class ModelStore:
    """Signed model versions under one directory."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        if os.path.lexists(self.root) and not self.root.is_dir():  # a file or FIFO given as --store
            raise ConfigError(f"model store {self.root} is not a folder", hint="give the store's folder (--store DIR)",
                              file=str(self.root))  # fmt: skip

    def names(self) -> list[str]:
        """Every model name with at least one version."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and self.formats(p.name))

    def formats(self, name: str) -> list[str]:
        """The formats `name` is published in."""
        base = self.root / name
        if not NAME_RE.match(name) or not base.is_dir():
            return []
        return sorted(p.name for p in base.iterdir() if p.is_dir() and self.versions(name, p.name))

    def format_of(self, name: str, fmt: str | None) -> str:
        """`fmt`, or the only format `name` has; a ConfigError when that is ambiguous or there is none."""
        if fmt is not None:
            return fmt
        have = self.formats(name)
        if len(have) == 1:
            return have[0]
        if not have:
            models = ", ".join(self.names()) or "none"
            raise ConfigError(
                f"model store {self.root}: no model {name!r} (models: {models})",
                hint="publish it with `hilbench model publish`",
            )
        raise ConfigError(f"model store {self.root}: {name} has several formats ({', '.join(have)}): name one")

    def versions(self, name: str, fmt: str | None = None) -> list[int]:
        """The published versions of `name` in `fmt`, oldest first."""
        if fmt is None:
            fmt = self.format_of(name, None) if self.formats(name) else ""
        base = self.root / name / fmt if fmt and NAME_RE.match(name) and NAME_RE.match(fmt) else None
        if base is None or not base.is_dir():
            return []
        return sorted(int(p.name) for p in base.iterdir() if p.name.isdigit() and (p / "manifest.json").is_file())

    def version_dir(self, name: str, version: int, fmt: str | None = None) -> Path:
        """Where version `version` of `name` in `fmt` lives: a ConfigError when a name, format or version
        breaks the store's rules or the folder resolves outside the store (a symbolic link out of it), so no
        caller can be led out of the store (`..`, `/abs`, `a\\b`)."""
        fmt = self.format_of(name, fmt) if NAME_RE.match(name) else fmt
        if not NAME_RE.match(name) or not isinstance(fmt, str) or not NAME_RE.match(fmt):
            raise ConfigError(f"model store {self.root}: {name!r} / {fmt!r} is not a model name and format")
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise ConfigError(f"model store {self.root}: {version!r} is not a version")
        path = self.root / name / fmt / str(version)
        root = self.root.resolve()
        if path.exists() and root not in path.resolve().parents:
            raise ConfigError(f"model store {self.root}: {name}/{fmt}/{version} resolves outside the store")
        return path

    def blob_path(self, name: str, version: int, fmt: str | None = None) -> Path:
        """The model file of a version."""
        return self.version_dir(name, version, fmt) / "model.bin"

    def manifest(self, name: str, version: int, fmt: str | None = None) -> dict[str, Any]:
        """The signed manifest of a version, or a ConfigError naming what exists."""
        fmt = self.format_of(name, fmt)
        path = self.version_dir(name, version, fmt) / "manifest.json"
        if not os.path.lexists(path):
            have = ", ".join(map(str, self.versions(name, fmt))) or "none"
            raise ConfigError(f"model store {self.root}: no {name}@{version} in {fmt} (versions: {have})")
        manifest = self.read_json(path)
        said = (manifest.get("name"), manifest.get("format"), manifest.get("version"))
        if said != (name, fmt, version):
            raise ConfigError(
                f"model store {self.root}: {name}/{fmt}/{version} holds the manifest of "
                f"{said[0]!r} {said[1]!r} version {said[2]!r}",
                hint="a version folder was copied or planted by hand: remove it, publish with `hilbench model publish`",
                file=str(path),
            )
        return manifest

    def _delta_file(self, name: str, version: int, base_version: int, fmt: str | None, algo: str, ext: str) -> Path:
        if algo not in ALGOS:
            raise ConfigError(f"unknown delta algorithm {algo!r} (known: {', '.join(ALGOS)})")
        return self.version_dir(name, version, fmt) / f"{delta_stem(base_version, algo)}{ext}"

    def delta_path(
        self, name: str, version: int, base_version: int, fmt: str | None = None, algo: str = "bsdiff4"
    ) -> Path:
        """The patch from `base_version` to `version` in container `algo`."""
        return self._delta_file(name, version, base_version, fmt, algo, ".bsdiff")

    def delta_manifest(
        self, name: str, version: int, base_version: int, fmt: str | None = None, algo: str = "bsdiff4"
    ) -> dict[str, Any] | None:
        """The signed delta manifest from `base_version` to `version`, or None when there is no such delta."""
        path = self._delta_file(name, version, base_version, fmt, algo, ".json")
        return self.read_json(path) if os.path.lexists(path) else None

    def read_file(self, path: Path) -> bytes:
        """The bytes of a regular file inside the store, checked at open: no symbolic link followed, a FIFO or
        device never waited on (O_NONBLOCK), the open file regular, at most MAX_FILE bytes, and where it
        resolves inside the store; a ConfigError naming the file otherwise."""
        where = f"model store {self.root}: {path}"
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            why = "is a symbolic link" if exc.errno == errno.ELOOP else f"cannot be opened ({exc.strerror or exc})"
            raise ConfigError(f"{where} {why}", file=str(path)) from None
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ConfigError(f"{where} is not a regular file", file=str(path))
            if st.st_size > MAX_FILE:
                raise ConfigError(
                    f"{where} has {st.st_size} bytes, over the {MAX_FILE >> 20} MiB limit", file=str(path)
                )
            real = Path(os.readlink(f"/proc/self/fd/{fd}"))
            if self.root.resolve() not in real.parents:
                raise ConfigError(f"{where} resolves outside the store ({real})", file=str(path))
            data = fh.read(MAX_FILE + 1)
        if len(data) > MAX_FILE:
            raise ConfigError(f"{where} grew over the {MAX_FILE >> 20} MiB limit while read", file=str(path))
        return data

    def read_json(self, path: Path) -> dict[str, Any]:
        """A manifest of the store (`read_file`'s checks), a JSON object; a ConfigError naming the file when it is
        not JSON, nested too deeply, or not an object."""
        try:
            doc = json.loads(self.read_file(path))
        except RecursionError:
            raise ConfigError(f"model store {self.root}: {path} is nested too deeply", file=str(path)) from None
        except ValueError as exc:
            raise ConfigError(f"model store {self.root}: {path} is not JSON ({exc})", file=str(path)) from None
        if not isinstance(doc, dict):
            raise ConfigError(f"model store {self.root}: {path} is a JSON {type(doc).__name__}, not an object",
                              file=str(path))  # fmt: skip
        return doc

    def delta_from(
        self, name: str, version: int, base_sha256: str, fmt: str | None = None, algo: str = "bsdiff4"
    ) -> dict[str, Any] | None:
        """The signed delta manifest that turns the model with hash `base_sha256` into `name@version`, if any."""
        for base_version in self.versions(name, fmt):
            dm = self.delta_manifest(name, version, base_version, fmt, algo)
            if dm is not None and dm["base"] == base_sha256:
                return dm
        return None

    def resolve(self, spec: str, fmt: str | None = None) -> dict[str, Any]:
        """The manifest for `NAME` (latest) or `NAME@VERSION` in `fmt`, or a ConfigError saying what exists."""
        name, _, version = spec.partition("@")
        fmt = self.format_of(name, fmt if self.formats(name) else None)  # an unknown name: say which names exist
        versions = self.versions(name, fmt)
        if not versions:
            have = ", ".join(self.formats(name)) or "none"
            raise ConfigError(f"model store {self.root}: no {name} in {fmt} (formats: {have})")
        if not version:
            return self.manifest(name, versions[-1], fmt)
        if not version.isdigit():
            raise ConfigError(f"model {spec!r}: version must be an integer, as in {name}@{versions[-1]}")
        return self.manifest(name, int(version), fmt)

    def publish(
        self, model: Path, key: ec.EllipticCurvePrivateKey, *, name: str, fmt: str, version: int | None = None
    ) -> PublishedModel:
        """Sign and store `model` as the next (or the given) version of `name` in `fmt`, with a delta from the
        latest version in that format."""
        if not NAME_RE.match(name):
            raise ConfigError(f"model name {name!r}: use lowercase letters, digits, '.', '_' and '-'")
        if not NAME_RE.match(fmt):
            raise ConfigError(f"model format {fmt!r}: use lowercase letters, digits, '.', '_' and '-'")
        data = read_input(model, "model")
        if not data:
            raise ConfigError(f"model {model}: file is empty")
        versions = self.versions(name, fmt)
        previous = self.manifest(name, versions[-1], fmt) if versions else None
        if version is None:
            version = versions[-1] + 1 if versions else 1
        if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= MAX_VERSION:
            raise ConfigError(
                f"model {name} ({fmt}): version {version} is outside 1..{MAX_VERSION}",
                hint="versions are whole numbers a store folder and the agents can name",
            )
        if versions and version <= versions[-1]:
            raise ConfigError(f"model {name} ({fmt}): version {version} is not newer than the published {versions[-1]}")
        manifest = model_manifest(Path(model), name, version, fmt)
        if previous and previous["sha256"] == manifest["sha256"]:
            raise ConfigError(f"model {model}: identical to the published {name}@{previous['version']} ({fmt})")
        manifest = sign_manifest(manifest, key)
        tmp = self.root / name / fmt / f".{version}.tmp"
        try:
            delta = self._write_version(tmp, data, manifest, previous, key)
            tmp.rename(self.root / name / fmt / str(version))  # a version appears whole or not at all
        except OSError as exc:
            raise ConfigError(
                f"model store {self.root}: cannot write {name}@{version}: {exc.strerror or exc}",
                hint="give a writable --store with free space",
                file=str(self.root),
            ) from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return PublishedModel(manifest, delta)

    def _write_version(
        self,
        tmp: Path,
        data: bytes,
        manifest: dict[str, Any],
        previous: dict[str, Any] | None,
        key: ec.EllipticCurvePrivateKey,
    ) -> dict[str, Any] | None:
        """The version's files written into `tmp`; the signed delta from `previous` (None for a first one)."""
        name, fmt = manifest["name"], manifest["format"]
        shutil.rmtree(tmp, ignore_errors=True)
        safe_folder(tmp.parent, "model store")
        tmp.mkdir()
        write_file(tmp / "model.bin", data, what="model store")
        write_file(tmp / "manifest.json", json.dumps(manifest, indent=2) + "\n", what="model store")
        delta = None
        if previous is not None:
            base = self.read_file(self.blob_path(name, previous["version"], fmt))
            for algo in reversed(ALGOS):  # the standard bsdiff4 one last: that is the delta returned
                patch = make_patch(base, data, algo)
                delta = sign_manifest(delta_manifest(previous, manifest, patch, algo), key)
                stem = delta_stem(previous["version"], algo)
                write_file(tmp / f"{stem}.bsdiff", patch, what="model store")
                write_file(tmp / f"{stem}.json", json.dumps(delta, indent=2) + "\n", what="model store")
        return delta

    def listing(self) -> list[dict[str, Any]]:
        """Every version with its deltas, for `ota serve` and `--json`."""
        rows = []
        for name in self.names():
            for fmt in self.formats(name):
                for version in self.versions(name, fmt):
                    m = self.manifest(name, version, fmt)
                    deltas = [
                        {"base_version": b, "algo": algo, "patch_size": dm.get("patch_size")}
                        for b in self.versions(name, fmt)
                        for algo in ALGOS
                        if (dm := self.delta_manifest(name, version, b, fmt, algo)) is not None
                    ]
                    rows.append(
                        {**{k: m[k] for k in ("name", "version", "sha256", "size", "format")}, "deltas": deltas}
                    )
        return rows
