"""The results schema (docs/results.md). Plain SQL types so a PostgreSQL backend can reuse it."""

from bench.store.frame_columns import PACKED

SCHEMA_VERSION = 3

# alerts as version 2 kept them (bench.alerts, docs/alerts.md): one row per device, session and metric, and every
# change to it. A new store is created at version 1 and brought up by MIGRATIONS like any other, so these stay as
# they were; the next step reshapes them.
ALERT_TABLES_V2 = [
    """CREATE TABLE IF NOT EXISTS alerts (
        id INTEGER PRIMARY KEY,
        session TEXT NOT NULL,
        device TEXT NOT NULL,
        metric TEXT NOT NULL,
        kind TEXT NOT NULL,
        state TEXT NOT NULL,
        first_run INTEGER NOT NULL,
        last_run INTEGER NOT NULL,
        opened_at TEXT NOT NULL,
        state_since TEXT NOT NULL,
        owner TEXT NOT NULL DEFAULT '',
        note TEXT NOT NULL DEFAULT '',
        link TEXT NOT NULL DEFAULT '',
        reason TEXT NOT NULL DEFAULT '',
        of_alert INTEGER,
        fixed_run INTEGER,
        good_nights INTEGER NOT NULL DEFAULT 0,
        data TEXT NOT NULL DEFAULT '{}')""",
    """CREATE TABLE IF NOT EXISTS alert_events (
        id INTEGER PRIMARY KEY,
        alert_id INTEGER NOT NULL REFERENCES alerts(id),
        run_id INTEGER,
        at TEXT NOT NULL,
        event TEXT NOT NULL,
        actor TEXT NOT NULL DEFAULT '',
        detail TEXT NOT NULL DEFAULT '')""",
    "CREATE INDEX IF NOT EXISTS alerts_by_key ON alerts (session, device, metric)",
    "CREATE INDEX IF NOT EXISTS alert_events_by_run ON alert_events (run_id)",
]

# version 3: one alert per cause (a device's metrics that moved with one fingerprint change or on one first bad
# night): `alerts` keeps the alert's state and cause, `alert_metrics` each metric it lists. Each version-2 alert
# becomes an alert of one metric (a fixed one's metric recovered by its fixing run). The index keeps its name on
# other columns, so a bench of version 2 opening this store (its CREATE INDEX IF NOT EXISTS alerts_by_key a no-op)
# reaches the version check and is refused with its fix, not a missing column.
ALERT_GROUPS = [
    """CREATE TABLE IF NOT EXISTS alert_metrics (
        alert_id INTEGER NOT NULL REFERENCES alerts(id),
        session TEXT NOT NULL,
        metric TEXT NOT NULL,
        kind TEXT NOT NULL,
        first_run INTEGER NOT NULL,
        last_run INTEGER NOT NULL,
        good_nights INTEGER NOT NULL DEFAULT 0,
        recovered_run INTEGER,
        data TEXT NOT NULL DEFAULT '{}',
        PRIMARY KEY (alert_id, session, metric))""",
    "INSERT INTO alert_metrics (alert_id, session, metric, kind, first_run, last_run, good_nights, recovered_run, data)"
    " SELECT id, session, metric, kind, first_run, last_run, good_nights,"
    " CASE WHEN state = 'fixed' THEN fixed_run END, data FROM alerts",
    "DROP INDEX IF EXISTS alerts_by_key",
    *(f"ALTER TABLE alerts DROP COLUMN {column}" for column in ("session", "metric", "kind", "good_nights")),
    "CREATE INDEX IF NOT EXISTS alerts_by_key ON alerts (device, state)",
    "CREATE INDEX IF NOT EXISTS alert_metrics_by_key ON alert_metrics (session, metric)",
]

# schema version -> the statements that bring a store of that version to the next one (a new store starts at 1)
FIRST_VERSION = 1
MIGRATIONS: dict[int, list[str]] = {1: ALERT_TABLES_V2, 2: ALERT_GROUPS}


def run_device_table(name: str, *columns: str, key: str = "") -> str:
    """The CREATE TABLE of rows kept per run and device: `columns` between the run and device columns and the
    primary key (run_id, device, then `key`)."""
    lines = ["run_id INTEGER NOT NULL REFERENCES runs(id)", "device TEXT NOT NULL", *columns]
    lines.append(f"PRIMARY KEY (run_id, device{', ' + key if key else ''})")
    body = ",\n        ".join(lines)
    return f"CREATE TABLE IF NOT EXISTS {name} (\n        {body})"


