"""The virtual stand-in of web devices: one headless Chromium on the bench host (Debian's chromium, a fresh
profile, the network features off) shared by the virtual web devices of an event loop, each device a page
in it, reached over its DevTools WebSocket like a browser started by hand."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from bench.browser.browser import Browser
from bench.config.fleet import Device
from bench.links.browser import BrowserLink


@dataclass
class _Shared:
    """The browser of one event loop and how many virtual devices use it."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    browser: Browser | None = None
    users: int = 0


_SHARED: dict[int, _Shared] = {}  # by id of the running event loop


class VirtualBrowser:
    """A web device's share of the bench's headless Chromium: started by the first, stopped by the last."""

    def __init__(self, device: Device, state: Path) -> None:
        self.device = device
        self.state = state
        self.browser: Browser | None = None

    async def start(self) -> BrowserLink:
        shared = _SHARED.setdefault(id(asyncio.get_running_loop()), _Shared())
        async with shared.lock:
            if shared.browser is None:
                self.state.mkdir(parents=True, exist_ok=True)
                browser = Browser(log_path=self.state / "chromium.log")
                await browser.start()
                shared.browser = browser
            shared.users += 1
            self.browser = shared.browser
        return BrowserLink(devtools=self.browser.devtools)

    async def stop(self) -> None:
        if self.browser is None:
            return
        self.browser = None
        key = id(asyncio.get_running_loop())
        shared = _SHARED[key]
        async with shared.lock:
            shared.users -= 1
            if shared.users == 0 and shared.browser is not None:
                browser, shared.browser = shared.browser, None
                del _SHARED[key]
                await browser.stop()

    def urls(self) -> dict[str, str]:
        return {"devtools": self.browser.devtools if self.browser else ""}
