"""A replay run: a session played into every selected device, measured and stored.

Per device: open its agent session, sync clocks, start the frame loop, collect frame records (written
to the store as they arrive) while one paced loop sends the inputs to every device of its wave, then stop,
sync clocks again (drift over the run), take stats, and store the measurements. Devices timed on the bench's
clock play first, together; devices on their own clock (QEMU -icount guests) play after them (`waves`)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bench.agent.endpoint import AgentEndpoint, AgentLike, ClockLike, OpenAgent
from bench.agent.frame import Frame
from bench.agent.session import LoopStart
from bench.bundles import loaded_model
from bench.bundles.fingerprint import device_clock
from bench.config.fleet import Device
from bench.config.kinds import MICROPYTHON_AGENT, Settings
from bench.core.errors import BenchError, DeviceUnreachable
from bench.core.outcomes import PASS, FailureClass, Outcome, class_of, infrastructure, product, recovered
from bench.energy.meters import meter_for
from bench.energy.protocol import Meter, PowerSample
from bench.energy.store import add_power
from bench.measure.device import DeviceMeasurements, measure_device
from bench.measure.energy import EnergyFigures, energy_figures
from bench.measure.played import add_played, played
from bench.measure.records import OffsetClock
from bench.measure.replay_timing import ReplayTiming
from bench.replay.pacing import Pacer
from bench.replay.phases import PhaseTimer
from bench.replay.plan import Plan, VoiceChoice, VoiceMode, choose_voice_mode, link_bytes_per_s, sampled_at_most
from bench.replay.player import DevicePace, Replayer, ReplayOutcome, Track
from bench.replay.sink import FrameSink, RunSink

CLOCK_PINGS = 16
TAIL_S = 0.5  # after the last input, keep listening this long (covers the decision budget)
SPAN_STRETCH = 3.0  # a device playing a fixed span of the session may take this many times its replay_budget_s
COLD_STARTS = 10  # per device and session run: first-frame time is their median (the product's +15% check)
COLD_START_TIMEOUT_S = 30.0
IDLE_SAMPLES = 8  # a device-clock meter's readings before the loop starts: its idle baseline (_start_meter)
IDLE_WAIT_S = 20.0  # the longest the loop waits for them
HOLD_MS = 200  # a device-clock replay: session time 0 is this long after the agent's first VSync
HOLD_CAP = "hold"  # the agent holds inputs until its own clock reaches them (protocol.md, start `hold_ms`)
DEVICE_CLOCK = OffsetClock(0)  # device-clock figures: device us as "bench" ns, unmapped


def on_device_clock(device: Device, hello: dict[str, Any]) -> bool:
    """Whether a replay paces `device` on its own clock: its clock is not the bench's (a QEMU -icount guest) and
    its agent can hold inputs until they are due. Other icount agents get bench-clock pacing, and their bench-clock
    figures are not stored (they would mean nothing)."""
    return device_clock(device, hello) == "icount" and HOLD_CAP in (hello.get("caps") or ())


def latency_clock(device: Device, hello: dict[str, Any]) -> str | None:
    """The clock a device's decision-latency and first-frame figures are on: "device", "bench", or None when
    neither means anything (an icount guest whose agent cannot hold inputs)."""
    if on_device_clock(device, hello):
        return "device"
    return None if device_clock(device, hello) == "icount" else "bench"


SPLIT, TOGETHER = "split", "together"
WAVE_POLICIES = (SPLIT, TOGETHER)
DEFAULT_WAVES = TOGETHER  # what the nightly and `hilbench replay` use (docs/replay.md: the two measured)


def waves(runs: list[DeviceRun], policy: str = DEFAULT_WAVES) -> list[list[DeviceRun]]:
    """The order devices play in. `together`: every device in one wave, the counted devices' emulators at the host's
    lowest CPU priority (bench.core.procs.COUNTED_NICE), so they take only the cores the others leave idle.
    `split`: those timed on the bench's clock together (with the counted boards that hold few inputs:
    `_short_hold`), then those on their own clock together: a device on its own clock is emulated on a host (QEMU
    -icount) and its figures do not depend on the host's timing, but it keeps host cores busy while its loop runs;
    a bench-clock device's figures are the host's timing (docs/replay.md compares the two)."""
    if policy == TOGETHER:
        return [runs] if runs else []
    first = [r for r in runs if r.latency_clock == "bench" or _short_hold(r)]
    after = [r for r in runs if r not in first]
    return [w for w in (first, after) if w]


def _short_hold(run: DeviceRun) -> bool:
    """A device on its own clock whose agent holds only a second or two of inputs (a MicroPython board's heap): it
    needs the bench to keep feeding it, and an idle core's clock runs on at real time while it waits, so it plays
    in the first wave, not beside the guests that take every host core (beside them the counted C6s waited for
    inputs seconds late: release error P99 4.6-6.2 s, every timing verdict inconclusive)."""
    return run.latency_clock == "device" and run.device.kind_info.runtime == MICROPYTHON_AGENT


def key_every(settings: Settings) -> int:
    """Every how many VSyncs a key frame (with inference) comes, so inference runs at the kind's `fps_target`
    on its `vsync_hz` display (30 FPS on 60 Hz: every other frame)."""
    return max(1, round(settings.vsync_hz / settings.fps_target))


@dataclass
class DeviceRun:
    """One device's state and results in a replay run."""

    device: Device
    track: Track | None = None
    endpoint: AgentEndpoint | None = None
    frames: list[Frame] = field(default_factory=list)
    collector: asyncio.Task | None = None
    status: str = "pending"  # pending, opened (waiting for its wave), running, ok, failed, unreachable
    detail: str = ""
    result: DeviceMeasurements | None = None
    stats: list[dict[str, Any]] = field(default_factory=list)
    clock: ClockLike | None = None
    start_ns: int | None = None  # bench time the frame loop's start request went out
    cold_starts_ms: list[float] = field(default_factory=list)  # model load request -> first decision, each
    end_ns: int | None = None  # bench time the bench stopped listening for decisions
    latency_clock: str | None = "bench"  # see latency_clock()
    epoch_us: int | None = None  # device-clock replay: device time of session time 0
    start_us: int | None = None  # device-clock replay: device time the agent received the start request
    failure: FailureClass | None = None  # the class of what made the status "failed"/"unreachable"
    recoveries_at_start: int = 0  # recoveries the agent session had before the frame loop started (at open)
    meter: Meter | None = None  # the power meter on its supply, sampling during the frame loop
    power: list[PowerSample] = field(default_factory=list)  # what the meter took
    meter_error: str = ""
    meter_stopped: bool = False
    energy: EnergyFigures | None = None  # what the meter's samples give, once measured
    held_ahead: tuple[int, int | None] = (0, None)  # a device-clock agent: inputs held before its loop, most it holds

    def device_now_us(self) -> int | None:
        """The newest device time the bench has heard of: the VSync of the last frame record."""
        return self.frames[-1].vsync if self.frames else None

    def loop_over(self) -> bool:
        """Whether the device's frame loop is over: no more frame records will come."""
        return self.collector is not None and self.collector.done()

    @property
    def recovery_steps(self) -> list[str | None]:
        """The ladder step that brought the device back, one per recovery during this run."""
        session = self.endpoint.session if self.endpoint is not None else None
        mid_run = getattr(session, "recoveries", [])[self.recoveries_at_start :]
        return [r.step for r in mid_run if r.recovered]

    @property
    def outcome(self) -> Outcome:
        """The device's class in this run before any verdict: a device that stopped answering is never a pass,
        also when the recovery ladder brought it back (its figures cover a hang, not the product)."""
        if self.status in ("failed", "unreachable"):
            return Outcome(self.failure or FailureClass.INFRASTRUCTURE, self.detail)
        if self.status != "ok":
            return infrastructure(f"replay {self.status}")
        restarts = getattr(self.endpoint.session, "restarts", 0) if self.endpoint is not None else 0
        if restarts:  # a Linux agent that died mid-run and was started again: the product crashed
            return product(f"agent crashed during the run (restarted {restarts} time(s))")
        steps = self.recovery_steps
        return recovered(steps) if steps else PASS

    def fail(self, detail: str, cls: FailureClass, status: str = "failed") -> None:
        """Mark the device failed because `detail`, of failure class `cls`."""
        self.status, self.detail, self.failure = status, detail, cls


class _RecordingSink:
    """Sends through the agent session and notes each input's send time where its frame records look."""

    def __init__(self, session: AgentLike, seqs: list[int]) -> None:
        self.session = session
        self.seqs = iter(seqs)

    async def send_raw(self, data: bytes) -> int:
        sent = await self.session.send_raw(data)
        self.session.sent_ns[next(self.seqs)] = sent
        return sent


@dataclass
class ReplayRun:
    """Plays `plan` into `devices` (opened with `open_agent`), writing into `store` (the results store, or any
    `RunSink`) as `run_id`."""

    plan: Plan
    devices: list[Device]
    open_agent: OpenAgent
    store: RunSink
    run_id: int
    speed: float | None = 1.0
    voice: str = "auto"  # auto, voice (PCM) or voicef
    pacer: Pacer = field(default_factory=Pacer)
    realtime: bool = True  # pace under a real-time scheduling priority when the OS allows it
    runs: list[DeviceRun] = field(default_factory=list)
    replayer: Replayer | None = None
    outcome: ReplayOutcome | None = None
    waves: str = DEFAULT_WAVES  # how devices are grouped into waves (`waves`)
    timer: PhaseTimer = field(default_factory=PhaseTimer)  # where the run's time goes (bench.replay.phases)
    _frames: FrameSink | None = field(default=None, init=False, repr=False)

    async def execute(self) -> list[DeviceRun]:
        """Run everything; devices that fail are marked and the others go on."""
        self.runs = [DeviceRun(d) for d in self.devices]
        self.replayer = Replayer(self.plan, self.pacer, self.realtime)
        self._frames = self.store.frames.frame_sink()
        live: list[DeviceRun] = []
        timer = self.timer
        ready: asyncio.Task | None = None  # the next wave's _ready, running while this one plays
        try:
            with timer.phase("open", _names(self.runs)):
                await asyncio.gather(*(self._prepare(r, self._open) for r in self.runs))
            order = waves([r for r in self.runs if r.status == "opened"], self.waves)
            for number, wave in enumerate(order, 1):
                with timer.phase("start", _names(wave), number):
                    ready = ready or self._ready_all(wave)
                    await ready
                    await asyncio.gather(*(self._prepare(r, self._begin) for r in wave if r.status == "opened"))
                ready = self._ready_all(order[number]) if number < len(order) else None  # during this wave's play
                playing = [r for r in wave if r.status == "running"]
                live += playing
                if playing:
                    with timer.phase("play", _names(playing), number):
                        outcome = await self.replayer.play([r.track for r in playing], self.speed)
                        self.outcome = self.outcome or outcome
                        await asyncio.sleep(TAIL_S)
                with timer.phase("stop", _names(playing), number):
                    await asyncio.gather(*(self._stop(r) for r in playing))
                stopped = [r for r in playing if r.status == "ok"]
                with timer.phase("cold starts", _names(stopped), number):
                    await asyncio.gather(*(self._timed_cold_starts(r) for r in stopped))
        finally:  # also when interrupted: what was collected is measured and stored
            if ready is not None and not ready.done():
                ready.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ready
            with timer.phase("measure", _names(live)):
                await asyncio.gather(*(self._close(r) for r in self.runs), return_exceptions=True)
                self._frames.close()
                for r in self.runs:
                    if r.status == "opened":  # interrupted before its wave played
                        r.fail("interrupted before its replay began", FailureClass.INFRASTRUCTURE)
                        self._store_status(r)
                for r in live:
                    if r.status == "running":
                        r.fail(r.detail or "interrupted", FailureClass.INFRASTRUCTURE)
                        r.end_ns = r.end_ns or time.monotonic_ns()
                    self._measure(r)
        return self.runs

    def _ready_all(self, wave: list[DeviceRun]) -> asyncio.Task:
        """`_ready` for every device of `wave`, in the background."""

        async def ready(run: DeviceRun) -> None:
            with self.timer.phase("start", [run.device.name], detail=True):
                await self._prepare(run, self._ready)

        async def all_ready() -> None:
            await asyncio.gather(*(ready(r) for r in wave))

        return asyncio.create_task(all_ready(), name="ready")

    async def _prepare(self, run: DeviceRun, step: Callable[[DeviceRun], Awaitable[None]]) -> None:
        """One step of getting `run`'s device going; its failure marks the device, and the others go on."""
        try:
            await step(run)
        except Exception as exc:  # one device's trouble (even a driver bug) must not stop the others
            unreachable = isinstance(exc, DeviceUnreachable | OSError) and run.endpoint is None
            detail = str(exc) if isinstance(exc, BenchError | OSError) else f"{type(exc).__name__}: {exc}"
            run.fail(detail, class_of(exc), "unreachable" if unreachable else "failed")
            self._store_status(run)

    def _store_status(self, run: DeviceRun) -> None:
        """Write the device's status, its detail and its outcome to the store."""
        self.store.runs.update_device(
            self.run_id, run.device.name, status=run.status, detail=run.detail, outcome=run.outcome.to_json()
        )

    async def _open(self, run: DeviceRun) -> None:
        """Open the device's agent session and sync clocks; its hello says which clock it is timed on."""
        self.store.runs.add_device(self.run_id, run.device.name, run.device.kind)
        with self.timer.phase("open", [run.device.name], detail=True):
            run.endpoint = await self.open_agent(run.device)
            session = run.endpoint.session
            run.recoveries_at_start = len(getattr(session, "recoveries", []))
            await session.sync_clock(CLOCK_PINGS)
        run.latency_clock = latency_clock(run.device, session.info)
        run.status = "opened"

    async def _ready(self, run: DeviceRun) -> None:
        """Make the device's track (its voice mode and inputs) and hand a device-clock agent the session ahead of
        its loop. Runs while the wave before the device's plays: only the agent's link and emulator are busy."""
        dev, session = run.device, run.endpoint.session
        s = dev.settings
        choice = self._voice_choice(dev)
        reason, keep = choice.reason, None
        if s.input_max_hz:
            keep = frozenset(sampled_at_most(self.plan, s.input_max_hz))
            reason += f"; voice, gaze and mocap at most {s.input_max_hz:g} Hz (the device's input_max_hz)"
        if s.replay_span_s and run.latency_clock == "device":
            keep = frozenset(i for i in (keep or range(len(self.plan.inputs))) if self._in_span(i, s.replay_span_s))
            reason += f"; the session's first {s.replay_span_s:g} s (the fleet's replay_span_s)"
        run.track = Track(dev.name, _RecordingSink(session, [p.seq for p in self.plan.inputs]), choice.mode,
                          reason, keep=keep)  # fmt: skip
        if run.latency_clock == "device":
            run.held_ahead = await self._hold_ahead(run)

    async def _begin(self, run: DeviceRun) -> None:
        """Start the meter and the frame loop (on a device-clock agent: with the session it holds), and collect
        frames."""
        dev, session = run.device, run.endpoint.session
        s = dev.settings
        await self._start_meter(run)
        hold = HOLD_MS if run.latency_clock == "device" else None
        preloaded, max_held = run.held_ahead
        run.start_ns = time.monotonic_ns()
        ack = await session.start(LoopStart(
            fps=s.fps_target, vsync_hz=s.vsync_hz, key_every=key_every(s), budget_ms=s.decision_budget_ms,
            frames=0 if hold is None else self._frames_for(run), hold_ms=hold,
            hold_count=None if hold is None else run.track.planned(self.plan),
        ))  # fmt: skip
        if hold is not None:
            run.epoch_us, run.start_us = int(ack["epoch"]), int(ack["rx"])
            budget_ns = round(self._budget_s(dev) * 1e9)
            run.track.pace = DevicePace(run.epoch_us, run.device_now_us, budget_ns, HOLD_MS, preloaded=preloaded,
                                        max_held=max_held, loop_over=run.loop_over)  # fmt: skip
        run.collector = asyncio.create_task(self._collect(run), name=f"frames-{dev.name}")
        run.status = "running"
        self.store.runs.update_device(
            self.run_id, dev.name, status="running", agent=session.info, voice_mode=str(run.track.mode),
            voice_reason=run.track.mode_reason, latency_clock=run.latency_clock,
        )  # fmt: skip

    async def _hold_ahead(self, run: DeviceRun) -> tuple[int, int | None]:
        """Hand a device-clock agent the session before its loop starts (`hold`, then as many inputs as it can
        hold); returns how many it holds and the most it can hold at once (None: no limit given). The `stats`
        reply comes after the agent has taken every line before it."""
        session = run.endpoint.session
        ack = await session.hold()
        max_held = int(ack["max"]) if "max" in ack else None
        sent = await self.replayer.preload(run.track, max_held if max_held is not None else len(self.plan.inputs))
        held = (await session.stats()).get("held")
        if held != sent:
            raise BenchError(f"agent on {run.device.name}: holds {held} of the {sent} inputs sent ahead of its loop")
        return sent, max_held

    async def _start_meter(self, run: DeviceRun) -> None:
        """Start the device's power meter in the background (its failure is noted, and the run goes on). A meter on
        the device's clock gives IDLE_SAMPLES before the loop starts: the idle baseline its energy per decision
        needs when it is too coarse for single decisions (bench.measure.energy)."""
        try:
            run.meter = meter_for(run.device, driver=run.endpoint.driver if run.endpoint else None)
            if run.meter is not None:
                await run.meter.start()
                if run.meter.device_clock:  # on a slow guest the readings come late: what came by then is used
                    await run.meter.first_sample()
                    await run.meter.more_samples(IDLE_SAMPLES, IDLE_WAIT_S)
        except BenchError as exc:
            run.meter_error = str(exc)
            if run.meter is not None:
                await run.meter.stop()
            run.meter = None

    async def _stop_meter(self, run: DeviceRun) -> None:
        """Stop the meter once, keeping its samples (and why it stopped early, if it did)."""
        if run.meter is not None and not run.meter_stopped:
            run.meter_stopped = True
            run.power = await run.meter.stop()
            run.meter_error = run.meter_error or "; ".join(run.meter.errors)

    def _energy(self, run: DeviceRun, clock: ClockLike) -> EnergyFigures | None:
        """Energy figures of the run (None for a device without a meter)."""
        if run.device.energy is None:
            return None
        if run.meter is None:
            why = run.meter_error or "the meter did not start"
            return EnergyFigures(f"{run.device.energy.driver} ({why})", 0.0, 0, flags=("meter_failed",))
        m = run.meter
        return energy_figures(run.power, run.frames, clock, m.name, m.period_s, m.marker, m.device_clock)

    def _budget_s(self, dev: Device) -> float:
        """Bench seconds a device-clock replay may take: the device's replay_budget_s, else the session's length;
        SPAN_STRETCH times that for a device that plays a fixed span of the session (replay_span_s)."""
        budget = dev.settings.replay_budget_s or self.plan.duration_ns / 1e9 / (self.speed or 1.0)
        return budget * SPAN_STRETCH if dev.settings.replay_span_s else budget

    def _in_span(self, index: int, span_s: float) -> bool:
        return self.plan.inputs[index].offset_ns <= span_s * 1e9

    def _frames_for(self, run: DeviceRun) -> int:
        """The display frames of a device-clock loop that plays its track to the end: up to TAIL_S past its last
        input (the loop then ends on its own clock, at the same frame every night, not when the bench's `stop`
        arrives)."""
        last_ns = max((p.offset_ns for i, p in enumerate(self.plan.inputs) if run.track.takes(i)), default=0)
        return math.ceil((HOLD_MS / 1000 + last_ns / 1e9 + TAIL_S) * run.device.settings.vsync_hz) + 1

    def _voice_choice(self, dev: Device) -> VoiceChoice:
        if self.voice != "auto":
            return VoiceChoice(VoiceMode(self.voice), "chosen with --voice")
        if dev.settings.voice != "auto":
            return VoiceChoice(VoiceMode(dev.settings.voice), "the device's voice setting in the fleet")
        return choose_voice_mode(self.plan, link_bytes_per_s(dev.link), self.speed or 1.0)

    async def _collect(self, run: DeviceRun) -> None:
        """Store each frame record the moment it arrives (committed by the writer thread)."""
        async for rec in run.endpoint.session.frames():
            run.frames.append(rec)
            self._frames.put(self.run_id, run.device.name, rec)

    async def _stop(self, run: DeviceRun) -> None:
        """Stop the frame loop, collect the last records, stats and a closing clock sync."""
        session = run.endpoint.session
        run.end_ns = time.monotonic_ns()
        lost = _failure(run.collector)
        if lost is not None:  # the device stopped answering and could not be brought back (what came is kept)
            run.fail(lost, _failure_class(run.collector))
            return
        try:
            await session.stop()
            await self._stop_meter(run)
            if run.collector is not None:
                await asyncio.wait_for(run.collector, 10)
            run.stats.append(await session.stats())
            run.clock = await session.sync_clock(CLOCK_PINGS)
        except Exception as exc:  # measure what arrived anyway
            lost = _failure(run.collector)
            cls = _failure_class(run.collector) if lost else class_of(exc)
            run.fail(lost or f"stopping: {type(exc).__name__}: {exc}", cls)
        if run.track is not None and run.track.failed:  # the link stopped taking inputs
            run.fail(f"link lost: {run.track.failed}", FailureClass.INFRASTRUCTURE)
        refused = getattr(session, "refusals", [])
        if run.status == "running" and refused:  # the bench sends valid lines only: refusing them is the product's
            first = refused[0]
            run.fail(
                f"the agent refused {len(refused)} input line(s), first {first.get('code')}: {first.get('detail', '')}",
                FailureClass.PRODUCT,
            )
        if run.status == "running":
            run.status = "ok"

    async def _timed_cold_starts(self, run: DeviceRun) -> None:
        """`_cold_starts`, timed as the device's part of the wave's cold starts."""
        with self.timer.phase("cold starts", [run.device.name], detail=True):
            await self._cold_starts(run)

    async def _cold_starts(self, run: DeviceRun) -> None:
        """COLD_STARTS cold starts after the session: the device's model loaded again (read, verified, parsed),
        then the frame loop started; each from the load request to the first decision (t1 on the bench clock).
        A device that cannot (e.g. an image whose model lives elsewhere) gets a note, not a failure."""
        session = run.endpoint.session
        clock = run.clock or session.clock
        s = run.device.settings
        if run.latency_clock is None:
            why = "no cold starts: the device's clock is emulated (QEMU -icount) and its agent cannot be timed on it"
            self.store.runs.update_device(self.run_id, run.device.name, cold_starts_error=why)
            return
        try:
            path, manifest = loaded_model(run.device)
            for _ in range(COLD_STARTS):
                sent_ns = time.monotonic_ns()
                loaded = await session.load(path, manifest, cold=True)
                if run.latency_clock == "device":  # both ends on the device's clock: the load's receipt (`rx`)
                    clock, sent_ns = DEVICE_CLOCK, int(loaded["rx"]) * 1000
                await session.start(LoopStart(fps=s.fps_target, vsync_hz=s.vsync_hz, budget_ms=s.decision_budget_ms))
                first = None
                async for rec in session.frames(timeout=COLD_START_TIMEOUT_S):
                    if rec.ran and rec.t1 is not None:
                        first = rec
                        break
                await session.stop()
                async for _ in session.frames(timeout=COLD_START_TIMEOUT_S):  # the rest, up to `stopped`
                    pass
                if first is not None:
                    took_ms = (clock.to_bench_ns(first.t1) - sent_ns) / 1e6
                    if took_ms <= 0:  # the clock mapping is off: a figure of 0 would pass for a fast start
                        raise BenchError(f"first decision {took_ms:.1f} ms before the load request (clock mapping)")
                    run.cold_starts_ms.append(took_ms)
        except Exception as exc:  # the session's own figures stand; say why there are no cold starts
            why = f"cold starts stopped after {len(run.cold_starts_ms)}: {type(exc).__name__}: {exc}"
            self.store.runs.update_device(self.run_id, run.device.name, cold_starts_error=why)

    def _measure(self, run: DeviceRun) -> None:
        """Compute and store the device's measurements from what was collected."""
        session = run.endpoint.session
        name = run.device.name
        self._store_inputs(run)
        clock = run.clock or session.clock  # the opening sync, when the closing one failed
        run.energy = self._energy(run, clock)
        timing = self._timing(run, clock)
        run.result = measure_device(
            run.frames,
            clock=clock,
            budget_ms=float(run.device.settings.decision_budget_ms),
            stats=run.stats,
            faults=list(session.faults),
            cold_starts_ms=run.cold_starts_ms,
            timing=timing,
            energy=run.energy,
            energy_budget_mj=run.device.energy.budget_mj if run.device.energy is not None else None,
        )
        planned = run.track.planned(self.plan)
        run.result.add("inputs_sent", run.track.sent, description=f"of {planned} planned")
        if run.latency_clock == "device":  # what the device was given on its own clock (bench.results.played)
            add_played(run.result, played(run.frames, list(run.track.sent_by_seq(self.plan)), run.stats))
        run.result.add("input_bytes", run.track.sent_bytes, description=f"as {run.track.mode} lines")
        self.store.measures.add_measurements(self.run_id, name, run.result.measurements)
        self.store.measures.add_histograms(self.run_id, name, run.result.histograms)
        self.store.measures.add_faults(self.run_id, name, run.result.faults)
        if run.power:
            add_power(self.store.measures, self.run_id, name, run.power, run.energy.windows_ns if run.energy else ())
        self.store.frames.set_clock(
            self.run_id, name, clock.offset_ns, clock.drift_ppm, clock.ref_ns, clock.uncertainty_ns
        )
        self._store_status(run)

    def _timing(self, run: DeviceRun, clock: ClockLike) -> ReplayTiming:
        """When each input was due or sent and how much of the session played, on the clock of `run`'s figures."""
        s = run.device.settings
        duration_s = self.plan.duration_ns / 1e9
        if run.latency_clock != "device":
            covered = duration_s if not run.track.failed else None
            loop_s = (run.end_ns - run.start_ns) / 1e9 if run.end_ns and run.start_ns else None
            return ReplayTiming(
                clock=run.latency_clock, inputs_ns=run.track.sent_by_seq(self.plan) if run.latency_clock else {},
                latency_clock=clock, end_ns=run.end_ns, start_ns=run.start_ns if run.latency_clock else None,
                send_errors_ns=run.track.send_errors_ns() if self.speed is not None else None,
                session_s=duration_s, covered_s=covered, loop_s=loop_s, vsync_hz=s.vsync_hz, fps=s.fps_target,
            )  # fmt: skip
        end_us = max((r.t1 if r.t1 is not None else r.vsync for r in run.frames), default=run.epoch_us)
        due = {  # due on the device's clock (ns), for the inputs that were sent and came due before the end
            p.seq: (run.epoch_us + p.offset_ns // 1_000_000 * 1000) * 1000
            for p, sent in zip(self.plan.inputs, run.track.sent_ns, strict=False)
            if sent >= 0 and run.epoch_us + p.offset_ns // 1_000_000 * 1000 <= end_us
        }
        covered = min(duration_s, max(0.0, (end_us - run.epoch_us) / 1e6))
        if run.track.budget_hit or run.track.loop_ended:  # played up to the last input sent (the rest never went out)
            last = max(
                (p.offset_ns for p, t in zip(self.plan.inputs, run.track.sent_ns, strict=False) if t >= 0), default=0
            )
            covered = min(covered, last / 1e9)
        loop_s = (end_us - run.start_us) / 1e6 if run.start_us is not None else None
        return ReplayTiming(
            clock="device", inputs_ns=due, latency_clock=DEVICE_CLOCK, end_ns=end_us * 1000,
            start_ns=run.start_us * 1000 if run.start_us is not None else None, send_errors_ns=None,
            session_s=duration_s, covered_s=covered, loop_s=loop_s, vsync_hz=s.vsync_hz, fps=s.fps_target,
            budget_hit=run.track.budget_hit,
        )  # fmt: skip

    def _store_inputs(self, run: DeviceRun) -> None:
        track = run.track
        rows = [
            (p.seq, p.channel, d if d >= 0 else None, s)
            for p, d, s in zip(self.plan.inputs, track.due_ns, track.sent_ns, strict=False)
            if s >= 0
        ]
        self.store.frames.add_inputs(self.run_id, run.device.name, rows)

    async def _close(self, run: DeviceRun) -> None:
        await self._stop_meter(run)  # when interrupted before _stop: what the meter took still counts
        if run.collector is not None and not run.collector.done():
            run.collector.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await run.collector
        if run.endpoint is not None:
            await run.endpoint.close()


def _names(runs: list[DeviceRun]) -> list[str]:
    return [r.device.name for r in runs]


def _failure_class(task: asyncio.Task | None) -> FailureClass:
    """The class of a finished frame collector's failure."""
    exc = task.exception() if task is not None and task.done() and not task.cancelled() else None
    return class_of(exc) if exc is not None else FailureClass.INFRASTRUCTURE


def _failure(task: asyncio.Task | None) -> str | None:
    """Why a finished frame collector failed (None while it runs or when it ended cleanly)."""
    if task is None or not task.done() or task.cancelled() or task.exception() is None:
        return None
    exc = task.exception()
    return str(exc) if isinstance(exc, BenchError) else f"{type(exc).__name__}: {exc}"