TABLES = [
    """CREATE TABLE IF NOT EXISTS meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS runs (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        bench TEXT NOT NULL DEFAULT '',
        started_at TEXT NOT NULL,
        finished_at TEXT,
        status TEXT NOT NULL,
        session TEXT,
        speed REAL,
        git_rev TEXT,
        config TEXT NOT NULL DEFAULT '{}',
        summary TEXT NOT NULL DEFAULT '{}')""",
    """CREATE TABLE IF NOT EXISTS devices (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'running',
        detail TEXT NOT NULL DEFAULT '',
        info TEXT NOT NULL DEFAULT '{}',
        PRIMARY KEY (run_id, name))""",
    run_device_table(
        "measurements",
        "name TEXT NOT NULL",
        "unit TEXT NOT NULL",
        "value REAL",
        "low REAL",
        "high REAL",
        "marginal_low REAL",
        "marginal_high REAL",
        "outcome TEXT NOT NULL",
        "samples INTEGER",
        "flags TEXT NOT NULL DEFAULT ''",
        "description TEXT NOT NULL DEFAULT ''",
        key="name",
    ),
    run_device_table(
        "histograms",
        "name TEXT NOT NULL",
        "unit TEXT NOT NULL",
        "count INTEGER NOT NULL",
        "encoded TEXT NOT NULL",
        key="name",
    ),
    run_device_table(
        "faults",
        "n INTEGER NOT NULL",
        "kind TEXT NOT NULL",
        "cause TEXT NOT NULL",
        "model_version INTEGER",
        "prev_version INTEGER",
        "t_switch_us INTEGER",
        "t_fault_us INTEGER",
        "t_fault_bench_ns INTEGER",
        "since_switch_ms REAL",
        "rollback_us INTEGER",
        "detail TEXT NOT NULL DEFAULT ''",
        key="n",
    ),
    run_device_table(
        "frames",
        "i INTEGER NOT NULL",
        "vsync INTEGER NOT NULL",
        "due INTEGER",
        "ran INTEGER NOT NULL",
        "t0 INTEGER",
        "t1 INTEGER",
        "act INTEGER",
        "p REAL",
        "seq INTEGER NOT NULL",
        "skip INTEGER NOT NULL",
        "late INTEGER NOT NULL",
        "q INTEGER NOT NULL",
        "model INTEGER",
        "rx_ns INTEGER",
        key="i",
    ),
    run_device_table(
        "inputs",
        "seq INTEGER NOT NULL",
        "ch TEXT NOT NULL",
        "due_ns INTEGER",
        "sent_ns INTEGER NOT NULL",
        key="seq",
    ),
    run_device_table(
        "clock",
        "offset_ns REAL NOT NULL",
        "drift_ppm REAL NOT NULL",
        "ref_ns INTEGER NOT NULL",
        "uncertainty_ns REAL",
    ),
    run_device_table(
        "telemetry",
        "t_ns INTEGER NOT NULL",
        "name TEXT NOT NULL",
        "value REAL NOT NULL",
        "unit TEXT NOT NULL DEFAULT ''",
        "source TEXT NOT NULL DEFAULT ''",
        key="name, t_ns",
    ),
    # Verdict evidence (added without a schema version bump: CREATE IF NOT EXISTS adds them to older stores,
    # whose runs then have no baseline membership and so start a new baseline window).
    """CREATE TABLE IF NOT EXISTS run_host (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        data TEXT NOT NULL,
        PRIMARY KEY (run_id))""",
    run_device_table(
        "fingerprints",
        "data TEXT NOT NULL",
    ),
    run_device_table(
        "verdicts",
        "metric TEXT NOT NULL",
        "status TEXT NOT NULL",
        "data TEXT NOT NULL",
        key="metric",
    ),
    run_device_table(
        "baseline_members",
        "accepted INTEGER NOT NULL",
        "why TEXT NOT NULL DEFAULT ''",
    ),
    "CREATE INDEX IF NOT EXISTS measurements_by_name ON measurements (name, device)",
    # device health (bench.store.health): the state of each device, and every failure and recovery over the history
    """CREATE TABLE IF NOT EXISTS device_health (
        device TEXT PRIMARY KEY,
        state TEXT NOT NULL,
        reason TEXT NOT NULL DEFAULT '',
        since TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS device_events (
        id INTEGER PRIMARY KEY,
        device TEXT NOT NULL,
        at TEXT NOT NULL,
        event TEXT NOT NULL,
        step TEXT,
        seconds REAL,
        run_id INTEGER,
        detail TEXT NOT NULL DEFAULT '')""",
    # retention (docs/results.md): replayed inputs one row per run, device and channel (bench.store.packed
    # arrays; the `inputs` table above is read for runs written before it), and which runs' raw rows are gone
    run_device_table(
        "input_sends",
        "ch TEXT NOT NULL",
        "n INTEGER NOT NULL",
        "seq BLOB NOT NULL",
        "due BLOB NOT NULL",
        "sent BLOB NOT NULL",
        key="ch",
    ),
    run_device_table(
        "raw_pruned",
        "at TEXT NOT NULL",
        "frames INTEGER NOT NULL",
        "inputs INTEGER NOT NULL",
    ),
    # frame records one row per run and device once the run is finished (bench.store.frame_columns: each column
    # a packed array, in PACKED order, then the flags); the `frames` table above holds them a row per frame while
    # their run is written (each commit small; a killed run keeps what it wrote) and for runs written before it
    run_device_table("frame_packs", "n INTEGER NOT NULL", *(f"{c} BLOB NOT NULL" for c in (*PACKED, "flags"))),
]
