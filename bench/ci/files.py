"""Where a job writes its CI files, taken from its options and checked before it runs (light: the CLI imports it
for every command)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from bench.core.errors import ConfigError
from bench.core.folders import check_chain


@dataclass(frozen=True)
class CiFiles:
    """Where a job writes its CI files (None: not wanted)."""

    summary_md: Path | None = None
    junit: Path | None = None
    metrics: Path | None = None
    pages_url: str | None = None  # where the job's pages are published, for the summary's links

    def check(self) -> None:
        """ConfigError naming the option whose file cannot be written, before the job runs."""
        for option, path in (("--summary-md", self.summary_md), ("--junit", self.junit), ("--metrics", self.metrics)):
            if path is not None and (path.is_dir() or not _writable_dir(path.parent)):
                raise ConfigError(
                    f"{option} {path}: cannot write a file there",
                    file=str(path),
                    hint="give a file in a folder that exists and you may write",
                )
            if path is not None:
                check_chain(path.parent, f"{option} folder")


def _writable_dir(folder: Path) -> bool:
    folder = folder if str(folder) else Path(".")
    return folder.is_dir() and os.access(folder, os.W_OK)
