"""An asyncio event loop on a background thread, for sync callers (pytest) of the async bench library."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """Runs coroutines on one long-lived loop, so async resources (virtual devices) outlive a single call."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="bench-loop", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run `coro` on the loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def close(self) -> None:
        """Stop the loop and join its thread."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


def run_on_a_thread(coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
    """Run `coro` on a loop thread of its own, closed after: one call of a sync caller."""
    loop = LoopThread()
    try:
        return loop.run(coro, timeout_s)
    finally:
        loop.close()
