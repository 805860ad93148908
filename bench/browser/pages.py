"""The page server: serves the web agent's page, LiteRT.js and each web device's storage over HTTP, and takes
each page's WebSocket link to the bench.

HTTP (a stdlib server in a thread): `/web/...` the page and agent modules, `/litert/...` LiteRT.js and its WASM
builds, `/dev/NAME/...` the device's storage folder (GET; PUT only for what the agent records, `writable_file`).
A PUT needs the device's token (`X-Device-Token`), which the bench gives the page in its URL's fragment (never
sent in a request line, so never in a log); its raw path must be plain segments under `models/` (no `..`, `.`,
`%`-escapes, backslashes or absolute parts) that resolve inside the device's models folder, and its body what
that file holds (a .tflite model or the current-model record). The trust key is never writable.
Responses carry COOP/COEP headers: a cross-origin-isolated page gets 5 us performance.now() resolution
(100 us otherwise). WebSocket (`websockets`): `/agent/NAME?token=...` is device NAME's protocol link (the same
token: another local process cannot pose as the device's page).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import hmac
import json
import re
import secrets
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import websockets
from websockets.asyncio.server import ServerConnection

from bench.browser.assets import content_type, static_file
from bench.core.errors import DeviceUnreachable
from bench.core.folders import write_file
from bench.core.lifecycle import StartStop

ISOLATION = {"Cross-Origin-Opener-Policy": "same-origin", "Cross-Origin-Embedder-Policy": "require-corp"}
MAX_PUT = 64 * 1024 * 1024
TOKEN_HEADER = "X-Device-Token"
_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")  # one plain path segment: no `.`, `..`, `%`, `\`
TFLITE_MAGIC = b"TFL3"  # a .tflite flatbuffer's file identifier, at bytes 4-8


def writable_file(raw_path: str) -> tuple[str, tuple[str, ...]] | None:
    """(device name, segments under models/) of a PUT's raw (undecoded) request path when it is one the agent
    writes: `/dev/NAME/models/current.json` or `/dev/NAME/models/updates/FILE.tflite`; None for anything else."""
    parts = raw_path.split("/")
    if len(parts) < 5 or parts[:2] != ["", "dev"] or parts[3] != "models":
        return None
    name, rest = parts[2], tuple(parts[4:])
    if not all(_SEGMENT.match(p) for p in (name, *rest)):
        return None
    if rest == ("current.json",) or (len(rest) == 2 and rest[0] == "updates" and rest[1].endswith(".tflite")):
        return name, rest
    return None


def body_fits(rest: tuple[str, ...], data: bytes) -> bool:
    """Whether `data` is what file `rest` holds: the current-model record (a JSON object with a path and a
    manifest) or a .tflite model (its magic)."""
    if rest == ("current.json",):
        try:
            doc = json.loads(data)
        except ValueError:
            return False
        return isinstance(doc, dict) and isinstance(doc.get("path"), str) and isinstance(doc.get("manifest"), dict)
    return len(data) >= 8 and data[4:8] == TFLITE_MAGIC


class _Handler(BaseHTTPRequestHandler):
    server: _HttpServer

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the page server is not a web site."""

    def _send(self, status: int, body: bytes = b"", ctype: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for k, v in ISOLATION.items():
            self.send_header(k, v)
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _device_file(self, path: str) -> Path | None:
        parts = path.split("/", 3)  # "", "dev", NAME, rest
        if len(parts) < 4 or parts[1] != "dev" or parts[2] not in self.server.folders:
            return None
        base = self.server.folders[parts[2]].resolve()
        target = (base / parts[3]).resolve()
        return target if base in target.parents else None

    def do_GET(self) -> None:
        path = unquote(urlsplit(self.path).path)
        if path.startswith("/dev/"):
            target = self._device_file(path)
            if target is None or not target.is_file():
                self._send(HTTPStatus.NOT_FOUND, b"no such file\n")
                return
            self._send(HTTPStatus.OK, target.read_bytes(), content_type(target))
            return
        found = static_file(path)
        if found is None:
            self._send(HTTPStatus.NOT_FOUND, b"no such file\n")
            return
        self._send(HTTPStatus.OK, *found)

    do_HEAD = do_GET

    def do_PUT(self) -> None:
        self.close_connection = True  # a refused body is not read: the connection cannot carry another request
        split = urlsplit(self.path)
        found = writable_file(split.path) if not split.query else None
        token = self.server.tokens.get(found[0], "") if found else ""
        given = self.headers.get(TOKEN_HEADER, "")
        if found is None or found[0] not in self.server.folders:
            self._send(HTTPStatus.FORBIDDEN, b"not a file the agent writes\n")
            return
        if not token or not hmac.compare_digest(given.encode(), token.encode()):
            self._send(HTTPStatus.FORBIDDEN, b"wrong or missing device token\n")
            return
        models = (self.server.folders[found[0]] / "models").resolve()
        target = models.joinpath(*found[1]).resolve()
        if models not in target.parents or self.server.folders[found[0]].resolve() not in models.parents:
            self._send(HTTPStatus.FORBIDDEN, b"not a file the agent writes\n")
            return
        length = self.headers.get("Content-Length", "")
        if not length.isdigit() or not 0 < int(length) <= MAX_PUT:
            self._send(HTTPStatus.LENGTH_REQUIRED, f"a Content-Length of 1 to {MAX_PUT} bytes is needed\n".encode())
            return
        data = self.rfile.read(int(length))
        if len(data) != int(length) or not body_fits(found[1], data):
            self._send(HTTPStatus.BAD_REQUEST, b"the body is not what this file holds\n")
            return
        write_file(target, data, what="page folder")
        self._send(HTTPStatus.NO_CONTENT)


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    folders: dict[str, Path]
    tokens: dict[str, str]


class PageServer(StartStop):
    """HTTP + WebSocket server on loopback for the pages of the web devices of one bench process."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.http: _HttpServer | None = None
        self.thread: threading.Thread | None = None
        self.ws = None
        self.folders: dict[str, Path] = {}
        self.tokens: dict[str, str] = {}  # device -> the token its page writes with
        self.links: dict[str, asyncio.Queue[ServerConnection]] = {}

    async def start(self) -> None:
        """Bind both servers on free ports."""
        self.http = _HttpServer((self.host, 0), _Handler)
        self.http.folders = self.folders
        self.http.tokens = self.tokens
        # serve_forever checks for shutdown every poll_interval: its default 0.5 s was the wait of every stop
        self.thread = threading.Thread(
            target=self.http.serve_forever, kwargs={"poll_interval": 0.05}, name="web-pages", daemon=True
        )
        self.thread.start()
        self.ws = await websockets.serve(self._on_link, self.host, 0, max_size=1 << 20, compression=None)

    async def stop(self) -> None:
        """Close both servers."""
        if self.ws is not None:
            self.ws.close()
            await self.ws.wait_closed()
            self.ws = None
        if self.http is not None:
            await asyncio.to_thread(self.http.shutdown)
            self.http.server_close()
            self.http = None

    @property
    def http_base(self) -> str:
        assert self.http is not None
        return f"http://{self.host}:{self.http.server_address[1]}"

    @property
    def ws_base(self) -> str:
        assert self.ws is not None
        return f"ws://{self.host}:{self.ws.sockets[0].getsockname()[1]}"

    def add_device(self, name: str, folder: Path) -> str:
        """Serve `folder` as device `name`'s storage; returns the URL of its page, which carries a fresh token
        for the page's writes in its fragment (keep the URL to the browser: it is the device's write key)."""
        self.folders[name] = Path(folder)
        self.tokens[name] = secrets.token_urlsafe(32)
        self.links.setdefault(name, asyncio.Queue())
        query = f"link={self.ws_base}/agent/{name}&store=/dev/{name}/"
        return f"{self.http_base}/web/index.html?{query}#token={self.tokens[name]}"

    async def _on_link(self, conn: ServerConnection) -> None:
        split = urlsplit(conn.request.path if conn.request else "")
        name = split.path.removeprefix("/agent/")
        queue = self.links.get(name) if split.path.startswith("/agent/") else None
        given = parse_qs(split.query).get("token", [""])[0]
        if queue is None or not hmac.compare_digest(given.encode(), self.tokens.get(name, "").encode()):
            await conn.close(1008, "no such device")  # an unknown device or no token: not the device's page
            return
        queue.put_nowait(conn)
        await conn.wait_closed()

    async def accept(self, name: str, timeout: float) -> WebSocketTransport:
        """The next link from device `name`'s page, or DeviceUnreachable after `timeout` s."""
        try:
            conn = await asyncio.wait_for(self.links[name].get(), timeout)
        except TimeoutError:
            raise DeviceUnreachable(f"web device {name}: its page did not connect within {timeout:.0f} s") from None
        return WebSocketTransport(conn, f"ws-page:{name}")


class WebSocketTransport:
    """A page's link (bench.agent.transport's interface): bytes to the page go as they come, newlines
    included (the page reads a stream, as a serial agent does, and bounds its lines itself); each text
    message from the page is one protocol line."""

    def __init__(self, conn: ServerConnection, name: str) -> None:
        self.conn = conn
        self.name = name
        self.utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")  # a piece may end inside a character

    async def send(self, data: bytes) -> None:
        try:
            if text := self.utf8.decode(data):
                await self.conn.send(text)
        except websockets.ConnectionClosed as exc:
            raise DeviceUnreachable(f"agent {self.name}: the page's link closed: {exc}") from None

    async def readline(self) -> bytes:
        try:
            msg = await self.conn.recv()
        except websockets.ConnectionClosed:
            return b""
        text = msg if isinstance(msg, str) else msg.decode(errors="replace")
        return text.rstrip("\n").encode() + b"\n"

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.conn.close()
