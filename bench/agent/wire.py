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
MAX_LINE = 4096  # bytes of a line, `~`, JSON, `*crc` and newline; a reply longer than this is never sent
MAX_DEPTH = 16  # arrays and objects nested in one message (the deepest message the protocol has nests 3)
MAX_TYPE = 32  # characters of `t`
MAX_ID = (1 << 53) - 1  # largest `id` magnitude (exact in every JSON reader, JavaScript's included)
MAX_TEXT = 256  # characters of a name, path or URL field the agent takes (`path`, `url`, a manifest's strings)
MAX_DETAIL = 200  # characters of an error's `detail`: longer ones are cut (they may quote the request)
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
    """One message (a dict with `t`) as a protocol line, bytes ending in a newline; ValueError over MAX_LINE."""
    if not isinstance(msg, dict) or "t" not in msg:
        raise ValueError("a message is a dict with a 't' field")
    body = _dumps(msg).encode()
    line = START + body + SEP + crc32hex(body) + b"\n"
    if len(line) > MAX_LINE:
        raise ValueError("message of %d bytes exceeds the %d-byte line limit" % (len(line), MAX_LINE))
    return line


def encode_reply(msg):
    """`encode(msg)`, but a message over the line limit becomes an `internal` error that says so (with the
    request's id): what an agent sends, so no reply it builds can stop it."""
    try:
        return encode(msg)
    except ValueError as exc:
        msg_id = msg.get("id") if isinstance(msg, dict) else None
        return encode(error("internal", "reply %r not sent: %s" % (str(msg.get("t"))[:MAX_TYPE], exc), msg_id))


def is_message(line):
    """True when `line` is meant as a protocol line (starts with `~`); other lines are console text."""
    return line[:1] == START


def _valid_id(value):
    return isinstance(value, int) and not isinstance(value, bool) and -MAX_ID <= value <= MAX_ID


def _readable_id(body):
    if not shallow(body):
        return None
    try:
        obj = json.loads(body)
    except (ValueError, RuntimeError, MemoryError):
        return None
    if isinstance(obj, dict) and _valid_id(obj.get("id")):
        return obj["id"]
    return None


def shallow(body):
    """True when JSON text `body` (bytes) nests at most MAX_DEPTH arrays and objects. Counting the brackets (in C)
    settles every ordinary line; only a line with more than MAX_DEPTH of them is scanned, strings skipped."""
    if body.count(b"[") + body.count(b"{") <= MAX_DEPTH:
        return True
    depth = 0
    in_str = False
    escaped = False
    for c in body:
        if in_str:
            if escaped:
                escaped = False
            elif c == 92:  # backslash
                escaped = True
            elif c == 34:  # quote
                in_str = False
        elif c == 34:
            in_str = True
        elif c == 91 or c == 123:  # [ {
            depth += 1
            if depth > MAX_DEPTH:
                return False
        elif c == 93 or c == 125:  # ] }
            depth -= 1
    return True


def decode(line):
    """The message dict carried by a protocol line (bytes or str, trailing CR/LF optional).

    Raises WireError with code `bad_frame` (no `*crc`, CRC mismatch, too long), `bad_json` (not a JSON
    object, or nested deeper than MAX_DEPTH), `bad_field` (no string `t`, an `id` that is not an integer of at
    most MAX_ID) or `unknown_type` (a `t` longer than MAX_TYPE)."""
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
    if not shallow(body):
        raise WireError("bad_json", "payload nests arrays and objects deeper than %d" % MAX_DEPTH)
    try:
        msg = json.loads(body)
    except (ValueError, RuntimeError, MemoryError):  # RuntimeError, MemoryError: MicroPython's deep or huge JSON
        raise WireError("bad_json", "payload is not valid JSON")
    if not isinstance(msg, dict):
        raise WireError("bad_json", "payload is not a JSON object")
    msg_id = msg.get("id")
    if msg_id is not None and not _valid_id(msg_id):
        raise WireError("bad_field", "'id' is not an integer of at most %d" % MAX_ID)
    t = msg.get("t")
    if not isinstance(t, str):
        raise WireError("bad_field", "message has no string 't' field", msg_id)
    if len(t) > MAX_TYPE:
        raise WireError("unknown_type", "message type of %d characters (at most %d)" % (len(t), MAX_TYPE), msg_id)
    return msg


def error(code, detail, msg_id=None):
    """An `error` reply message; a `detail` over MAX_DETAIL characters is cut (it may quote the request)."""
    if len(detail) > MAX_DETAIL:
        detail = detail[: MAX_DETAIL - 3] + "..."
    msg = {"t": "error", "code": code, "detail": detail}
    if msg_id is not None:
        msg["id"] = msg_id
    return msg


def hello(agent, version, platform, fields):
    """The `hello` an agent sends (protocol.md `hello`): the protocol version, the implementation (`agent`,
    `version`) and where it runs (`platform`), then its `fields` (runtime, verifier, model, caps)."""
    msg = {"t": "hello", "proto": PROTO, "agent": agent, "version": version, "platform": platform}
    for k in fields:
        msg[k] = fields[k]
    return msg


def text(value, name, limit=MAX_TEXT):
    """`value` when it is a string of at most `limit` characters; ValueError (answered `bad_field`) naming the
    field otherwise."""
    if not isinstance(value, str):
        raise ValueError("%s must be a string" % name)
    if len(value) > limit:
        raise ValueError("%s of %d characters (at most %d)" % (name, len(value), limit))
    return value


def number(value, name):
    """`value` when it is a number (not a boolean) of at most MAX_ID in magnitude, or None; ValueError (answered
    `bad_field`) naming the field otherwise (a value the agent echoes must not grow its reply)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -MAX_ID * 1e6 <= value <= MAX_ID * 1e6:
        raise ValueError("%s must be a number" % name)
    return value


def reply(request, t, fields=None):
    """A reply of type `t` to `request`, echoing its id, with `fields` added."""
    msg = {"t": t}
    if fields:
        for k in fields:
            msg[k] = fields[k]
    if isinstance(request, dict) and request.get("id") is not None:
        msg["id"] = request["id"]
    return msg
