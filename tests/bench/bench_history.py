"""Lab-scale figures: a year of nightly history for 50 devices x 3 sessions, written through the results store's
API, and how long the lab's everyday reads of it take.

    .venv/bin/python -m tests.bench bench_history [--scale 1.0] [--no-postgres] [--keep DIR]

Each night stores, per session and device, what a nightly keeps forever: the catalogue's figures (from one
measured run of the device's kind, with run-to-run noise), its HDR histograms, a fingerprint, the final verdicts,
baseline membership and the bench host's noise. The last `--raw-nights` (30, the default retention) also keep
their raw rows: frame records and replayed inputs (counts per device run as on the bundled nightly: ~1,300 frames
and ~10,000 inputs). `--scale` shrinks devices and nights alike for a quick check on a busy host; the sizes are
then also extrapolated to full scale from the bytes per device run of each kind of row.

Prints: store size (SQLite, and a PostgreSQL server the script starts itself unless --no-postgres), per table and
extrapolated to full scale for each backend; time to store the last night; time to render the latest report with
its trends (a fresh process, cold, as `hilbench report`); time for the verdicts with drift detection of the last
night over the year (every device and rule of the three sessions, bench.results.drift); time for index.html over
every session run; the retention prune; host load.
A cold render's wall time and CPU time are both given: on a shared host the CPU time is the fairer figure.
Goals: store under 2 GB; latest-run render under 3 s cold.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.config.fleet import RawRetention
from bench.measure.measurement import Measurement
from bench.report.html import run_file_stem, write_index
from bench.report.nights import load_grids
from bench.results.evidence import record_verdicts
from bench.results.judge import judge_run
from bench.results.thresholds import load_thresholds
from bench.store.raw import RAW_TABLES
from bench.store.results import ResultStore, open_store
from bench.store.retention import prune
from tests.measured_runs import Shape, measured, records

SESSIONS = ("combat", "dialogue", "exploration")
KINDS = (("esp32c6", Shape(20, 24.6, 118_000.0)), ("jetson-orin-nx", Shape(60, 3.1, 61e6)),
         ("pi5", Shape(30, 9.5, 52e6)), ("switch-arm64", Shape(30, 29.0, 48e6)))  # fmt: skip
FRAMES, INPUTS = 1300, 10_000  # per device run, as on the bundled nightly (15,486 frames, 124,152 inputs / 12)
CHANNELS = ("gaze", "voice", "mocap", "action", "event")
GOAL_BYTES, GOAL_RENDER_S = 2e9, 3.0  # each of BACKENDS under GOAL_BYTES
BACKENDS = ("sqlite", "postgres")
FIGURE_TABLES = ("measurements", "histograms", "verdicts", "fingerprints", "baseline_members", "devices", "runs")


class Templates:
    """One measured device run per kind (figures, histograms, frame records) and one input log, reused each night
    with noise on the figures: writing, not measuring, is what this benchmark times."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.kinds = {}
        for kind, shape in KINDS:
            recs, sent = records(shape, FRAMES, rng)
            result = measured(shape, recs, sent, rng)
            self.kinds[kind] = (result.measurements, result.histograms, recs)
        due = np.cumsum(rng.exponential(6e6, INPUTS)).astype(np.int64)  # ~10,000 inputs over a minute
        sent = due + rng.lognormal(np.log(9_000), 0.6, INPUTS).astype(np.int64)
        self.inputs = [
            (i, CHANNELS[i % len(CHANNELS)], int(d), int(s)) for i, (d, s) in enumerate(zip(due, sent, strict=True))
        ]


def device_names(count: int) -> list[tuple[str, str]]:
    return [(f"{KINDS[i % len(KINDS)][0]}-{i:02d}", KINDS[i % len(KINDS)][0]) for i in range(count)]


