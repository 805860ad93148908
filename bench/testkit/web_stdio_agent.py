"""A web device as one local process speaking the protocol on stdin/stdout: a page server, a headless
Chromium, the device's page, and its WebSocket link bridged to stdio. The conformance suite starts the web
agent this way, like the other agents.

    python -m bench.testkit.web_stdio_agent --storage DIR [--log FILE]

With $HILBENCH_DEVTOOLS set to a bench-started browser's DevTools URL (bench.browser.browser.Browser.devtools), the
page opens as a new tab of that browser, closed when the agent ends, instead of in a Chromium of its own (the
conformance suite shares one browser per test file; Chromium's start was most of a session's time). The URL
carries the relay's secret token, so it comes in the environment, never on the command line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from bench.browser.browser import Browser, Cdp, connect
from bench.browser.pages import PageServer
from bench.core.errors import BenchError
from bench.core.lifecycle import cancel

NAME = "stdio"
CHUNK = 1 << 16
DEVTOOLS_ENV = "HILBENCH_DEVTOOLS"


@contextlib.asynccontextmanager
async def browser_cdp(log: Path | None, devtools: str) -> AsyncIterator[Cdp]:
    """DevTools of the browser at `devtools` when given, else of a headless Chromium started (and stopped) here."""
    if devtools:
        cdp = await connect(devtools)
        try:
            yield cdp
        finally:
            await cdp.close()
        return
    async with Browser(log) as browser:
        assert browser.cdp is not None
        yield browser.cdp


async def bridge(storage: Path, log: Path | None, connect_timeout: float, devtools: str = "") -> int:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=CHUNK)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out = sys.stdout.buffer

    def console(text: str) -> None:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()

    async with PageServer() as pages, browser_cdp(log, devtools) as cdp:
        url = pages.add_device(NAME, storage)
        page = await cdp.open_page(url, console)
        try:
            try:
                link = await pages.accept(NAME, connect_timeout)
            except BenchError as exc:
                console(f"stdio_agent: {exc}")
                return 3

            async def to_page() -> None:  # bytes as they come: the page bounds its lines (a 1 MB line is its business)
                while chunk := await reader.read(CHUNK):
                    await link.send(chunk)

            async def from_page() -> None:
                while line := await link.readline():
                    out.write(line)
                    out.flush()

            up = asyncio.create_task(to_page())
            down = asyncio.create_task(from_page())
            await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
            for task in (up, down):
                await cancel(task, BenchError)
            await link.close()
        finally:
            await page.close()  # in a shared browser the tab would outlive the agent
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="stdio_agent", description=__doc__.splitlines()[0])
    p.add_argument("--storage", type=Path, required=True, help="the device's storage folder (bench.browser.deploy)")
    p.add_argument("--log", type=Path, help="Chromium's own output goes here")
    p.add_argument("--connect-timeout", type=float, default=60.0, help="seconds for the page to connect")
    args = p.parse_args(argv)
    return asyncio.run(bridge(args.storage, args.log, args.connect_timeout, os.environ.get(DEVTOOLS_ENV, "")))


if __name__ == "__main__":
    sys.exit(main())
