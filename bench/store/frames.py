"""Frame records, replayed inputs and clock mappings of each device in a run (tables `frames`, `frame_packs`,
`inputs`, `input_sends`, `clock`, bench.store.schema).

Writes commit as they happen (WAL journal on SQLite), so a run that is killed keeps every frame record
written before the kill; a finished run's records are packed into one row per device."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from bench.agent.frame import Frame
from bench.store.database import Database
from bench.store.dialect import reuse_deleted
from bench.store.frame_columns import FIELDS, PACKED, FrameColumns, empty
from bench.store.frame_writer import BackgroundFrameWriter, WriterConnection
from bench.store.packed import NONE, pack, unpack


class FrameStore:
    """Frame records, inputs and clock mappings; `reopen` gives a second connection to the same store (the
    background frame writer's)."""

    def __init__(self, db: Database, reopen: Callable[[], WriterConnection]) -> None:
        self.db = db
        self._reopen = reopen

    def add_frame(self, run_id: int, device: str, frame: Frame, rx_ns: int | None = None) -> None:
        """Write one frame record now (committed at once)."""
        self.add_frames(run_id, device, [frame], rx_ns)

    def add_frames(self, run_id: int, device: str, frames: Iterable[Frame], rx_ns: int | None = None) -> None:
        """Write frame records in one transaction: a row each while the run goes on (small commits from the frame
        writer's thread), packed when it finishes (`pack`). A record with the same index replaces the
        stored one."""
        rows = [
            (
                run_id, device, f.i, f.vsync, f.due, int(f.ran), f.t0, f.t1, getattr(f, "act", None),
                getattr(f, "p", None), f.seq, int(f.skip), int(f.late), getattr(f, "q", 0),
                getattr(f, "model", None), rx_ns if rx_ns is not None else getattr(f, "rx_ns", None),
            )
            for f in frames
        ]  # fmt: skip
        with self.db.tx():
            self.db.executemany("INSERT OR REPLACE INTO frames VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)

    def pack(self, run_id: int) -> None:
        """Move the run's frame rows into one packed row per device (merged with what was packed before), in one
        transaction; the rows' space is then reused by the next runs' rows. Read before the transaction begins, so
        that it only writes (a SQLite reader turned writer fails at once when another connection wrote since): the
        run's own writer is gone by then."""
        packs = []
        for (device,) in self.db.execute("SELECT DISTINCT device FROM frames WHERE run_id = ?", (run_id,)).fetchall():
            try:
                columns = self.frame_columns(run_id, device)
            except (TypeError, ValueError, OverflowError):
                # a field that is no number an int64 holds (an agent's bad value): that device's records stay rows,
                # as its agent sent them, so that finishing the run and opening the store never fail on it
                continue
            packs.append((run_id, device, len(columns), *columns.pack()))
        if not packs:
            return
        with self.db.tx():
            for pack_row in packs:
                self.db.execute("INSERT OR REPLACE INTO frame_packs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", pack_row)
                self.db.execute("DELETE FROM frames WHERE run_id = ? AND device = ?", pack_row[:2])
        reuse_deleted(self.db.conn, "frames")

    def frame_sink(self) -> BackgroundFrameWriter:
        """A background writer of frame records into this store, with its own connection (the replay's
        `FrameSink`; while the replay paces, its thread is real-time as the process's others are)."""
        return BackgroundFrameWriter(self._reopen)

    def add_inputs(self, run_id: int, device: str, rows: Iterable[tuple[int, str, int | None, int]]) -> None:
        """Write replayed inputs: (seq, channel, due_ns or None, sent_ns). Stored one row per channel of packed
        arrays (bench.store.packed); inputs already stored for the same seq are replaced."""
        by_channel: dict[str, dict[int, tuple[int, int]]] = {}
        for seq, ch, due, sent in rows:
            by_channel.setdefault(ch, {})[seq] = (NONE if due is None else due, sent)
        with self.db.tx():
            for ch, new in by_channel.items():
                merged = {**self._channel_inputs(run_id, device, ch), **new}
                seqs = sorted(merged)
                self.db.execute(
                    "INSERT OR REPLACE INTO input_sends VALUES (?,?,?,?,?,?,?)",
                    (run_id, device, ch, len(seqs), pack(seqs), pack([merged[q][0] for q in seqs]),
                     pack([merged[q][1] for q in seqs])),
                )  # fmt: skip

    def _channel_inputs(self, run_id: int, device: str, ch: str) -> dict[int, tuple[int, int]]:
        """seq -> (due_ns or NONE, sent_ns) stored for one channel."""
        row = self.db.execute(
            "SELECT seq, due, sent FROM input_sends WHERE run_id = ? AND device = ? AND ch = ?", (run_id, device, ch)
        ).fetchone()
        if row is None:
            return {}
        seqs, due, sent = (unpack(blob) for blob in row)
        return {int(q): (int(d), int(t)) for q, d, t in zip(seqs, due, sent, strict=True)}

    def set_clock(
        self, run_id: int, device: str, offset_ns: float, drift_ppm: float, ref_ns: int, uncertainty_ns: float | None
    ) -> None:
        """The device clock mapping used for this run."""
        self.db.execute(
            "INSERT OR REPLACE INTO clock VALUES (?,?,?,?,?,?)",
            (run_id, device, offset_ns, drift_ppm, ref_ns, uncertainty_ns),
        )

    def clock(self, run_id: int, device: str) -> dict[str, float] | None:
        """The clock mapping stored for a device in a run."""
        row = self.db.execute(
            "SELECT offset_ns, drift_ppm, ref_ns, uncertainty_ns FROM clock WHERE run_id = ? AND device = ?",
            (run_id, device),
        ).fetchone()
        return dict(zip(("offset_ns", "drift_ppm", "ref_ns", "uncertainty_ns"), row, strict=True)) if row else None

    def frame_columns(self, run_id: int, device: str) -> FrameColumns:
        """Frame records of one device in a run as arrays, in frame order."""
        return self.columns_of_run(run_id, device).get(device, empty())

    def columns_of_run(self, run_id: int, device: str | None = None) -> dict[str, FrameColumns]:
        """device -> its frame records in a run (of one device, or all) as arrays, in frame order: the packed row of
        a finished run, merged with the rows of one still being written (or killed, or written before frames were
        packed). Every reader of frame records reads them here."""
        where, params = "run_id = ?" + (" AND device = ?" if device else ""), (run_id, device) if device else (run_id,)
        packed = self.db.execute(f"SELECT device, {', '.join(PACKED)}, flags FROM frame_packs WHERE {where}", params)
        out = {row[0]: FrameColumns.unpack(row[1:]) for row in packed.fetchall()}
        rows: dict[str, list] = {}
        for row in self.db.execute(f"SELECT device, {', '.join(FIELDS)} FROM frames WHERE {where}", params).fetchall():
            rows.setdefault(row[0], []).append(row[1:])
        for name, found in rows.items():
            out[name] = out.get(name, empty()).merged(FrameColumns.from_rows(found))
        return out

    def frames(self, run_id: int, device: str) -> Iterator[Frame]:
        """Frame records of one device in a run, in frame order."""
        return self.frame_columns(run_id, device).frames()

    def frame_count(self, run_id: int, device: str | None = None) -> int:
        """How many frame records a run (or one of its devices) has."""
        where, params = "run_id = ?" + (" AND device = ?" if device else ""), (run_id, device) if device else (run_id,)
        packed = dict(self.db.execute(f"SELECT device, n FROM frame_packs WHERE {where}", params).fetchall())
        rows = self.db.execute(f"SELECT device, COUNT(*) FROM frames WHERE {where} GROUP BY device", params)
        live = dict(rows.fetchall())
        # a device with both (records written after its run was packed) is counted record by record
        return sum(
            len(self.frame_columns(run_id, d)) if d in packed and d in live else packed.get(d, 0) + live.get(d, 0)
            for d in packed.keys() | live.keys()
        )

    def inputs(self, run_id: int, device: str) -> dict[int, int]:
        """Input seq -> bench send time (ns) of one device in a run (also of runs stored a row per input)."""
        rows = self.db.execute("SELECT seq, sent_ns FROM inputs WHERE run_id = ? AND device = ?", (run_id, device))
        sent = dict(rows.fetchall())
        packed = self.db.execute("SELECT seq, sent FROM input_sends WHERE run_id = ? AND device = ?", (run_id, device))
        for seqs, times in packed.fetchall():
            sent.update(zip(unpack(seqs).tolist(), unpack(times).tolist(), strict=True))
        return sent

    def input_count(self, run_id: int, device: str) -> int:
        """How many replayed inputs are stored for one device in a run."""
        legacy = self.db.execute("SELECT COUNT(*) FROM inputs WHERE run_id = ? AND device = ?", (run_id, device))
        packed = self.db.execute("SELECT SUM(n) FROM input_sends WHERE run_id = ? AND device = ?", (run_id, device))
        return int(legacy.fetchone()[0]) + int(packed.fetchone()[0] or 0)
