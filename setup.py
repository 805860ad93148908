"""The shipped data files, by folder: every file of each agent, suite, web, fixture and firmware folder (the last two
with their subfolders) goes to share/npc-hil-bench/<folder>, where bench/core/paths.py finds it. A new kind's
firmware/<kind>/ (or a new fixtures folder) ships with no entry of its own; pyproject.toml holds the rest of the
packaging.

The data folder keeps the checkout's layout, so a path a bundled file gives relative to itself resolves the same
in both: the bundled fleet's stand-in `uhubctl` (../../bench/virtual/host_tools/uhubctl from fixtures/fleets/)
ships at share/npc-hil-bench/bench/virtual/host_tools/ (tests/e2e/test_installed.py walks every such path)."""

from pathlib import Path

from setuptools import setup

SHARE = "share/npc-hil-bench"
# a folder's own files; `**`: a folder with every folder below it (a firmware port's include/ and modules/)
FOLDERS = ("host", "micropython", "hil", "web", "web/agent", "web/tools", "fixtures/**", "firmware/**",
           "bench/virtual/host_tools")  # fmt: skip


def shipped(folder: Path) -> list[str]:
    """The folder's own files (no subfolders, links, caches or dotfiles)."""
    return sorted(
        p.as_posix() for p in folder.iterdir() if p.is_file() and not p.is_symlink() and not p.name.startswith(".")
    )


def source(folder: Path) -> bool:
    """A folder of the source, not a link, a cache or a dot folder."""
    return folder.is_dir() and not folder.is_symlink() and not any(p.startswith((".", "__")) for p in folder.parts)


folders = sorted({f for pattern in FOLDERS for f in Path().glob(pattern) if source(f)})
setup(data_files=[(f"{SHARE}/{f.as_posix()}", files) for f in folders if (files := shipped(f))])
