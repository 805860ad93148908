"""Device clock -> bench clock mapping from ping/pong exchanges (NTP-style offset, linear drift)."""

from __future__ import annotations

from dataclasses import dataclass, field

MIN_DRIFT_SPAN_NS = 1_000_000_000


@dataclass(frozen=True)
class ClockSample:
    """One ping/pong: bench send `b0` and receive `b1` (ns), device receipt `d` (us)."""

    b0: int
    b1: int
    d: int

    @property
    def rtt_ns(self) -> int:
        return self.b1 - self.b0

    @property
    def offset_ns(self) -> float:
        """Device ns minus bench ns, assuming a symmetric path."""
        return self.d * 1000 - (self.b0 + self.b1) / 2


@dataclass
class ClockSync:
    """Offset and drift between a device's microsecond clock and the bench's monotonic_ns.

    The offset is taken from the exchanges with the smallest round trips (the least queued ones);
    drift is the least-squares slope of those offsets over bench time, in parts per million."""

    best_fraction: float = 0.5
    samples: list[ClockSample] = field(default_factory=list)
    offset_ns: float = 0.0
    drift_ppm: float = 0.0
    ref_ns: int = 0  # bench time at which offset_ns holds

    def add(self, b0: int, b1: int, d: int) -> None:
        """Record one exchange and refresh the estimate."""
        self.samples.append(ClockSample(b0, b1, d))
        self._estimate()

    @property
    def synced(self) -> bool:
        return bool(self.samples)

    @property
    def min_rtt_ns(self) -> int | None:
        return min((s.rtt_ns for s in self.samples), default=None)

    @property
    def uncertainty_ns(self) -> float:
        """The offset's worst-case error with an asymmetric path: half the largest round trip among the
        exchanges the estimate uses."""
        if not self.samples:
            return float("inf")
        return max(s.rtt_ns for s in self._best()) / 2

    def _best(self) -> list[ClockSample]:
        ranked = sorted(self.samples, key=lambda s: s.rtt_ns)
        keep = max(1, round(len(ranked) * self.best_fraction))
        return sorted(ranked[:keep], key=lambda s: s.b0)

    def _estimate(self) -> None:
        best = self._best()
        xs = [(s.b0 + s.b1) / 2 for s in best]
        ys = [s.offset_ns for s in best]
        mx = sum(xs) / len(xs)
        my = sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        # a drift measured over less than MIN_DRIFT_SPAN_NS of exchanges is noise: keep 0 until then
        span = xs[-1] - xs[0]
        slope = 0.0
        if len(xs) >= 3 and span >= MIN_DRIFT_SPAN_NS:
            slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
        self.drift_ppm = slope * 1e6
        self.ref_ns = round(mx)
        self.offset_ns = my

    def offset_at(self, bench_ns: int) -> float:
        """The offset (device ns - bench ns) at bench time `bench_ns`."""
        return self.offset_ns + (bench_ns - self.ref_ns) * self.drift_ppm / 1e6

    def to_bench_ns(self, device_us: int) -> int:
        """A device timestamp (us) on the bench clock (ns)."""
        dev_ns = device_us * 1000
        guess = dev_ns - self.offset_ns
        return round(dev_ns - self.offset_at(round(guess)))

    def to_device_us(self, bench_ns: int) -> int:
        """A bench time (ns) on the device clock (us)."""
        return round((bench_ns + self.offset_at(bench_ns)) / 1000)
