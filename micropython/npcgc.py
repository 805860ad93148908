"""Garbage collection at a fixed point of the frame, in idle time (MicroPython agent; runs under CPython too).

MicroPython collects when an allocation finds no free block: on the ESP32-C6's 300 KB heap that is every few
frames, each collection ~9 ms of the counted core, and whichever frame's inference was allocating paid it: a
random quarter of the frames, so the night's inference P50 moved with how many (docs/esp32c6.md). Real-time
MicroPython code collects at a point of its own loop instead; the agent does so after a frame's record, every
`every` frames: as many frame cycles as the heap left free by a collection holds, each cycle counted as the
largest of the last CYCLES measured (the first cycle after a collection). `gc.mem_free()` walks the whole heap
(~2 ms on the C6), so it is asked twice (right after a collection and one cycle later) at one collection in
MEASURE_EVERY only."""

CYCLES = 8  # measured cycles that size `every` (a model switch's burst falls out after as many)
MEASURE_EVERY = 4  # collections: one in this many is followed by a measured cycle


class IdleCollector:
    """Collects at the frame's idle point every `every` frames. `mem_free()` returns the free heap in bytes,
    `collect()` collects (gc.mem_free and gc.collect on the board)."""

    def __init__(self, mem_free, collect):
        self.mem_free = mem_free
        self.collect = collect
        self.every = 1  # frames between collections (1 until a cycle has been measured)
        self.since = 0  # frames since the last collection
        self.after = None  # free bytes right after the last measured collection
        self.measuring = False  # whether the cycle since the last collection is measured
        self.cycles = []  # bytes allocated in the first cycle after each of the last CYCLES collections
        self.collections = 0

    def idle(self):
        """At the frame's idle point: measure the first cycle after a collection (a cycle in which the allocator
        collected by itself reads less than it allocated, or nothing), and collect when `every` frames have passed.
        True when it did."""
        self.since += 1
        if self.since == 1 and self.measuring:
            used = self.after - self.mem_free()
            if used > 0:
                self.cycles.append(used)
                if len(self.cycles) > CYCLES:
                    self.cycles.pop(0)
                self.every = max(1, self.after // max(self.cycles))
        if self.since < self.every:
            return False
        self.collect()
        self.measuring = self.collections % MEASURE_EVERY == 0
        if self.measuring:
            self.after = self.mem_free()
        self.collections += 1
        self.since = 0
        return True
