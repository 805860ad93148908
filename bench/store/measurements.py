"""What a run measured on each device: measurements, histograms, fault events and telemetry (tables
`measurements`, `histograms`, `faults`, `telemetry`, bench.store.schema)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bench.measure.catalogue import metric
from bench.measure.faults import FaultEvent
from bench.measure.histogram import Histogram
from bench.measure.measurement import Measurement
from bench.store import stored
from bench.store.database import Database

_REALS = ("value", "low", "high", "marginal_low", "marginal_high")  # the REAL columns of a measurement


@dataclass(frozen=True)
class MeasurementRow:
    """One stored measurement."""

    run_id: int
    device: str
    name: str
    unit: str
    value: float | None
    low: float | None
    high: float | None
    marginal_low: float | None
    marginal_high: float | None
    outcome: str
    samples: int | None
    flags: tuple[str, ...]
    description: str


def _rule(name: str) -> str:
    """The metric catalogue's rule for measurement `name` ("" for a name it does not have)."""
    try:
        return metric(name).rule
    except KeyError:
        return ""


class MeasurementStore:
    """Measurements, histograms, faults and telemetry per run and device."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def add_measurements(self, run_id: int, device: str, measurements: Iterable[Measurement]) -> None:
        """Write measurements (replacing same-named ones of this run and device). The schema's limit and outcome
        columns are from when measurements carried fixed limits: written empty and "unset". A description that is
        the catalogue's rule for the name is written empty (`measurements` reads the rule back)."""
        rows = [
            (run_id, device, m.name, m.unit, m.value, None, None, None, None, "unset", m.samples, ",".join(m.flags),
             "" if m.description == _rule(m.name) else m.description)
            for m in measurements
        ]  # fmt: skip
        with self.db.tx():
            self.db.executemany("INSERT OR REPLACE INTO measurements VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)

    def add_histograms(self, run_id: int, device: str, histograms: Iterable[Histogram]) -> None:
        """Write histograms in HdrHistogram's standard encoded form."""
        with self.db.tx():
            self.db.executemany(
                "INSERT OR REPLACE INTO histograms VALUES (?,?,?,?,?,?)",
                [(run_id, device, h.name, h.unit, h.count, h.encode()) for h in histograms],
            )

    def add_faults(self, run_id: int, device: str, faults: Sequence[FaultEvent]) -> None:
        """Write fault events (numbered in order)."""
        start = self.db.execute(
            "SELECT COUNT(*) FROM faults WHERE run_id = ? AND device = ?", (run_id, device)
        ).fetchone()[0]
        with self.db.tx():
            self.db.executemany(
                "INSERT INTO faults VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [
                    (
                        run_id, device, start + k, f.kind, f.cause, f.model_version, f.prev_version, f.t_switch_us,
                        f.t_fault_us, f.t_fault_bench_ns, f.since_switch_ms, f.rollback_us, f.detail,
                    )
                    for k, f in enumerate(faults)
                ],
            )  # fmt: skip

    def add_telemetry(self, run_id: int, device: str, rows: Iterable[tuple[int, str, float, str, str]]) -> int:
        """Write telemetry values (t_ns, name, value, unit, source) of `device`; returns how many."""
        values = [(run_id, device, t_ns, name, value, unit, source) for t_ns, name, value, unit, source in rows]
        with self.db.tx():
            self.db.executemany("INSERT OR REPLACE INTO telemetry VALUES (?,?,?,?,?,?,?)", values)
        return len(values)

    def measurements(self, run_id: int, device: str | None = None) -> list[MeasurementRow]:
        """Measurements of a run (one device's, or all), by device then name."""
        sql = "SELECT * FROM measurements WHERE run_id = ?" + (" AND device = ?" if device else "")
        rows = self.db.execute(sql + " ORDER BY device, name", (run_id, device) if device else (run_id,))
        return [self._measurement(r) for r in rows]

    def of_runs(self, run_ids: Iterable[int]) -> list[MeasurementRow]:
        """Measurements of runs `run_ids`, by run, device and name."""
        ids = list(run_ids)
        marks = ", ".join("?" for _ in ids) or "NULL"
        rows = self.db.execute(
            f"SELECT * FROM measurements WHERE run_id IN ({marks}) ORDER BY run_id, device, name", ids
        )
        return [self._measurement(r) for r in rows]

    def _measurement(self, r: tuple) -> MeasurementRow:
        where = f"({r[0]}, {r[1]!r}, {r[2]!r})"
        label = self.db.label
        numbers = [stored.number(v, label, "measurements", where, f) for v, f in zip(r[4:9], _REALS, strict=True)]
        samples = None if r[10] is None else stored.integer(r[10], label, "measurements", where, "samples")
        flags = tuple(f for f in str(r[11] or "").split(",") if f)
        return MeasurementRow(r[0], r[1], r[2], r[3], *numbers, r[9], samples, flags, r[12] or _rule(r[2]))

    def history(self, name: str, device: str, *, limit: int = 30) -> list[tuple[int, str, float | None]]:
        """(run id, started_at, value) of measurement `name` on `device` over the latest runs, oldest first."""
        rows = self.db.execute(
            "SELECT r.id, r.started_at, m.value FROM measurements m JOIN runs r ON r.id = m.run_id"
            " WHERE m.name = ? AND m.device = ? ORDER BY r.id DESC LIMIT ?",
            (name, device, limit),
        ).fetchall()
        return list(reversed(rows))

    def histograms(self, run_id: int, device: str) -> dict[str, Histogram]:
        """name -> Histogram of one device in a run."""
        return self.histograms_of_run(run_id, device).get(device, {})

    def histograms_of_run(self, run_id: int, device: str | None = None) -> dict[str, dict[str, Histogram]]:
        """device -> name -> Histogram of a run (of one device, or all)."""
        sql = "SELECT device, name, unit, encoded FROM histograms WHERE run_id = ?" + (
            " AND device = ?" if device else ""
        )
        rows = self.db.execute(sql, (run_id, device) if device else (run_id,))
        out: dict[str, dict[str, Histogram]] = {}
        for device, name, unit, encoded in rows:
            try:
                out.setdefault(device, {})[name] = Histogram.decode(name, unit, encoded)
            except Exception as exc:  # hdrh raises its own classes, ValueError, zlib.error, TypeError
                where = f"({run_id}, {device!r}, {name!r})"
                raise stored.DamagedStore(
                    f"results store {self.db.label}: table histograms, row {where}, field encoded: cannot decode "
                    f"({type(exc).__name__}: {str(exc)[:60]})",
                    hint="the store was changed outside the bench: restore it from a backup, or delete that row",
                    file=self.db.label,
                    field="histograms.encoded",
                ) from None
        return out

    def telemetry(self, run_id: int, device: str | None = None) -> dict[str, list[tuple[str, str, int, float]]]:
        """device -> its telemetry values in a run (of one device, or all) as (name, unit, t_ns, value), by name then
        time."""
        sql = "SELECT device, name, unit, t_ns, value FROM telemetry WHERE run_id = ?" + (
            " AND device = ?" if device else ""
        )
        out: dict[str, list[tuple[str, str, int, float]]] = {}
        for d, name, unit, t_ns, value in self.db.execute(
            sql + " ORDER BY device, name, t_ns", (run_id, device) if device else (run_id,)
        ):
            out.setdefault(d, []).append((name, unit, t_ns, value))
        return out

    def faults(self, run_id: int, device: str | None = None) -> list[tuple[str, FaultEvent]]:
        """(device, FaultEvent) of a run, in order."""
        sql = "SELECT * FROM faults WHERE run_id = ?" + (" AND device = ?" if device else "") + " ORDER BY device, n"
        rows = self.db.execute(sql, (run_id, device) if device else (run_id,))
        return [(r[1], FaultEvent(*r[3:])) for r in rows]

    def faults_of_runs(self, run_ids: Iterable[int]) -> list[tuple[int, str, FaultEvent]]:
        """(run id, device, FaultEvent) of runs `run_ids`, in order."""
        ids = list(run_ids)
        marks = ", ".join("?" for _ in ids) or "NULL"
        rows = self.db.execute(f"SELECT * FROM faults WHERE run_id IN ({marks}) ORDER BY run_id, device, n", ids)
        return [(r[0], r[1], FaultEvent(*r[3:])) for r in rows]