def store_night(store: ResultStore, t: Templates, night: int, started: dt.datetime, devices: list[tuple[str, str]],
                raw: bool, rng: np.random.Generator, verdicts: dict[str, list]) -> list[int]:  # fmt: skip
    """One night's three session runs; returns their run ids."""
    ids = []
    for k, session in enumerate(SESSIONS):
        at = (started + dt.timedelta(minutes=5 * k)).isoformat(timespec="milliseconds")
        run = store.runs.begin_run("replay", bench="lab", session=session, git_rev=f"{night:040x}", started_at=at)
        store.verdicts.record_host(run, {"host": "bench-1", "cores": 8, "load_start": 0.4, "busy_pct": 12.0})
        for name, kind in devices:
            figures, hists, frames = t.kinds[kind]
            store.runs.add_device(run, name, kind)
            store.verdicts.record_fingerprint(run, name, {"model_sha256": f"{night // 30:064x}", "agent": "npc-agent 2",
                                                  "virtual": False, "clock": "real time"})  # fmt: skip
            noise = rng.lognormal(0.0, 0.012, len(figures))
            store.measures.add_measurements(run, name, [
                Measurement(m.name, m.unit, None if m.value is None else m.value * n, m.samples, m.flags,
                            m.description) for m, n in zip(figures, noise, strict=True)
            ])  # fmt: skip
            store.measures.add_histograms(run, name, hists)
            if raw:
                store.frames.add_frames(run, name, frames)
                store.frames.add_inputs(run, name, t.inputs)
            store.windows.accept(run, name, True)
            store.runs.update_device(run, name, status="ok")
        if session in verdicts:
            record_verdicts(store, run, verdicts[session])
        store.runs.finish_run(run, "ok")
        ids.append(run)
    return ids


