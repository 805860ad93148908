"""Latency distributions as HDR histograms, with the percentile summary the reports use."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

import numpy as np
from hdrh.histogram import HdrHistogram

from bench.measure.samples import too_few_flags

PERCENTILES = (50.0, 90.0, 95.0, 99.0)
# the stored statistics of a distribution: measurement suffix -> percentile (100 = max)
DISTRIBUTION_KEYS = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "max": 100.0}
SIGNIFICANT_DIGITS = 3  # values kept within 0.1%
HIGHEST = 3_600_000_000_000  # an hour in ns: the largest value any unit here needs


@dataclass(frozen=True)
class Summary:
    """P50/P90/P95/P99/max (and min, mean, count) of a histogram, in its unit."""

    unit: str
    count: int
    min: float | None
    mean: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    max: float | None
    flags: tuple[str, ...]

    def to_dict(self) -> dict:
        """JSON-ready form."""
        data = asdict(self)
        data["flags"] = list(self.flags)
        return data


class Histogram:
    """A named HDR histogram of non-negative integer values in `unit` (us or ns)."""

    def __init__(self, name: str, unit: str, hdr: HdrHistogram | None = None) -> None:
        self.name = name
        self.unit = unit
        self.hdr = hdr or HdrHistogram(1, HIGHEST, SIGNIFICANT_DIGITS)
        self.clamped = 0  # negative values recorded as 0

    def record(self, value: float) -> None:
        """Add one value (negative values count as 0 and are tallied in `clamped`)."""
        v = round(value)
        if v < 0:
            self.clamped += 1
            v = 0
        self.hdr.record_value(v)

    def record_all(self, values: Iterable[float]) -> Histogram:
        """Add every value; returns self. One hdrh call per bucket (its per-value call is ~30 us in Python), with the
        bucket's smallest and largest value so that min and max stay exact."""
        v = np.rint(np.fromiter(values, dtype=float)).astype(np.int64)
        self.clamped += int(np.count_nonzero(v < 0))
        v = np.sort(np.maximum(v, 0))
        if not v.size:
            return self
        hdr = self.hdr
        bits = np.frexp((v | hdr.sub_bucket_mask).astype(float))[1]  # bit length (exact below 2**53)
        bucket = bits - hdr.unit_magnitude - (hdr.sub_bucket_half_count_magnitude + 1)
        index = ((bucket + 1) << hdr.sub_bucket_half_count_magnitude) + (v >> (bucket + hdr.unit_magnitude))
        starts = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])
        ends = np.r_[starts[1:], v.size] - 1
        for first, last in zip(starts.tolist(), ends.tolist(), strict=True):
            if last > first:
                hdr.record_value(int(v[first]), last - first)
            hdr.record_value(int(v[last]))
        return self

    @property
    def count(self) -> int:
        """Number of values recorded."""
        return self.hdr.get_total_count()

    def percentile(self, p: float) -> float | None:
        """Value at percentile `p` (0-100), None when empty."""
        return float(self.hdr.get_value_at_percentile(p)) if self.count else None

    def summary(self) -> Summary:
        """The percentile summary, flagged for percentiles the sample count cannot support."""
        n = self.count
        if not n:
            return Summary(self.unit, 0, None, None, None, None, None, None, None, ("no_samples",))
        pct = self.hdr.get_percentile_to_value_dict(list(PERCENTILES))
        return Summary(
            unit=self.unit,
            count=n,
            min=float(self.hdr.get_min_value()),
            mean=round(_mean(self.hdr), 3),
            p50=float(pct[50.0]),
            p90=float(pct[90.0]),
            p95=float(pct[95.0]),
            p99=float(pct[99.0]),
            max=float(self.hdr.get_max_value()),
            flags=too_few_flags(n, PERCENTILES),
        )

    def encode(self) -> str:
        """The standard HdrHistogram compressed, base64 form (readable by every HdrHistogram library)."""
        return self.hdr.encode().decode()

    @classmethod
    def decode(cls, name: str, unit: str, encoded: str | bytes) -> Histogram:
        """The histogram `encode` produced."""
        return cls(name, unit, HdrHistogram.decode(encoded))


def _buckets(hdr: HdrHistogram) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lowest value, width and count of every filled bucket. Vectorised over the counts array (iterating hdrh in
    Python is ~100x slower)."""
    filled = min(hdr.counts_len, hdr.encoder.payload.counts_len)  # decoded histograms may be truncated
    counts = np.ctypeslib.as_array(hdr.counts)[:filled].astype(np.int64)
    index = np.flatnonzero(counts)
    half_magnitude, half = hdr.sub_bucket_half_count_magnitude, hdr.sub_bucket_half_count
    bucket = (index >> half_magnitude) - 1
    sub = (index & (half - 1)) + half
    low_bucket = bucket < 0
    sub[low_bucket] -= half
    bucket[low_bucket] = 0
    shift = bucket + hdr.unit_magnitude
    return sub << shift, np.left_shift(1, shift), counts[index]


def histogram_values(hist: Histogram) -> np.ndarray:
    """The recorded values of an HDR histogram, each at its bucket's highest equivalent value (within 0.1%),
    in ascending order."""
    lowest, width, counts = _buckets(hist.hdr)
    return np.repeat((lowest + width - 1).astype(float), counts)


def _mean(hdr: HdrHistogram) -> float:
    """The mean of the recorded values at their buckets' median equivalent values (as hdrh's get_mean_value)."""
    lowest, width, counts = _buckets(hdr)
    return float(np.sum((lowest + (width >> 1)) * counts) / np.sum(counts))
