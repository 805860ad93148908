"""Publishing a run reads it once: the run's id goes from `publish_run` to the store's read model and no further
(the page is built from what was read), in a held number of statements (tests/publish_walk.py traces it)."""

from __future__ import annotations

from pathlib import Path

from tests.publish_walk import publish_walk

ROUND_TRIPS = 33  # statements to publish a judged night of 3 devices, its history and the index's grids


def test_a_judged_night_is_read_once_and_published_from_what_was_read(tmp_path: Path) -> None:
    walk = publish_walk(tmp_path)
    modules = [module for module, _ in walk.stops]
    assert modules == ["bench/report/publish.py", "bench/store/"], "\n".join(walk.lines())
    assert len(walk.stops) <= 15 and walk.returns <= 3
    read = walk.stops[1][1]
    assert read.count("page") == 1 and read.count("history") == 1 and read.count("night") == 1  # one read each
    assert walk.round_trips <= ROUND_TRIPS, "\n".join(walk.lines())


def test_a_run_judged_now_reads_it_once_more_for_its_verdicts(tmp_path: Path) -> None:
    walk = publish_walk(tmp_path, compare=True)
    modules = [module for module, _ in walk.stops]
    assert len(walk.stops) <= 15 and walk.returns <= 3, "\n".join(walk.lines())
    assert modules[:4] == ["bench/report/publish.py", "bench/store/", "bench/results/judge.py", "bench/store/"]
