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
from bench.agent.frame import Frame
from bench.agent.session import LoopStart
from bench.config.fleet import Device, SerialLink
from bench.core.errors import DeviceUnreachable
from bench.measure.records import OffsetClock
from bench.replay.plan import build_plan
from bench.replay.recording import write_session
from bench.replay.run import ReplayRun
from bench.replay.synth import synth_session
from bench.store.results import open_store

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

    async def start(self, loop: LoopStart):
        self._loop = asyncio.create_task(self._run(loop.fps))
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
        # every input: not the kind's 30 a second per sampled channel (test_replay_sampling.py shows those)
        Device("uart-1", "esp32c6", SerialLink("socket://x:1", 115200), settings={"fps_target": 20, "input_max_hz": 0}),
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
    run_id = store.runs.begin_run("replay", session=plan.session_id, speed=2.0)
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

    devices_rows = {d.name: d for d in store.runs.devices(run_id)}
    assert (
        devices_rows["uart-1"].info["voice_mode"] == "voicef" and "B/s" in devices_rows["uart-1"].info["voice_reason"]
    )
    assert devices_rows["gone-1"].status == "unreachable"

    ms = {m.name: m for m in store.measures.measurements(run_id, "tcp-1")}
    assert ms["fps"].value == pytest.approx(30, rel=0.35)
    assert ms["inference_latency_p50"].value == pytest.approx(2000, rel=0.5)
    # the decision latency is corrected for the 7 s clock offset: a few frame periods, not seconds
    assert 0 < ms["decision_latency_p50"].value < 200_000
    assert ms["mem_peak"].value == 4242 and ms["faults_crash"].value == 1
    assert ms["replay_send_error_p50"].unit == "ns" and ms["replay_send_error_p50"].value is not None
    assert store.frames.frame_count(run_id, "tcp-1") == len(by_name["tcp-1"].frames) > 10
    assert ms["inputs_sent"].value == len(plan.inputs)
    uart = {m.name: m.value for m in store.measures.measurements(run_id, "uart-1")}
    assert uart["input_bytes"] == sum(len(line) for line in agents["uart-1"].lines) < ms["input_bytes"].value
    assert len(store.frames.inputs(run_id, "tcp-1")) == len(plan.inputs)
    assert set(store.measures.histograms(run_id, "uart-1")) >= {
        "decision_latency",
        "inference_latency",
        "replay_send_error",
    }
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


class SlowGuest(StandInAgent):
    """An icount guest's agent: its clock runs at `rate` of real time, it holds each input until its clock reaches
    the input's `ts` after its epoch (the `hold` cap; up to `max_held` sent ahead of its loop), and it notes when
    (device us) each input arrived."""

    def __init__(self, fps: int, rate: float, max_held: int = 1 << 16) -> None:
        super().__init__(fps)
        self.max_held = max_held
        self.started = False
        self.info = {"agent": "stand-in", "platform": "linux-aarch64/qemu-icount", "caps": ["hold"]}
        self.rate = rate
        self.born = time.monotonic_ns()
        self.epoch = 0
        self.arrived: list[tuple[int, int]] = []  # (device us, ts ms)
        self.holds: list[int | None] = []  # each start's hold_ms
        self.epochs: list[int] = []

    def _us(self) -> int:
        return round((time.monotonic_ns() - self.born) * self.rate) // 1000

    async def start(self, loop: LoopStart):
        rx = self._us()
        self.started = True
        self.holds.append(loop.hold_ms)
        self.epoch = rx + 1_000_000 // loop.vsync_hz + (loop.hold_ms or 0) * 1000
        self.epochs.append(self.epoch)
        self._loop = asyncio.create_task(self._run(loop.fps))
        return {"t": "ack", "epoch": self.epoch, "rx": rx}

    async def hold(self) -> dict[str, Any]:
        return {"t": "ack", "max": self.max_held}

    async def stats(self) -> dict[str, Any]:
        return {**await super().stats(), "held": 0 if self.started else len(self.arrived)}

    async def send_raw(self, data: bytes) -> int:
        self.arrived.append((None if not self.started else self._us(), _decode(data)["ts"]))
        return await super().send_raw(data)

    async def _run(self, fps: int) -> None:
        i, period = 0, 1_000_000 // fps
        while True:
            due = self.epoch - 200_000 + i * period
            while self._us() < due:
                await asyncio.sleep(0.001)
            t0 = self._us()
            released = [(us, ts) for us, ts in self.arrived if self.epoch + ts * 1000 <= t0]
            await asyncio.sleep(0.002)
            self._queue.put_nowait(Frame(i, due, due=due, ran=True, t0=t0, t1=self._us(), seq=len(released) - 1,
                                         rx_ns=time.monotonic_ns()))  # fmt: skip
            i += 1

    async def load(self, path: str, manifest: dict[str, Any], timeout: float = 60.0, *, cold: bool = False):
        rx = self._us()
        await super().load(path, manifest, timeout, cold=cold)
        return {"t": "loaded", "rx": rx}


