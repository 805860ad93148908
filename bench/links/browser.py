"""A browser reached over its DevTools endpoint: the link of web devices. The bench opens the device's page
in it and watches it; the page talks to the bench over a WebSocket."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar
from urllib.parse import urlsplit

from bench.links.on_host import OnTheBenchHost
from bench.links.probe_result import ProbeResult

if TYPE_CHECKING:
    from bench.links.spec import FleetEntry


@dataclass(frozen=True)
class BrowserLink(OnTheBenchHost):
    """A Chromium's DevTools WebSocket URL (`ws://HOST:PORT/devtools/browser/ID`)."""

    what: ClassVar[str] = "a browser"

    family: ClassVar[str] = "browser"
    fields: ClassVar[frozenset[str]] = frozenset({"devtools"})
    lab_classes: ClassVar[tuple[str, ...]] = ()

    devtools: str

    @classmethod
    def parse(cls, entry: FleetEntry) -> BrowserLink | None:
        """The link of a fleet device (None when optional and not given)."""
        hint = ('give devtools = "ws://HOST:9222/devtools/browser/ID" (chromium --remote-debugging-port=9222), '
                "or set virtual = true")  # fmt: skip
        url = entry.needed(entry.link.devtools, "devtools", hint)
        return None if url is None else cls(devtools=url)

    def describe(self) -> str:
        """The link as a person would write it, its path left out (a bench-started browser's holds its token)."""
        scheme, _, rest = self.devtools.partition("://")
        return f"devtools {scheme}://{rest.split('/', 1)[0]}/…"

    @property
    def bytes_per_s(self) -> float | None:
        """None: a WebSocket is not the bottleneck."""
        return None

    async def probe(self, kind: str, timeout_s: float) -> ProbeResult:
        """Does the DevTools endpoint's port accept a connection (the driver asks the browser itself:
        WebDriver.probe)."""
        url = urlsplit(self.devtools)
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(url.hostname, url.port or 80), timeout_s)
        except (OSError, TimeoutError) as exc:
            return ProbeResult(False, f"DevTools endpoint {self.devtools} does not answer: {exc}")
        writer.close()
        return ProbeResult(True, f"DevTools port open at {self.devtools}")
