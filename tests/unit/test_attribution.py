"""Attribution by replay over stored runs: the nightly's judge_run on real store rows, artefacts kept by sha256;
the replays are synthetic figures that depend on which component the device was put back to."""

from __future__ import annotations

import asyncio
import hashlib
import re
from pathlib import Path

import numpy as np

from bench.bundles.artefacts import ArtefactStore
from bench.config.fleet import load_fleet
from bench.measure.measurement import Measurement
from bench.nightly.attribution import attribute, regressions_of
from bench.results.judge import judge_run
from bench.results.thresholds import load_thresholds
from bench.results.verdict import settle
from bench.store.results import open_store

RULES = load_thresholds()


def _run(store, value: float, fingerprint: dict, kind: str = "replay") -> int:
    run = store.runs.begin_run(kind, session="combat-0000")
    store.runs.add_device(run, "c6-a", "esp32c6")
    store.measures.add_measurements(run, "c6-a", [Measurement("inference_latency_p50", "us", value, samples=500)])
    store.runs.update_device(run, "c6-a", status="ok")
    store.runs.finish_run(run, "ok")
    store.verdicts.record_fingerprint(run, "c6-a", fingerprint)
    return run


def _setup(tmp_path: Path, *, firmware_changed: bool):
    store = open_store(tmp_path / "r.sqlite")
    artefacts = ArtefactStore.of(store)
    old_model = artefacts.keep_bytes(b"old model", "model", "old.tflite", ".tflite")
    new_model = hashlib.sha256(b"new model").hexdigest()
    old_fw = artefacts.keep_bytes(b"old firmware", "firmware", "old.bin", ".bin")
    new_fw = hashlib.sha256(b"new firmware").hexdigest() if firmware_changed else old_fw
    rng = np.random.default_rng(1)
    for _ in range(5):
        run = _run(store, 1000.0 * rng.normal(1.0, 0.01), {"model_sha256": old_model, "firmware_sha256": old_fw})
        store.windows.accept(run, "c6-a", True)
    regressed = _run(store, 1410.0, {"model_sha256": new_model, "firmware_sha256": new_fw})
    (verdict,) = [settle(v) for v in judge_run(store, regressed, RULES) if v.metric == "inference_p50"]
    assert verdict.status == "regression"
    return store, artefacts, regressed, verdict, (old_model, new_model, old_fw, new_fw)


def test_two_changes_the_model_reproduces_it_the_firmware_does_not(tmp_path: Path) -> None:
    store, artefacts, run, verdict, (old_model, new_model, old_fw, new_fw) = _setup(tmp_path, firmware_changed=True)
    device = load_fleet(None).get("c6-a")
    old_model_file = str(artefacts.path(old_model))
    deployed: list[tuple[str, str]] = []

    async def deploy(d) -> None:
        deployed.append((str(d.settings.model), str(d.settings.firmware)))

    async def replay(devs) -> int:
        old = str(devs[0].settings.model) == old_model_file  # only the model makes it slower
        fw = old_fw if str(devs[0].settings.firmware) == str(artefacts.path(old_fw)) else new_fw
        return _run(store, 1004.0 if old else 1412.0, {"model_sha256": old_model if old else new_model,
                                                         "firmware_sha256": fw}, "attribution")  # fmt: skip

    found = asyncio.run(attribute(store, run, verdict, device, RULES, replay, deploy))
    assert found is not None and found.cause == "model", found
    assert set(found.runs) == {"model", "firmware"} and len(deployed) == 2
    assert abs(found.put_back["model"]) < 2 and found.put_back["firmware"] > 30
    assert found.text.startswith(f"cause: model ({old_model[:4]}… -> {new_model[:4]}…): ")
    assert re.search(r"with the old model and the new firmware \+0\.\d%", found.text), found.text
    assert re.search(r"with the old firmware and the new model \+4[01]\.\d%", found.text), found.text
    assert regressions_of([verdict]) == {"c6-a": verdict}


def test_one_change_is_the_cause_without_a_replay(tmp_path: Path) -> None:
    store, _, run, verdict, (old_model, new_model, _, _) = _setup(tmp_path, firmware_changed=False)

    async def never(*_args) -> int:
        raise AssertionError("no replay needed")

    found = asyncio.run(attribute(store, run, verdict, load_fleet(None).get("c6-a"), RULES, never, never))
    assert found.cause == "model" and not found.runs
    assert re.fullmatch(
        rf"cause: model \({old_model[:4]}… -> {new_model[:4]}…\), the only change: \+4[01]\.\d%", found.text
    )
