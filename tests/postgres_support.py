"""A throwaway PostgreSQL server for tests (Debian's postgresql package; nothing else).

`HILBENCH_TEST_PG_URL` (a server CI already runs) is used when set. Otherwise `postgres_server()` runs
initdb into a fresh folder and starts the server on a free loopback port with trust authentication;
as root it runs them as the `postgres` user (PostgreSQL refuses to run as root). Stopped on exit.
Also runnable: `python -m tests.postgres_support` starts one and prints its URL until Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def pg_tool(name: str) -> str | None:
    """Path of a PostgreSQL server tool (initdb, pg_ctl), or None when the server is not installed."""
    for folder in PG_BIN_DIRS:
        if (folder / name).exists():
            return str(folder / name)
    return shutil.which(name)


def available() -> bool:
    """True when a server can be had (a URL is given, or the server package is installed)."""
    return bool(os.environ.get("HILBENCH_TEST_PG_URL")) or (
        pg_tool("initdb") is not None and pg_tool("pg_ctl") is not None
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """Yield the URL of an empty database on a PostgreSQL server."""
    given = os.environ.get("HILBENCH_TEST_PG_URL")
    if given:
        yield given
        return
    initdb, pg_ctl = pg_tool("initdb"), pg_tool("pg_ctl")
    if initdb is None or pg_ctl is None:
        raise RuntimeError("PostgreSQL server not installed: apt-get install postgresql")
    folder = Path(tempfile.mkdtemp(prefix="hilbench-pg-"))
    data = folder / "data"
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    port = _free_port()
    log = folder / "server.log"
    run = {"check": True, "stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE}
    subprocess.run(_as_server_user([initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"]), **run)
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50"
    subprocess.run(_as_server_user([pg_ctl, "-D", str(data), "-l", str(log), "-o", options, "-w", "start"]), **run)
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(_as_server_user([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"]), check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)


def fresh_database(url: str) -> str:
    """A new empty database on the server at `url`; returns its URL."""
    import psycopg

    name = f"hb_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return url.rsplit("/", 1)[0] + "/" + name


def main() -> None:
    """Serve until SIGTERM or SIGINT (background jobs of a script ignore SIGINT: stop them with SIGTERM)."""
    import signal
    import sys
    import time

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with postgres_server() as server_url:
        print(server_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)


if __name__ == "__main__":
    main()
