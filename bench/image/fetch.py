"""Downloads for an image recipe: pinned Debian packages (private apt lists, no change to the host's
apt setup) and pinned wheels, kept in a download cache shared by every build."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.core.cachefiles import sha256_file
from bench.core.errors import BenchError
from bench.core.folders import write_file
from bench.image.recipe import Recipe, Wheel


def deb_filename(name: str, version: str, arch: str) -> str:
    """The file name `apt-get download` gives a package (an epoch's ':' written as %3a)."""
    return f"{name}_{version.replace(':', '%3a')}_{arch}.deb"


def cached_deb(folder: Path, name: str, version: str, arch: str) -> Path | None:
    """The cached .deb for a pinned package (its own arch or 'all'), if downloaded before."""
    for a in (arch, "all"):
        path = folder / deb_filename(name, version, a)
        if path.is_file():
            return path
    return None


def _apt_options(recipe: Recipe, state: Path) -> list[str]:
    return [
        f"-oAPT::Architecture={recipe.arch}",
        f"-oAPT::Architectures={recipe.arch}",
        f"-oDir::State::Lists={state / 'lists'}",
        f"-oDir::Cache={state / 'cache'}",
        f"-oDir::Etc::SourceList={state / 'sources.list'}",
        "-oDir::Etc::SourceParts=/nonexistent",
        "-oAPT::Sandbox::User=root",
    ]


def _run(cmd: list[str], cwd: Path | None, what: str) -> None:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-6:])
        raise BenchError(f"{what} failed (exit {proc.returncode}):\n{tail}")


def fetch_debs(recipe: Recipe, downloads: Path) -> dict[str, Path]:
    """Every pinned package's .deb, downloading the missing ones. Returns name -> file."""
    folder = downloads / "debs" / recipe.arch
    folder.mkdir(parents=True, exist_ok=True)
    missing = [n for n, v in recipe.packages.items() if cached_deb(folder, n, v, recipe.arch) is None]
    if missing:
        state = downloads / f"apt-{recipe.arch}"
        for sub in ("lists/partial", "cache/archives/partial"):
            (state / sub).mkdir(parents=True, exist_ok=True)
        sources = "".join(f"deb [signed-by={recipe.keyring}] {src}\n" for src in recipe.sources)
        write_file(state / "sources.list", sources, what="download cache")
        opts = _apt_options(recipe, state)
        _run(["apt-get", *opts, "-q", "update"], None, f"apt-get update ({recipe.arch} lists)")
        pins = [f"{n}={recipe.packages[n]}" for n in missing]
        try:
            _run(["apt-get", *opts, "-q", "download", *pins], folder, "apt-get download")
        except BenchError as exc:
            raise BenchError(
                f"{exc}\nA pinned version may have left the mirror: in {recipe.path}, re-pin [apt.packages] to the "
                "version `apt-cache policy PKG` shows for the arm64 lists."
            ) from None
    found = {n: cached_deb(folder, n, v, recipe.arch) for n, v in recipe.packages.items()}
    lost = [n for n, p in found.items() if p is None]
    if lost:
        raise BenchError(f"apt-get download gave no file for {', '.join(lost)} (see {recipe.path} [apt.packages])")
    return {n: p for n, p in found.items() if p is not None}


def fetch_wheel(wheel: Wheel, python_version: str, downloads: Path) -> Path:
    """The pinned wheel file, downloaded with pip for the guest's platform and checked by sha256."""
    folder = downloads / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{wheel.name.replace('-', '_')}-{wheel.version}-"
    hits = [p for p in folder.glob(f"{stem}*.whl") if sha256_file(p) == wheel.sha256]
    if not hits:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
        cmd += ["--platform", wheel.platform, "--python-version", python_version, "--implementation", "cp"]
        _run([*cmd, "-d", str(folder), f"{wheel.name}=={wheel.version}"], None, f"pip download {wheel.name}")
        hits = [p for p in folder.glob(f"{stem}*.whl") if sha256_file(p) == wheel.sha256]
    if not hits:
        raise BenchError(
            f"wheel {wheel.name} {wheel.version} ({wheel.platform}): no download matches sha256 {wheel.sha256}",
            hint="check the [[wheel]] pin in the recipe",
        )
    return hits[0]