def build(location: str | Path, nights: int, devices: int, raw_nights: int, *, quiet: bool = False) -> dict:
    """Write the history; returns {"ids": run ids per night, "last_night_s", "build_s"}."""
    rng = np.random.default_rng(7)
    t = Templates(rng)
    names = device_names(devices)
    rules = load_thresholds()
    first = dt.datetime.now(dt.UTC).replace(hour=1, minute=0, second=0, microsecond=0) - dt.timedelta(days=nights)
    ids: list[list[int]] = []
    verdicts: dict[str, list] = {}
    started = time.perf_counter()
    last_night_s = 0.0
    with open_store(location) as store:
        for night in range(nights):
            t0 = time.perf_counter()
            raw = night >= nights - raw_nights
            ids.append(store_night(store, t, night, first + dt.timedelta(days=night), names, raw, rng, verdicts))
            last_night_s = time.perf_counter() - t0
            if night == min(5, nights - 1) and not verdicts:  # judged once; stored as every night's final verdicts
                for session, run in zip(SESSIONS, ids[-1], strict=True):
                    verdicts[session] = judge_run(store, run, rules)
                for past in ids:
                    for session, run in zip(SESSIONS, past, strict=True):
                        record_verdicts(store, run, verdicts[session])
            if not quiet and night % max(1, nights // 10) == 0:
                print(f"  night {night + 1}/{nights} stored ({time.perf_counter() - started:.0f} s)", flush=True)
    return {"ids": ids, "last_night_s": last_night_s, "build_s": time.perf_counter() - started}


def table_bytes(path: Path) -> dict[str, int]:
    """SQLite bytes per table, its indexes counted with it."""
    db = sqlite3.connect(path)
    owner = dict(db.execute("SELECT name, tbl_name FROM sqlite_master").fetchall())
    sizes: dict[str, int] = {}
    for name, size in db.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
        sizes[owner.get(name, name)] = sizes.get(owner.get(name, name), 0) + size
    db.close()
    return sizes


def pg_table_bytes(store: ResultStore) -> dict[str, int]:
    """PostgreSQL bytes per table, its indexes and TOAST counted with it."""
    rows = store.db.execute(
        "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'public' AND c.relkind = 'r'"
    ).fetchall()
    return {name: int(size) for name, size in rows}


def full_scale(tables: dict[str, int], device_runs: int, raw_runs: int) -> tuple[float, float, float]:
    """(figures kept forever, raw rows, their sum) at full scale's first year, in bytes, from the bytes per device
    run of each kind of row."""
    figures = sum(tables.get(t, 0) for t in FIGURE_TABLES) / device_runs
    raw = sum(tables.get(t, 0) for t in RAW_TABLES) / raw_runs
    year = 365 * 50 * len(SESSIONS) * figures, 30 * 50 * len(SESSIONS) * raw
    return year[0], year[1], sum(year)


def render_once(store_path: str, run_id: int, reports: str) -> None:
    """One render of the latest run in this (fresh) process; prints its seconds as JSON."""
    from bench.report.publish import publish_run

    start = time.perf_counter()
    with open_store(store_path) as store:
        published = publish_run(store, run_id, reports_dir=Path(reports))
    print(json.dumps({"render_s": time.perf_counter() - start, "trend_runs": len(published.report.data["devices"][0]
                                                                                  ["trend"])}))  # fmt: skip


def timed_reads(location: str | Path, ids: list[list[int]], work: Path) -> dict:
    """Render (cold, fresh process), the last night's verdicts with drift, index.html over every session run."""
    out: dict = {}
    reports = work / "reports"
    (reports / "runs").mkdir(parents=True, exist_ok=True)
    start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, __file__, "--render-once", str(location), str(ids[-1][-1]), str(reports)],
                          capture_output=True, text=True, check=True)  # fmt: skip
    out["render_cold_s"] = round(time.perf_counter() - start, 2)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # CPU seconds: the fairer figure on a shared host
    out["render_cold_cpu_s"] = round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2)
    out["render_in_process_s"] = round(json.loads(proc.stdout.splitlines()[-1])["render_s"], 2)
    start = time.perf_counter()  # what bounds a cold render on a busy host: starting Python and importing the bench
    subprocess.run([sys.executable, "-c", "import bench.report.publish"], check=True)
    out["import_cold_s"] = round(time.perf_counter() - start, 2)
    rules = load_thresholds()
    with open_store(location) as store:
        start = time.perf_counter()
        judged = sum(len(judge_run(store, run, rules)) for run in ids[-1])
        out["drift_verdicts_s"] = round(time.perf_counter() - start, 2)
        out["verdicts_judged"] = judged
        devices = [d.name for d in store.runs.devices(ids[-1][0])]  # every night has the same devices
        for night in ids:  # a run-list entry per session run, as its rendered report leaves one
            for session, run in zip(SESSIONS, night, strict=True):
                started = store.runs.run(run).started_at if run == night[0] else ""
                entry = {"run": {"run_id": str(run), "started_at": started, "label": "replay", "status": "ok",
                                 "meta": {"session": session}},
                         "baseline": {"name": None}, "outcome": {"verdict": "pass", "regressions": 0,
                                                                 "regressed_devices": []},
                         "devices": [{"name": d} for d in devices]}  # fmt: skip
                (reports / "runs" / f"{run_file_stem(str(run))}.json").write_text(json.dumps(entry))
        start = time.perf_counter()
        grids = load_grids(store, rules)
        index = write_index(reports, None, grids)
        out["index_s"] = round(time.perf_counter() - start, 2)
        out["index_runs"] = sum(len(n) for n in ids)
        out["index_device_runs"] = out["index_runs"] * len(devices)
        out["index_mb"] = round(index.stat().st_size / 1e6, 2)
        start = time.perf_counter()
        pruned = prune(store, RawRetention())
        out["prune_s"] = round(time.perf_counter() - start, 2)
        out["prune"] = pruned.to_json()
    return out


