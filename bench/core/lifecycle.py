"""What the bench starts and stops around an `async with` block (servers, proxies, samplers, browsers)."""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from typing import Self


async def cancel(task: asyncio.Task | None, *ignored: type[BaseException]) -> None:
    """Cancel `task` (None: nothing to do) and wait until it has ended; what it raises on the way out is
    suppressed when it is one of `ignored` (its cancellation always is)."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, *ignored):
            await task


async def release(owner: object, *names: str) -> None:
    """Close each of `owner`'s attributes `names` that is set, in order (`close()`, else `stop()`), and set it to
    None: an agent's link, a page, a server."""
    for name in names:
        part = getattr(owner, name)
        setattr(owner, name, None)
        if part is not None:
            await (part.close() if hasattr(part, "close") else part.stop())


class StartStop(ABC):
    """An async `start()` and `stop()`; `async with x:` starts `x` and stops it on leaving, however the block ends."""

    @abstractmethod
    async def start(self) -> object:
        """Begin (listen, serve, sample); what it returns is the subclass's."""

    @abstractmethod
    async def stop(self) -> object:
        """End and release what `start` took; what it returns is the subclass's."""

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
