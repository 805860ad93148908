"""bench.core.procs: a child that has exited is waited for, never signalled (which would reap it before the
event loop's child watcher, losing its status and logging "Unknown child process pid")."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import threading

import pytest

from bench.core.procs import has_exited, stop_process


def test_has_exited_sees_a_zombie_without_reaping_it() -> None:
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    done = subprocess.Popen([sys.executable, "-c", "raise SystemExit(7)"])
    try:
        os.waitid(os.P_PID, done.pid, os.WEXITED | os.WNOWAIT)  # until it has exited, leaving it unreaped
        assert has_exited(done.pid)
        assert done.wait(timeout=5) == 7  # not reaped by it: its status was kept for its owner
        assert not has_exited(running.pid)
    finally:
        running.kill()
        running.wait()
    assert has_exited(running.pid)  # reaped: no child of ours any more


def test_stop_process_ends_a_running_child_and_keeps_a_finished_ones_status(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The finished child is stopped while the child watcher has not reaped it yet (a busy host: its thread is
    not scheduled); held here until 0.5 s after the child exited."""
    gate = threading.Event()
    real_waitpid = os.waitpid

    def watcher_waitpid(pid: int, options: int) -> tuple[int, int]:
        if threading.current_thread() is not threading.main_thread():  # asyncio's ThreadedChildWatcher
            gate.wait(10)
        return real_waitpid(pid, options)

    monkeypatch.setattr(os, "waitpid", watcher_waitpid)

    async def scenario() -> tuple[int | None, int | None]:
        running = await asyncio.create_subprocess_exec(sys.executable, "-c", "import time; time.sleep(30)")
        finished = await asyncio.create_subprocess_exec(sys.executable, "-c", "raise SystemExit(3)")
        os.waitid(os.P_PID, finished.pid, os.WEXITED | os.WNOWAIT)
        threading.Timer(0.5, gate.set).start()
        await stop_process(finished, 5.0)
        await stop_process(running, 5.0)
        return running.returncode, finished.returncode

    with caplog.at_level(logging.WARNING, logger="asyncio"):
        stopped, finished = asyncio.run(scenario())
    assert finished == 3, "its own status, not the watcher's 255 for a child reaped behind its back"
    assert "Unknown child process" not in caplog.text
    assert stopped == -15
