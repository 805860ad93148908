"""Writing a job's CI files: the Markdown summary (also appended to $GITHUB_STEP_SUMMARY when GitHub Actions
sets it), JUnit XML and OpenMetrics text, each replaced whole (a collector never reads half a file)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from bench.ci.facts import CiReport
from bench.ci.files import CiFiles
from bench.ci.junit import junit_xml
from bench.ci.openmetrics import openmetrics_text
from bench.ci.summary_md import summary_markdown

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


def _replace(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_ci_files(report: CiReport, files: CiFiles, env: Mapping[str, str] = os.environ) -> list[Path]:
    """Write the files asked for; returns them (the step summary included when it was appended to)."""
    written = []
    step = env.get(STEP_SUMMARY_ENV)
    if files.summary_md is not None or step:
        text = summary_markdown(report, base_url=files.pages_url)
        if files.summary_md is not None:
            _replace(files.summary_md, text)
            written.append(files.summary_md)
        if step:
            with open(step, "a", encoding="utf-8") as f:
                f.write(text)
            written.append(Path(step))
    if files.junit is not None:
        _replace(files.junit, junit_xml(report))
        written.append(files.junit)
    if files.metrics is not None:
        _replace(files.metrics, openmetrics_text(report))
        written.append(files.metrics)
    return written
