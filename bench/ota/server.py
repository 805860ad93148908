"""The CoAP update server: model blobs, patches and manifests served block by block (RFC 7959).

aiocoap's default resource renders a whole response and caches it per remote, so it cannot serve block N
of an interrupted transfer. Here every Block2 request is answered straight from the file (random access,
O(1) memory per block) with Size2 and an ETag derived from the content hash, so a client can resume from
any block and notice when the content changed under it.

Paths (under `coap://HOST:PORT/`):
  models/NAME/FORMAT/VERSION                       the model file
  models/NAME/FORMAT/VERSION/manifest              its signed manifest (JSON)
  models/NAME/FORMAT/VERSION/delta/BASE            the bsdiff4 patch from version BASE
  models/NAME/FORMAT/VERSION/delta/BASE/manifest   its signed delta manifest (JSON)
  models/NAME/FORMAT/VERSION/delta-zlib/BASE[/manifest]   the same patch as bsdiff4-zlib (microcontrollers)

Bad requests (RFC 7252 5.4.1, RFC 7959 2.2): an unknown critical option gets 4.02, a reserved block size
(SZX 7) and a Uri-Path that is not UTF-8 get 4.00. aiocoap decodes string options strictly and drops the
datagram on bad UTF-8 with an exception in its receive callback (no answer at all), so string options are
decoded with `surrogateescape` here (`_lenient_strings`) and the server answers such a path itself.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import socket
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import aiocoap
import aiocoap.resource
from aiocoap import error
from aiocoap.numbers.codes import Code
from aiocoap.numbers.contentformat import ContentFormat
from aiocoap.numbers.optionnumbers import OptionNumber
from aiocoap.numbers.types import ACK
from aiocoap.optiontypes import BlockOption

from bench.core.errors import ConfigError
from bench.core.lifecycle import StartStop
from bench.ota.resources import DELTA_PATHS, segments
from bench.ota.store import ModelStore

# critical options this server understands (If-Match, Uri-Host, If-None-Match, Uri-Port, Uri-Path, Uri-Query,
# Accept, Block2, Block1); any other critical (odd-numbered) option is answered 4.02 Bad Option
KNOWN_CRITICAL = frozenset({1, 3, 5, 7, 11, 15, 17, 23, 27})
RESERVED_SZX = 7
MAX_SZX = 6  # 1024-byte blocks: the largest plain CoAP-over-UDP block size
REVALIDATE_S = 0.5  # how long a looked-up blob is served before the store is checked again
MAX_ENCODED_BLOCKS = 65536  # encoded block responses kept (64 MB of 1 KB blocks)
OCTET_STREAM = ContentFormat.OCTETSTREAM
JSON = ContentFormat.JSON


@dataclass
class ServedCounts:
    """What the server sent for one path: requests per block number and payload bytes."""

    blocks: Counter[int] = field(default_factory=Counter)
    bytes: int = 0

    @property
    def total_blocks(self) -> int:
        """Block responses sent, repeats included."""
        return sum(self.blocks.values())


@dataclass(frozen=True)
class Blob:
    """Something the server can serve: its bytes (read once from the store's file, `path`, which the cache
    watches for changes), with the hash its manifest gives (the ETag)."""

    sha256: str
    size: int
    content_format: ContentFormat
    path: Path | None = None
    data: bytes = b""

    def read(self, offset: int, length: int) -> bytes:
        """`length` bytes at `offset`."""
        return self.data[offset : offset + length]


def block_response(blob: Blob, block2: BlockOption.BlockwiseTuple | None, max_szx: int = MAX_SZX) -> aiocoap.Message:
    """The 2.05 response carrying the requested block of `blob` with Block2, Size2 and ETag."""
    if block2 is None:
        num, szx = 0, max_szx
    elif block2.size_exponent > max_szx:  # RFC 7959 2.4: answer with a smaller block covering the same offset
        szx = max_szx
        num = block2.start // (1 << (szx + 4))
    else:
        num, szx = block2.block_number, block2.size_exponent
    size = 1 << (szx + 4)
    offset = num * size
    if offset >= blob.size and not (offset == 0 and blob.size == 0):
        raise error.BadOption(f"block {num} starts beyond the {blob.size}-byte resource")
    payload = blob.read(offset, size)
    more = offset + len(payload) < blob.size
    msg = aiocoap.Message(code=Code.CONTENT, payload=payload, content_format=blob.content_format)
    msg.opt.etag = bytes.fromhex(blob.sha256[:16])
    msg.opt.size2 = blob.size
    if block2 is not None or more:
        msg.opt.block2 = BlockOption.BlockwiseTuple(num, more, szx)
    return msg


class ModelsResource(aiocoap.resource.Resource, aiocoap.resource.PathCapable):
    """The server's root resource: everything under `models/`, looked up in the store on each request (new
    versions appear live). No `Site` in front: its per-request message copy was a third of the server's time."""

    def __init__(self, store: ModelStore, max_szx: int = MAX_SZX) -> None:
        super().__init__()
        self.store = store
        self.max_szx = max_szx
        self.served: dict[str, ServedCounts] = {}
        self._cache: dict[tuple[str, ...], tuple[int, Blob, float]] = {}  # parts -> (dir mtime, blob, checked)
        # request options and payload bytes -> (path parts, blob, block number, payload length, path, response)
        self._encoded: dict[bytes, tuple[tuple[str, ...], Blob, int, int, str, bytes]] = {}

    async def needs_blockwise_assembly(self, request: aiocoap.Message) -> bool:
        return False

    async def render_get(self, request: aiocoap.Message) -> aiocoap.Message:
        return self.respond(request)

    def respond(self, request: aiocoap.Message) -> aiocoap.Message:
        """The response to a GET (a block of a blob), counted; aiocoap errors (4.04, 4.02) raised."""
        check_request(request)
        if request.opt.uri_path[:1] != ("models",):
            raise error.NotFound("the update server serves models/...")
        parts = request.opt.uri_path[1:]
        path = "/".join(parts)
        blob = self._cached_lookup(parts)
        response = block_response(blob, request.opt.block2, self.max_szx)
        counts = self.served.setdefault(path, ServedCounts())
        counts.blocks[response.opt.block2.block_number if response.opt.block2 else 0] += 1
        counts.bytes += len(response.payload)
        return response

    def encoded_block(self, options: bytes) -> bytes | None:
        """The encoded response (code byte, options, payload: no header, message ID or token) to a confirmable
        GET whose options and payload part is `options`, counted, when a request with those very bytes was
        answered before and its blob is unchanged; None otherwise. Requests for one block differ only in
        message ID and token, so a fleet fetching the same blocks costs one decode and encode per block."""
        entry = self._encoded.get(options)
        if entry is None or self._cached_lookup(entry[0]) is not entry[1]:
            return None
        counts = self.served.setdefault(entry[4], ServedCounts())
        counts.blocks[entry[2]] += 1
        counts.bytes += entry[3]
        return entry[5]

    def encode_block(self, request: aiocoap.Message, options: bytes) -> bytes:
        """`respond(request)` encoded as for `encoded_block`, kept under `options` while its blob is in memory."""
        response = self.respond(request)
        response.mtype, response.mid, response.token = ACK, 0, b""
        encoded = response.encode()
        tail = encoded[1:2] + encoded[4:]
        parts = request.opt.uri_path[1:]
        blob = self._cached_lookup(parts)
        if blob.data:
            if len(self._encoded) >= MAX_ENCODED_BLOCKS:  # old versions' blocks go; current ones come back
                self._encoded.clear()
            num = response.opt.block2.block_number if response.opt.block2 else 0
            self._encoded[options] = (parts, blob, num, len(response.payload), "/".join(parts), tail)
        return tail

    def _cached_lookup(self, parts: tuple[str, ...]) -> Blob:
        """`_lookup`, remembered while the version directory and the file are unchanged; checked at most every
        REVALIDATE_S (a rollout asks for the same blob thousands of times a second), the file's bytes held in
        memory meanwhile (no open/seek/read per block)."""
        now = time.monotonic()
        cached = self._cache.get(parts)
        if cached is not None and now - cached[2] < REVALIDATE_S:
            return cached[1]
        seg = segments(parts)
        if seg is None:
            raise error.NotFound(f"no {'/'.join(parts)} in the model store")
        try:
            stamp = self.store.version_dir(seg.name, seg.version, seg.fmt).stat().st_mtime_ns
        except (ConfigError, OSError):
            stamp = None
        if cached is not None and stamp is not None and cached[0] == stamp and _unchanged(cached[1]):
            self._cache[parts] = (stamp, cached[1], now)
            return cached[1]
        blob = self._lookup(parts)
        if stamp is not None:
            self._cache[parts] = (stamp, blob, now)
        return blob

    def _lookup(self, parts: tuple[str, ...]) -> Blob:
        """The blob path segments `parts` (after `models/`) name, checked by `segments`, or 4.04."""
        store = self.store
        seg = segments(parts)
        try:
            if seg is None:
                raise ValueError("not a path of the store")
            if seg.algo is None and not seg.manifest:
                path = store.blob_path(seg.name, seg.version, seg.fmt)
                sha = store.manifest(seg.name, seg.version, seg.fmt)["sha256"]
                data = store.read_file(path)  # a regular file inside the store, read once (never a FIFO)
                return Blob(sha, len(data), OCTET_STREAM, path=path, data=data)
            if seg.algo is None:
                return _json_blob(store.manifest(seg.name, seg.version, seg.fmt))
            assert seg.base is not None
            dm = store.delta_manifest(seg.name, seg.version, seg.base, seg.fmt, seg.algo)
            if dm is not None and seg.manifest:
                return _json_blob(dm)
            if dm is not None:
                path = store.delta_path(seg.name, seg.version, seg.base, seg.fmt, seg.algo)
                data = store.read_file(path)
                return Blob(dm["patch_sha256"], len(data), OCTET_STREAM, path=path, data=data)
        except (ValueError, KeyError, TypeError, OSError, ConfigError):
            pass
        raise error.NotFound(f"no {'/'.join(parts)} in the model store")


