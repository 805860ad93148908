"""Garbage collection at a fixed point of the frame, in idle time (MicroPython agent; runs under CPython too).

MicroPython collects when an allocation finds no free block: on the ESP32-C6's 300 KB heap that is every few
frames, each collection ~9 ms of the counted core, and whichever frame's inference was allocating paid it: a
random quarter of the frames, so the night's inference P50 moved with how many (docs/esp32c6.md). Real-time
MicroPython code collects at a point of its own loop instead; the agent does so after each frame's record, when
the free heap may not last through the next frame cycle (twice the most one of the last CYCLES cycles
allocated), so the allocations up to and through the next inference find free blocks."""

CYCLES = 8  # frame cycles whose allocations size the reserve (a model switch's burst falls out after as many)
FIRST_RESERVE = 32 * 1024  # bytes kept free before the first cycle has been measured


class IdleCollector:
    """Collects at the frame's idle point when the free heap is below the reserve. `mem_free()` returns the free
    heap in bytes, `collect()` collects (gc.mem_free and gc.collect on the board)."""

    def __init__(self, mem_free, collect):
        self.mem_free = mem_free
        self.collect = collect
        self.last = None  # free bytes after the previous idle point
        self.cycles = []  # bytes allocated in each of the last CYCLES frame cycles
        self.collections = 0

    def reserve(self):
        """Bytes to keep free: twice the largest recent cycle's allocations (FIRST_RESERVE before any)."""
        return 2 * max(self.cycles) if self.cycles else FIRST_RESERVE

    def idle(self):
        """At the frame's idle point: note what the cycle since the last one allocated (unless a collection came
        in between: the free heap then grew), and collect when the free heap is under the reserve. True when it
        collected."""
        free = self.mem_free()
        if self.last is not None and free <= self.last:
            self.cycles.append(self.last - free)
            if len(self.cycles) > CYCLES:
                self.cycles.pop(0)
        collected = free < self.reserve()
        if collected:
            self.collect()
            self.collections += 1
            free = self.mem_free()
        self.last = free
        return collected
