"""A Chromium driven over the DevTools protocol (CDP), and a headless one the bench starts: one browser,
one page (target) per web device. The bench opens pages, reads their console, sees them crash, and closes
them."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import itertools
import json
import os
import shutil
import signal
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import websockets

from bench.errors import ConfigError, DeviceUnreachable
from bench.lifecycle import StartStop
from bench.procs import stop_process

# closed network: nothing in the background may try to reach out; a fresh profile per browser
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
    "--remote-debugging-port=0",
]


def chromium_path() -> str:
    """Debian's chromium (or chromium-browser / google-chrome on PATH), or ConfigError."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise ConfigError("no Chromium on PATH", hint="install Debian's `chromium` package (.ci/setup does)")


def _die_with_parent() -> None:
    """In the child: SIGKILL when the bench process dies, so a killed bench leaves no browser behind (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class CdpError(Exception):
    """A DevTools command failed."""


class Cdp:
    """One DevTools WebSocket (the browser's): commands with ids, events to listeners, sessions per target."""

    def __init__(self, ws: websockets.ClientConnection) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            async for raw in self.ws:
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

    async def call(self, method: str, session: str | None = None, timeout: float = 30, **params: Any) -> dict:
        """Send one command (to a target's `session` when given) and return its result."""
        msg_id = next(self.ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[msg_id] = fut
        cmd: dict[str, Any] = {"id": msg_id, "method": method, "params": params}
        if session:
            cmd["sessionId"] = session
        await self.ws.send(json.dumps(cmd))
        reply = await asyncio.wait_for(fut, timeout)
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
        await self.ws.close()
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
    """A headless Chromium with a fresh profile, driven over its DevTools WebSocket."""

    def __init__(self, log_path: Path | None = None) -> None:
        self.log_path = log_path
        self.proc: asyncio.subprocess.Process | None = None
        self.profile: str | None = None
        self.cdp: Cdp | None = None
        self.devtools = ""  # the browser's DevTools WebSocket URL
        self.version = ""

    async def start(self, timeout: float = 30) -> None:
        """Start Chromium and connect to its DevTools endpoint, or DeviceUnreachable."""
        self.profile = tempfile.mkdtemp(prefix="hilbench-chromium-")
        log = open(self.log_path, "ab") if self.log_path else asyncio.subprocess.DEVNULL  # noqa: SIM115
        try:
            self.proc = await asyncio.create_subprocess_exec(
                chromium_path(),
                *FLAGS,
                f"--user-data-dir={self.profile}",
                "about:blank",
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        finally:
            if self.log_path:
                log.close()
        port_file = Path(self.profile) / "DevToolsActivePort"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not port_file.is_file() or len(port_file.read_text().splitlines()) < 2:
            if self.proc.returncode is not None or loop.time() > deadline:
                await self.stop()
                raise DeviceUnreachable(f"Chromium did not open its DevTools port within {timeout:.0f} s")
            await asyncio.sleep(0.05)
        port, path = port_file.read_text().splitlines()[:2]
        self.devtools = f"ws://127.0.0.1:{port}{path}"
        self.cdp = await connect(self.devtools)
        self.version = (await self.cdp.call("Browser.getVersion")).get("product", "")

    async def stop(self) -> None:
        """Close the browser (its process group) and remove its profile."""
        if self.cdp is not None:
            with contextlib.suppress(Exception):
                await self.cdp.call("Browser.close", timeout=5)
            await self.cdp.close()
            self.cdp = None
        await stop_process(self.proc, 5)
        if self.proc is not None and self.proc.returncode is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # helpers (zygote, GPU, renderers) go with it
        if self.profile:
            shutil.rmtree(self.profile, ignore_errors=True)
            self.profile = None
