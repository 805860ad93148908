"""A nightly's Markdown summary rendered as GitHub renders it (CommonMark with tables, through markdown-it-py) and
opened in headless Chromium: no errors, its tables and folds there, a screenshot kept as an artefact."""

from __future__ import annotations

from html import escape
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from bench.ci.summary_md import summary_markdown
from tests.conftest import REPO
from tests.report_chromium import check_page
from tests.unit.test_ci_files import nightly_ci_report

ARTEFACTS = REPO / "reports" / "artefacts"
# roughly GitHub's job-summary look: its font stack, bordered tables, zebra rows
STYLE = """
body { font: 14px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; max-width: 1012px;
       margin: 24px auto; color: #1f2328; }
h2 { border-bottom: 1px solid #d1d9e0; padding-bottom: .3em; } table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #d1d9e0; padding: 4px 10px; } tr:nth-child(2n) { background: #f6f8fa; }
details { margin: 6px 0; } summary { cursor: pointer; font-weight: 600; } code { background: #eff1f3; }
"""


def render(markdown: str, title: str) -> str:
    """The summary as a page, as a job page shows it."""
    body = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(markdown)
    return f"<!doctype html><html><head><meta charset=utf-8><title>{escape(title)}</title><style>{STYLE}</style>" \
           f"</head><body>{body}</body></html>"  # fmt: skip


@pytest.mark.e2e
def test_a_nightly_summary_renders_in_headless_chromium(tmp_path: Path) -> None:
    text = summary_markdown(nightly_ci_report(tmp_path), base_url="https://ci.example/reports/runs")
    page = tmp_path / "summary.html"
    page.write_text(render(text, "summary"))
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    screenshot = ARTEFACTS / "ci-summary-chromium.png"
    screenshot.unlink(missing_ok=True)
    result = check_page(page, screenshot, width=1100)
    assert result.errors == [] and result.requests == []
    assert result.title == "summary"
    html = page.read_text()
    assert html.count("<table>") >= 4 and html.count("<details") == html.count("</details>") >= 2
    assert screenshot.stat().st_size > 30_000  # tables and text, not a blank page
