"""Model signature checks for the MicroPython agent: canonical manifest bytes, trusted key, file hash.

`canonical(manifest)` reproduces bench/models/signing.py's bytes (CPython's `json.dumps(sort_keys=True,
separators=(",", ":"))`, ASCII-escaped) without relying on MicroPython's json, which cannot sort keys.
"""

import hashlib

try:
    from binascii import a2b_base64, hexlify, unhexlify
except ImportError:  # pragma: no cover - every MicroPython port has binascii
    from ubinascii import a2b_base64, hexlify, unhexlify

import p256

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def _string(s):
    out = ['"']
    for ch in s:
        esc = _ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
            continue
        code = ord(ch)
        if 0x20 <= code < 0x7F:
            out.append(ch)
        elif code < 0x10000:
            out.append("\\u%04x" % code)
        else:
            code -= 0x10000
            out.append("\\u%04x\\u%04x" % (0xD800 | (code >> 10), 0xDC00 | (code & 0x3FF)))
    out.append('"')
    return "".join(out)


def _value(v):
    if v is True:
        return "true"
    if v is False:
        return "false"
    if v is None:
        return "null"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        keys = sorted(v)
        return "{" + ",".join(_string(k) + ":" + _value(v[k]) for k in keys) + "}"
    raise ValueError("manifest value of type %s cannot be signed canonically" % type(v).__name__)


def canonical(manifest):
    """The bytes a signature covers: the manifest without `sig`, keys sorted, compact, ASCII."""
    body = {}
    for k in manifest:
        if k != "sig":
            body[k] = manifest[k]
    return _value(body).encode()


def load_trusted_key(path="trust.key"):
    """The trusted public key from a file of 128 hex characters (X||Y); ValueError if it is unusable."""
    with open(path) as f:
        text = f.read().strip()
    if len(text) != 128:
        raise ValueError("%s: expected 128 hex characters (X||Y), found %d" % (path, len(text)))
    return p256.public_key(unhexlify(text))


def verify_manifest(manifest, key):
    """True when `manifest['sig']` (base64 DER) is a valid ECDSA-P256 signature by `key` over canonical()."""
    sig = manifest.get("sig")
    if not isinstance(sig, str):
        return False
    try:
        der = a2b_base64(sig)
        digest = hashlib.sha256(canonical(manifest)).digest()
    except ValueError:
        return False
    return p256.verify(key, digest, der)


class Hashed:
    """A binary file read through SHA-256: whatever a parser takes from it is what is hashed, so the bytes that
    are parsed are the bytes that are checked (read once: a file changed between two reads cannot slip in)."""

    def __init__(self, f):
        self.f = f
        self.h = hashlib.sha256()
        self.size = 0

    def read(self, n):
        data = self.f.read(n)
        self.h.update(data)
        self.size += len(data)
        return data

    def readinto(self, buf):
        """Read into `buf` and hash all of it: right when the read fills it, as every read of a parse that
        succeeds does (a short read ends the parse with an error, and the hash is not used then)."""
        n = self.f.readinto(buf)
        if n:
            self.h.update(buf)
            self.size += n
        return n

    def drain(self, chunk=512):
        """Hash the rest of the file (after a parse that stopped early); returns the total size."""
        buf = bytearray(chunk)
        while True:
            n = self.f.readinto(buf)
            if not n:
                return self.size
            self.h.update(buf if n == chunk else buf[:n])
            self.size += n

    def hexdigest(self):
        return hexlify(self.h.digest()).decode()


def file_sha256(path):
    """(hex sha256, size) of the file at `path`, read in small chunks."""
    with open(path, "rb") as f:
        hashed = Hashed(f)
        hashed.drain()
        return hashed.hexdigest(), hashed.size
