"""A replay run's orchestration (agent sessions, frames stored as they come, measurements) with an
in-process stand-in for the agent session; the real agents are exercised in tests/e2e."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from bench.agent import wire
from bench.agent.endpoint import AgentEndpoint
from bench.errors import DeviceUnreachable
from bench.fleet import Device, SerialLink
from bench.measure.records import Frame, OffsetClock
from bench.replay.plan import build_plan
from bench.replay.run import ReplayRun
from bench.replay.session import write_session
from bench.replay.synth import synth_session
from bench.results import open_store

DEVICE_OFFSET_NS = 7_000_000_000  # the stand-in's clock runs 7 s ahead of the bench clock


class StandInClock(OffsetClock):
    drift_ppm = 0.0
    ref_ns = 0
    uncertainty_ns = 1000.0


def _decode(line: bytes) -> dict:
    """An `in` line as the replayer encodes it: plain JSON in these tests, wire framing via replay_fleet."""
    return wire.decode(line) if line.startswith(b"~") else json.loads(line)


class StandInAgent:
    """Runs a frame loop at `fps`: each frame's inference uses every input received so far and takes 2 ms."""

    def __init__(self, fps: int) -> None:
        self.info = {"agent": "stand-in"}
        self.clock = StandInClock(DEVICE_OFFSET_NS)
        self.faults: list[dict[str, Any]] = [{"kind": "crash", "cause": "exception", "t_switch": 5, "t_fault": 9}]
        self.sent_ns: dict[int, int] = {}
        self.lines: list[bytes] = []
        self.loads: list[tuple[str, str, bool]] = []
        self.fps = fps
        self._queue: asyncio.Queue = asyncio.Queue()
        self._loop: asyncio.Task | None = None

    def _us(self) -> int:
        return (time.monotonic_ns() + DEVICE_OFFSET_NS) // 1000

    async def sync_clock(self, n: int = 16, interval: float = 0.0) -> StandInClock:
        return self.clock

    async def start(self, *, fps: int, vsync_hz: int, key_every: int = 1, budget_ms: int = 50, frames: int = 0):
        self._loop = asyncio.create_task(self._run(fps))
        return {"t": "ack"}

    async def _run(self, fps: int) -> None:
        i = 0
        while True:
            await asyncio.sleep(1 / fps)
            t0 = self._us()
            seq = max((_decode(line)["seq"] for line in self.lines[-1:]), default=-1)
            await asyncio.sleep(0.002)
            self._queue.put_nowait(Frame(i, t0 - 100, due=t0 - 50, ran=True, t0=t0, t1=self._us(), seq=seq,
                                         rx_ns=time.monotonic_ns()))  # fmt: skip
            i += 1

    async def stop(self, timeout: float | None = None):
        self._loop.cancel()
        self._queue.put_nowait(None)
        return {"t": "ack"}

    async def stats(self) -> dict[str, Any]:
        return {"t": "stats", "mem": 10, "mem_peak": 4242}

    async def load(
        self, path: str, manifest: dict[str, Any], timeout: float = 60.0, *, cold: bool = False
    ) -> dict[str, Any]:
        self.loads.append((path, manifest["sha256"], cold))
        await asyncio.sleep(0.02)  # reading, verifying and parsing the model
        return {"t": "loaded"}

    async def send_raw(self, data: bytes) -> int:
        sent = time.monotonic_ns()
        self.lines.append(data)
        return sent

    async def frames(self, timeout: float | None = None):
        while (rec := await self._queue.get()) is not None:
            yield rec


