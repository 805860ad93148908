"""Agent wire protocol codec: one message per line, `~{json}*crc32hex\n` (docs/protocol.md).

Written in the subset of Python that MicroPython runs: it is deployed unchanged beside both reference
agents (micropython/ and host/) and used by the bench. No typing imports, no f-strings.
"""

import json

try:
    from binascii import crc32 as _crc32
except ImportError:  # a MicroPython build without binascii.crc32
    _crc32 = None

PROTO = 1
MAX_LINE = 4096
START = b"~"
SEP = b"*"
ERROR_CODES = ("bad_frame", "bad_json", "unknown_type", "bad_field", "busy", "not_loaded", "refused", "internal")

_TABLE = None


def _crc32_soft(data):
    global _TABLE
    if _TABLE is None:
        _TABLE = []
        for n in range(256):
            c = n
            for _ in range(8):
                c = (0xEDB88320 ^ (c >> 1)) if c & 1 else (c >> 1)
            _TABLE.append(c)
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def crc32hex(data):
    """The CRC-32 (IEEE) of `data` as 8 lowercase hex digits (bytes)."""
    crc = _crc32(data) if _crc32 is not None else _crc32_soft(data)
    return ("%08x" % (crc & 0xFFFFFFFF)).encode()


class WireError(Exception):
    """A line that is not a valid protocol message. `code` is an error code; `id` the request id if readable."""

    def __init__(self, code, detail, msg_id=None):
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.id = msg_id


def _dumps(msg):
    try:
        return json.dumps(msg, separators=(",", ":"))
    except TypeError:  # an old MicroPython without `separators`
        return json.dumps(msg)


def encode(msg):
    """One message (a dict with `t`) as a protocol line, bytes ending in a newline."""
    if not isinstance(msg, dict) or "t" not in msg:
        raise ValueError("a message is a dict with a 't' field")
    body = _dumps(msg).encode()
    line = START + body + SEP + crc32hex(body) + b"\n"
    if len(line) > MAX_LINE:
        raise ValueError("message of %d bytes exceeds the %d-byte line limit" % (len(line), MAX_LINE))
    return line


def is_message(line):
    """True when `line` is meant as a protocol line (starts with `~`); other lines are console text."""
    return line[:1] == START


def _readable_id(body):
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    if isinstance(obj, dict) and isinstance(obj.get("id"), int):
        return obj["id"]
    return None


def decode(line):
    """The message dict carried by a protocol line (bytes or str, trailing CR/LF optional).

    Raises WireError with code `bad_frame` (no `*crc`, CRC mismatch, too long) or `bad_json`
    (the JSON is not an object with a string `t`)."""
    if isinstance(line, str):
        line = line.encode()
    line = line.rstrip(b"\r\n")
    if len(line) > MAX_LINE:
        raise WireError("bad_frame", "line of %d bytes exceeds %d" % (len(line), MAX_LINE))
    if not is_message(line):
        raise WireError("bad_frame", "line does not start with '~'")
    star = line.rfind(SEP)
    if star < 0 or len(line) - star != 9:
        raise WireError("bad_frame", "no '*crc32' trailer", _readable_id(line[1:]))
    body = line[1:star]
    crc = line[star + 1 :].lower()
    if crc != crc32hex(body):
        raise WireError("bad_frame", "CRC mismatch", _readable_id(body))
    try:
        msg = json.loads(body)
    except ValueError:
        raise WireError("bad_json", "payload is not valid JSON")
    if not isinstance(msg, dict):
        raise WireError("bad_json", "payload is not a JSON object")
    if not isinstance(msg.get("t"), str):
        msg_id = msg.get("id")
        raise WireError("bad_field", "message has no string 't' field", msg_id if isinstance(msg_id, int) else None)
    return msg


def error(code, detail, msg_id=None):
    """An `error` reply message."""
    msg = {"t": "error", "code": code, "detail": detail}
    if msg_id is not None:
        msg["id"] = msg_id
    return msg


def reply(request, t, fields=None):
    """A reply of type `t` to `request`, echoing its id, with `fields` added."""
    msg = {"t": t}
    if fields:
        for k in fields:
            msg[k] = fields[k]
    if isinstance(request, dict) and request.get("id") is not None:
        msg["id"] = request["id"]
    return msg
