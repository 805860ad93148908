"""A fixture session replayed into a virtual Jetson and a virtual Pi 5 at once, through real sshd and the
real host agent: frames and latencies stored, board telemetry stored with the run and shown in the report."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bench.agent import wire
from bench.devices import driver_for
from bench.devices.linux_endpoint import LinuxAgentOpener
from bench.fleet import load_fleet
from bench.loop_thread import LoopThread
from bench.replay.plan import Plan, build_plan
from bench.replay.run import ReplayRun
from bench.replay.session import read_session
from bench.report.build import build_report
from bench.report.html import render_html
from bench.results.store import open_store
from bench.results.view_adapter import load_run
from bench.virtual import virtual_fleet
from tests.conftest import REPO

pytestmark = pytest.mark.e2e

SECONDS = 3


def first_seconds(plan: Plan, seconds: float) -> Plan:
    limit = int(seconds * 1e9)
    return dataclasses.replace(plan, inputs=[p for p in plan.inputs if p.offset_ns < limit], duration_ns=limit)


def test_replay_combat_session_into_jetson_and_pi(tmp_path: Path) -> None:
    plan = first_seconds(build_plan(read_session(REPO / "fixtures/sessions/combat.mcap"), wire.encode), SECONDS)
    devices = [d for d in load_fleet() if d.kind in ("jetson-orin-nx", "pi5")]
    store = open_store(tmp_path / "results.sqlite")
    run_id = store.begin_run("replay", session=plan.session_id, speed=1.0)
    loop = LoopThread()

    async def go():
        async with virtual_fleet(devices) as (resolved, _running):
            for dev in resolved:
                driver = driver_for(dev)
                try:
                    assert all(step.ok for step in await driver.flash())
                finally:
                    await driver.close()
            opener = LinuxAgentOpener(store, run_id)
            runs = await ReplayRun(plan, resolved, opener.open, store, run_id, speed=1.0).execute()
            return runs, opener

    try:
        runs, opener = loop.run(go(), timeout_s=180)
    finally:
        loop.close()
    store.finish_run(run_id, "finished")
    assert {r.device.name: r.status for r in runs} == {"orin-1": "ok", "pi5-1": "ok"}, [r.detail for r in runs]

    view = load_run(store, run_id)
    for name, fps in (("orin-1", 60), ("pi5-1", 30)):
        device = view.devices[name]
        assert store.frame_count(run_id, name) >= fps * SECONDS * 0.6
        assert device.series("latency_ms") is not None and len(device.series("latency_ms")) > 50
        assert opener.errors[name] == []
        temps = device.telemetry["temp_c"]
        assert temps.unit == "degC" and temps.values.size >= 3 and (temps.values > 30).all()
        assert device.telemetry["mem_used_mb"].values.size == temps.values.size
        assert temps.t_s[-1] > 1.0  # sampled across the run, on the run's time axis
    assert "throttled_bits" in view.devices["pi5-1"].telemetry
    assert "power_vdd_in_mw" in view.devices["orin-1"].telemetry

    html = render_html(build_report(view))
    assert html.count("<title>Board temperature (hottest zone)</title>") == 2 and "Board telemetry" in html
    store.close()
