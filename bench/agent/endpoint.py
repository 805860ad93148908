"""What a replay needs from an opened agent, whoever opened it (a driver, the Linux opener, a test):
the session protocol and the endpoint that closes it. Below both bench.devices and bench.replay."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from bench.agent.frame import Frame
from bench.agent.session import LoopStart
from bench.config.fleet import Device


class ClockLike(Protocol):
    """The clock mapping an agent session keeps (bench.agent.clock.ClockSync)."""

    offset_ns: float
    drift_ppm: float
    ref_ns: int

    @property
    def uncertainty_ns(self) -> float: ...

    def to_bench_ns(self, device_us: int) -> int: ...


class AgentLike(Protocol):
    """What a replay run needs from an agent session (bench.agent.session.AgentSession)."""

    info: dict[str, Any]
    clock: ClockLike
    faults: list[dict[str, Any]]
    sent_ns: dict[int, int]

    async def sync_clock(self, n: int = 16, interval: float = 0.0) -> ClockLike: ...
    async def start(self, loop: LoopStart) -> Any: ...
    async def stop(self, timeout: float | None = None) -> Any: ...
    async def hold(self) -> dict[str, Any]: ...
    async def stats(self) -> dict[str, Any]: ...
    async def load(
        self, path: str, manifest: dict[str, Any], timeout: float = 60.0, *, cold: bool = False
    ) -> dict[str, Any]: ...
    async def send_raw(self, data: bytes) -> int: ...
    def frames(self, timeout: float | None = None) -> AsyncIterator[Frame]: ...


@dataclass
class AgentEndpoint:
    """An opened agent session of one device and how to close it."""

    session: AgentLike
    close: Callable[[], Awaitable[None]]
    driver: Any = None  # the device's driver, when the opener has one (a console's supply meter follows it)


OpenAgent = Callable[[Device], Awaitable[AgentEndpoint]]
