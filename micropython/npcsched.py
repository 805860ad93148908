"""The VSync-aligned frame scheduler (product.md), as pure logic fed with timestamps in microseconds.

Runs under MicroPython and CPython. The agent's loop feeds it VSync ticks and inference start/end
times from its own clock; tests feed it a fake VSync clock.

Rules:
- a frame's inference is due at `vsync + 1 s / fps`;
- if that is within `debounce_us` (8 ms) after the previous scheduled inference (or before it),
  it is pushed to `previous + push_us` (16 ms);
- frames that are not key frames (`i % key_every != 0`) skip inference (the feature window, the
  "hidden-state cache", is still updated by the inputs);
- at most `max_queue` (2) inferences are pending (scheduled, not finished); a frame arriving when the
  queue is full skips;
- an inference is `late` when it starts after the VSync that follows its due time (its decision
  misses the display frame it was due for).
"""

import npcfeat

DEBOUNCE_US = 8000
PUSH_US = 16000
MAX_QUEUE = 2
MAX_HZ = 1000  # frame and vsync rates above this are a sender's bug (a frame period under 1 ms)
MAX_FRAMES = 1000000000
MAX_HOLD_MS = 60000  # `start`'s hold_ms: at most this long between the loop's first VSync and input ts 0
COMPACT_HELD = 64  # released inputs are dropped from the front of the held list in batches of at least this


class Slot:
    """One display frame's scheduling decision."""

    __slots__ = ("due", "i", "key", "late", "q", "skip", "t0", "t1", "vsync")

    def __init__(self, i, vsync, due, key, skip, q):
        self.i = i
        self.vsync = vsync
        self.due = due
        self.key = key
        self.skip = skip
        self.q = q
        self.late = False
        self.t0 = None
        self.t1 = None


