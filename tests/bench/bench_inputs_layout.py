"""The size of a stored nightly's replayed inputs, a row per input (the layout before) against packed rows,
one per run, device and channel (bench.store.packed, the layout now), and the store per night with each.

    .venv/bin/python -m tests.bench bench_inputs_layout reports/results.sqlite

Works on a copy of the store (the original is not touched): re-stores every run's row-per-input inputs
through `ResultStore.add_inputs`, checks they read back the same, drops the old rows, VACUUMs and prints
the sizes (SQLite's dbstat: table plus index pages)."""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import tempfile
from pathlib import Path

from bench.store.results import open_store


def table_bytes(path: Path) -> dict[str, int]:
    """Bytes per table (its automatic indexes counted with it)."""
    db = sqlite3.connect(path)
    rows = db.execute("SELECT tbl_name, name FROM sqlite_master").fetchall()
    owner = {name: tbl for tbl, name in rows}
    sizes: dict[str, int] = {}
    for name, size in db.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
        table = owner.get(name, name)
        sizes[table] = sizes.get(table, 0) + size
    db.close()
    return sizes


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("store", type=Path, help="a SQLite results store with at least one nightly")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="inputs-layout-")) / "copy.sqlite"
    shutil.copy(args.store, work)
    with open_store(work) as store:
        nights = len({r.started_at[:10] for r in store.runs.latest(kind="replay")}) or 1
        store.raw.reclaim_space()
        before = table_bytes(work)
        file_before = store.raw.size_bytes()
        parts = store.db.execute("SELECT DISTINCT run_id, device FROM inputs").fetchall()
        rows = 0
        for run_id, device in parts:
            legacy = store.db.execute(
                "SELECT seq, ch, due_ns, sent_ns FROM inputs WHERE run_id = ? AND device = ?", (run_id, device)
            ).fetchall()
            expect = store.frames.inputs(run_id, device)
            store.db.execute("DELETE FROM inputs WHERE run_id = ? AND device = ?", (run_id, device))
            store.frames.add_inputs(run_id, device, legacy)
            assert store.frames.inputs(run_id, device) == expect, (run_id, device)
            rows += len(legacy)
        store.raw.reclaim_space()
        after = table_bytes(work)
        file_after = store.raw.size_bytes()
    old, new = before.get("inputs", 0), after.get("input_sends", 0)
    print(f"{args.store}: {rows} inputs of {len(parts)} device runs over {nights} night(s)")
    print(f"row per input (inputs + its key index): {old / 1e6:.2f} MB; packed rows (input_sends): {new / 1e6:.3f} MB"
          f" ({old / max(new, 1):.0f}x smaller)")  # fmt: skip
    print(f"whole store: {file_before / 1e6:.2f} MB -> {file_after / 1e6:.2f} MB, per night "
          f"{file_before / nights / 1e6:.2f} -> {file_after / nights / 1e6:.2f} MB")  # fmt: skip
    shutil.rmtree(work.parent)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