def check_request(request: aiocoap.Message) -> None:
    """4.02 for an unknown critical option, 4.00 for a reserved SZX or a path that is not UTF-8."""
    for option in request.opt.option_list():
        number = int(option.number)
        if number & 1 and number not in KNOWN_CRITICAL:
            raise error.BadOption(f"unknown critical option {number}")
    if request.opt.block2 is not None and request.opt.block2.size_exponent == RESERVED_SZX:
        raise error.BadRequest("Block2 SZX 7 is reserved (RFC 7959 2.2)")
    if any(not _is_utf8(part) for part in request.opt.uri_path):
        raise error.BadRequest("Uri-Path is not valid UTF-8")


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: an undecodable byte kept by surrogateescape
        return False
    return True


def _lenient_strings() -> None:
    """Decode CoAP string options with surrogateescape (see the module doc), once per process."""
    from aiocoap import optiontypes

    def decode(self, rawdata: bytes) -> None:
        self.value = rawdata.decode("utf-8", "surrogateescape")

    optiontypes.StringOption.decode = decode


def _unchanged(blob: Blob) -> bool:
    """True when a file blob's file still has the size it had when looked up."""
    try:
        return blob.path is None or blob.path.stat().st_size == blob.size
    except OSError:
        return False


def _json_blob(doc: dict) -> Blob:
    data = json.dumps(doc, sort_keys=True).encode()
    return Blob(hashlib.sha256(data).hexdigest(), len(data), JSON, data=data)


