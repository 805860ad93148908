"""Device leases: one bench process per device, released when the holder dies or its TTL runs out.

A lease is a small JSON file per device in the lease folder. Taking, renewing and breaking leases
happens under an flock on the folder's mutex file, so two processes never both win. A lease whose
holder process is gone (same host) or whose expiry has passed is stale and may be taken over.
The holder renews its leases from a background thread every TTL/3.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.core.errors import LeaseBusy
from bench.core.folders import UnsafeFolder, check_folder, own_folder, write_file

DEFAULT_TTL_S = 300.0


def lease_dir() -> Path:
    """Where leases live: $HILBENCH_LEASE_DIR, else a per-user folder under /tmp shared by all runs (made and
    checked by `bench.core.folders`: this user's own, nobody else may write to it)."""
    env = os.environ.get("HILBENCH_LEASE_DIR")
    if env:
        return own_folder(Path(env), "lease folder ($HILBENCH_LEASE_DIR)")
    return own_folder(Path("/tmp") / f"hilbench-leases-{os.getuid()}", "lease folder", private=True)


@dataclass
class LeaseInfo:
    """Who holds a device and until when."""

    device: str
    holder: str  # free text: the job or user that holds it
    host: str
    pid: int
    pid_start: float  # process start time, so a reused pid is not mistaken for the holder
    taken: float
    expires: float

    def describe(self) -> str:
        """Who holds it: command, pid, host and since when (for messages)."""
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.taken))
        return f"held by {self.holder} (pid {self.pid} on {self.host}) since {since}"

    @property
    def alive(self) -> bool:
        """True while the holder still runs and the lease has not expired."""
        if time.time() > self.expires:
            return False
        if self.host != socket.gethostname():
            return True
        return process_start(self.pid) == self.pid_start


def process_start(pid: int) -> float | None:
    """When process `pid` started (clock ticks since boot), or None when it does not exist."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return float(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


@contextlib.contextmanager
def _mutex(folder: Path):
    check_folder(folder, "lease folder")  # each time: a folder swapped since the start is refused too
    try:
        fd = os.open(folder / ".mutex", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:  # ELOOP: a symbolic link planted as the mutex
        raise UnsafeFolder(f"lease folder {folder}: cannot open its .mutex: {exc.strerror or exc}",
                           hint=f"remove {folder / '.mutex'}", file=str(folder / ".mutex")) from None  # fmt: skip
    with os.fdopen(fd, "r+b", buffering=0) as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or device planted as the mutex
            raise UnsafeFolder(f"lease folder {folder}: its .mutex is not a regular file",
                               hint=f"remove {folder / '.mutex'}", file=str(folder / ".mutex"))  # fmt: skip
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _read(path: Path) -> LeaseInfo | None:
    """The lease in `path`: a regular file (no link followed, a FIFO never waited on), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return LeaseInfo(**json.loads(os.read(fd, 1 << 16)))
    except (OSError, ValueError, TypeError, RecursionError):
        return None
    finally:
        os.close(fd)


def _write(path: Path, info: LeaseInfo) -> None:
    try:
        write_file(path, json.dumps(asdict(info)), what="lease folder", mode=0o600)  # never through a planted link
    except OSError as exc:  # a folder or something else planted at the lease's name
        raise UnsafeFolder(f"lease folder {path.parent}: cannot write {path.name}: {exc.strerror or exc}",
                           hint=f"remove {path}", file=str(path), device=info.device) from None  # fmt: skip


def list_leases(folder: Path | None = None) -> list[LeaseInfo]:
    """Every lease file, live or stale, sorted by device."""
    folder = folder or lease_dir()
    infos = [_read(p) for p in sorted(folder.glob("*.lease"))]
    return [i for i in infos if i is not None]


class LeaseSet:
    """Leases held by this process; renewed in the background until released."""

    def __init__(self, holder: str = "", ttl_s: float = DEFAULT_TTL_S, folder: Path | None = None) -> None:
        self.holder = holder or os.environ.get("HILBENCH_JOB", f"pid{os.getpid()}")
        self.ttl_s = ttl_s
        self.folder = folder or lease_dir()
        self._held: dict[str, LeaseInfo] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self, device: str, wait_s: float = 0.0, say: Callable[[str], None] | None = None) -> LeaseInfo:
        """Take the lease on `device`, waiting up to `wait_s`; LeaseBusy names the holder otherwise. `say`
        hears "waiting for DEVICE (held by ..., pid N) up to S s" when it has to wait, and again when it got it."""
        start = time.monotonic()
        deadline = start + wait_s
        waited = False
        while True:
            current = self._try(device)
            if current is None:
                if waited and say is not None:
                    say(f"got {device} after waiting {time.monotonic() - start:.1f} s")
                return self._held[device]
            if not waited and wait_s > 0 and say is not None:
                say(f"waiting for {device} (held by {current.holder}, pid {current.pid}) up to {wait_s:g} s")
            waited = True
            if time.monotonic() >= deadline:
                raise LeaseBusy(
                    f"device {device!r} is busy: {current.describe()}"
                    + (f"; waited {wait_s:g} s" if wait_s > 0 else ""),
                    hint="wait for that run to finish (--lease-wait S waits longer), or pick another device",
                    device=device,
                )
            time.sleep(0.2)

    def _try(self, device: str) -> LeaseInfo | None:
        path = self.folder / f"{device}.lease"
        with _mutex(self.folder):
            current = _read(path)
            if current is not None and current.alive and current.pid != os.getpid():
                return current
            now = time.time()
            info = LeaseInfo(
                device=device,
                holder=self.holder,
                host=socket.gethostname(),
                pid=os.getpid(),
                pid_start=process_start(os.getpid()) or 0.0,
                taken=now,
                expires=now + self.ttl_s,
            )
            _write(path, info)
        with self._lock:
            self._held[device] = info
        self._ensure_renewer()
        return None

    def release(self, device: str) -> None:
        """Give `device` back (only if this process still holds it)."""
        path = self.folder / f"{device}.lease"
        with self._lock:
            self._held.pop(device, None)
        with _mutex(self.folder):
            current = _read(path)
            if current is not None and current.pid == os.getpid():
                path.unlink(missing_ok=True)

    def release_all(self) -> None:
        """Give back every lease and stop renewing."""
        self._stop.set()
        for device in list(self._held):
            self.release(device)

    def _ensure_renewer(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._renew_loop, name="lease-renew", daemon=True)
            self._thread.start()

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            with self._lock:
                held = list(self._held.values())
            with _mutex(self.folder):
                for info in held:
                    info.expires = time.time() + self.ttl_s
                    _write(self.folder / f"{info.device}.lease", info)

    def __enter__(self) -> LeaseSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release_all()
