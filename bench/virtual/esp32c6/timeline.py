"""The counted core's events as stretches of its counted clock: what the virtual supply's current follows.

The firmware writes an event on its ring at each change of the core's state (running, idle) and of a GPIO's output
level, with the counted time (quarter ns) and the instructions run by then (bench.virtual.esp32c6.counted). Between
two events the core did one thing: a Segment is that stretch, its length on the counted clock, the share of it the
core ran (busy cycles x 25 q over its length: none for an idle, all of a run but the up to 1 us the clock rounds up
to when input is taken) and the GPIOs' levels. Segments follow each other with no gap and no overlap, so a meter that
turns each into samples (sample k at the first event's time + k x 10 us) is on the counted clock.

A stretch is known once the event that ends it is read. Until then: an idle with an end (a timeout, an alarm) passes
at the host's rate in QEMU -icount (sleep=on), so it is given as it passes, from when it was seen less a margin, and
never past its end; an idle that only input ends lets no counted time pass (QEMU has no deadline to move its clock
to), so while it lasts the meter gets filler at the idle current, which is not counted time; a run is given when it
ends (the stream lags the board by that run). A stretch given beyond what the next event says (the margin was not
enough) is taken from the segments after it, so they never overlap.

The ring and the status block are in the chip's memory, which board code can write (machine.mem32), so each event is
checked before it counts: its time and busy cycles never go back, its busy cycles fit its stretch, its time is within
what the counted clock can have reached by the host's clock (MAX_SPEED x the host's time since the timeline began,
plus SLACK_NS), its GPIO levels are the chip's 31 pins. An event that fails is refused (counted in `refused`) and
the stream goes on from the last good one; an event count that goes back (a forged one overwritten) resyncs.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.virtual.esp32c6.counted import EVENTS, Q_PER_CYCLE, Q_PER_NS, UNBOUNDED, CoreEvent, CoreState, CoreStatus

MARGIN_NS = 2_000_000  # an idle seen at host time t is given from t + this: it may have begun after its event
LOST_MARGIN = 64  # a reader this far behind the ring's oldest event skips to it (it may be overwritten as it reads)
MAX_SPEED = 64  # counted time passes at most this many times faster than the host's (QEMU -icount runs ~1-6x)
SLACK_NS = 10_000_000_000  # of host time, added to what the counted clock may have reached
ROUNDING_Q = 4_000  # a run's busy cycles may pass its length by the clock's rounding up to 1 us
GPIO_MASK = (1 << 31) - 1  # GPIO0-30


@dataclass(frozen=True)
class Segment:
    """A stretch of the supply: `dt_q` quarter nanoseconds, `busy` the share the core ran, `gpio` the output levels."""

    dt_q: int
    busy: float
    gpio: int


class Timeline:
    """One boot of the counted core, turned into Segments as its events are read."""

    def __init__(self) -> None:
        self.next_event = 0  # the ring index of the next event to read
        self._open: CoreEvent | None = None  # the event whose stretch has not ended yet
        self._given_q = 0  # counted time up to which segments were given
        self._seen_ns = 0  # host time the open stretch was first seen
        self._filled_ns = 0  # host time up to which filler was given
        self._origin_ns: int | None = None  # host time of the first read
        self.refused = 0  # events (and event counts) refused: not what the firmware can have written

    def wanted(self, status: CoreStatus) -> tuple[int, int]:
        """(first, count): the events to read after `status`. Only the ring's last EVENTS are there: a reader further
        behind loses the ones in between, and the segment across them has their charge but not their edges."""
        if status.events < self.next_event:  # the count went back: a forged one was overwritten, or is one
            self.refused += 1
            self.next_event = status.events
        first = max(self.next_event, status.events - EVENTS + LOST_MARGIN)
        return first, max(0, status.events - first)

    def advance(self, first: int, events: list[CoreEvent], status: CoreStatus, now_ns: int) -> list[Segment]:
        """The segments that `events` (ring indexes from `first`) end, then what the open stretch gives by host time
        `now_ns`."""
        out = []
        if self._origin_ns is None:
            self._origin_ns = now_ns
        for event in events:
            if not self._valid(event, now_ns):
                self.refused += 1
                continue
            if self._open is None:
                self._given_q = event.chip_q  # the stream starts at the first event read
            else:
                out += self._closed(self._open, event)
            self._open, self._seen_ns, self._filled_ns = event, now_ns, now_ns
        self.next_event = first + len(events)
        if self._open is not None and self._open.state != CoreState.RUN and status.events == self.next_event:
            out += self._idling(self._open, status.idle_end_q, now_ns)
        return out

    def _valid(self, event: CoreEvent, now_ns: int) -> bool:
        """Whether `event` can be the firmware's, after the last good one."""
        reach_q = (now_ns - (self._origin_ns or 0) + SLACK_NS) * Q_PER_NS * MAX_SPEED
        if not (0 <= event.chip_q <= reach_q and 0 <= event.gpio <= GPIO_MASK):
            return False
        prev = self._open
        if prev is None:
            return event.busy_cycles * Q_PER_CYCLE <= event.chip_q + ROUNDING_Q
        length = event.chip_q - prev.chip_q
        busy = event.busy_cycles - prev.busy_cycles
        return length >= 0 and busy >= 0 and busy * Q_PER_CYCLE <= length + ROUNDING_Q

    def _closed(self, start: CoreEvent, end: CoreEvent) -> list[Segment]:
        if end.chip_q <= self._given_q:
            return []
        length = end.chip_q - start.chip_q
        busy = min(1.0, (end.busy_cycles - start.busy_cycles) * Q_PER_CYCLE / max(1, length))
        begin = max(start.chip_q, self._given_q)
        self._given_q = end.chip_q
        return [Segment(end.chip_q - begin, busy, start.gpio)]

    def _idling(self, idle: CoreEvent, end_q: int, now_ns: int) -> list[Segment]:
        if end_q == UNBOUNDED:
            filler = now_ns - self._filled_ns
            self._filled_ns = now_ns
            return [Segment(filler * Q_PER_NS, 0.0, idle.gpio)] if filler > 0 else []
        upto = min(idle.chip_q + max(0, now_ns - self._seen_ns - MARGIN_NS) * Q_PER_NS, end_q)
        if upto <= self._given_q:
            return []
        begin, self._given_q = self._given_q, upto
        return [Segment(upto - begin, 0.0, idle.gpio)]
