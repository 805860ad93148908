"""A QEMU machine's own reset and power, through its QMP socket (QEMU Machine Protocol: JSON over a UNIX socket).

`QmpClient` speaks the protocol (greeting, `qmp_capabilities`, one command at a time, events skipped);
`QmpPower` is the PowerDriver of an emulated console: off = `quit` (the supply cut), on = boot the machine
again through its driver, status = `query-status`. A hard reset is `system_reset` (see the QEMU driver).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.power.protocol import PowerDriver, PowerError, PowerSettings, PowerSpec, PowerState

QMP_TIMEOUT_S = 5.0


class QmpClient:
    """One QMP connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(cls, path: Path, timeout_s: float = QMP_TIMEOUT_S) -> QmpClient:
        """Connect, read the greeting and leave capabilities negotiation (PowerError when nothing answers)."""
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(str(path)), timeout_s)
        except (OSError, TimeoutError) as exc:
            raise PowerError(f"QMP socket {path}: {exc}") from None
        client = cls(reader, writer)
        try:
            await client.negotiate(timeout_s)
        except BaseException:
            await client.close()
            raise
        return client

    async def negotiate(self, timeout_s: float = QMP_TIMEOUT_S) -> None:
        """Read the greeting and leave capabilities negotiation (a connection made some other way: a socket pair)."""
        greeting = await self._read(timeout_s)
        if "QMP" not in greeting:
            raise PowerError("QMP: no greeting")
        await self.execute("qmp_capabilities", timeout_s=timeout_s)

    async def _read(self, timeout_s: float) -> dict[str, Any]:
        try:
            line = await asyncio.wait_for(self.reader.readline(), timeout_s)
        except TimeoutError:
            raise PowerError(f"QMP: no answer within {timeout_s:g} s") from None
        if not line:
            raise PowerError("QMP: the machine closed the connection")
        return json.loads(line)

    async def execute(
        self, command: str, arguments: dict[str, Any] | None = None, *, timeout_s: float = QMP_TIMEOUT_S
    ) -> Any:
        """Run one command; its `return` value (PowerError with QEMU's `error.desc`)."""
        request: dict[str, Any] = {"execute": command}
        if arguments:
            request["arguments"] = arguments
        self.writer.write(json.dumps(request).encode() + b"\n")
        await self.writer.drain()
        while True:
            reply = await self._read(timeout_s)
            if "event" in reply:
                continue
            if "error" in reply:
                raise PowerError(f"QMP {command}: {reply['error'].get('desc', reply['error'])}")
            return reply.get("return")

    async def close(self) -> None:
        """Close the connection."""
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()


async def qmp(path: Path, command: str, arguments: dict[str, Any] | None = None) -> Any:
    """Run one QMP command on the machine behind `path`."""
    client = await QmpClient.connect(path)
    try:
        return await client.execute(command, arguments)
    finally:
        await client.close()


class QmpPower(PowerDriver[PowerSettings]):
    """An emulated machine's supply: `quit` cuts it, `boot` (the driver's) applies it."""

    def __init__(self, device: str, socket: Callable[[], Path | None], boot: Callable[[], Awaitable[object]]) -> None:
        super().__init__(device, PowerSpec("qmp", PowerSettings(off_s=0.5)))
        self._socket = socket  # the running machine's QMP socket, None when it does not run
        self._boot = boot

    @property
    def where(self) -> str:
        return "QEMU (QMP)"

    async def on(self) -> None:
        """Boot the machine when it does not run."""
        if await self.status() != PowerState.ON:
            await self._boot()

    async def off(self) -> None:
        """`quit`: the machine stops at once, as without power."""
        path = self._socket()
        if path is not None:
            # it may close the socket before answering, or reset it while the answer is read
            with contextlib.suppress(PowerError, ConnectionError):
                await qmp(path, "quit")

    async def status(self) -> PowerState:
        """On while QMP answers (running, or paused: hung but powered), off otherwise."""
        path = self._socket()
        if path is None:
            return PowerState.OFF
        try:
            await qmp(path, "query-status")
        except PowerError:
            return PowerState.OFF
        return PowerState.ON
