"""A rendered report opened in headless Chromium: no console errors, no network, a screenshot as artefact."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.report.html import write_index, write_report
from bench.report.nights import load_grids
from bench.results.thresholds import load_thresholds
from bench.store.results import open_store
from tests.conftest import REPO
from tests.nightly_history import Plan, write_history
from tests.report_chromium import check_page
from tests.unit.test_report_render import regressed_report

ARTEFACTS = REPO / "reports" / "artefacts"


@pytest.mark.e2e
def test_report_opens_in_headless_chromium_without_errors(tmp_path: Path) -> None:
    page = write_report(regressed_report(), tmp_path)
    screenshot = ARTEFACTS / "report-chromium.png"
    screenshot.unlink(missing_ok=True)
    result = check_page(page, screenshot)
    assert result.errors == []
    assert result.requests == [], "a self-contained report requests nothing"
    assert result.title == "hilbench run run-0002"
    assert screenshot.stat().st_size > 50_000  # a full page of tables and plots, not a blank image
    assert check_page(tmp_path / "index.html").errors == []


@pytest.mark.e2e
def test_the_check_catches_console_errors_and_network_use(tmp_path: Path) -> None:
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<html><head><title>bad</title><link rel=stylesheet href='https://example.invalid/x.css'></head>"
        "<body><script>console.error('boom', 42); missing();</script></body></html>"
    )
    result = check_page(bad)
    assert "console.error: boom 42" in result.errors
    assert any("ReferenceError: missing is not defined" in e for e in result.errors)
    assert result.requests == ["https://example.invalid/x.css"]


@pytest.mark.e2e
def test_the_history_page_opens_in_headless_chromium_with_its_change_point(tmp_path: Path) -> None:
    rules = load_thresholds()
    with open_store(tmp_path / "results.sqlite") as store:
        write_history(
            store, rules, Plan(nights=24, creep_from=14, failed={10: "c6-a"}, model_every=8), ("c6-a", "orin-1")
        )
        grids = load_grids(store, rules)
    (tmp_path / "reports").mkdir()
    page = write_index(tmp_path / "reports", [], grids)
    screenshot = ARTEFACTS / "history-chromium.png"
    screenshot.unlink(missing_ok=True)
    result = check_page(page, screenshot)
    assert result.errors == [] and result.requests == []
    assert result.title == "hilbench nightly history"
    assert "drift since run" in page.read_text()  # orin-1's creep, its first night marked
    assert screenshot.stat().st_size > 20_000
