"""The per-device measures table: one row per figure with its label, value, what its count counts and the clock it
is on. The overview and the verdict table use the same labels and count nouns, so a figure reads the same
everywhere; on a QEMU guest in icount mode a bench-clock figure is "n/a" with the reason, never a number."""

from __future__ import annotations

from dataclasses import dataclass

from bench.energy.spec import MODELLED_FROM
from bench.measure.catalogue import BENCH, DEVICE, Metric, metric
from bench.measure.device import ON_DEVICE_CLOCK
from bench.report.summary import FIGURES
from bench.results.clocks import COUNTED_TIMING, EMULATED_TIMING, GUEST_TIMING, REAL_TIMING
from bench.results.judge import ICOUNT
from bench.virtual.esp32c6.supply import MODELLED_COUNTED

GUEST_ICOUNT = "guest (icount)"
GUEST_CLOCK = "guest clock (icount)"  # a figure measured end to end on an icount guest's own clock
METER_CLOCK = "bench (the meter's samples)"  # energy on a guest whose meter's samples are stamped on the bench clock
DEVICE_METER_CLOCK = "guest clock (icount): the meter's readings"  # ... stamped on the guest's own clock
MODELLED_NOTE = "; modelled (the energy note below)"  # a virtual board's meter, modelled from its counted time
EMULATED = "emulated: the bench host's speed, not the board's"  # a QEMU guest without icount (plain TCG)
# the virtual ESP32-C6's counted core (QEMU -icount running the RV32 firmware): its time is its instruction count
COUNTED = "counted: RV32 at the chip's 160 MHz"
COUNTED_ENERGY = MODELLED_COUNTED  # its virtual PPK2's figures


@dataclass(frozen=True)
class Row:
    """One figure of the measures table: a DeviceSummary field, titled and clocked by its catalogue entry.
    `metric` is the thresholds rule judging it ("" when none); a count's `unit` is its noun."""

    key: str
    field: str  # DeviceSummary field with the value
    count_field: str  # DeviceSummary field with the number of observations behind it
    noun: str  # what is counted
    metric: str = ""
    count: bool = False  # the figure is itself a count of `noun`

    @property
    def entry(self) -> Metric:
        """The catalogue entry of the stored figure the row shows."""
        return metric(FIGURES[self.field][0][0])

    @property
    def label(self) -> str:
        """The figure's title (the catalogue's, as the verdicts use it)."""
        return self.entry.title

    @property
    def unit(self) -> str:
        """The unit the value is shown in (a count's noun)."""
        return self.noun if self.count else {"us": "µs"}.get(FIGURES[self.field][1], FIGURES[self.field][1])

    @property
    def clock(self) -> str:
        """BENCH, DEVICE or "" (a size or a count of events)."""
        return self.entry.clock


ROWS = (
    Row("latency_p50", "latency_p50_ms", "latency_n", "inputs", "latency_p50"),
    Row("latency_p95", "latency_p95_ms", "latency_n", "inputs"),
    Row("latency_p99", "latency_p99_ms", "latency_n", "inputs", "latency_p99"),
    Row("deadline_misses", "deadline_misses", "latency_n", "inputs", count=True),
    Row("inference_p50", "inference_p50_ms", "inference_n", "inferences", "inference_p50"),
    Row("fps", "fps", "frames", "frames", "fps"),
    Row("low_1pct_fps", "low_1pct_fps", "frames", "frames", "low_1pct_fps"),
    Row("jitter_std", "jitter_std_us", "frames", "frames", "jitter_std"),
    Row("jitter_p99", "jitter_p99_us", "frames", "frames"),
    Row("stutters", "stutters", "frames", "frames", count=True),
    Row("first_frame", "first_frame_ms", "first_frame_n", "cold starts", "first_frame_ms"),
    Row("memory_peak", "memory_peak_mb", "", "agent reports", "memory_peak"),
    Row("energy_per_decision", "energy_p50_mj", "energy_n", "decisions", "energy_per_decision"),
    Row("energy_per_decision_p99", "energy_p99_mj", "energy_n", "decisions", "energy_per_decision_p99"),
    Row("power_inferring", "power_inferring_mw", "energy_n", "decisions"),
    Row("power_idle", "power_idle_mw", "energy_n", "decisions"),
    Row("energy_session", "energy_session_mj", "", "sessions"),
    Row("power_mean", "power_mean_mw", "", "sessions", "power_mean"),
)
ENERGY_FIELDS = frozenset(row.field for row in ROWS if row.field.startswith(("energy_", "power_")))

# the summary fields measured on the bench's clock (n/a on an icount guest)
BENCH_CLOCK_FIELDS = frozenset(row.field for row in ROWS if row.clock == BENCH)

# what a verdict's observation count counts, per thresholds metric
NOUNS = {row.metric: row.noun for row in ROWS if row.metric}


def clock_label(row: Row, icount: bool, timing: str = REAL_TIMING, meter: str = "") -> str:
    """The clock a row's figure is on, as the table shows it (`meter`: how the device's energy figures were
    measured, as stored with them)."""
    if row.clock and timing == COUNTED_TIMING:
        return COUNTED_ENERGY if row.field in ENERGY_FIELDS else COUNTED
    if row.clock and timing == GUEST_TIMING and row.field in ENERGY_FIELDS:
        clock = DEVICE_METER_CLOCK if ON_DEVICE_CLOCK in meter else METER_CLOCK
        return clock + (MODELLED_NOTE if MODELLED_FROM in meter else "")
    if row.clock and timing == GUEST_TIMING:
        return GUEST_CLOCK
    if row.clock and timing == EMULATED_TIMING:
        return EMULATED
    if row.clock == DEVICE and icount:
        return GUEST_ICOUNT
    return row.clock or "—"


def not_applicable(row: Row, icount: bool) -> str | None:
    """Why the row's figure means nothing on this device, or None."""
    return ICOUNT if icount and row.clock == BENCH else None


def measure_rows(device: dict) -> list[dict]:
    """The rows of one device (its report data: summary, verdicts, icount) ready for the template."""
    summary, icount = device["summary"], device["icount"]
    titles = {v["metric"]: v["title"] for v in device["verdicts"]}
    metered = bool(device.get("meter"))  # energy rows only for a device with a power meter
    return [
        {
            "key": row.key,
            "label": titles.get(row.metric, row.label),
            "metric": row.metric,
            "value": summary.get(row.field),
            "unit": row.unit,
            "count": _count(row, summary),
            "noun": row.noun,
            "clock": clock_label(row, icount, device.get("timing", REAL_TIMING), device.get("meter") or ""),
            "na": not_applicable(row, icount) or _energy_na(row, summary, device),
        }
        for row in ROWS
        if metered or row.field not in ENERGY_FIELDS
    ]


def _count(row: Row, summary: dict) -> int | None:
    """What the row's figure rests on; none for an energy figure the meter could not give (not "0 decisions")."""
    if not row.count_field or (row.field in ENERGY_FIELDS and summary.get(row.field) is None):
        return None
    return summary.get(row.count_field)


def _energy_na(row: Row, summary: dict, device: dict) -> str | None:
    """Why an energy row has no figure (a meter too slow for one decision says so; never a 0)."""
    if row.field in ENERGY_FIELDS and summary.get(row.field) is None:
        return device.get("energy_na") or "the power meter gave no figure"
    return None


def count_text(n: int | None, noun: str) -> str:
    """ "9,391 inputs", "1 cold start"."""
    if n is None:
        return "—"
    return f"{n:,} {noun[:-1] if n == 1 and noun.endswith('s') else noun}"