def test_replay_run_measures_and_stores_every_device(tmp_path: Path) -> None:
    plan = build_plan(synth_session("combat", 5, duration_s=1.5), lambda m: json.dumps(m).encode())
    devices = [
        Device("tcp-1", "pi5", None, settings={"fps_target": 30, "vsync_hz": 30, "decision_budget_ms": 50}),
        Device("uart-1", "esp32c6", SerialLink("socket://x:1", 115200), settings={"fps_target": 20}),
        Device("gone-1", "pi5", None),
    ]
    agents: dict[str, StandInAgent] = {}
    closed: list[str] = []

    async def open_agent(dev: Device) -> AgentEndpoint:
        if dev.name == "gone-1":
            raise DeviceUnreachable("gone-1: no answer on its link")
        agents[dev.name] = StandInAgent(dev.settings.fps_target)

        async def close() -> None:
            closed.append(dev.name)

        return AgentEndpoint(agents[dev.name], close)

    store = open_store(tmp_path / "r.sqlite")
    run_id = store.begin_run("replay", session=plan.session_id, speed=2.0)
    runs = asyncio.run(ReplayRun(plan, devices, open_agent, store, run_id, speed=2.0).execute())
    by_name = {r.device.name: r for r in runs}
    assert by_name["gone-1"].status == "unreachable" and "no answer" in by_name["gone-1"].detail
    assert by_name["tcp-1"].status == "ok" and by_name["uart-1"].status == "ok"
    assert sorted(closed) == ["tcp-1", "uart-1"]

    # every input reached each live agent, in order; the UART got voice features
    for name in ("tcp-1", "uart-1"):
        seqs = [json.loads(line)["seq"] for line in agents[name].lines]
        assert seqs == list(range(len(plan.inputs)))
    chans = {json.loads(line)["ch"] for line in agents["uart-1"].lines}
    assert "voicef" in chans and "voice" not in chans
    assert "voice" in {json.loads(line)["ch"] for line in agents["tcp-1"].lines}

    devices_rows = {d.name: d for d in store.devices(run_id)}
    assert (
        devices_rows["uart-1"].info["voice_mode"] == "voicef" and "B/s" in devices_rows["uart-1"].info["voice_reason"]
    )
    assert devices_rows["gone-1"].status == "unreachable"

    ms = {m.name: m for m in store.measurements(run_id, "tcp-1")}
    assert ms["fps"].value == pytest.approx(30, rel=0.35)
    assert ms["inference_latency_p50"].value == pytest.approx(2000, rel=0.5)
    # the decision latency is corrected for the 7 s clock offset: a few frame periods, not seconds
    assert 0 < ms["decision_latency_p50"].value < 200_000
    assert ms["mem_peak"].value == 4242 and ms["faults_crash"].value == 1
    assert ms["replay_send_error_p50"].unit == "ns" and ms["replay_send_error_p50"].value is not None
    assert store.frame_count(run_id, "tcp-1") == len(by_name["tcp-1"].frames) > 10
    assert ms["inputs_sent"].value == len(plan.inputs)
    uart = {m.name: m.value for m in store.measurements(run_id, "uart-1")}
    assert uart["input_bytes"] == sum(len(line) for line in agents["uart-1"].lines) < ms["input_bytes"].value
    assert len(store.inputs(run_id, "tcp-1")) == len(plan.inputs)
    assert set(store.histograms(run_id, "uart-1")) >= {"decision_latency", "inference_latency", "replay_send_error"}
    # after the session: 10 cold starts (the model the bench deployed, loaded again, then the frame loop started)
    assert agents["uart-1"].loads[0][0] == "models/npc-policy-int8.npcm" and len(agents["uart-1"].loads) == 10
    assert all(cold for _, _, cold in agents["uart-1"].loads)  # cold starts: the agent may free its models first
    assert agents["tcp-1"].loads[0][0].endswith(".tflite") and "/" not in agents["tcp-1"].loads[0][0]
    cold = ms["first_frame_p50"]
    assert cold.samples == 10 and 20_000 < cold.value < 1_000_000  # load 20 ms + up to a frame period, in us
    store.close()


def test_replay_fleet_gives_run_aware_openers_the_run_id(tmp_path: Path) -> None:
    from bench.replay.service import replay_fleet

    path = tmp_path / "s.mcap"
    write_session(path, synth_session("combat", 4, duration_s=1.0))
    seen: list[int] = []

    def make_opener(run_id: int):
        seen.append(run_id)

        async def open_agent(dev: Device) -> AgentEndpoint:
            async def close() -> None:
                return None

            return AgentEndpoint(StandInAgent(30), close)

        return open_agent

    with open_store(tmp_path / "r.sqlite") as store:
        result = asyncio.run(replay_fleet([Device("d", "pi5", None)], path, store, make_opener=make_opener, speed=4))
        assert seen == [result.run_id] and result.status == "ok"
        with pytest.raises(ValueError, match="exactly one"):
            asyncio.run(replay_fleet([], path, store))
