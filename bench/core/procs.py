"""Child processes the bench starts: tied to the bench's life, and stopped with a grace period.

Every child is started through `tied(argv)`: util-linux `setpriv --pdeathsig KILL` sets PR_SET_PDEATHSIG in
the child before it execs the real program, so the kernel kills it when the bench dies, also on SIGKILL
(no cleanup code of ours runs then). This is chosen over a `preexec_fn` calling prctl (Python code between
fork and exec is unsafe in a process with threads, and the bench has some) and over a watchdog pipe per
child (a helper process each). The death signal follows the *thread* that started the child, so children
are started from the thread that owns them for their whole life (the event loop's thread).

Processes that leave their parent on purpose (an agent a board runs detached, `setsid nohup`) are covered
by `python -m bench.core.reaper`, a watchdog the owner keeps a pipe to (see bench.core.reaper)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Sequence

DIE_WITH_BENCH = ("setpriv", "--pdeathsig", "KILL", "--")
# An emulator on a counted clock (QEMU -icount: the guests, the C6's core) runs at the host's lowest CPU priority:
# its figures are its instructions, whatever its share of the host, so contention stretches only its wall time,
# while a device timed on the bench's clock beside it (the browser) and the bench's own pacing keep the cores they
# need (docs/replay.md).
COUNTED_NICE = ("nice", "-n", "19")


def tied(argv: Sequence[str]) -> list[str]:
    """`argv` prefixed so that the process is killed when the bench (the starting thread) dies."""
    return [*DIE_WITH_BENCH, *argv]


def has_exited(pid: int) -> bool:
    """True when child `pid` has exited, without reaping it (`waitid` with WNOWAIT), so that whoever waits for it
    (the event loop's child watcher) still gets its status; also True when it is no child of ours any more."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def signal_child(proc: asyncio.subprocess.Process, sig: int) -> None:
    """Send `sig` to child `proc`, unless it has exited: Popen polls, and so reaps, before it signals, and the
    event loop's child watcher would then log "Unknown child process pid" and lose the child's status."""
    if proc.returncode is None and not has_exited(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)


async def stop_process(proc: asyncio.subprocess.Process | None, grace_s: float) -> None:
    """SIGTERM `proc`, give it `grace_s` to exit, then SIGKILL it; nothing when it already ended, and only a wait
    for a child that has exited but is not reaped yet (`signal_child`)."""
    if proc is None or proc.returncode is not None:
        return
    signal_child(proc, signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), grace_s)
    except TimeoutError:
        signal_child(proc, signal.SIGKILL)
        await proc.wait()
