"""Board code against the virtual PPK2: the counted core's status block and ring of events live in the chip's
memory, which firmware a user flashes can write. Each event is checked before the meter counts it (time and busy
cycles never go back, busy fits its stretch, time within the counted clock's reach, GPIOs the chip's), a refused
one is counted and shown in the meter's status, and nothing written there stops the stream; a power cycle brings
back a stream that had stopped."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import signal
import sys
from collections.abc import AsyncIterator

from bench.virtual.esp32c6.counted import UNBOUNDED, CoreEvent, CoreState, CoreStatus
from bench.virtual.esp32c6.ppk2 import AVERAGE_START, MAX_BUFFER, VirtualPpk2
from bench.virtual.esp32c6.supply import Span, Supply
from bench.virtual.esp32c6.timeline import Segment, Timeline

RUN, IDLE = CoreState.RUN, CoreState.IDLE
MS_Q = 4_000_000
CYCLES_PER_MS = 160_000
HUGE = (1 << 63) - 1


def ev(ms: float, busy_ms: float, state: CoreState = IDLE, gpio: int = 0) -> CoreEvent:
    return CoreEvent(round(ms * MS_Q), round(busy_ms * CYCLES_PER_MS), state, gpio)


def status(events: int) -> CoreStatus:
    return CoreStatus(IDLE, UNBOUNDED, events, 0)


def test_a_forged_huge_timestamp_is_refused_and_the_stream_goes_on() -> None:
    t = Timeline()
    t.advance(0, [ev(0, 0, RUN)], status(1), now_ns=0)
    forged = CoreEvent(HUGE, 0, IDLE, 0)
    got = t.advance(1, [forged, ev(2, 2, IDLE)], status(3), now_ns=1_000_000)
    assert t.refused == 1 and got[0] == Segment(2 * MS_Q, 1.0, 0)  # the run up to the good event, whole


def test_time_or_busy_cycles_going_back_are_refused() -> None:
    t = Timeline()
    t.advance(0, [ev(0, 0, RUN), ev(5, 5, IDLE)], status(2), now_ns=0)
    t.advance(2, [ev(4, 5, RUN), ev(6, 4, RUN), ev(7, 5, IDLE)], status(5), now_ns=0)
    assert t.refused == 2


def test_a_run_busier_than_its_stretch_is_refused() -> None:
    """A "decision" forged as 100 ms of busy cycles in 1 ms of time."""
    t = Timeline()
    t.advance(0, [ev(0, 0, RUN)], status(1), now_ns=0)
    t.advance(1, [ev(1, 100, IDLE, 1 << 6)], status(2), now_ns=0)
    assert t.refused == 1


def test_gpio_levels_beyond_the_chips_pins_are_refused() -> None:
    t = Timeline()
    t.advance(0, [ev(0, 0, RUN), ev(1, 1, IDLE, gpio=1 << 31)], status(2), now_ns=0)
    assert t.refused == 1


def test_a_first_event_beyond_the_clocks_reach_is_refused() -> None:
    t = Timeline()
    t.advance(0, [ev(3_600_000, 0, IDLE)], status(1), now_ns=0)  # an hour of counted time at once
    assert t.refused == 1 and t.advance(1, [ev(1, 0, IDLE)], status(2), now_ns=0) == []


def test_an_event_count_that_goes_back_resyncs() -> None:
    t = Timeline()
    t.advance(0, [ev(0, 0, RUN)], status(1), now_ns=0)
    assert t.wanted(status(2**31)) == (2**31 - 2048 + 64, 2048 - 64)  # a forged count: at most a ring's worth
    t.advance(2**31 - 2048 + 64, [], status(2**31), now_ns=0)
    assert t.wanted(status(3)) == (3, 0) and t.refused == 1  # the firmware wrote its real count again
    assert t.wanted(status(5)) == (3, 2)


class Ring:
    """A counted core's memory as the supply reads it, with what board code wrote in it."""

    def __init__(self, events: list[CoreEvent]) -> None:
        self.ring = events

    async def status(self) -> CoreStatus | None:
        return status(len(self.ring))

    async def events(self, first: int, count: int) -> list[CoreEvent] | None:
        return self.ring[first : first + count]


def serve(supply: Supply, ring: Ring, seconds: float, spans: list[Span]) -> None:
    async def run() -> None:
        supply.listeners.append(spans.append)
        supply.watch(lambda: None)  # as a measuring meter: a tick every TICK_S
        supply.start()
        await asyncio.sleep(seconds)
        ring.ring.append(ev(1, 1, IDLE))
        await asyncio.sleep(seconds)
        await supply.stop()

    asyncio.run(run())


def test_the_supply_streams_on_past_forged_events_and_counts_them() -> None:
    ring = Ring([ev(0, 0, RUN), CoreEvent(HUGE, HUGE, IDLE, 0), CoreEvent(-1 & HUGE, 0, RUN, 1 << 40)])
    supply = Supply(lambda: (True, False, True, None), lambda: ring)
    spans: list[Span] = []
    serve(supply, ring, 0.1, spans)
    assert supply.refused == 2 and supply.faults == 0
    assert Span(MS_Q, 27_000 + 11_000, 0) in spans  # the good run, after the forged events
    assert all(s.dt_q < 10**12 for s in spans)


