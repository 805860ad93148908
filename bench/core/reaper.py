"""`python -m bench.core.reaper ROOT`: kill what runs inside folder ROOT once the bench is gone.

A virtual Linux board runs its agent detached (`setsid nohup`, as on a real board), so it is nobody's child
and no death signal reaches it. The board starts this watchdog with a pipe on its stdin; when the pipe
closes (the board stopped, or the bench died, even by SIGKILL: the kernel closes the pipe) it SIGKILLs every
process whose working folder is inside ROOT, as powering the board off would."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path


def processes_in(root: Path) -> list[int]:
    """Processes whose working folder is inside `root` (what runs "on" a virtual device)."""
    found = []
    prefix = str(root.resolve())
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                # a folder removed while something still runs in it (a worktree the bench took down on its way
                # out) reads "PATH (deleted)": what runs there is still the device's
                cwd = os.readlink(entry / "cwd").removesuffix(" (deleted)")
                if cwd == prefix or cwd.startswith(prefix + "/"):
                    found.append(int(entry.name))
    return found


def kill_in(root: Path) -> int:
    """SIGKILL every process inside `root` (twice over, for ones forked meanwhile); how many were killed."""
    killed = 0
    for _ in range(3):
        pids = processes_in(root)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
    return killed


def main(argv: list[str]) -> int:
    """Wait for EOF on stdin, then empty the folder of processes."""
    if len(argv) != 1:
        sys.stderr.write("usage: python -m bench.core.reaper ROOT\n")
        return 2
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C goes to the bench, which closes the pipe
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    while os.read(0, 4096):
        pass
    kill_in(Path(argv[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
