"""Copy files to a MicroPython board with mpremote's serial transport, verifying each file's sha256 on the board.

Blocking (mpremote is synchronous): run it in a thread. Files whose sha256 on the board already
matches are not sent again.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO

from mpremote.transport import TransportError
from mpremote.transport_serial import SerialTransport

from bench.bundles.trust import TRUST_FILES, refuse_key_downgrade
from bench.core.paths import deploy_name

CHUNK = 512
RAW_REPL_ATTEMPTS = 4  # a board that was just reset needs a moment before its REPL answers


@dataclass
class DeployOutcome:
    """Which files were sent and which were already there."""

    sent: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


class DeployError(Exception):
    """A file did not arrive intact (or the board did not answer)."""


def _log(stream: IO[str] | None, text: str) -> None:
    if stream is not None:
        stream.write(text + "\n")
        stream.flush()


def open_raw_repl(url: str, baud: int, log: IO[str] | None = None) -> SerialTransport:
    """Connect and enter the raw REPL (with a soft reset, as mpremote does), retrying while the board boots."""
    last: Exception | None = None
    for attempt in range(RAW_REPL_ATTEMPTS):
        transport = None
        try:
            transport = SerialTransport(url, baudrate=baud)
            transport.enter_raw_repl(soft_reset=True)
            return transport
        except (TransportError, OSError) as exc:
            last = exc
            _log(log, f"raw REPL attempt {attempt + 1} failed: {exc}")
            if transport is not None:
                transport.close()
            time.sleep(0.5 * (attempt + 1))
    raise DeployError(f"no MicroPython REPL on {url}: {last}")


@contextmanager
def _raw_repl_no_reset(url: str, baud: int) -> Iterator[SerialTransport]:
    """The board's raw REPL without a soft reset (giving up after 3 s), closed on leaving. A close that fails
    (the chip was just told to reset, and its USB port may be gone) is not the request's failure."""
    transport = None
    try:
        transport = SerialTransport(url, baudrate=baud)
        transport.enter_raw_repl(soft_reset=False, timeout_overall=3)
        yield transport
    finally:
        if transport is not None:
            with suppress(TransportError, OSError):
                transport.close()


def micropython_version(url: str, baud: int, log: IO[str] | None = None) -> str | None:
    """The MicroPython version running on the board (`sys.version`'s "MicroPython vX.Y.Z"), or None when no
    MicroPython REPL answers."""
    try:
        with _raw_repl_no_reset(url, baud) as transport:
            text = transport.exec("import sys\nprint(sys.version)").decode("utf-8", "replace")
    except (TransportError, OSError) as exc:
        _log(log, f"no MicroPython REPL on {url}: {exc}")
        return None
    match = re.search(r"MicroPython v?([0-9][^\s;,]*)", text)
    return match[1] if match else text.strip() or None


def _ask_machine(url: str, baud: int, call: str, what: str, log: IO[str] | None, settle_s: float = 0.0) -> bool:
    """Run `machine.<call>()` on the board without waiting for an answer (the chip resets), then wait
    `settle_s`. False when no REPL answers."""
    try:
        with _raw_repl_no_reset(url, baud) as transport:
            transport.exec_raw_no_follow(f"import machine\nmachine.{call}()")
            _log(log, f"asked MicroPython for {what} (machine.{call}())")
            if settle_s:
                time.sleep(settle_s)
            return True
    except (TransportError, OSError) as exc:
        _log(log, f"no MicroPython REPL to ask for {what}: {exc}")
        return False


def request_reset(url: str, baud: int, log: IO[str] | None = None) -> bool:
    """Ask MicroPython to reset the chip (`machine.reset()`, as `mpremote reset` does). False when no REPL answers."""
    return _ask_machine(url, baud, "reset", "a reset", log)


def request_bootloader(url: str, baud: int, log: IO[str] | None = None) -> bool:
    """Ask MicroPython to enter the ROM download mode (`machine.bootloader()`, as `mpremote bootloader`
    does). False when no REPL answers (the board may already be in download mode, or boot-looping)."""
    return _ask_machine(url, baud, "bootloader", "the bootloader", log, settle_s=0.3)  # it resets into the ROM loader


def board_sha256(transport: SerialTransport, path: str) -> bytes | None:
    """The sha256 of `path` computed on the board, or None when it does not exist."""
    try:
        return transport.fs_hashfile(path, "sha256")
    except OSError:
        return None


def deploy_files(
    url: str,
    baud: int,
    files: list[tuple[Path, str]],
    *,
    log: IO[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> DeployOutcome:
    """Send `files` (source, board path) and check each one's sha256 on the board."""
    outcome = DeployOutcome()
    for _source, dest in files:  # before the board is touched
        deploy_name(url, dest)
    transport = open_raw_repl(url, baud, log)
    try:
        for source, dest in files:  # before anything is written
            if dest in TRUST_FILES:
                data = source.read_bytes()
                have = board_sha256(transport, dest)
                refuse_key_downgrade(url, dest, data, have not in (None, hashlib.sha256(data).digest()))
        made: set[str] = set()
        for index, (source, dest) in enumerate(files):
            data = source.read_bytes()
            want = hashlib.sha256(data).digest()
            for parent in reversed(PurePosixPath(dest).parents):
                folder = str(parent)
                if folder not in (".", "/") and folder not in made:
                    if not transport.fs_exists(folder):
                        transport.fs_mkdir(folder)
                    made.add(folder)
            if board_sha256(transport, dest) == want:
                outcome.unchanged.append(dest)
                _log(log, f"{dest}: up to date")
            else:
                transport.fs_writefile(dest, data, chunk_size=CHUNK)
                got = board_sha256(transport, dest)
                if got != want:
                    raise DeployError(
                        f"{dest}: sha256 on the board is {got.hex() if got else 'missing'}, sent {want.hex()}"
                    )
                outcome.sent.append(dest)
                _log(log, f"{dest}: sent {len(data)} bytes, sha256 verified on the board")
            if progress:
                progress(index + 1, len(files))
        transport.exit_raw_repl()
    finally:
        transport.close()
    return outcome