class UpdateServer(StartStop):
    """The update server on one UDP port; `async with UpdateServer(store) as srv: srv.base_url`."""

    def __init__(self, store: ModelStore, host: str = "127.0.0.1", port: int = 0, max_szx: int = MAX_SZX) -> None:
        self.store = store
        self.host = host
        self.port = port
        self.models = ModelsResource(store, max_szx)
        self._ctx: aiocoap.Context | None = None

    async def start(self) -> str:
        """Bind and serve; return the base URL. A port another process serves on is refused (aiocoap binds
        with SO_REUSEPORT, so two servers would otherwise split the requests between them)."""
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"update server: port {self.port} is out of range (0 to 65535)")
        if self.port:
            _check_free(self.host, self.port)
        _lenient_strings()
        try:
            self._ctx = await aiocoap.Context.create_server_context(
                self.models, bind=(self.host, self.port), transports=[server_transport(self.host)]
            )
        except OSError as exc:
            raise ConfigError(f"update server: cannot bind {self.host}:{self.port}: {exc.strerror}") from None
        self.port = _bound_port(self._ctx)
        _install_fast_path(self._ctx, self.models)
        return self.base_url

    async def stop(self) -> None:
        """Stop serving and release the port."""
        if self._ctx is not None:
            await self._ctx.shutdown()
            self._ctx = None

    @property
    def base_url(self) -> str:
        """`coap://HOST:PORT`."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"coap://{host}:{self.port}"

    def model_url(self, name: str, version: int, base_url: str | None = None, fmt: str | None = None) -> str:
        """URL of a model file (through `base_url`, e.g. a proxy's, when given); `fmt` may be left out when
        `name` has one format."""
        return f"{base_url or self.base_url}/{model_path(name, self.store.format_of(name, fmt), version)}"

    def delta_url(
        self,
        name: str,
        version: int,
        base_version: int,
        base_url: str | None = None,
        fmt: str | None = None,
        algo: str = "bsdiff4",
    ) -> str:
        """URL of the patch from `base_version` to `version` in container `algo`."""
        return f"{self.model_url(name, version, base_url, fmt)}/{delta_segment(algo)}/{base_version}"

    def served(self, path: str) -> ServedCounts:
        """What was served for `models/...` path `path` (e.g. `npc-policy/tflite-int8/2`)."""
        return self.models.served.get(path, ServedCounts())


def _install_fast_path(ctx: aiocoap.Context, models: ModelsResource) -> None:
    """Answer a confirmable GET for a block of a blob straight from the datagram handler: decoded and encoded
    by aiocoap's own `Message`, but without its request pipeline (token and message managers, pipes, a task
    per request), which was two thirds of the server's CPU per block (docs/ota.md). Anything else (other
    codes or types, options the fast path does not know, errors) goes through aiocoap as before. A repeated
    request is answered again: a GET is idempotent, so RFC 7252 4.5 allows it instead of a cached reply.
    Only on `simplesocketserver` (one address): `udp6` has to answer from the address it was asked on."""
    for ri in ctx.request_interfaces:
        pool = getattr(getattr(ri.token_interface, "message_interface", None), "_pool", None)
        if pool is None:
            continue
        slow = pool.datagram_received

        def datagram_received(data: bytes, sockaddr: tuple, pool=pool, slow=slow) -> None:
            if len(data) >= 4 and data[0] & 0x0F > 8:  # token length 9-15: a message format error (RFC 7252 3)
                if data[0] & 0x30 == 0:  # confirmable: rejected with a Reset; anything else is silently ignored
                    pool._transport.sendto(bytes((0x70, 0)) + data[2:4], sockaddr)
                return
            response = _fast_response(data, models)
            if response is None:
                slow(data, sockaddr)
            else:
                pool._transport.sendto(response, sockaddr)

        pool.datagram_received = datagram_received


_FAST_OPTIONS = {OptionNumber.URI_PATH, OptionNumber.BLOCK2, OptionNumber.URI_HOST, OptionNumber.URI_PORT}


def _fast_response(data: bytes, models: ModelsResource) -> bytes | None:
    """The encoded piggybacked response to a plain block GET, or None for aiocoap to handle the datagram."""
    if len(data) < 4 or data[0] & 0xF0 != 0x40 or data[1] != 0x01 or data[0] & 0x0F > 8:
        return None  # not version 1 + confirmable + GET with a valid token length (RFC 7252 3)
    token = data[4 : 4 + (data[0] & 0x0F)]
    options = data[4 + len(token) :]
    tail = models.encoded_block(options)
    if tail is None:
        try:
            request = aiocoap.Message.decode(data)
        except (error.UnparsableMessage, ValueError):
            return None
        if request.payload or any(option.number not in _FAST_OPTIONS for option in request.opt.option_list()):
            return None
        try:
            tail = models.encode_block(request, options)
        except error.RenderableError:
            return None  # aiocoap renders the error response
    # CoAP header: version 1, type ACK, token length; the code; the request's message ID; the token
    return bytes((0x60 | len(token), tail[0])) + data[2:4] + token + tail[1:]


def server_transport(host: str) -> str:
    """aiocoap's transport for a server bound to `host`: `simplesocketserver` (plain sendto/recvfrom) for one
    address, `udp6` (packet-info ancillary data, v4-mapped address parsing on every datagram: a quarter of the
    server's CPU per block) only when it must answer from whichever of the host's addresses was asked."""
    try:
        any_address = ipaddress.ip_address(host).is_unspecified
    except ValueError:  # a host name: one address
        any_address = False
    return "udp6" if any_address else "simplesocketserver"


def delta_segment(algo: str) -> str:
    """The path segment under a model version for deltas in container `algo`."""
    return next(seg for seg, a in DELTA_PATHS.items() if a == algo)


def model_path(name: str, fmt: str, version: int) -> str:
    """The path of a model version on the server (under the base URL)."""
    return f"models/{name}/{fmt}/{version}"


def _bound_port(ctx: aiocoap.Context) -> int:
    for ri in ctx.request_interfaces:
        mi = getattr(ri.token_interface, "message_interface", None)
        transport = getattr(mi, "transport", None) or getattr(getattr(mi, "_pool", None), "_transport", None)
        if transport is not None:
            return transport.get_extra_info("socket").getsockname()[1]
    raise ConfigError("update server: aiocoap bound no UDP transport")


def _check_free(host: str, port: int) -> None:
    """ConfigError when UDP `host:port` is taken (bound without SO_REUSEPORT, so any holder blocks it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ConfigError(
                f"update server: {host}:{port} is not free: {exc.strerror}",
                hint="another `hilbench ota serve` may run there; pick another --port (0: any free one)",
            ) from None
