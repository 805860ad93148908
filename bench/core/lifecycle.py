"""What the bench starts and stops around an `async with` block (servers, proxies, samplers, browsers)."""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import Coroutine
from typing import Generic, Self, TypeVar

T = TypeVar("T")


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


class Sampler(StartStop, Generic[T]):
    """Samples in the background between `start()` and `stop()`: a power meter, a board's telemetry. `samples`
    and `errors` (what stopped it early, named) grow while it runs; `stop()` ends it, `close()`s what it reads
    from and returns every sample."""

    def __init__(self) -> None:
        self.samples: list[T] = []
        self.errors: list[str] = []
        self._task: asyncio.Task[None] | None = None

    def _begin(self, sampling: Coroutine[object, object, None], name: str) -> None:
        """Run `sampling` in the background, unless it already runs."""
        if self._task is None:
            self._task = asyncio.create_task(sampling, name=name)
        else:
            sampling.close()

    async def stop(self) -> list[T]:
        """Stop sampling; every sample taken."""
        task, self._task = self._task, None
        await cancel(task)
        await self.close()
        return list(self.samples)

    async def close(self) -> None:
        """Release what the sampler reads from."""
