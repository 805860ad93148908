"""The virtual stand-in of a web device: a headless Chromium on the bench host (Debian's chromium, a fresh
profile, the network features off), reached over its DevTools WebSocket like a browser started by hand."""

from __future__ import annotations

from pathlib import Path

from bench.fleet import Device
from bench.links.browser import BrowserLink
from bench.web.browser import Browser


class VirtualBrowser:
    """One headless Chromium for one web device."""

    def __init__(self, device: Device, state: Path) -> None:
        self.device = device
        self.state = state
        self.browser = Browser(log_path=None)

    async def start(self) -> BrowserLink:
        self.state.mkdir(parents=True, exist_ok=True)
        self.browser.log_path = self.state / "chromium.log"
        await self.browser.start()
        return BrowserLink(devtools=self.browser.devtools)

    async def stop(self) -> None:
        await self.browser.stop()

    def urls(self) -> dict[str, str]:
        return {"devtools": self.browser.devtools}
