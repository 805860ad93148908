"""The virtual ESP32-C6's supply on the counted clock: the firmware's status block and ring of events as the board
reads them, the segments they make, and the virtual PPK2's samples and logic inputs for those segments."""

from __future__ import annotations

import asyncio
import os
import struct
from pathlib import Path

import pytest

from bench.virtual.esp32c6.core import EVENTS_PER_READ, CountedCore
from bench.virtual.esp32c6.counted import (
    EVENT_FORMAT,
    EVENT_SIZE,
    EVENTS,
    EVENTS_ADDR,
    STATUS_FORMAT,
    STATUS_MAGIC,
    UNBOUNDED,
    CoreEvent,
    CoreState,
    CoreStatus,
    ResetCause,
    Vfs,
)
from bench.virtual.esp32c6.ppk2 import ADC_MULT, AVERAGE_START, RESISTORS, SAMPLE_Q, VirtualPpk2, encode, logic_bits
from bench.virtual.esp32c6.supply import IDLE_TICK_S, TICK_S, Span, Supply
from bench.virtual.esp32c6.timeline import MARGIN_NS, Segment, Timeline

RUN, IDLE = CoreState.RUN, CoreState.IDLE
MS_Q = 4_000_000  # one millisecond in quarter nanoseconds
CYCLES_PER_MS = 160_000


def _event(ms: float, busy_ms: float, state: CoreState, gpio: int = 0) -> CoreEvent:
    return CoreEvent(round(ms * MS_Q), round(busy_ms * CYCLES_PER_MS), state, gpio)


def _status(events: int, idle_end_q: int = UNBOUNDED, state: CoreState = IDLE) -> CoreStatus:
    return CoreStatus(state, idle_end_q, events, 0)


def test_status_block_and_events_parse_as_the_firmware_writes_them() -> None:
    block = struct.pack(STATUS_FORMAT, STATUS_MAGIC, 1, 123_456, 7, 1 << 6)
    assert CoreStatus.parse(block) == CoreStatus(IDLE, 123_456, 7, 64)
    assert CoreStatus.parse(b"\0" * len(block)) is None  # before the firmware wrote it
    ring = struct.pack(EVENT_FORMAT, 4_000, 160, 0, 0) + struct.pack(EVENT_FORMAT, 8_000, 160, 1, 64)
    torn = ring + struct.pack(EVENT_FORMAT, 9_000, 170, 0x55AA, 0) + struct.pack(EVENT_FORMAT, 10_000, 180, 0, 0)
    assert CoreEvent.parse_all(ring + b"\1\2") == [CoreEvent(4_000, 160, RUN, 0), CoreEvent(8_000, 160, IDLE, 64)]
    assert len(CoreEvent.parse_all(torn)) == 2  # a state the firmware never writes ends them


def test_segments_between_events_are_exact_on_the_counted_clock() -> None:
    timeline = Timeline()
    # run 2 ms (GPIO6 high for its second half), idle 3 ms, run 1 ms with 0.25 ms of it the clock's rounding up
    events = [
        _event(0, 0, RUN),
        _event(1, 1, RUN, 1 << 6),
        _event(2, 2, IDLE, 0),
        _event(5, 2, RUN),
        _event(6, 2.75, IDLE),
    ]
    got = timeline.advance(0, events, _status(5, idle_end_q=6 * MS_Q), now_ns=0)
    assert got == [Segment(MS_Q, 1.0, 0), Segment(MS_Q, 1.0, 1 << 6), Segment(3 * MS_Q, 0.0, 0),
                   Segment(MS_Q, 0.75, 0)]  # fmt: skip
    assert timeline.next_event == 5
    assert timeline.wanted(_status(9)) == (5, 4)


