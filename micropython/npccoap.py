"""A small CoAP Block2 client for MicroPython (RFC 7252 + RFC 7959), on a UDP socket.

Fetches one resource block by block into a file, writing each block to flash as it arrives, and resumes
from the last good block after an interruption (the server's ETag must still match). Retransmission is
its own: confirmable GETs, the first wait uniform in [ack_timeout, ack_timeout * random_factor], doubling,
at most max_retransmit times. A finished file whose SHA-256 differs from the expected one is fetched once
more from the start, then refused. Runs unchanged on CPython (for tools) and MicroPython (unix, ESP32).

Bounds: a fetch writes no byte past its `limit` (the signed size); a block longer than its size, a short block
that says more follow, a block size that grows, an ETag over 8 bytes or more than MAX_RESTARTS changes of the
ETag end it, and what it wrote is deleted (nothing refused is kept for resume).
"""

import binascii
import hashlib
import os
import random
import socket
import struct
import time

try:
    from time import ticks_diff, ticks_ms
except ImportError:  # CPython

    def ticks_ms():
        return int(time.monotonic() * 1000)

    def ticks_diff(a, b):
        return a - b


CON, NON, ACK, RST = 0, 1, 2, 3
GET = 1
CONTENT = 0x45  # 2.05
WAIT_SLICE_MS = 20  # a wait for an answer is cut into slices this long; `on_wait` runs between them
OPT_ETAG, OPT_URI_PATH, OPT_BLOCK2, OPT_SIZE2 = 4, 11, 23, 28
MAX_RESTARTS = 3  # content changes (a new ETag) one fetch starts over for, then gives up
MAX_ETAG = 8  # bytes (RFC 7252 5.10.6)


class FetchError(Exception):
    """A fetch that could not complete: `kind` is "transfer" (resumable) or "hash" (refused)."""

    def __init__(self, kind, detail):
        super().__init__(detail)
        self.kind = kind


class Timing:
    """Retransmission timing of this link (RFC 7252 names); the LAN default waits 50-75 ms."""

    def __init__(self, ack_timeout_ms=50, ack_random_factor=1.5, max_retransmit=6):
        self.ack_timeout_ms = ack_timeout_ms
        self.ack_random_factor = ack_random_factor
        self.max_retransmit = max_retransmit

    @classmethod
    def from_json(cls, data):
        """From the `coap` object of an `update` message (missing keys default)."""
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ValueError("coap must be an object of link timings")
        return cls(
            _bounded(data.get("ack_timeout_ms", 50), "ack_timeout_ms", 1, 60000),
            _bounded(data.get("ack_random_factor", 1.5), "ack_random_factor", 1, 4),
            int(_bounded(data.get("max_retransmit", 6), "max_retransmit", 0, 20, whole=True)),
        )


def _bounded(value, name, low, high, whole=False):
    """`value` when it is a number in [low, high] (the bench's own link-timing ranges, bench/ota/timing.py);
    ValueError (answered `bad_field`) for 1e308, NaN, true or a string."""
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and low <= value <= high
    if not ok or (whole and value != int(value)):
        raise ValueError("coap.%s: %r is outside %g..%g" % (name, value, low, high))
    return value


def parse_url(url):
    """`coap://host:port/a/b` -> (host, port, ["a", "b"])."""
    if not url.startswith("coap://"):
        raise ValueError("not a coap:// URL: " + url)
    rest = url[7:]
    slash = rest.find("/")
    hostport, path = (rest, "") if slash < 0 else (rest[:slash], rest[slash + 1 :])
    if hostport.startswith("["):
        end = hostport.index("]")
        host, port = hostport[1:end], hostport[end + 2 :] or "5683"
    elif ":" in hostport:
        host, port = hostport.rsplit(":", 1)
    else:
        host, port = hostport, "5683"
    return host, int(port), [p for p in path.split("/") if p]


def _option(prev, number, value):
    delta = number - prev
    length = len(value)
    ext = b""
    if delta >= 13:
        d, ext = 13, bytes([delta - 13])
    else:
        d = delta
    if length >= 13:
        n, ext = 13, ext + bytes([length - 13])
    else:
        n = length
    return bytes([(d << 4) | n]) + ext + value


def _uint(value):
    out = b""
    while value:
        out = bytes([value & 0xFF]) + out
        value >>= 8
    return out


def build_get(mid, token, path, block_num, szx):
    """A confirmable GET for block `block_num` of `path`."""
    msg = bytes([0x40 | len(token), GET]) + struct.pack(">H", mid) + token
    prev = 0
    for segment in path:
        msg += _option(prev, OPT_URI_PATH, segment.encode())
        prev = OPT_URI_PATH
    return msg + _option(prev, OPT_BLOCK2, _uint((block_num << 4) | szx))


