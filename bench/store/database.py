"""One open connection to the results store, as the per-kind stores use it: statements, transactions and
the store's name for messages (a PostgreSQL URL without its password)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


class Database:
    """A SQLite or PostgreSQL connection (bench.store.dialect) and the store's label."""

    def __init__(self, conn: Any, label: str) -> None:
        self.conn = conn
        self.label = label

    def execute(self, sql: str, params: tuple | list = ()) -> Any:
        """Run one statement; its cursor."""
        return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: list) -> Any:
        """Run one statement over `rows`."""
        return self.conn.executemany(sql, rows)

    @contextlib.contextmanager
    def tx(self) -> Iterator[None]:
        """One transaction: committed on success, rolled back on error."""
        self.conn.execute("BEGIN")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
