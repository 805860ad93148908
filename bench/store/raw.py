"""Raw rows and the space they take: which device runs still hold frame and input rows, pruning them (table
`raw_pruned` records it, for the report), and the store's size (bench.store.retention decides what goes)."""

from __future__ import annotations

from pathlib import Path

from bench.store.database import Database
from bench.store.dialect import database_size, reclaim_space
from bench.store.frames import FrameStore
from bench.store.runs import now

RAW_TABLES = ["frames", "frame_packs", "inputs", "input_sends"]  # the frame and input rows retention prunes


class RawStore:
    """The raw rows of each device run, and the store's size on disk (`path`: a SQLite file, or None)."""

    def __init__(self, db: Database, frames: FrameStore, path: Path | None) -> None:
        self.db = db
        self._frames = frames
        self._path = path

    def holders(self) -> list[tuple[int, str, str | None, str, str]]:
        """(run id, device, session, started_at, run status) of every device part whose raw rows were never
        pruned, newest run first."""
        return self.db.execute(
            "SELECT r.id, d.name, r.session, r.started_at, r.status FROM devices d JOIN runs r ON r.id = d.run_id"
            " WHERE NOT EXISTS (SELECT 1 FROM raw_pruned p WHERE p.run_id = d.run_id AND p.device = d.name)"
            " ORDER BY r.started_at DESC, r.id DESC, d.name"
        ).fetchall()

    def prune(self, run_id: int, device: str) -> tuple[int, int]:
        """Delete one device's frame and input rows of a run, in one transaction, and record that they are gone;
        returns (frames, inputs) removed."""
        frames = self._frames.frame_count(run_id, device)
        inputs = self._frames.input_count(run_id, device)
        with self.db.tx():
            for table in RAW_TABLES:
                self.db.execute(f"DELETE FROM {table} WHERE run_id = ? AND device = ?", (run_id, device))
            self.db.execute(
                "INSERT OR REPLACE INTO raw_pruned VALUES (?,?,?,?,?)", (run_id, device, now(), frames, inputs)
            )
        return frames, inputs

    def pruned(self, run_id: int) -> dict[str, str]:
        """Device -> when its frame rows of run `run_id` were pruned (absent: still stored, or it never had any, as
        in an update-and-faults run)."""
        rows = self.db.execute("SELECT device, at FROM raw_pruned WHERE run_id = ? AND frames > 0", (run_id,))
        return dict(rows.fetchall())

    def size_bytes(self) -> int:
        """Bytes the store takes on disk (SQLite file and WAL, or the PostgreSQL database)."""
        return database_size(self.db.conn, self._path)

    def reclaim_space(self) -> None:
        """Give the space of deleted raw rows back (SQLite VACUUM; PostgreSQL VACUUM of the raw tables)."""
        reclaim_space(self.db.conn, RAW_TABLES)
