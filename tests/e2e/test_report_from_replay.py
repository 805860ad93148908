"""The report of a real replay run: host agents (from their deploy bundle, as processes), the replayer,
the results store, then publish_run. Checks that what the agents measured arrives in the report."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from bench.agent import wire
from bench.agent.endpoint import AgentEndpoint
from bench.agent.session import AgentSession
from bench.agent.transport import ProcessTransport
from bench.config.fleet import Device
from bench.replay.plan import build_plan
from bench.replay.run import ReplayRun
from bench.replay.synth import synth_session
from bench.report.publish import publish_run
from bench.report.runview import FRAME_INTERVAL_MS, LATENCY_MS
from bench.report.view_adapter import load_run
from bench.store.results import open_store
from tests.conformance.harness import HostAgent

SETTINGS = {"fps_target": 30, "vsync_hz": 30, "decision_budget_ms": 50}


@pytest.mark.e2e
def test_a_replay_run_on_host_agents_renders_with_its_measurements(tmp_path: Path) -> None:
    agent = HostAgent(tmp_path / "agent")
    plan = build_plan(synth_session("combat", 3, duration_s=4.0), wire.encode)  # 3+ whole seconds: an FPS plot
    devices = [Device(name, "pi5", None, settings=SETTINGS) for name in ("host-a", "host-b")]

    async def open_agent(dev: Device) -> AgentEndpoint:
        transport = await ProcessTransport.spawn(
            agent.argv(), cwd=agent.folder, stderr_path=tmp_path / f"{dev.name}.err"
        )
        session = await AgentSession.open(transport, device=dev.name, timeout=15.0)

        async def close() -> None:
            with contextlib.suppress(Exception):
                await session.shutdown(timeout=5)
            await session.close()

        return AgentEndpoint(session, close)

    store_path = tmp_path / "results.sqlite"
    with open_store(store_path) as store:
        run_id = store.runs.begin_run("replay", session=plan.session_id)
        runs = asyncio.run(ReplayRun(plan, devices, open_agent, store, run_id, speed=1.0).execute())
        store.runs.finish_run(run_id, "ok")
        assert [r.status for r in runs] == ["ok", "ok"], [r.detail for r in runs]
        view = load_run(store, run_id)
        published = publish_run(store, run_id, reports_dir=tmp_path / "reports")

    for name in ("host-a", "host-b"):
        device = view.devices[name]
        assert len(device.series(LATENCY_MS)) > 20  # one decision latency per replayed input that got decided
        assert device.frames is not None and len(device.frames) > 40  # ~30 FPS for 4 s
        intervals = device.series(FRAME_INTERVAL_MS).values
        assert 25 < float(sorted(intervals[1:])[len(intervals) // 2]) < 45  # median frame interval near 33 ms
    summary = next(d for d in published.report.data["devices"] if d["name"] == "host-a")["summary"]
    assert 20 < summary["fps"] < 40 and summary["latency_n"] > 20 and summary["latency_p50_ms"] > 0
    assert summary["model_versions"], "frames carry the running model's version"
    page = published.page.read_text()
    assert "Decision latency CDF" in page and "FPS over time" in page
    assert "inputs: voice as voice (link not byte-limited)" in page  # what the replay sent each device, and why
    assert published.report.data["outcome"]["verdict"] == "collecting baseline"
