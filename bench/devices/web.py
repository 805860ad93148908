"""Driver for web devices: the JS reference agent (web/) in a page of a Chromium reached over DevTools.

`flash` writes the device's storage (agent settings, trusted key, signed model) into a folder on the bench
host, which the bench's page server serves as the page's origin storage; `open_agent` starts the page server,
opens the page in the browser of the device's link and returns the page's WebSocket link. The same code
serves a Chromium the bench started (virtual) and one started by hand with --remote-debugging-port."""

from __future__ import annotations

import asyncio
import hashlib
import time
from pathlib import Path

from bench.browser.browser import Cdp, Page, connect
from bench.browser.pages import PageServer, WebSocketTransport
from bench.config.fleet import Device
from bench.core.errors import ConfigError, DeviceUnreachable
from bench.core.folders import open_append
from bench.core.lifecycle import release
from bench.core.paths import state_dir
from bench.devices.base import Driver, Progress, StepResult, no_progress
from bench.links.browser import BrowserLink
from bench.links.probe_result import ProbeResult


def storage_dir(device: Device) -> Path:
    """The folder holding the device's origin storage (under the bench's state folder)."""
    return state_dir() / device.name / "storage"


class WebDriver(Driver):
    """A web device: one page in a browser."""

    connect_timeout_s = 60.0  # page load + LiteRT.js's WASM compile on a loaded 2-core machine

    def __init__(self, device: Device, log_dir: Path | None = None) -> None:
        super().__init__(device, log_dir)
        if not isinstance(device.link, BrowserLink):
            raise ConfigError(f"device {device.name}: a web device needs a browser link (devtools = ...)")
        self.link: BrowserLink = device.link
        self.pages: PageServer | None = None
        self.cdp: Cdp | None = None
        self.page: Page | None = None
        self.transport: WebSocketTransport | None = None

    async def probe(self, timeout_s: float) -> ProbeResult:
        """Does the browser answer on its DevTools endpoint."""
        try:
            cdp = await connect(self.link.devtools, timeout_s)
        except DeviceUnreachable as exc:
            return ProbeResult(False, str(exc))
        try:
            version = await asyncio.wait_for(cdp.call("Browser.getVersion"), timeout_s)
        finally:
            await cdp.close()
        return ProbeResult(True, f"{version.get('product', 'browser')} at {self.link.devtools}")

    async def flash(self, progress: Progress = no_progress) -> list[StepResult]:
        """Write the device's storage: agent settings, trusted key and the signed model, verified by hash."""
        from bench.browser.deploy import deploy_storage
        from bench.models import kind_model

        started = time.monotonic()
        model, _fmt = kind_model(self.device.kind, self.device.settings)
        folder = storage_dir(self.device)
        progress(0, 1, "storage")
        manifest = deploy_storage(
            folder,
            model,
            version=self.device.settings.model_version,
            mem_limit_mb=self.device.settings.memory_limit_mb,
        )
        written = hashlib.sha256((folder / "models" / model.name).read_bytes()).hexdigest()
        progress(1, 1, "storage")
        ok = written == manifest["sha256"]
        detail = f"{model.name} v{manifest['version']} in {folder}" + ("" if ok else ": sha256 differs after write")
        return [StepResult("storage", ok=ok, detail=detail, seconds=time.monotonic() - started)]

    def _console(self, text: str) -> None:
        if self.log_dir is not None:
            with open_append(self.log_dir / f"{self.device.name}-page.log") as f:
                f.write(text + "\n")

    async def open_agent(self) -> WebSocketTransport:
        """Open the page in the device's browser and return its WebSocket link (its hello comes first)."""
        if self.transport is not None:
            return self.transport
        folder = storage_dir(self.device)
        if not (folder / "agent.json").is_file():
            raise DeviceUnreachable(f"web device {self.device.name}: no storage yet (run `hilbench flash`)")
        try:
            self.pages = PageServer()
            await self.pages.start()
            url = self.pages.add_device(self.device.name, folder)
            self.cdp = await connect(self.link.devtools)
            self.page = await self.cdp.open_page(url, self._console)
            self.transport = await self.pages.accept(self.device.name, self.connect_timeout_s)
        except BaseException:
            await self.close_agent()
            raise
        return self.transport

    async def close_agent(self) -> None:
        """Close the link and the page, and stop the page server."""
        await release(self, "transport", "page", "cdp", "pages")
