"""A Chromium driven over the DevTools protocol (CDP), and a headless one the bench starts: one browser,
one page (target) per web device. The bench opens pages, reads their console, sees them crash, and closes
them."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Protocol

import websockets

from bench.browser import chromium
from bench.browser.relay import DevToolsRelay
from bench.core.errors import DeviceUnreachable
from bench.core.lifecycle import StartStop
from bench.core.logcap import open_for_child
from bench.core.procs import stop_process

# the pages are devices: they keep their timers and frames when not in front
FLAGS = (
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
)
PIPE_LIMIT = 1 << 28  # the largest DevTools message read from the pipe (a full-page screenshot is a few MB)


class Channel(Protocol):
    """Where DevTools messages go and come from: a WebSocket (websockets' client) or Chromium's pipe."""

    async def send(self, message: str) -> None: ...

    def __aiter__(self) -> AsyncIterator[str | bytes]: ...

    async def close(self) -> None: ...


class PipeChannel:
    """DevTools over `--remote-debugging-pipe`: NUL-delimited JSON on two pipes (the bench's ends)."""

    def __init__(
        self, reader: asyncio.StreamReader, read: asyncio.BaseTransport, writer: asyncio.WriteTransport
    ) -> None:
        self.reader = reader
        self.read = read
        self.writer = writer

    @classmethod
    async def open(cls, to_browser: int, from_browser: int) -> PipeChannel:
        """Wrap the two fds (they are the channel's from now on)."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=PIPE_LIMIT)
        read, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(from_browser, "rb", 0)
        )
        writer, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(to_browser, "wb", 0))
        return cls(reader, read, writer)

    async def send(self, message: str) -> None:
        if self.writer.is_closing():
            raise CdpError("the browser's DevTools pipe is closed")
        self.writer.write(message.encode() + b"\0")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            try:
                message = await self.reader.readuntil(b"\0")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
                return
            yield message[:-1]

    async def close(self) -> None:
        self.writer.close()
        self.read.close()
        self.reader.feed_eof()


class CdpError(Exception):
    """A DevTools command failed."""


class Cdp:
    """One DevTools connection to a browser (its WebSocket or its pipe): commands with ids, events to listeners,
    sessions per target."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.ids = itertools.count(1)
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            async for raw in self.channel:
                msg = json.loads(raw)
                fut = self.waiting.pop(msg.get("id", -1), None)
                if fut is not None and not fut.done():
                    fut.set_result(msg)
                elif "method" in msg:
                    for listener in list(self.listeners):
                        listener(msg)
        for fut in self.waiting.values():
            if not fut.done():
                fut.set_exception(CdpError("the browser's DevTools connection closed"))

    async def forward(self, command: dict[str, Any]) -> asyncio.Future[dict[str, Any]]:
        """Send `command` (method, params, sessionId; its id is replaced) and return the future of its reply."""
        msg_id = next(self.ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        if self.reader.done():
            fut.set_exception(CdpError("the browser's DevTools connection closed"))
            return fut
        self.waiting[msg_id] = fut
        await self.channel.send(json.dumps({**command, "id": msg_id}))
        return fut

    async def call(self, method: str, session: str | None = None, timeout: float = 30, **params: Any) -> dict:
        """Send one command (to a target's `session` when given) and return its result."""
        cmd: dict[str, Any] = {"method": method, "params": params}
        if session:
            cmd["sessionId"] = session
        reply = await asyncio.wait_for(await self.forward(cmd), timeout)
        if "error" in reply:
            raise CdpError(f"{method}: {reply['error'].get('message')}")
        return reply.get("result", {})

    async def open_page(self, url: str, on_console: Callable[[str], None]) -> Page:
        """A new tab at `url`, its console and crashes reported to `on_console`."""
        target = (await self.call("Target.createTarget", url="about:blank"))["targetId"]
        session = (await self.call("Target.attachToTarget", targetId=target, flatten=True))["sessionId"]
        page = Page(self, target, session, on_console)
        self.listeners.append(page.event)
        await self.call("Runtime.enable", session)
        await self.call("Inspector.enable", session)
        await self.call("Page.bringToFront", session)  # a background tab gets no animation frames
        await self.call("Page.navigate", session, url=url)
        return page

    async def close(self) -> None:
        await self.channel.close()
        self.reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.reader


async def connect(devtools: str, timeout: float = 10) -> Cdp:
    """A DevTools connection to the browser at `devtools` (its ws:// URL), or DeviceUnreachable."""
    try:
        ws = await asyncio.wait_for(websockets.connect(devtools, max_size=None, compression=None), timeout)
    except (OSError, TimeoutError, websockets.InvalidHandshake) as exc:
        raise DeviceUnreachable(f"browser at {devtools}: cannot connect to DevTools: {exc}") from None
    return Cdp(ws)


class Page:
    """One browser tab: its target id, CDP session, console lines and whether its renderer crashed."""

    def __init__(self, cdp: Cdp, target: str, session: str, on_console: Callable[[str], None]) -> None:
        self.cdp = cdp
        self.target = target
        self.session = session
        self.on_console = on_console
        self.crashed = False

    def event(self, msg: dict[str, Any]) -> None:
        if msg.get("sessionId") != self.session:
            return
        method, params = msg["method"], msg.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.on_console(f"[console.{params.get('type')}] {text}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.on_console(f"[exception] {details.get('exception', {}).get('description') or details.get('text')}")
        elif method == "Inspector.targetCrashed":
            self.crashed = True
            self.on_console("[page] the renderer crashed")

    async def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (awaited when it is a promise)."""
        res = await self.cdp.call(
            "Runtime.evaluate", self.session, expression=expression, returnByValue=True, awaitPromise=True
        )
        return res.get("result", {}).get("value")

    async def close(self) -> None:
        """Close the tab."""
        with contextlib.suppress(CdpError, websockets.ConnectionClosed, TimeoutError):
            await self.cdp.call("Target.closeTarget", targetId=self.target, timeout=5)
        with contextlib.suppress(ValueError):
            self.cdp.listeners.remove(self.event)


class Browser(StartStop):
    """A headless Chromium with a fresh profile, run as an unprivileged user (bench.browser.chromium) and driven over
    its DevTools pipe. `devtools` is the URL other bench code connects to: a relay on loopback that takes only
    that URL's secret token (bench.browser.relay), so no other local process can open a DevTools session."""

    def __init__(self, log_path: Path | None = None) -> None:
        self.log_path = log_path
        self.proc: asyncio.subprocess.Process | None = None
        self.launch: chromium.Launch | None = None
        self.cdp: Cdp | None = None
        self.relay: DevToolsRelay | None = None
        self.devtools = ""  # the relay's ws:// URL, token included
        self.version = ""
        self.sandbox = False  # whether Chromium's sandbox is on (where the kernel allows it)

    async def start(self, timeout: float = 30) -> None:
        """Start Chromium and connect to its DevTools pipe, or DeviceUnreachable."""
        self.launch = launch = chromium.prepare(FLAGS)
        self.sandbox = launch.sandbox
        log = open_for_child(self.log_path) if self.log_path else asyncio.subprocess.DEVNULL
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *launch.argv,
                "about:blank",
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                **launch.spawn_kwargs(),  # type: ignore[arg-type]
            )
        except BaseException:
            launch.cleanup()
            raise
        finally:
            if self.log_path:
                os.close(log)
        launch.started()
        self.cdp = Cdp(await PipeChannel.open(*launch.take_pipe()))
        try:
            self.version = (await self.cdp.call("Browser.getVersion", timeout=timeout)).get("product", "")
        except (CdpError, TimeoutError):
            await self.stop()
            raise DeviceUnreachable(f"Chromium did not answer on its DevTools pipe within {timeout:.0f} s") from None
        self.relay = DevToolsRelay(self.cdp)
        await self.relay.start()
        self.devtools = self.relay.url

    async def stop(self) -> None:
        """Close the browser (its process group) and remove its profile."""
        if self.relay is not None:
            await self.relay.stop()
            self.relay = None
        if self.cdp is not None:
            with contextlib.suppress(Exception):
                await self.cdp.call("Browser.close", timeout=5)
            await self.cdp.close()
            self.cdp = None
        await stop_process(self.proc, 5)
        if self.proc is not None and self.proc.returncode is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # helpers (zygote, GPU, renderers) go with it
        if self.launch is not None:
            self.launch.cleanup()
            self.launch = None
