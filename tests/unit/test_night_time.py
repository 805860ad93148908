"""Where a nightly's time went: the replay run's phases, the night's floor, and the summary's table."""

from __future__ import annotations

import asyncio

import pytest
from rich.console import Console

from bench.nightly.timing import NightTime, SessionTime
from bench.replay.phases import Phase, PhaseTimer, wave_seconds


def _session(name: str, recorded: float, kind: str = "replay") -> SessionTime:
    phases = [
        Phase("open", 2.5, ("orin-1",), detail=True),
        Phase("open", 0.5, ("web-1",), detail=True),
        Phase("open", 3.0, ("c6-a", "web-1")),
        Phase("start", 1.0, ("c6-a", "web-1"), 1),
        Phase("play", recorded + 0.5, ("c6-a", "web-1"), 1),
        Phase("stop", 0.5, ("c6-a", "web-1"), 1),
        Phase("cold starts", 2.0, ("c6-a",), 1),
        Phase("start", 4.0, ("orin-1", "pi5-1", "switch-1"), 2),
        Phase("play", 45.0, ("orin-1", "pi5-1", "switch-1"), 2),
        Phase("stop", 9.0, ("orin-1",), 2, detail=True),
        Phase("measure", 1.5, ("c6-a", "web-1", "orin-1")),
    ]
    return SessionTime(name, kind, recorded, phases)


def test_the_timer_keeps_a_phase_that_raised() -> None:
    timer = PhaseTimer()
    with pytest.raises(RuntimeError), timer.phase("play", ["c6-a"], 1):
        raise RuntimeError("link lost")
    with timer.phase("measure", ["c6-a"]):
        pass
    assert [(p.name, p.wave) for p in timer.phases] == [("play", 1), ("measure", None)]
    assert [Phase.from_json(doc) for doc in timer.to_json()] == [
        Phase(p.name, round(p.seconds, 3), p.devices, p.wave) for p in timer.phases
    ]


def test_the_timer_measures_wall_time() -> None:
    timer = PhaseTimer()

    async def wait() -> None:
        with timer.phase("play", ["web-1"], 1):
            await asyncio.sleep(0.05)

    asyncio.run(wait())
    assert 0.04 < timer.phases[0].seconds < 1.0


def test_waves_add_their_start_play_stop_and_cold_starts() -> None:
    waves = wave_seconds(_session("combat", 30.0).phases)
    assert waves == {1: pytest.approx(34.0), 2: pytest.approx(49.0)}


def test_the_floor_is_the_longest_session_and_the_device_stages() -> None:
    night = NightTime(total_s=400.0, stages={"check": 1.0, "flash": 30.0, "replay": 300.0, "update": 15.0,
                                             "faults": 20.0})  # fmt: skip
    night.sessions = [_session("combat", 30.0), _session("exploration", 40.0), _session("combat", 55.0, "confirm")]
    assert night.floor_s == pytest.approx(40.0 + 30.0 + 15.0 + 20.0)  # a confirmation replay is not a session
    doc = night.to_json()
    assert doc["over_floor_s"] == pytest.approx(400.0 - 105.0)
    assert doc["sessions"][0]["waves"] == {"1": 34.0, "2": 49.0}
    assert "floor 1:45" in night.headline() and "4:55 above it" in night.headline()


def test_the_table_fits_80_columns_and_names_each_wave() -> None:
    night = NightTime(total_s=200.0, stages={"replay": 150.0})
    night.sessions = [_session("exploration-0000", 40.0), _session("exploration-0000", 40.0, "retry")]
    console = Console(width=80, record=True)
    console.print(night.table())
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "exploration-0000 (retry)" in text and "open, orin-1 2 s" in text
    assert "measure, store" in text
