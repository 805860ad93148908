"""What the bench starts and stops around an `async with` block (servers, proxies, samplers, browsers)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Self


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
