"""Open an HTML file in headless Chromium and report what went wrong: console errors, uncaught exceptions,
error log entries, and any request that left the file (a self-contained report makes none). Saves a
full-page screenshot.

Talks the DevTools protocol over `--remote-debugging-pipe` (fds 3 and 4, NUL-separated JSON), so it needs
no port and no extra package. Chromium is started by bench.browser.chromium (an unprivileged user where the bench
is root, its sandbox on where the kernel allows); the page is opened from a copy in a folder of the bench's own
that user can read.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.browser import chromium
from bench.core.errors import BenchError
from bench.core.folders import open_fresh, write_file


@dataclass
class PageCheck:
    """What happened while a page loaded."""

    url: str
    errors: list[str] = field(default_factory=list)  # console errors, exceptions, error log entries
    requests: list[str] = field(default_factory=list)  # URLs the page requested besides itself
    screenshot: Path | None = None
    title: str = ""


def check_page(page: Path, screenshot: Path | None = None, *, width: int = 1400, timeout_s: float = 60.0) -> PageCheck:
    """Load `page` in a fresh headless Chromium profile; collect errors and foreign requests; screenshot it."""
    launch = chromium.prepare()
    try:
        url = launch.readable(page.resolve()).as_uri()
        session = _Pipe(launch, launch.bench_dir() / "stderr.log", timeout_s)
    except BaseException:
        launch.cleanup()
        raise
    try:
        return _load(session, url, screenshot, width)
    finally:
        session.close()
        launch.cleanup()


def _load(cdp: _Pipe, url: str, screenshot: Path | None, width: int) -> PageCheck:
    result = PageCheck(url)
    target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    sid = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for method in ("Runtime.enable", "Log.enable", "Page.enable", "Network.enable"):
        cdp.call(method, session=sid)
    cdp.call("Emulation.setDeviceMetricsOverride",
             {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session=sid)  # fmt: skip
    cdp.call("Page.navigate", {"url": url}, session=sid)
    cdp.wait_event("Page.loadEventFired", sid)
    cdp.drain(0.3)  # late console messages
    for event in cdp.events:
        _classify(event, url, result)
    result.title = cdp.call("Runtime.evaluate", {"expression": "document.title"}, session=sid)["result"].get(
        "value", ""
    )
    if screenshot is not None:
        height = cdp.call("Page.getLayoutMetrics", session=sid)["cssContentSize"]["height"]
        cdp.call("Emulation.setDeviceMetricsOverride",
                 {"width": width, "height": min(int(height) + 1, 16000), "deviceScaleFactor": 1, "mobile": False},
                 session=sid)  # fmt: skip
        data = cdp.call("Page.captureScreenshot", {"format": "png"}, session=sid)["data"]
        write_file(screenshot, base64.b64decode(data), what="report folder")
        result.screenshot = screenshot
    return result


def _classify(event: dict[str, Any], url: str, result: PageCheck) -> None:
    method, params = event.get("method"), event.get("params", {})
    if method == "Runtime.exceptionThrown":
        details = params.get("exceptionDetails", {})
        result.errors.append(f"exception: {details.get('exception', {}).get('description') or details.get('text')}")
    elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
        text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
        result.errors.append(f"console.{params['type']}: {text}")
    elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
        entry = params["entry"]
        result.errors.append(f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".strip())
    elif method == "Network.requestWillBeSent":
        requested = params.get("request", {}).get("url", "")
        if requested != url and not requested.startswith("data:"):
            result.requests.append(requested)


class _Pipe:
    """A Chromium process and its DevTools pipe."""

    def __init__(self, launch: chromium.Launch, log: Path, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.log = log
        with open_fresh(log, binary=True) as stderr:
            self.proc = subprocess.Popen(
                launch.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                **launch.spawn_kwargs(),  # type: ignore[arg-type]
            )  # fmt: skip
        launch.started()
        self._to_chrome, self._from_chrome = launch.take_pipe()
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None) -> dict:
        """Send a command and return its result (BenchError on a protocol error or timeout)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout_s
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BenchError(f"chromium: {method} failed: {reply['error'].get('message')}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str, session: str) -> None:
        """Wait until `method` arrives for `session`."""
        deadline = time.monotonic() + self.timeout_s
        while not any(e.get("method") == method and e.get("sessionId") == session for e in self.events):
            self.events.append(self._read(deadline))

    def drain(self, seconds: float) -> None:
        """Collect events for `seconds`."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                self.events.append(self._read(deadline, quiet=True))
            except TimeoutError:
                return

    def _read(self, deadline: float, *, quiet: bool = False) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._from_chrome], [], [], max(0.0, left))
            if not ready:
                if quiet:
                    raise TimeoutError
                raise BenchError(f"chromium did not answer within {self.timeout_s:.0f} s")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                stderr = self.log.read_text(errors="replace")[-2000:]
                raise BenchError(f"chromium exited (status {self.proc.wait()}): {stderr}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def close(self) -> None:
        """Close the browser and the pipes."""
        with contextlib.suppress(OSError):
            os.write(self._to_chrome, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)