def test_a_listener_that_fails_does_not_stop_the_stream() -> None:
    ring = Ring([ev(0, 0, RUN)])
    supply = Supply(lambda: (True, False, True, None), lambda: ring)
    calls: list[Span] = []

    def flaky(span: Span) -> None:
        calls.append(span)
        if len(calls) == 1:
            raise MemoryError("a span too long to sample")

    supply.listeners.append(flaky)
    serve(supply, ring, 0.1, [])
    assert supply.faults == 1 and len(calls) > 2


def _measuring(meter: VirtualPpk2) -> None:
    """Start `meter`'s measurement, and tell it the supply's first tick after the start went out (as that tick
    does: bench.virtual.esp32c6.supply.Supply.watch), so the spans it is handed next are measured."""
    meter._command(bytes([AVERAGE_START]))
    _synced(meter.supply)


def _synced(supply: Supply) -> None:
    told, supply._synced = supply._synced, []
    for synced in told:
        synced()


def test_the_meter_samples_a_huge_span_within_its_buffer_and_says_what_it_refused() -> None:
    async def run() -> None:
        ring = Ring([ev(0, 0, RUN), CoreEvent(HUGE, 0, IDLE, 0)])
        supply = Supply(lambda: (True, False, True, None), lambda: ring)
        meter = VirtualPpk2(supply)
        try:
            _measuring(meter)
            meter._on_span(Span(10**18, 27_000.0))
            assert len(meter._out) <= MAX_BUFFER
            supply.start()
            await asyncio.sleep(0.1)
            assert meter.status()["refused_events"] == 1
            assert meter.status()["stream_faults"] == 0
        finally:
            await supply.stop()
            meter.close()

    asyncio.run(run())


def test_start_after_a_stop_brings_the_stream_back() -> None:
    async def run() -> None:
        supply = Supply(lambda: (True, False, False, None))
        spans: list[Span] = []
        supply.listeners.append(spans.append)
        supply.watch(lambda: None)  # as a measuring meter: a tick every TICK_S
        supply.start()
        assert supply._task is not None
        supply._task.cancel()  # the stream stopped, however it did
        await asyncio.sleep(0.05)
        spans.clear()
        supply.start()  # what power_on / power_cycle do
        await asyncio.sleep(0.1)
        await supply.stop()
        assert spans

    asyncio.run(run())


def test_garbage_on_the_meters_port_leaves_it_measuring() -> None:
    """100 KB of random opcodes and arguments (a tool that is not ppk2-api, or a hostile one) on the PPK2's pty."""

    async def run() -> None:
        supply = Supply(lambda: (True, False, False, None))
        meter = VirtualPpk2(supply)
        try:
            rng = random.Random(7)
            meter._inbox += bytes(rng.randrange(256) for _ in range(100_000))
            meter._read_commands()
            meter._command(bytes([AVERAGE_START]))
            supply.start()
            await asyncio.sleep(0.1)
            assert meter.measuring and meter.status()["window"]["samples"] > 0
            assert len(meter._inbox) < 16
        finally:
            await supply.stop()
            meter.close()

    asyncio.run(run())


@contextlib.asynccontextmanager
async def _reader(meter: VirtualPpk2) -> AsyncIterator[asyncio.subprocess.Process]:
    """The bench's ppk2-api reader on `meter`'s pty, once it answered `ok` (its first line); killed on exit."""
    reader = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.energy.ppk2_reader", "--port", meter.path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert reader.stdout is not None
        first = json.loads(await asyncio.wait_for(reader.stdout.readline(), 20))
        assert first.get("ok"), first
        yield reader
    finally:
        if reader.returncode is None:
            reader.kill()
            await reader.wait()


def test_a_reader_opens_the_meter_after_one_that_fell_behind() -> None:
    """A reader that fell behind leaves up to a minute of samples queued (a nightly's replay on a busy host). The
    next reader (the confirm replay's) stops the measurement and reads what was queued away before it asks for the
    calibration metadata, so the metadata is not buried under old samples."""

    async def run() -> None:
        meter = VirtualPpk2(Supply(lambda: (True, False, False, None)))
        try:
            _measuring(meter)
            meter._on_span(Span(60 * 1000 * MS_Q, 27_000.0))  # a minute of samples nobody has read
            assert len(meter._out) > MAX_BUFFER // 2
            async with _reader(meter):
                pass  # it answered ok
        finally:
            meter.close()

    asyncio.run(run())


def test_a_reader_stopped_while_behind_still_gives_every_sample_made_before_the_stop() -> None:
    """The end of a measured window is what the meter made before the stop: a reader told to stop while samples
    are still on their way (behind on a busy host) stops the measurement and reads them, so its bins cover the
    whole window."""

    async def run() -> None:
        meter = VirtualPpk2(Supply(lambda: (True, False, False, None)))
        try:
            async with _reader(meter) as reader:
                assert reader.stdout is not None
                while not meter.measuring:  # the reader started it; the supply (not running here) syncs it
                    await asyncio.sleep(0.01)
                    _synced(meter.supply)
                meter._on_span(Span(3 * 1000 * MS_Q, 27_000.0))  # 3 s of samples at once
                reader.send_signal(signal.SIGTERM)  # long before the reader has decoded them
                out = await asyncio.wait_for(reader.stdout.read(), 60)
            bins = [line.split() for line in out.decode().splitlines() if line.startswith("@ ")]
            assert sum(int(b[2]) for b in bins) == 3 * 10**9  # every sample, in 1 ms bins
            assert all(abs(float(b[3]) - 27_000.0) < 30 for b in bins)
        finally:
            meter.close()

    asyncio.run(run())
