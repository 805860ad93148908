"""The manifest of external programs (bench/core/programs.toml) as typed objects, and finding them on this host.

Standard library only: `.ci/setup` runs `python3 bench/core/programs.py debian` before the venv exists to get the
Debian packages to install.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

MANIFEST = Path(__file__).with_name("programs.toml")
PIP = "pip"  # `debian` value of a program the venv installs
# the source checkout this module runs from (None: an installed package), for the command that installs a PIP program
_HERE = Path(__file__).resolve()
_SOURCE = next((p for p in _HERE.parents if (p / "pyproject.toml").is_file() and _HERE.is_relative_to(p / "bench")),
               None)  # fmt: skip
_VERSION_RE = re.compile(r"(?<![\w.])v?(\d+\.\d+(?:\.\d+)*)")  # "7.2.22", "v20.20.2"; not the 2 of mke2fs
_KEYS = {"program", "also", "debian", "min_version", "version_args", "needed_by", "paths", "setup", "file", "why"}


class ManifestError(ValueError):
    """programs.toml is malformed (a developer's mistake: the message names the entry and field)."""


def pip_fix() -> str:
    """The command that installs the bench's Python dependencies: into the checkout's venv, or, for an installed
    package, into the environment it runs in."""
    if _SOURCE is not None:
        return ".venv/bin/python -m pip install -e '.[dev]'  (or .ci/setup)"
    return f"{sys.executable} -m pip install npc-hil-bench (from its wheel or source: installs what it lacks)"


@dataclass(frozen=True)
class Program:
    """One external program: its names, where it comes from, the oldest version known to work, who needs it."""

    program: str
    debian: str
    needed_by: tuple[str, ...]
    why: str = ""
    also: tuple[str, ...] = ()
    min_version: str | None = None
    version_args: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    setup: bool = True
    file: bool = False  # a file the package installs (a library's), looked for in `paths` only

    @property
    def names(self) -> tuple[str, ...]:
        """Every name that does this program's job, preferred first."""
        return (self.program, *self.also)

    @property
    def fix(self) -> str:
        """The command that installs it."""
        if self.debian == PIP:
            return pip_fix()
        return f"apt-get install -y {self.debian}"

    def find(self, path: str | None = None) -> str | None:
        """Where it is on this host: `path` (default $PATH, then the venv's bin folder), then `paths`; a `file`
        entry in `paths` only, and need not be executable."""
        search = path if path is not None else os.pathsep.join([os.environ.get("PATH", ""), _venv_bin()])
        for name in () if self.file else self.names:
            found = shutil.which(name, path=search)
            if found:
                return found
        for pattern in self.paths:
            for folder in sorted(glob.glob(pattern), reverse=True):
                for name in self.names:
                    candidate = Path(folder) / name
                    if candidate.is_file() and (self.file or os.access(candidate, os.X_OK)):
                        return str(candidate)
        return None

    def version(self, exe: str, timeout_s: float = 10.0) -> str | None:
        """The version `exe --version` (its `version_args`) prints, or None when it cannot be read."""
        if not self.version_args:
            return None
        try:
            out = subprocess.run([exe, *self.version_args], capture_output=True, text=True, timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired):
            return None
        match = _VERSION_RE.search(out.stdout + out.stderr)
        return match.group(1) if match else None


def _venv_bin() -> str:
    return str(Path(sys.executable).parent)


def version_tuple(text: str) -> tuple[int, ...]:
    """ "7.2.22" -> (7, 2, 22)."""
    return tuple(int(p) for p in re.findall(r"\d+", text))


def _strings(entry: dict, key: str, where: str) -> tuple[str, ...]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ManifestError(f"{where}: `{key}` must be a list of names")
    return tuple(value)


def parse_manifest(data: dict, source: Path = MANIFEST) -> tuple[Program, ...]:
    """The programs of a parsed manifest; ManifestError naming the entry and field when one is malformed."""
    entries = data.get("program")
    if not isinstance(entries, list) or not entries:
        raise ManifestError(f"{source}: no [[program]] entries")
    programs: list[Program] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries, 1):
        where = f"{source}: program #{index}"
        if not isinstance(entry.get("program"), str) or not isinstance(entry.get("debian"), str):
            raise ManifestError(f"{where}: `program` and `debian` are required strings")
        where = f"{source}: program {entry['program']!r}"
        unknown = set(entry) - _KEYS
        if unknown:
            raise ManifestError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        needed_by = _strings(entry, "needed_by", where)
        if not needed_by:
            raise ManifestError(f"{where}: `needed_by` is empty (say what needs it)")
        program = Program(
            program=entry["program"],
            debian=entry["debian"],
            needed_by=needed_by,
            why=str(entry.get("why", "")),
            also=_strings(entry, "also", where),
            min_version=str(entry["min_version"]) if "min_version" in entry else None,
            version_args=_strings(entry, "version_args", where),
            paths=_strings(entry, "paths", where),
            setup=bool(entry.get("setup", True)),
            file=bool(entry.get("file", False)),
        )
        if program.file and not program.paths:
            raise ManifestError(f"{where}: a `file` entry needs `paths` (where the package puts it)")
        if program.min_version and not program.version_args:
            raise ManifestError(f"{where}: `min_version` needs `version_args` (how to read the version)")
        for name in program.names:
            if name in seen:
                raise ManifestError(f"{where}: {name!r} is listed twice")
            seen.add(name)
        programs.append(program)
    return tuple(programs)


def load_manifest(path: Path = MANIFEST) -> tuple[Program, ...]:
    """The bench's program manifest."""
    with path.open("rb") as fh:
        return parse_manifest(tomllib.load(fh), path)


def get_program(name: str, programs: tuple[Program, ...] | None = None) -> Program:
    """The manifest entry that has `name` among its names (KeyError when the manifest lacks it)."""
    for program in programs if programs is not None else load_manifest():
        if name in program.names:
            return program
    raise KeyError(f"{name!r} is not in {MANIFEST} (add an entry for it)")


def setup_packages(programs: tuple[Program, ...]) -> list[str]:
    """The Debian packages `.ci/setup` installs, each once, in manifest order."""
    packages: list[str] = []
    for program in programs:
        if program.setup and program.debian != PIP and program.debian not in packages:
            packages.append(program.debian)
    return packages


if __name__ == "__main__":  # .ci/setup: `python3 bench/core/programs.py debian`
    if sys.argv[1:] != ["debian"]:
        sys.exit("usage: python3 bench/core/programs.py debian")
    print(" ".join(setup_packages(load_manifest())))