def test_an_icount_guest_is_replayed_on_its_own_clock_within_its_budget(tmp_path: Path) -> None:
    """A guest whose clock runs at half real time gets the session at the recorded rate on its clock: as many
    inputs as it can hold go out before its loop starts, no later input reaches it more than the lookahead ahead of
    its clock, the replay stops at the device's time budget and says how much it played, and latency, deadline
    misses and first-frame times are on the guest clock."""
    from bench.replay.player import LOOKAHEAD_MS

    plan = build_plan(synth_session("combat", 5, duration_s=4.0), lambda m: json.dumps(m).encode())
    guest = SlowGuest(30, rate=0.5, max_held=100)
    device = Device("orin-1", "pi5", None, settings={"fps_target": 30, "vsync_hz": 30, "replay_budget_s": 1.2})

    async def open_agent(dev: Device) -> AgentEndpoint:
        async def close() -> None:
            return None

        return AgentEndpoint(guest, close)

    store = open_store(tmp_path / "r.sqlite")
    run_id = store.runs.begin_run("replay", session=plan.session_id, speed=1.0)
    (run,) = asyncio.run(ReplayRun(plan, [device], open_agent, store, run_id).execute())
    assert run.status == "ok", run.detail
    assert guest.holds[0] is not None  # the session's frame loop holds inputs (the cold starts' need not)
    ahead = [(us, ts) for us, ts in guest.arrived if us is not None]
    assert len(guest.arrived) - len(ahead) == 100  # what it can hold went out before its loop
    ahead_ms = max(ts - (us - guest.epochs[0]) / 1000 for us, ts in ahead)
    assert ahead_ms <= LOOKAHEAD_MS + 50  # the rest fed on the guest's clock: never flooded
    assert 100 < len(guest.arrived) < len(plan.inputs)  # the budget ended it: what fits, from the start
    ms = {m.name: m for m in store.measures.measurements(run_id, "orin-1")}
    last_sent_s = guest.arrived[-1][1] / 1000
    assert 0.1 < ms["replay_covered"].value <= last_sent_s + 0.001 < 4.0  # the part whose inputs all went out
    assert ms["replay_session"].value == pytest.approx(4.0, abs=0.01)
    assert "device clock" in ms["decision_latency_p50"].description
    assert 0 < ms["decision_latency_p50"].value < 2 * 1_000_000 / 30 + 5000  # at most a frame period + inference
    assert ms["replay_release_error_p50"].value is not None and "replay_send_error_p50" not in ms
    assert store.runs.devices(run_id)[0].info["latency_clock"] == "device"
    assert ms["first_frame_p50"].samples == 10 and 0 < ms["first_frame_p50"].value < 1_000_000
    store.close()


def _wave_run(tmp_path: Path, waves: str) -> list[tuple[str, str]]:
    """A bench-clock board and an icount guest replayed with wave policy `waves`: the order their loops started and
    stopped, and when the guest got its first held input ("guest", "held")."""
    plan = build_plan(synth_session("combat", 5, duration_s=1.0), lambda m: json.dumps(m).encode())
    board, guest = StandInAgent(30), SlowGuest(30, rate=1.0)
    events: list[tuple[str, str]] = []
    send = guest.send_raw

    async def noted_send(data: bytes) -> int:
        if not guest.started and ("guest", "held") not in events:
            events.append(("guest", "held"))
        return await send(data)

    guest.send_raw = noted_send
    for name, agent in (("board", board), ("guest", guest)):
        start, stop = agent.start, agent.stop

        async def noted_start(loop, _name=name, _start=start):
            events.append((_name, "start"))
            return await _start(loop)

        async def noted_stop(timeout=None, _name=name, _stop=stop):
            events.append((_name, "stop"))
            return await _stop(timeout)

        agent.start, agent.stop = noted_start, noted_stop
    agents = {"tcp-1": board, "orin-1": guest}
    devices = [Device("orin-1", "pi5", None, settings={"fps_target": 30, "vsync_hz": 30, "replay_budget_s": 3.0}),
               Device("tcp-1", "pi5", None, settings={"fps_target": 30, "vsync_hz": 30})]  # fmt: skip

    async def open_agent(dev: Device) -> AgentEndpoint:
        async def close() -> None:
            return None

        return AgentEndpoint(agents[dev.name], close)

    store = open_store(tmp_path / "r.sqlite")
    run_id = store.runs.begin_run("replay", session=plan.session_id, speed=1.0)
    run = ReplayRun(plan, devices, open_agent, store, run_id, waves=waves)
    runs = asyncio.run(run.execute())
    assert [r.status for r in runs] == ["ok", "ok"], [r.detail for r in runs]
    assert {r.latency_clock for r in runs} == {"bench", "device"}
    for name in agents:
        assert {m.name: m for m in store.measures.measurements(run_id, name)}["frames"].value > 0
    assert {p.wave for p in run.timer.phases if p.name == "play"} == ({1, 2} if waves == "split" else {1})
    store.close()
    return events


def test_devices_on_their_own_clock_play_after_the_bench_clock_ones(tmp_path: Path) -> None:
    """An icount guest keeps host cores busy while its loop runs, and a bench-clock device's figures are the host's
    timing: the guest's loop starts only once the bench-clock device's replay has stopped; the guest is handed the
    session it holds while the board plays, so its own wave starts at once."""
    events = _wave_run(tmp_path, "split")
    assert events.index(("board", "stop")) < events.index(("guest", "start")), events
    assert events.index(("guest", "held")) < events.index(("board", "stop")), events


def test_together_every_device_plays_in_one_wave(tmp_path: Path) -> None:
    events = _wave_run(tmp_path, "together")
    assert events.index(("guest", "start")) < events.index(("board", "stop")), events
    assert events.index(("board", "start")) < events.index(("guest", "stop")), events
