"""Who holds a labgrid place: one owner identity per job, so the janitor can tell a dead job's places.

labgrid names a lock holder `host/user` (LG_HOSTNAME, LG_USERNAME) and never expires it. The bench
gives every job its own user part, `hb.<user>.<pid>.<start>` (the process and its start time, so a reused
pid is not mistaken for the holder), unless LG_USERNAME names the job explicitly (e.g. a CI job id).
"""

from __future__ import annotations

import getpass
import os
import re
import socket

from bench.core.leases import process_start

_BENCH_USER_RE = re.compile(r"^hb\.(?P<user>[^./]+)\.(?P<pid>\d+)\.(?P<start>\d+)$")


def job_identity() -> tuple[str, str]:
    """(host, user) this job acquires places as."""
    host = os.environ.get("LG_HOSTNAME") or socket.gethostname()
    user = os.environ.get("LG_USERNAME")
    if not user:
        pid = os.getpid()
        safe = re.sub(r"[^A-Za-z0-9_-]", "_", getpass.getuser())
        user = f"hb.{safe}.{pid}.{int(process_start(pid) or 0)}"
    return host, user


def holder_gone(owner: str, this_host: str | None = None) -> bool | None:
    """True when `owner` ("host/user") is a bench job on this host that no longer runs; False when it
    runs; None when it cannot be told (another host, or an identity not made by the bench)."""
    host, _, user = owner.partition("/")
    if host != (this_host or os.environ.get("LG_HOSTNAME") or socket.gethostname()):
        return None
    match = _BENCH_USER_RE.match(user)
    if match is None:
        return None
    started = process_start(int(match["pid"]))
    return started is None or int(started) != int(match["start"])
