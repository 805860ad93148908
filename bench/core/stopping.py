"""How a `hilbench` command is stopped: SIGINT, SIGTERM and SIGHUP (Ctrl-C, cron/systemd/CI, a closed
terminal) all stop it, and it exits 128 + the signal's number. The one home of those signals and that code."""

from __future__ import annotations

import contextlib
import signal
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    import asyncio

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """The command was stopped by `signum`; `hilbench` prints "interrupted (NAME)" and exits 128 + signum."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_code(signum: int) -> int:
    """The exit status of a command stopped by `signum`."""
    return 128 + signum


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