def test_an_idle_with_an_end_is_given_as_it_passes_never_past_its_end() -> None:
    timeline = Timeline()
    timeline.advance(0, [_event(0, 0, RUN), _event(1, 1, IDLE)], _status(2, idle_end_q=11 * MS_Q), now_ns=0)
    early = timeline.advance(2, [], _status(2, idle_end_q=11 * MS_Q), now_ns=MARGIN_NS + 4_000_000)
    assert early == [Segment(4 * MS_Q, 0.0, 0)]  # from when it was seen, less the margin
    late = timeline.advance(2, [], _status(2, idle_end_q=11 * MS_Q), now_ns=MARGIN_NS + 60_000_000)
    assert late == [Segment(6 * MS_Q, 0.0, 0)]  # up to its end (1 + 10 ms), not the 60 ms the host took
    # the wake is read: the rest of the idle is there already, the run after it comes whole
    rest = timeline.advance(2, [_event(11, 1, RUN), _event(12, 2, IDLE)], _status(4, idle_end_q=20 * MS_Q), 0)
    assert rest == [Segment(MS_Q, 1.0, 0)]


def test_a_stretch_given_ahead_of_the_events_is_taken_from_the_next_ones() -> None:
    timeline = Timeline()
    timeline.advance(0, [_event(0, 0, IDLE)], _status(1, idle_end_q=10 * MS_Q), now_ns=0)
    timeline.advance(1, [], _status(1, idle_end_q=10 * MS_Q), now_ns=MARGIN_NS + 5_000_000)  # gave 5 ms
    got = timeline.advance(1, [_event(4, 0, RUN), _event(7, 3, IDLE)], _status(3, idle_end_q=UNBOUNDED), 0)
    assert got == [Segment(2 * MS_Q, 1.0, 0)]  # the idle ended at 4 ms: the run loses the 1 ms given twice


def test_an_idle_only_input_ends_is_filler_off_the_counted_clock() -> None:
    timeline = Timeline()
    timeline.advance(0, [_event(0, 0, RUN), _event(1, 1, IDLE)], _status(2), now_ns=1_000)
    assert timeline.advance(2, [], _status(2), now_ns=31_000) == [Segment(30_000 * 4, 0.0, 0)]
    assert timeline.advance(2, [], _status(2), now_ns=41_000) == [Segment(10_000 * 4, 0.0, 0)]
    # the input came after 1 us of counted time: that is all the idle gives the counted clock
    woke = timeline.advance(2, [_event(1.001, 1, RUN), _event(2.001, 2, IDLE)], _status(4), now_ns=50_000)
    assert woke[0] == Segment(4_000, 0.0, 0)


def test_a_reader_behind_the_ring_skips_to_its_oldest_events_keeping_their_charge() -> None:
    timeline = Timeline()
    timeline.advance(0, [_event(0, 0, RUN)], _status(1, state=RUN), now_ns=0)
    first, count = timeline.wanted(_status(EVENTS + 100, state=RUN))
    assert first == 100 + 64 and count == EVENTS - 64
    got = timeline.advance(first, [_event(10, 4, IDLE)], _status(first + 1, idle_end_q=10 * MS_Q), now_ns=0)
    assert got == [Segment(10 * MS_Q, 0.4, 0)]  # the lost events' edges are gone, not their busy cycles