def parse(data):
    """(type, code, mid, token, {option: value}, payload) of a CoAP datagram, or None if malformed."""
    if len(data) < 4 or data[0] >> 6 != 1:
        return None
    mtype, tkl, code = (data[0] >> 4) & 3, data[0] & 15, data[1]
    mid = (data[2] << 8) | data[3]
    token = data[4 : 4 + tkl]
    i, number, opts = 4 + tkl, 0, {}
    while i < len(data) and data[i] != 0xFF:
        d, n = data[i] >> 4, data[i] & 15
        i += 1
        if d == 13:
            d, i = data[i] + 13, i + 1
        elif d == 14:
            d, i = ((data[i] << 8) | data[i + 1]) + 269, i + 2
        if n == 13:
            n, i = data[i] + 13, i + 1
        elif n == 14:
            n, i = ((data[i] << 8) | data[i + 1]) + 269, i + 2
        number += d
        opts[number] = data[i : i + n]
        i += n
    payload = data[i + 1 :] if i < len(data) else b""
    return mtype, code, mid, token, opts, payload


def _to_int(raw):
    value = 0
    for b in raw:
        value = (value << 8) | b
    return value


def _file_size(path):
    try:
        return os.stat(path)[6]
    except OSError:
        return -1


def _remove(path):
    try:  # noqa: SIM105 (MicroPython has no contextlib)
        os.remove(path)
    except OSError:
        pass


def _read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def file_sha256(path):
    """Hex SHA-256 of a file, read in small chunks."""
    h = hashlib.sha256()
    buf = bytearray(512)
    with open(path, "rb") as f:
        while True:
            n = f.readinto(buf)
            if not n:
                break
            h.update(buf[:n] if n < len(buf) else buf)
    return binascii.hexlify(h.digest()).decode()