def main() -> int:
    if sys.argv[1:2] == ["--render-once"]:
        render_once(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scale", type=float, default=1.0, help="fraction of the 50 devices and 365 nights (default 1)")
    p.add_argument("--raw-nights", type=int, default=30, help="nights that keep raw rows (default 30)")
    p.add_argument("--no-postgres", action="store_true", help="SQLite only")
    p.add_argument("--keep", metavar="DIR", help="work folder to keep (default: a temporary one, removed)")
    args = p.parse_args()
    devices, nights = max(1, math.ceil(50 * args.scale)), max(2, math.ceil(365 * args.scale))
    raw_nights = min(args.raw_nights, nights)
    work = Path(args.keep or tempfile.mkdtemp(prefix="bench-history-"))
    work.mkdir(parents=True, exist_ok=True)
    load = [os.getloadavg()]
    print(f"{nights} nights x {devices} devices x {len(SESSIONS)} sessions; raw rows for the last {raw_nights}")
    path = work / "results.sqlite"
    path.unlink(missing_ok=True)
    built = build(path, nights, devices, raw_nights)
    tables = table_bytes(path)
    with open_store(path) as store:
        sqlite_bytes = store.raw.size_bytes()
    device_runs, raw_runs = nights * devices * len(SESSIONS), raw_nights * devices * len(SESSIONS)
    figures_full, raw_full, full = full_scale(tables, device_runs, raw_runs)
    result = {
        "nights": nights, "devices": devices, "sessions": len(SESSIONS), "raw_nights": raw_nights,
        "build_s": round(built["build_s"], 1), "store_one_night_s": round(built["last_night_s"], 2),
        "sqlite_mb": round(sqlite_bytes / 1e6, 1),
        "sqlite_tables_mb": {k: round(v / 1e6, 2) for k, v in sorted(tables.items(), key=lambda kv: -kv[1])[:8]},
        "figures_kb_per_device_run": round(figures_full / (365 * 50 * len(SESSIONS)) / 1e3, 2),
        "raw_kb_per_device_run": round(raw_full / (30 * 50 * len(SESSIONS)) / 1e3, 1),
        "sqlite_full_scale_estimate_gb": round(full / 1e9, 2),
        "sqlite_full_scale_figures_raw_gb": [round(figures_full / 1e9, 2), round(raw_full / 1e9, 2)],
    }  # fmt: skip
    result.update(timed_reads(path, built["ids"], work))
    load.append(os.getloadavg())
    if not args.no_postgres:
        from tests.postgres_support import fresh_database, postgres_server

        with postgres_server() as server:
            url = fresh_database(server)
            pg = build(url, nights, devices, raw_nights, quiet=True)
            with open_store(url) as store:
                pg_bytes, pg_tables = store.raw.size_bytes(), pg_table_bytes(store)
            result["postgres_mb"] = round(pg_bytes / 1e6, 1)
            result["postgres_tables_mb"] = {k: round(v / 1e6, 2) for k, v in
                                            sorted(pg_tables.items(), key=lambda kv: -kv[1])[:8]}  # fmt: skip
            result["postgres_store_one_night_s"] = round(pg["last_night_s"], 2)
            result["postgres_build_s"] = round(pg["build_s"], 1)
            pg_reads = timed_reads(url, pg["ids"], work / "pg")
            result.update({f"postgres_{k}": v for k, v in pg_reads.items() if k != "prune"})
            # per kind of row as for SQLite, plus what the database takes besides the tables (catalogues, WAL)
            pg_figures, pg_raw, pg_full = full_scale(pg_tables, device_runs, raw_runs)
            pg_full += pg_bytes - sum(pg_tables.values())
            result["postgres_full_scale_estimate_gb"] = round(pg_full / 1e9, 2)
            result["postgres_full_scale_figures_raw_gb"] = [round(pg_figures / 1e9, 2), round(pg_raw / 1e9, 2)]
        load.append(os.getloadavg())
    result["goals"] = {
        "store_under_2_gb": all(result.get(f"{db}_full_scale_estimate_gb", 0) * 1e9 < GOAL_BYTES for db in BACKENDS),
        "render_under_3_s_cold": result["render_cold_s"] < GOAL_RENDER_S,
    }
    result["load_avg_1_5_15"] = [[round(x, 1) for x in la] for la in load]
    result["cores"] = os.cpu_count()
    result["date"] = dt.datetime.now(dt.UTC).isoformat(timespec="minutes")
    print(json.dumps(result, indent=1))
    if not args.keep:
        with contextlib.suppress(OSError):
            import shutil

            shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
