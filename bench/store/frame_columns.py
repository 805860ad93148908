"""A device's frame records of one run as columns: numpy arrays in frame order, which is how every reader gets
them (`ResultStore.frame_columns`) and how the store keeps them once the run is finished (table `frame_packs`,
one row per run and device, each column a bench.store.packed array: ~10x smaller than a row per frame).

Absent values (no `due`, no `t0` on a frame whose inference did not run...) are kept in a bit mask with the flags,
and packed as the value before them, so they cost no delta."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from bench.agent.frame import Frame
from bench.store.packed import pack, unpack

FIELDS = tuple(f.name for f in dataclasses.fields(Frame))  # the columns of table `frames`, after run_id and device
NULLABLE = ("due", "t0", "t1", "act", "p", "model", "rx_ns")
_BOOLS = ("ran", "skip", "late")
_BITS = {name: 1 << k for k, name in enumerate((*_BOOLS, *NULLABLE))}  # the `flags` array: booleans, then absent
PACKED = tuple(f for f in FIELDS if f not in _BOOLS)  # packed one array each, then `flags`


@dataclass(frozen=True)
class FrameColumns:
    """Frame records by field: int64 arrays (`p`: float64) sorted by frame index `i`; an absent value reads 0."""

    values: dict[str, np.ndarray]
    absent: dict[str, np.ndarray]  # nullable field -> True where the record had no value

    def __len__(self) -> int:
        return int(self.values["i"].size)

    def present(self, name: str) -> np.ndarray:
        """True where field `name` has a value."""
        return ~self.absent[name] if name in self.absent else np.ones(len(self), dtype=bool)

    def frames(self) -> Iterator[Frame]:
        """The records as Frame objects, in frame order."""
        lists = {k: v.tolist() for k, v in self.values.items()}
        gone = {k: v.tolist() for k, v in self.absent.items()}
        for n in range(len(self)):
            row = {k: None if k in gone and gone[k][n] else lists[k][n] for k in FIELDS}
            yield Frame(**{**row, **{k: bool(row[k]) for k in _BOOLS}})

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[int | float | None]]) -> FrameColumns:
        """From rows of table `frames` (FIELDS order, run_id and device left out)."""
        values, absent = {}, {}
        for k, name in enumerate(FIELDS):
            column = [r[k] for r in rows]
            if name in NULLABLE:
                absent[name] = np.array([v is None for v in column], dtype=bool)
                column = [0 if v is None else v for v in column]
            values[name] = np.array(column, dtype=np.float64 if name == "p" else np.int64)
        return cls(values, absent)._sorted()

    def merged(self, newer: FrameColumns) -> FrameColumns:
        """These records and `newer`'s, a record of `newer` replacing one with the same index."""
        if not len(newer):
            return self
        both = FrameColumns(
            {k: np.concatenate([newer.values[k], self.values[k]]) for k in FIELDS},
            {k: np.concatenate([newer.absent[k], self.absent[k]]) for k in NULLABLE},
        )
        _, first = np.unique(both.values["i"], return_index=True)  # the first of equal indexes: newer's
        return both._take(first)

    def pack(self) -> list[bytes]:
        """The PACKED arrays and the flags, as table `frame_packs` stores them."""
        flags = np.zeros(len(self), dtype=np.int64)
        for name in _BOOLS:
            flags |= np.where(self.values[name] != 0, _BITS[name], 0)
        for name in NULLABLE:
            flags |= np.where(self.absent[name], _BITS[name], 0)
        blobs = []
        for name in PACKED:
            column = self.values[name]
            if name in NULLABLE:
                column = _held(column, self.absent[name])
            blobs.append(pack(column.view(np.int64)))  # `p`: its float64 bits, exact
        return [*blobs, pack(flags)]

    @classmethod
    def unpack(cls, blobs: Sequence[bytes]) -> FrameColumns:
        """The columns `pack` gave."""
        *arrays, flags = (unpack(blob) for blob in blobs)
        values = dict(zip(PACKED, arrays, strict=True))
        values["p"] = values["p"].view(np.float64)
        values.update({name: (flags & _BITS[name] != 0).astype(np.int64) for name in _BOOLS})
        absent = {name: flags & _BITS[name] != 0 for name in NULLABLE}
        for name in NULLABLE:
            values[name] = np.where(absent[name], np.zeros(1, dtype=values[name].dtype), values[name])
        return cls({k: values[k] for k in FIELDS}, absent)

    def _sorted(self) -> FrameColumns:
        return self._take(np.argsort(self.values["i"], kind="stable"))

    def _take(self, index: np.ndarray) -> FrameColumns:
        values, absent = self.values, self.absent
        return FrameColumns({k: v[index] for k, v in values.items()}, {k: v[index] for k, v in absent.items()})


def empty() -> FrameColumns:
    """No records."""
    return FrameColumns.from_rows([])


def _held(values: np.ndarray, absent: np.ndarray) -> np.ndarray:
    """`values` with each absent one replaced by the last present one before it (0 before the first)."""
    if not absent.any():
        return values
    filled = np.where(absent, np.zeros(1, dtype=values.dtype), values)
    last = np.maximum.accumulate(np.where(absent, -1, np.arange(values.size)))
    return np.where(last >= 0, filled[np.maximum(last, 0)], filled)
