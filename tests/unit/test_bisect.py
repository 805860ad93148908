"""Bisection's search and step verdicts over stored runs (the nightly's judge_run on real store rows; the
replays are synthetic figures, the deploy a callable). The replayed end-to-end case: tests/e2e/test_bisect.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from bench.bundles import resets_model
from bench.commands.bisect import with_artefact
from bench.config.fleet import load_fleet
from bench.core.errors import ConfigError
from bench.core.paths import MODELS_DIR
from bench.measure.measurement import Measurement
from bench.results.bisect import BAD, GOOD, SKIPPED, BisectError, NotRun, bisect, next_index
from bench.results.thresholds import load_thresholds
from bench.store.results import open_store

BUILDS = [f"model-{n}" for n in range(1, 9)]


def _fake(store, figures: list[float], seed: int = 0):
    rng = np.random.default_rng(seed)
    deployed: list[int] = []

    async def deploy(index: int) -> None:
        deployed.append(index)

    async def replay(index: int, kind: str) -> int:
        run = store.runs.begin_run(kind, session="combat-0000")
        store.runs.add_device(run, "c6-a", "esp32c6")
        value = figures[index] * float(rng.normal(1.0, 0.02))
        store.measures.add_measurements(run, "c6-a", [Measurement("inference_latency_p50", "us", value, samples=500)])
        store.runs.update_device(run, "c6-a", status="ok")
        store.runs.finish_run(run, "ok")
        return run

    return deploy, replay, deployed


def test_a_step_between_3_and_4_is_found_in_3_steps_of_3_runs(tmp_path: Path) -> None:
    store = open_store(tmp_path / "b.sqlite")
    deploy, replay, deployed = _fake(store, [1000.0] * 3 + [2500.0] * 5)
    result = asyncio.run(bisect(store, "c6-a", BUILDS, deploy, replay, load_thresholds(), metric="inference_p50"))
    assert BUILDS[result.first_bad] == "model-4" and BUILDS[result.last_good] == "model-3"
    assert len(result.steps) <= 3 and [s.status for s in result.steps].count(BAD) >= 1
    assert all(len(s.runs) == 3 for s in result.steps)
    bad = next(s for s in result.steps if s.index == result.first_bad)
    value, unit = bad.figure("inference_p50")
    assert unit == "us" and 2300 < value < 2700
    assert 900 < result.baseline.figure("inference_p50")[0] < 1100
    assert deployed[0] == 0  # the good end first, as the baseline


def test_a_build_that_does_not_deploy_is_skipped_and_said_so(tmp_path: Path) -> None:
    store = open_store(tmp_path / "b.sqlite")
    deploy, replay, _ = _fake(store, [1000.0] * 3 + [2500.0] * 5)

    async def flaky_deploy(index: int) -> None:
        if index == 3:
            raise ConfigError("model-4.tflite: not a TFLite model")
        await deploy(index)

    result = asyncio.run(bisect(store, "c6-a", BUILDS, flaky_deploy, replay, load_thresholds()))
    skipped = [s for s in result.steps if s.status == SKIPPED]
    assert [s.build for s in skipped] == ["model-4"] and "not a TFLite model" in skipped[0].reason
    assert BUILDS[result.first_bad] == "model-5" and "model-4" in result.note  # ambiguous: said so
    assert any(s.status == GOOD for s in result.steps)


def test_a_good_end_that_does_not_deploy_stops_the_bisection(tmp_path: Path) -> None:
    store = open_store(tmp_path / "b.sqlite")
    _, replay, _ = _fake(store, [1000.0] * 8)

    async def broken(index: int) -> None:
        raise ConfigError("no such file")

    with pytest.raises(BisectError, match="good end model-1"):
        asyncio.run(bisect(store, "c6-a", BUILDS, broken, replay, load_thresholds()))


def test_next_index_halves_the_untested_range() -> None:
    assert next_index(0, 7, set()) == 3
    assert next_index(0, 3, set()) == 1
    assert next_index(0, 3, {1}) == 2
    assert next_index(2, 3, set()) is None


def test_a_build_the_device_did_not_run_is_skipped_not_judged_on_the_model_before_it(tmp_path: Path) -> None:
    # a model the board refused at load (out of memory) leaves the one before running: its figures are that
    # model's, so judged they made every refused build "good"
    store = open_store(tmp_path / "b.sqlite")
    deploy, replay, _ = _fake(store, [1000.0] * 3 + [2500.0] * 5)

    async def refusing_replay(index: int, kind: str) -> int:
        if index == 3:
            raise NotRun("c6-a ran model sha256 0888ac48…, not the configured 4f1e20aa…")
        return await replay(index, kind)

    result = asyncio.run(bisect(store, "c6-a", BUILDS, deploy, refusing_replay, load_thresholds()))
    (skipped,) = [s for s in result.steps if s.status == SKIPPED]
    assert skipped.build == "model-4" and skipped.reason.startswith("not run: c6-a ran model sha256")
    assert not skipped.runs
    assert BUILDS[result.first_bad] == "model-5" and "model-4" in result.note


def test_a_step_deploy_resets_the_model_the_board_last_switched_to() -> None:
    # without the reset a board that had switched models (an update, the nightly's last deploy) booted into that one
    # after the step's deploy, and the bisection's good end ran the fixture model instead of build 01
    device = load_fleet(None).get("c6-a")
    target = with_artefact(device, MODELS_DIR / "npc-policy-int8.tflite")
    assert resets_model(target) and target.settings.model.endswith("npc-policy-int8.tflite")
