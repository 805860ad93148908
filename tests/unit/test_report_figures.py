"""The figures the report's pages show for stored runs, held steady against checked-in files (tests/expected/):
a night with frame records (plots, faults, a regression judged from the store), the same run compared with a
pinned one, a judged night of stored measurements, and the index's history grids. A change in any figure a reader
sees fails with the lines that changed; a change meant to alter them is written with `pytest --update-expected`."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.alerts import model as alert_model
from bench.report.publish import publish_run
from bench.results.thresholds import load_thresholds
from bench.store.results import open_store
from tests.conftest import REPO
from tests.expected import check_expected
from tests.nightly_history import Plan, write_history
from tests.report_figures import page_figures
from tests.stored_runs import build_store

FIRST_NIGHT = dt.datetime(2026, 11, 1, 2, 0, tzinfo=dt.UTC)
NOW = FIRST_NIGHT + dt.timedelta(days=14)  # when the pages are read: an open alert's age counts to it


class _Clock(dt.datetime):
    @classmethod
    def now(cls, tz: dt.tzinfo | None = None) -> _Clock:
        return cls.fromisoformat(NOW.astimezone(tz).isoformat())


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Alert ages (bench.alerts.model reads the wall clock through its `dt`) count to NOW."""
    monkeypatch.setattr(alert_model, "dt", SimpleNamespace(datetime=_Clock, UTC=dt.UTC))


def figures(page: Path | None) -> list[str]:
    """The page's figures, with this checkout's path (the thresholds file's) written as <repo>."""
    assert page is not None
    return [line.replace(str(REPO), "<repo>") for line in page_figures(page.read_text(encoding="utf-8"))]


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """7 nights x 2 devices with frame records; the last regressed on orin-1."""
    path = tmp_path_factory.mktemp("replayed") / "results.sqlite"
    return path, build_store(path, runs=7, devices=2, frames=1000, first_night=FIRST_NIGHT)


def test_a_regressed_nights_page(replayed: tuple[Path, int], tmp_path: Path, update_expected: bool) -> None:
    path, last = replayed
    with open_store(path) as store:
        published = publish_run(store, last, reports_dir=tmp_path)
    check_expected(figures(published.page), "report-run.txt", update_expected)


def test_a_run_compared_with_a_pinned_one(replayed: tuple[Path, int], tmp_path: Path, update_expected: bool) -> None:
    path, last = replayed
    with open_store(path) as store:
        published = publish_run(store, last, reports_dir=tmp_path, compare_run=1)
    check_expected(figures(published.page), "report-compare.txt", update_expected)


def test_a_judged_nights_page_and_the_history_grids(tmp_path: Path, update_expected: bool) -> None:
    """Stored verdicts of 12 nights: a creep on orin-1, a memory step and a failed part on c6-a, new models."""
    rules = load_thresholds()
    plan = Plan(nights=12, creep_from=5, step_night=9, failed={10: "c6-a"}, model_every=4)
    with open_store(tmp_path / "results.sqlite") as store:
        ids = write_history(store, rules, plan, ("c6-a", "orin-1", "pi5-1"), first_night=FIRST_NIGHT)
        published = publish_run(store, ids[-1], reports_dir=tmp_path / "reports", thresholds=rules)
    check_expected(figures(published.page), "report-night.txt", update_expected)
    check_expected(figures(tmp_path / "reports" / "index.html"), "report-index.txt", update_expected)
