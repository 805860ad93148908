"""No local process but the bench can drive the bench's Chromium (issue 31, case 3): Chromium has no DevTools
port (it is driven over its pipe), the only port in front of it wants the URL's secret token, it runs as an
unprivileged user where the bench is root, with its sandbox on where the kernel allows."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
from pathlib import Path

import pytest
import websockets

from bench.browser import chromium
from bench.browser.browser import Browser, connect

pytestmark = pytest.mark.e2e

# Another local user's view: every listening TCP port on this host (from /proc/net/tcp*), each asked for
# Chromium's discovery JSON and for a DevTools WebSocket; stdlib only, run by the system Python.
SCAN = r"""
import json, socket, sys
ports = set()
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        rows = open(table).read().splitlines()[1:]
    except OSError:
        continue
    for row in rows:
        local, state = row.split()[1], row.split()[3]
        if state == "0A":  # LISTEN
            ports.add(int(local.rsplit(":", 1)[1], 16))
def ask(port, path, upgrade):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            if upgrade:
                head += ("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n")
            s.sendall((head + "\r\n").encode())
            return s.recv(4096).decode("latin-1")
    except OSError as exc:
        return f"error {exc}"
def probe(port):
    version = ask(port, "/json/version", False)
    return port, {
        "discovery": "webSocketDebuggerUrl" in version,
        "status": {path: ask(port, path, True).split("\r\n", 1)[0]
                   for path in ("/devtools/browser", "/devtools/browser/x", "/json/version")},
    }
from concurrent.futures import ThreadPoolExecutor
with ThreadPoolExecutor(32) as pool:  # ports that never answer cost their timeout each: ask them at once
    found = dict(pool.map(probe, sorted(ports)))
pipe = []
for pid in sys.argv[1:]:
    for fd in (3, 4):
        try:
            open(f"/proc/{pid}/fd/{fd}", "rb" if fd == 4 else "wb").close()
            pipe.append(f"{pid}/{fd} opened")
        except OSError as exc:
            pipe.append(f"{pid}/{fd} {type(exc).__name__}")
print(json.dumps({"ports": found, "pipe": pipe}))
"""


def _other_user() -> list[str]:
    """Run as a local user other than the bench and the browser (uid 54321, no groups) when root."""
    if os.geteuid() != 0:
        return []
    return ["setpriv", "--reuid=54321", "--regid=54321", "--clear-groups", "--"]


def _browser_pids(user: chromium.BrowserUser) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        uid = int(status.split("Uid:", 1)[1].split()[0])
        if b"hilbench-chromium-" in cmdline and b"/chromium" in cmdline.split(b"\0")[0] and uid == user.uid:
            pids.append(int(entry.name))
    return pids


def _listening() -> dict[str, str]:
    """Listening TCP sockets: inode -> port (decimal)."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            cols = row.split()
            if cols[3] == "0A":
                found[cols[9]] = str(int(cols[1].rsplit(":", 1)[1], 16))
    return found


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    with contextlib.suppress(FileNotFoundError):  # a process that ended meanwhile
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(FileNotFoundError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    return inodes


def test_no_other_local_process_can_open_a_devtools_session() -> None:
    async def main() -> tuple[dict, list[int], str, dict]:
        async with Browser() as browser:
            user = chromium.browser_user()
            pids = _browser_pids(user)
            scan = await asyncio.to_thread(
                subprocess.run,
                [*_other_user(), "/usr/bin/python3", "-c", SCAN, *map(str, pids)],
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert scan.returncode == 0, scan.stderr
            # the bench itself, with the URL's token: a session, a page, JavaScript
            cdp = await connect(browser.devtools)
            page = await cdp.open_page("about:blank", lambda line: None)
            assert await page.evaluate("6 * 7") == 42
            renderers = [
                p for p in _browser_pids(user) if b"--type=renderer" in Path(f"/proc/{p}/cmdline").read_bytes()
            ]
            seccomp = {p: Path(f"/proc/{p}/status").read_text().split("Seccomp:", 1)[1].split()[0] for p in renderers}
            await page.close()
            await cdp.close()
            # without the token, or with a wrong one, even the bench is refused
            for path in ("/devtools/browser", "/devtools/browser/" + "A" * 32, "/json/version", "/"):
                url = browser.devtools.split("/devtools/", 1)[0] + path
                with pytest.raises(websockets.InvalidStatus) as refused:
                    await websockets.connect(url)
                assert refused.value.response.status_code == 403
            listening = _listening()
            browser_ports = {listening[i] for pid in _browser_pids(user) for i in _socket_inodes(pid) if i in listening}
            bench_ports = {listening[i] for i in _socket_inodes(os.getpid()) if i in listening}
            own = {"browser": browser_ports, "bench": bench_ports, "seccomp": seccomp}
            return json.loads(scan.stdout), pids, browser.devtools, own

    scan, pids, devtools, own = asyncio.run(main())
    assert pids, "the browser's processes were found (the checks below looked at them)"
    assert own["browser"] == set(), "Chromium itself listens on no TCP port"
    relay_port = devtools.split(":")[2].split("/")[0]
    assert relay_port in scan["ports"], "the scan saw the one port in front of the browser"
    assert relay_port in own["bench"]
    # other jobs on a shared host may run browsers of their own: what matters is that no port of this bench or
    # its browser gives a DevTools session
    for port in own["bench"] & set(scan["ports"]):
        seen = scan["ports"][port]
        assert not seen["discovery"], f"port {port} answered Chromium's /json/version"
        assert not any(" 101 " in status for status in seen["status"].values()), f"port {port}: {seen}"
    assert all(s.startswith("HTTP/1.1 403") for s in scan["ports"][relay_port]["status"].values())
    if os.geteuid() == 0:
        user = chromium.browser_user()
        assert user.uid != 0 and user.switched
        assert all(line.endswith(("PermissionError", "FileNotFoundError")) for line in scan["pipe"]), scan["pipe"]
        if chromium.sandbox_allowed(user):
            assert own["seccomp"] and set(own["seccomp"].values()) == {"2"}, "renderers run in the seccomp sandbox"