class Client:
    """One CoAP endpoint on a UDP socket; `fetch` resources from it block by block. `on_wait` (no arguments) is
    called every WAIT_SLICE_MS while an answer is awaited, so the caller can answer its own link meanwhile."""

    def __init__(self, timing=None, szx=6, on_wait=None):
        self.timing = timing or Timing()
        self.szx = szx
        self.on_wait = on_wait
        self.sock = None
        self.mid = random.getrandbits(16)

    def close(self):
        """Release the socket."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _exchange(self, addr, path, num, szx, stats):
        """Send the GET for block `num` of size 2**(szx+4) (retransmitting) and return the parsed response."""
        t = self.timing
        self.mid = (self.mid + 1) & 0xFFFF
        token = os.urandom(4)
        request = build_get(self.mid, token, path, num, szx)
        wait = t.ack_timeout_ms * (1 + (t.ack_random_factor - 1) * random.getrandbits(10) / 1023)
        separate = False
        for attempt in range(t.max_retransmit + 1):
            if attempt and not separate:
                stats["retransmits"] += 1
            if not separate:
                self.sock.sendto(request, addr)
            deadline = ticks_ms() + int(wait)
            while True:
                left = ticks_diff(deadline, ticks_ms())
                if left <= 0:
                    break
                self.sock.settimeout(min(left, WAIT_SLICE_MS) / 1000)
                try:
                    data = self.sock.recv(1280)
                except OSError:  # this slice timed out: let the agent answer its link, then wait on
                    if self.on_wait is not None:
                        self.on_wait()
                    continue
                msg = parse(data)
                if msg is None:
                    continue
                mtype, code, mid, rtoken, opts, payload = msg
                if mtype == ACK and mid == self.mid and code == 0:
                    separate = True  # empty ACK: the response comes later as its own message
                    continue
                if rtoken != token:
                    continue  # a late answer to an earlier request, or a duplicate
                if mtype == CON:
                    self.sock.sendto(bytes([0x60, 0]) + struct.pack(">H", mid), addr)
                return code, opts, payload
            wait *= 2
        raise FetchError("transfer", f"block {num}: no answer after {t.max_retransmit} retransmissions")

    def fetch(self, url, path, sha256=None, on_block=None, limit=None):
        """Fetch `url` (at most `limit` bytes) into file `path` (via `path`.part), resuming; return the transfer
        figures.

        With `sha256` the finished file is checked; a mismatch re-fetches once, then raises FetchError("hash").
        A server that breaks a bound (module docstring) gets FetchError("transfer") and the part file is deleted."""
        if not isinstance(limit, int) or limit < 0:
            raise FetchError("transfer", url + ": no size to bound the transfer")
        for attempt in range(2):
            try:
                stats = self._fetch_once(url, path + ".part", on_block, limit)
            except _Broken as exc:
                _remove(path + ".part")
                _remove(path + ".part.etag")
                raise FetchError(exc.kind, "%s: %s; nothing kept" % (url, exc))
            if sha256 is None or file_sha256(path + ".part") == sha256:
                _remove(path)
                os.rename(path + ".part", path)
                stats["restarts"] += attempt
                return stats
            _remove(path + ".part")
        raise FetchError("hash", url + ": content hash differs from the manifest twice")

    def _fetch_once(self, url, part, on_block, limit):
        host, port, segments = parse_url(url)
        addr = socket.getaddrinfo(host, port)[0][-1]
        if self.sock is None:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        stats = {"blocks": 0, "bytes": 0, "retransmits": 0, "resumed_from": 0, "restarts": 0, "size": 0}
        started = ticks_ms()
        try:
            while True:
                try:
                    self._transfer(url, addr, segments, part, stats, on_block, limit)
                    break
                except _ContentChanged:  # the server's content changed since the part was written: start over
                    _remove(part)
                    _remove(part + ".etag")
                    stats["restarts"] += 1
                    if stats["restarts"] > MAX_RESTARTS:
                        raise _Broken("the content changed %d times during the transfer" % stats["restarts"])
        finally:
            stats["transfer_us"] = ticks_diff(ticks_ms(), started) * 1000
        _remove(part + ".etag")
        return stats

    def _transfer(self, url, addr, segments, part, stats, on_block, limit):
        szx = self.szx
        size = 1 << (szx + 4)
        etag = _read_text(part + ".etag")
        have = _file_size(part)
        num = have // size if etag and have > 0 else 0
        stats["resumed_from"] = num
        with open(part, "r+b" if num else "wb") as f:
            while True:
                code, opts, payload = self._exchange(addr, segments, num, szx, stats)
                if code != CONTENT:
                    raise FetchError("transfer", f"{url}: server answered {code >> 5}.{code & 31:02d}")
                if len(opts.get(OPT_ETAG, b"")) > MAX_ETAG:
                    raise _Broken("an ETag of %d bytes (at most %d)" % (len(opts[OPT_ETAG]), MAX_ETAG))
                tag = binascii.hexlify(opts.get(OPT_ETAG, b"")).decode()
                if etag and tag != etag:
                    raise _ContentChanged()
                if not etag:
                    etag = tag
                    with open(part + ".etag", "w") as e:
                        e.write(tag)
                block = _to_int(opts.get(OPT_BLOCK2, b""))
                if OPT_BLOCK2 in opts and block & 7 < szx and (block >> 4) << ((block & 7) + 4) == num * size:
                    szx = block & 7  # the server's smaller blocks, from here on
                    size = 1 << (szx + 4)
                    num = block >> 4
                if OPT_BLOCK2 in opts and block & 7 > szx:
                    raise _Broken("block %d: the server's block size grew to %d B" % (num, 1 << ((block & 7) + 4)))
                if OPT_BLOCK2 in opts and block >> 4 != num:
                    raise FetchError("transfer", f"asked for block {num}, got {block >> 4}")
                more = OPT_BLOCK2 in opts and block & 8
                n = len(payload)
                if n > size or (more and n != size):
                    raise _Broken(
                        "block %d carries %d B of %d%s" % (num, n, size, " and says more follow" * bool(more))
                    )
                size2 = _to_int(opts[OPT_SIZE2]) if OPT_SIZE2 in opts else 0
                if num * size + n > limit or size2 > limit:
                    raise _Broken(
                        "the server sends %d B or more, at most %d" % (max(num * size + n, size2), limit), "hash"
                    )
                f.seek(num * size)
                f.write(payload)
                f.flush()  # the last good block is on flash before the next is asked for
                stats["blocks"] += 1
                stats["bytes"] += len(payload)
                stats["size"] = _to_int(opts[OPT_SIZE2]) if OPT_SIZE2 in opts else num * size + len(payload)
                num += 1
                if on_block is not None:
                    on_block(num, stats["size"])
                if not more:
                    return


class _ContentChanged(Exception):
    pass


class _Broken(Exception):
    """The server broke a transfer bound: the fetch is refused (kind `hash` for content longer than the signed size,
    `transfer` for the protocol's other bounds) and its file deleted."""

    def __init__(self, detail, kind="transfer"):
        super().__init__(detail)
        self.kind = kind
