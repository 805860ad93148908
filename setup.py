"""The shipped data files, by folder: every file of each agent, suite, web, fixture and firmware folder goes to
share/npc-hil-bench/<folder>, where bench/core/paths.py finds it. A new kind's firmware/<kind>/ (or a new fixtures
folder) ships with no entry of its own; pyproject.toml holds the rest of the packaging."""

from pathlib import Path

from setuptools import setup

SHARE = "share/npc-hil-bench"
FOLDERS = ("host", "micropython", "hil", "web", "web/agent", "web/tools", "fixtures/*", "firmware/*")


def shipped(folder: Path) -> list[str]:
    """The folder's own files (no subfolders, links, caches or dotfiles)."""
    return sorted(
        p.as_posix() for p in folder.iterdir() if p.is_file() and not p.is_symlink() and not p.name.startswith(".")
    )


folders = sorted({f for pattern in FOLDERS for f in Path().glob(pattern) if f.is_dir() and not f.is_symlink()})
setup(data_files=[(f"{SHARE}/{f.as_posix()}", files) for f in folders if (files := shipped(f))])
