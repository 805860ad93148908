"""Synthetic nightly histories written through the results store and judged by the nightly's own confirm stage
(no replay: suspects settle as regressions): for the history page's tests and its timing benchmark."""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.alerts.findings import findings_of_verdicts
from bench.alerts.tracking import record_night
from bench.measure.measurement import Measurement
from bench.nightly.confirm import confirm_run
from bench.results.thresholds import Thresholds
from bench.store.results import ResultStore, open_store
from tests.stored_runs import night_start

# device -> (kind, inference P50 us, decision latency P50 us, FPS, memory peak B, clock)
FLEET = {
    "c6-a": ("esp32c6", 1000.0, 9000.0, 20.0, 118_000.0, "real time"),
    "c6-b": ("esp32c6", 1000.0, 9000.0, 20.0, 118_000.0, "real time"),
    "pi5-1": ("pi5", 460.0, 6000.0, 30.0, 52e6, "icount"),
    "orin-1": ("jetson-orin-nx", 360.0, 3100.0, 60.0, 61e6, "real time"),
    "switch-1": ("switch-arm64", 400.0, 29000.0, 30.0, 48e6, "real time"),
}


@dataclass
class Plan:
    """What happens over the nights: run-to-run noise, a creep on one device, a step, failures, model changes."""

    nights: int
    cv: float = 0.012
    creep_device: str = "orin-1"
    creep_from: int | None = None  # 0-based night the creep starts (None: no creep)
    creep_rate: float = 0.05  # per night, on inference P50
    step_night: int | None = None  # a +40% memory step on c6-a that night only
    failed: dict[int, str] = field(default_factory=dict)  # night -> device whose part failed
    model_every: int = 0  # a new model sha256 on every device each this many nights (0: never)


def write_history(
    store: ResultStore, thresholds: Thresholds, plan: Plan, devices: tuple[str, ...],
    first_night: dt.datetime | None = None,
) -> list[int]:  # fmt: skip
    """Store and judge `plan.nights` nights of session "combat" on `devices` (a day apart from `first_night`,
    else all now); return their run ids."""
    rng = np.random.default_rng(5)
    ids = []
    for night in range(plan.nights):
        run = store.runs.begin_run("replay", session="combat", started_at=night_start(first_night, night))
        for name in devices:
            kind, inference, latency, fps, mem, clock = FLEET[name]
            store.runs.add_device(run, name, kind)
            noise = rng.lognormal(0.0, plan.cv, 4)
            if plan.creep_from is not None and name == plan.creep_device and night >= plan.creep_from:
                inference *= (1 + plan.creep_rate) ** (night - plan.creep_from + 1)
            if night == plan.step_night and name == "c6-a":
                mem *= 1.4
            model = f"{night // plan.model_every:064x}" if plan.model_every else "0" * 64
            store.verdicts.record_fingerprint(run, name, {"model_sha256": model, "virtual": True, "clock": clock})
            if plan.failed.get(night) == name:
                store.runs.update_device(run, name, status="failed", detail="link lost mid-replay")
                continue
            store.measures.add_measurements(run, name, [
                Measurement("inference_latency_p50", "us", inference * noise[0], samples=900),
                Measurement("decision_latency_p50", "us", latency * noise[1], samples=900),
                Measurement("decision_latency_p99", "us", 2 * latency * noise[1], samples=900),
                Measurement("fps", "FPS", fps * (1 + (noise[2] - 1) / 20), samples=900),
                Measurement("fps_1pct_low", "FPS", 0.9 * fps * (1 + (noise[2] - 1) / 5), samples=900),
                Measurement("frame_jitter_std", "us", 800 * noise[3], samples=900),
                Measurement("mem_peak", "B", mem, samples=40),
            ])  # fmt: skip
            store.runs.update_device(run, name, status="ok")
        store.runs.finish_run(run, "ok")
        done = asyncio.run(confirm_run(store, run, "combat.mcap", [], thresholds, None))
        record_night(store, findings_of_verdicts(store, run, done.verdicts), thresholds.alerts, "nightly on test-host")
        ids.append(run)
    return ids


def store_night(
    store: ResultStore,
    thresholds: Thresholds,
    rng: np.random.Generator,
    *,
    slower: dict[str, float] | None = None,
    models: dict[str, str] | None = None,
    devices: tuple[str, ...] = ("c6-a", "orin-1"),
    session: str = "combat",
    moved: tuple[str, ...] = ("inference_latency_p50",),
) -> int:
    """One judged night of `session` on `devices` (real-time clocks, CV 1.2%), each device's `moved` figures
    (default its inference P50; also "decision_latency_p50", "mem_peak") times its `slower` factor, running the
    model `models` names (default "0"*64), its findings recorded as alerts by the nightly's own step; returns the
    run id."""
    run = store.runs.begin_run("replay", session=session)
    for name in devices:
        kind, inference, latency, fps, mem, _ = FLEET[name]
        store.runs.add_device(run, name, kind)
        noise = rng.lognormal(0.0, 0.012, 3)
        model = (models or {}).get(name, "0" * 64)
        store.verdicts.record_fingerprint(run, name, {"model_sha256": model, "virtual": True, "clock": "real time"})
        factor = {m: (slower or {}).get(name, 1.0) for m in moved}
        store.measures.add_measurements(run, name, [
            Measurement(m, unit, value * factor.get(m, 1.0), samples=samples) for m, unit, value, samples in (
                ("inference_latency_p50", "us", inference * noise[0], 900),
                ("decision_latency_p50", "us", latency * noise[1], 900),
                ("fps", "FPS", fps * (1 + (noise[2] - 1) / 20), 900),
                ("mem_peak", "B", mem, 40),
            )
        ])  # fmt: skip
        store.runs.update_device(run, name, status="ok")
    store.runs.finish_run(run, "ok")
    done = asyncio.run(confirm_run(store, run, f"{session}.mcap", [], thresholds, None))
    record_night(store, findings_of_verdicts(store, run, done.verdicts), thresholds.alerts, "nightly on test-host")
    return run


def store_history(path: Path, thresholds: Thresholds, steps: list[dict[str, Any]], good: int = 6) -> list[int]:
    """A results store at `path` with `good` unchanged judged nights, then one night per step (`store_night`'s
    `slower` and `models`), drawn from one seeded generator; returns the run ids."""
    rng = np.random.default_rng(11)
    with open_store(path) as store:
        ids = [store_night(store, thresholds, rng) for _ in range(good)]
        return ids + [store_night(store, thresholds, rng, **step) for step in steps]