def test_the_ppk2_streams_each_span_as_samples_with_its_logic_inputs() -> None:
    async def stream() -> bytes:
        supply = Supply(lambda: (True, False, True, None))
        meter = VirtualPpk2(supply, {0: 6, 3: 7})
        try:
            meter._command(bytes([AVERAGE_START]))
            for listener in supply.listeners:  # before the supply's first tick after the start: not measured
                listener(Span(SAMPLE_Q * 7, 38_000.0))
            for told in supply._synced:  # that tick went out
                told()
            for span in (
                Span(SAMPLE_Q * 5 // 2, 27_000.0),
                Span(SAMPLE_Q * 3, 38_000.0, 1 << 6),
                Span(SAMPLE_Q // 2, 27_000.0),
            ):
                for listener in supply.listeners:
                    listener(span)
            assert meter.status()["window"]["samples"] == 6
            await asyncio.sleep(0.05)
            return os.read(meter.slave, 4096)
        finally:
            meter.close()

    words = [w for (w,) in struct.iter_unpack("<I", asyncio.run(stream()))]
    # 2.5 samples, then 3, then 0.5: the halves carry, so sample k stays at k x 10 us: 2 + 3 + 1
    assert [w >> 24 for w in words] == [0, 0, 1, 1, 1, 0]  # D0 is GPIO6; D3 (GPIO7) stays low
    assert logic_bits(1 << 7 | 1 << 6, {0: 6, 3: 7}) == 0b1001


def test_encoded_samples_decode_to_the_current_in_one_range() -> None:
    words = [w for (w,) in struct.iter_unpack("<I", encode(31_234.5, 1000, logic=0b101))]
    assert len(words) == 1000 and {w >> 24 for w in words} == {0b101}
    codes = [w & 0x3FFF for w in words]
    ranges = {w >> 14 & 7 for w in words}
    assert len(ranges) == 1 and max(codes) - min(codes) == 1  # two codes dithered, one range
    resistor = RESISTORS[ranges.pop()]
    mean_ua = sum(codes) / len(codes) * 4 * ADC_MULT / resistor * 1e6  # as ppk2-api decodes an ideal calibration
    assert mean_ua == pytest.approx(31_234.5, rel=1e-4)


def test_a_backlog_of_events_is_read_in_pieces_across_the_rings_end() -> None:
    core = CountedCore(Path("core.elf"), Vfs(Path("flash.bin"), 0, 0), b"\0" * 6, ResetCause.PWRON_RESET, print)
    asked: list[tuple[int, int]] = []

    async def read(addr: int, words: int) -> bytes:
        asked.append((addr, words))
        first = (addr - EVENTS_ADDR) // EVENT_SIZE
        return b"".join(struct.pack(EVENT_FORMAT, first + k, 0, 0, 0) for k in range(words * 4 // EVENT_SIZE))

    core._read = read  # type: ignore[method-assign]
    got = asyncio.run(core.events(EVENTS - 100, 700))  # 100 before the ring's end, 600 from its start
    assert [e.chip_q for e in got] == [*range(EVENTS - 100, EVENTS), *range(600)]
    assert max(words for _a, words in asked) * 4 // EVENT_SIZE <= EVENTS_PER_READ  # each QMP reply stays small


class _ReadCounter:
    """A counted core that answers nothing, counting the supply's status reads."""

    def __init__(self) -> None:
        self.reads = 0

    async def status(self) -> CoreStatus | None:
        self.reads += 1
        return None

    async def events(self, first: int, count: int) -> list[CoreEvent] | None:
        return []


def test_the_supply_reads_the_core_every_tick_only_while_a_meter_measures() -> None:
    """Between measurements a board's supply reads its core every IDLE_TICK_S, not every TICK_S (a waiting board
    cost a tenth of a host core in QMP reads); a watch ticks at once and is told when that tick went out."""

    async def reads_over(seconds: float) -> tuple[int, int, list[int]]:
        core = _ReadCounter()
        supply = Supply(lambda: (True, False, True, None), lambda: core)
        synced: list[int] = []
        supply.start()
        try:
            await asyncio.sleep(seconds)
            idle = core.reads
            supply.watch(lambda: synced.append(core.reads))
            await asyncio.sleep(seconds)
            watched = core.reads - idle
            supply.unwatch()
        finally:
            await supply.stop()
        return idle, watched, synced

    idle, watched, synced = asyncio.run(reads_over(0.5))
    assert idle <= 0.5 / IDLE_TICK_S + 2, idle
    assert watched >= 0.5 / TICK_S / 2, watched
    assert len(synced) == 1 and synced[0] == idle + 1  # told after the tick the watch brought at once
