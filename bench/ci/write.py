"""Writing a job's CI files: the Markdown summary (also appended to $GITHUB_STEP_SUMMARY when GitHub Actions
sets it), JUnit XML and OpenMetrics text, each replaced whole (a collector never reads half a file) through
bench.core.folders: never through a link, never in a folder another user could swap."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from bench.ci.facts import CiReport
from bench.ci.files import CiFiles
from bench.ci.junit import junit_xml
from bench.ci.openmetrics import openmetrics_text
from bench.ci.summary_md import summary_markdown
from bench.core.folders import open_append, write_file

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


def write_ci_files(report: CiReport, files: CiFiles, env: Mapping[str, str] = os.environ) -> list[Path]:
    """Write the files asked for; returns them (the step summary included when it was appended to)."""
    written = []
    step = env.get(STEP_SUMMARY_ENV)
    if files.summary_md is not None or step:
        text = summary_markdown(report, base_url=files.pages_url)
        if files.summary_md is not None:
            write_file(files.summary_md, text, what="--summary-md folder")
            written.append(files.summary_md)
        if step:
            with open_append(Path(step), what=f"${STEP_SUMMARY_ENV} folder") as f:
                f.write(text)
            written.append(Path(step))
    if files.junit is not None:
        write_file(files.junit, junit_xml(report), what="--junit folder")
        written.append(files.junit)
    if files.metrics is not None:
        write_file(files.metrics, openmetrics_text(report), what="--metrics folder")
        written.append(files.metrics)
    return written
