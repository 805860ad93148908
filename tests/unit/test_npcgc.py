"""micropython/npcgc.py: the MicroPython agent's collections at the frame's idle point, on a simulated heap."""

import npcgc


class Heap:
    """A heap of `size` bytes with `live` bytes that survive a collection; allocations past its free space make the
    allocator collect by itself (`auto` counts those: on the board, in whatever was running, an inference)."""

    def __init__(self, size: int, live: int) -> None:
        self.size, self.live, self.used = size, live, live
        self.auto = self.idle = 0

    def free(self) -> int:
        return self.size - self.used

    def collect(self) -> None:
        self.idle += 1
        self.used = self.live

    def alloc(self, n: int) -> None:
        if n > self.free():
            self.auto += 1
            self.used = self.live
        self.used += n


def run_frames(heap: Heap, collector: npcgc.IdleCollector | None, per_cycle: list[int], inference: int) -> int:
    """Frame cycles: five input lines allocate the cycle's bytes, the inference `inference` bytes, then the idle
    point (none without a collector). How many inferences found the heap full (a collection in them)."""
    in_inference = 0
    for rx in per_cycle:
        for _ in range(5):
            heap.alloc(rx // 5)
        auto = heap.auto
        heap.alloc(inference)
        in_inference += heap.auto > auto
        if collector is not None:
            collector.idle()
    return in_inference


def test_no_inference_collects_once_the_cycles_are_measured():
    """Cycles allocating 50-65 KB (20 KB of it the inference's) of a 300 KB heap with 80 KB live: without the idle
    point a collection falls in an inference every dozen frames; with it none does after the first cycles, and
    it collects every third frame (220 KB free after a collection: three cycles of at most 65 KB)."""
    per_cycle = [30_000 + (k * 7919) % 15_000 for k in range(200)]
    assert run_frames(Heap(300_000, 80_000), None, per_cycle, 20_000) > 10
    heap = Heap(300_000, 80_000)
    collector = npcgc.IdleCollector(heap.free, heap.collect)
    assert run_frames(heap, collector, per_cycle[:3], 20_000) <= 2  # the first cycles, before one is measured
    assert run_frames(heap, collector, per_cycle[3:], 20_000) == 0
    assert heap.auto <= 2
    assert collector.collections == heap.idle
    assert heap.idle <= len(per_cycle) // 3 + 2  # not every frame: only when the next cycle might not fit


def test_the_heap_is_walked_twice_a_collection_only():
    """gc.mem_free() walks the whole heap: it is asked right after one collection in MEASURE_EVERY and one cycle
    later, no more."""
    heap = Heap(300_000, 80_000)
    asked = []
    collector = npcgc.IdleCollector(lambda: asked.append(1) or heap.free(), heap.collect)
    run_frames(heap, collector, [20_000] * 100, 5_000)
    assert collector.every == 220_000 // 25_000
    assert len(asked) <= 2 * (collector.collections // npcgc.MEASURE_EVERY + 1)


def test_a_burst_shortens_the_period_until_it_falls_out():
    """A measured cycle that allocated much (a model switch) makes collections more frequent for CYCLES measured
    cycles."""
    heap = Heap(300_000, 20_000)
    collector = npcgc.IdleCollector(heap.free, heap.collect)
    run_frames(heap, collector, [10_000] * 30, 0)
    steady = collector.every
    assert steady == 280_000 // 10_000
    while not (collector.since == 0 and collector.measuring):  # up to a collection whose next cycle is measured
        heap.alloc(10_000)
        collector.idle()
    heap.alloc(100_000)
    collector.idle()
    assert collector.every == 280_000 // 100_000
    run_frames(heap, collector, [10_000] * (steady * npcgc.MEASURE_EVERY * (npcgc.CYCLES + 1)), 0)
    assert collector.every == steady