class Scheduler:
    """Decides, per VSync tick, when (and whether) the frame's inference runs."""

    def __init__(self, fps, vsync_hz, key_every=1, debounce_us=DEBOUNCE_US, push_us=PUSH_US, max_queue=MAX_QUEUE):
        if not (0 < fps <= MAX_HZ and 0 < vsync_hz <= MAX_HZ) or key_every < 1 or max_queue < 1:
            raise ValueError("fps and vsync_hz must be in 1..%d, key_every and max_queue >= 1" % MAX_HZ)
        self.fps = fps
        self.vsync_hz = vsync_hz
        self.frame_us = 1000000 // fps
        self.vsync_us = 1000000 // vsync_hz
        self.key_every = key_every
        self.debounce_us = debounce_us
        self.push_us = push_us
        self.max_queue = max_queue
        self.pending = []  # scheduled, not finished, in due order
        self.prev_due = None
        self.frames = 0
        self.skipped = 0
        self.late = 0
        self.inferences = 0

    def on_vsync(self, vsync):
        """Schedule the frame of the VSync at `vsync` (us); returns its Slot (skip=True: no inference)."""
        i = self.frames
        self.frames += 1
        key = i % self.key_every == 0
        if not key or len(self.pending) >= self.max_queue:
            self.skipped += 1
            return Slot(i, vsync, None, key, True, len(self.pending))
        due = vsync + self.frame_us
        if self.prev_due is not None and due < self.prev_due + self.debounce_us:
            due = self.prev_due + self.push_us
        self.prev_due = due
        slot = Slot(i, vsync, due, key, False, len(self.pending) + 1)
        self.pending.append(slot)
        return slot

    def next_due(self):
        """The earliest pending Slot whose inference has not begun (the next one to run), or None."""
        for slot in self.pending:
            if slot.t0 is None:
                return slot
        return None

    def begin(self, slot, t0):
        """Inference of `slot` starts at `t0`; sets its `late` flag."""
        slot.t0 = t0
        # the first VSync strictly after the due time, on this frame's VSync grid
        after_due = slot.vsync + ((slot.due - slot.vsync) // self.vsync_us + 1) * self.vsync_us
        slot.late = t0 >= after_due
        if slot.late:
            self.late += 1

    def finish(self, slot, t1):
        """Inference of `slot` ended at `t1`; it leaves the queue."""
        slot.t1 = t1
        self.inferences += 1
        if slot in self.pending:
            self.pending.remove(slot)

    def drop(self, slot):
        """Forget a pending slot without running it (the loop stopped)."""
        if slot in self.pending:
            self.pending.remove(slot)


def from_start(msg):
    """What a `start` message (protocol.md) asks of the frame loop: its Scheduler, how many frames (0: until
    `stop`) and hold_ms (None: no inputs held for it); ValueError naming a field out of range."""
    fps = npcfeat.whole(msg.get("fps", 60), "fps", 1, MAX_HZ)
    vsync_hz = npcfeat.whole(msg.get("vsync_hz", fps), "vsync_hz", 1, MAX_HZ)
    key_every = npcfeat.whole(msg.get("key_every", 1), "key_every", 1, MAX_HZ)
    frames = npcfeat.whole(msg.get("frames", 0), "frames", 0, MAX_FRAMES)
    hold_ms = msg.get("hold_ms")
    hold_ms = None if hold_ms is None else npcfeat.whole(hold_ms, "hold_ms", 0, MAX_HOLD_MS)
    return Scheduler(fps, vsync_hz, key_every), frames, hold_ms


def hold_count(msg):
    """`start`'s hold_count: how many inputs the bench sends for a held loop, those held ahead included (None: not
    said); ValueError when out of range."""
    count = msg.get("hold_count")
    return None if count is None else npcfeat.whole(count, "hold_count", 0, MAX_FRAMES)


class VsyncClock:
    """The display clock: VSync ticks every `1/vsync_hz` s from `origin` (us), as integers that never drift."""

    def __init__(self, vsync_hz, origin):
        self.vsync_hz = vsync_hz
        self.origin = origin
        self.n = 0

    def tick_at(self, n):
        """The timestamp of VSync number n."""
        return self.origin + n * 1000000 // self.vsync_hz

    def next_tick(self):
        """The next VSync not yet taken."""
        return self.tick_at(self.n)

    def take(self):
        """Take the next VSync; returns its timestamp."""
        t = self.tick_at(self.n)
        self.n += 1
        return t


class Held:
    """The inputs an agent holds until its clock reaches their due time (protocol.md `start` with hold_ms, and
    `hold` ahead of a loop): in arrival order, each with its due time in us after the loop's epoch; released
    from the front. An input's `ts` is checked when it is held, its data when it is released."""

    def __init__(self, limit):
        self.limit = limit  # inputs held at once
        self.epoch = None  # a held loop runs: device time (us) of session time 0
        self.holding = False  # `hold` came: inputs are held for the next loop, whose epoch is not known yet
        self.items = []  # (ts_us, ch, ts, d, seq); those before `next` are released
        self.next = 0
        self.late = 0  # inputs that arrived after their due time (released at once)
        self.late_max_us = 0
        self.dropped = 0  # inputs forgotten before they were due
        self.count = None  # the inputs the bench sends this loop, held ahead included (`start`'s hold_count)
        self.taken = 0  # inputs taken since `hold` (or since the loop started, with none held ahead)
        self.last_ts_us = 0  # the due time (us after the epoch) of the last input taken

    def __len__(self):
        return len(self.items) - self.next

    def active(self):
        """Whether an input that arrives now is held (else it goes to the features at once)."""
        return self.epoch is not None or self.holding

    def hold(self):
        """Hold the inputs from now on for the next loop (those held before are dropped)."""
        self.drop()
        self.taken = 0
        self.holding = True

    def start(self, epoch, count=None):
        """A loop starts whose inputs are held until due after `epoch` (device us); with None its inputs are not
        held, and those held ahead for it are dropped. `count`: how many inputs the bench sends for it, those held
        ahead included (None: not known)."""
        self.epoch = epoch
        if epoch is None:
            self.drop()
        if not self.holding:
            self.taken = 0
        self.holding = False
        self.count = None if epoch is None else count

    def stop(self):
        """The loop stopped: the inputs not yet due are dropped."""
        self.drop()
        self.epoch = None
        self.count = None

    def fed(self):
        """Whether the loop reads its inputs on its own clock: it knows how many the bench sends, and some are still
        to come."""
        return self.epoch is not None and self.count is not None and self.taken < self.count

    def wanted(self, t_us):
        """Whether the next input must be read before the loop goes on to device time `t_us`: more are to come and
        none taken is due after it (the bench sends them in due order)."""
        return self.fed() and (self.taken == 0 or self.epoch + self.last_ts_us <= t_us)

    def drop(self):
        """Forget the inputs not yet released (counted in `dropped`)."""
        self.dropped += len(self)
        self.items = []
        self.next = 0

    def add(self, args, rx_us):
        """Hold input `args` (ch, ts, d, seq) that arrived at `rx_us` (device us); False when `limit` inputs are
        held already. ValueError or TypeError for a `ts` out of range."""
        ts_us = round(1000 * npcfeat.number(args[1], "ts", 0, npcfeat.TS_BOUND_MS))
        if len(self) >= self.limit:
            return False
        if self.epoch is not None and rx_us > self.epoch + ts_us:  # after its due time: released at once
            self.late += 1
            self.late_max_us = max(self.late_max_us, rx_us - self.epoch - ts_us)
        self.items.append((ts_us,) + args)  # noqa: RUF005 (MicroPython has no starred tuple displays)
        self.taken += 1
        self.last_ts_us = ts_us
        return True

    def release(self, t_us, features):
        """Hand the inputs due by `t_us` (device clock) to `features`, in arrival order; the errors of those whose
        data it refused (KeyError, TypeError, ValueError, as an input not held gets), in order."""
        items, epoch, refused = self.items, self.epoch, ()
        while self.next < len(items) and epoch + items[self.next][0] <= t_us:
            _, ch, ts, d, seq = items[self.next]
            items[self.next] = None
            self.next += 1
            try:
                features.add(ch, ts, d, seq)
            except (KeyError, TypeError, ValueError) as exc:
                refused += (exc,)
        if self.next >= COMPACT_HELD and 2 * self.next >= len(items):
            del items[: self.next]
            self.next = 0
        return refused
