"""How a `hilbench` command is stopped: SIGINT, SIGTERM and SIGHUP (Ctrl-C, cron/systemd/CI, a closed
terminal) all stop it, and it exits 128 + the signal's number. The one home of those signals and that code."""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import TYPE_CHECKING, Any, Self, TypeVar

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Coroutine

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
T = TypeVar("T")

# the stop signals this command received, first first (`hilbench` clears it when a command starts): a repeated
# SIGTERM/SIGHUP is ignored while stopping, and the first names the exit code
stopped_by: list[int] = []


class Interrupted(KeyboardInterrupt):
    """The command was stopped by `signum`; `hilbench` prints "interrupted (NAME)" and exits 128 + signum."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_code(signum: int) -> int:
    """The exit status of a command stopped by `signum`."""
    return 128 + signum


def run_stoppable(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` that SIGTERM and SIGHUP stop as Ctrl-C stops asyncio.run: while its loop runs, the loop's
    own handler cancels the main task (devices stopped, leases released, the run marked), whatever SIGINT's
    handler is. A command started with SIGINT ignored (`cmd &` in a script, a test runner's worker) has no Ctrl-C
    handler to hand the signal to; a signal raised inside a task there is "Task exception was never retrieved".
    The handlers the command had before are back when the loop ends. CancelledError when stopped."""
    import asyncio

    async def stoppable() -> T:
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        assert task is not None
        previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS[1:]}
        on_main = threading.current_thread() is threading.main_thread()
        for sig in previous if on_main else ():
            loop.add_signal_handler(sig, _cancel, sig, task)
        try:
            return await main
        finally:
            for sig, handler in previous.items() if on_main else ():
                loop.remove_signal_handler(sig)
                signal.signal(sig, handler)  # type: ignore[arg-type]

    return asyncio.run(stoppable())


def _cancel(signum: int, task: asyncio.Task[Any]) -> None:
    if not stopped_by:  # the first stop signal; a repeated one must not cut the cleanup short (SIGKILL still does)
        stopped_by.append(signum)
        task.cancel()


class StopSignals:
    """`with StopSignals() as stop:` inside a running event loop: `await stop.wait()` returns at the first stop
    signal (a repeated one is ignored while the server winds down); `stop.raise_if_stopped()` then raises
    Interrupted. For servers, which stop their own way (exporter first, then devices) rather than be cancelled."""

    def __init__(self) -> None:
        import asyncio  # here, not at the top: `hilbench` imports this module before any command needs asyncio

        self.signum: int | None = None
        self._event = asyncio.Event()
        self._previous: dict[int, object] = {}

    def __enter__(self) -> Self:
        loop = self._loop()
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.getsignal(sig)
            loop.add_signal_handler(sig, self._got, sig)
        return self

    @staticmethod
    def _loop() -> asyncio.AbstractEventLoop:
        import asyncio

        return asyncio.get_running_loop()

    def __exit__(self, *exc: object) -> None:
        loop = self._loop()
        for sig, previous in self._previous.items():
            with contextlib.suppress(RuntimeError, ValueError):
                loop.remove_signal_handler(sig)
            if previous is not None:
                signal.signal(sig, previous)  # type: ignore[arg-type]

    def _got(self, signum: int) -> None:
        if self.signum is None:
            self.signum = signum
            self._event.set()

    async def wait(self) -> int:
        """Wait for a stop signal; its number."""
        await self._event.wait()
        assert self.signum is not None
        return self.signum

    @property
    def event(self) -> asyncio.Event:
        """Set once a stop signal arrived (for code that waits on an Event)."""
        return self._event

    def raise_if_stopped(self) -> None:
        """Interrupted when a stop signal arrived."""
        if self.signum is not None:
            raise Interrupted(self.signum)
