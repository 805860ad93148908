"""The wire codec: framing, CRC, errors, line splitting."""

import zlib

import pytest

from bench.agent import wire


def test_encode_decode_round_trip():
    msg = {"t": "frame", "i": 3, "p": 0.71, "ran": True, "d": [1, 2.5, None], "s": "héllo"}
    line = wire.encode(msg)
    assert line.startswith(b"~{") and line.endswith(b"\n")
    body, crc = line[1:-1].rsplit(b"*", 1)
    assert crc == b"%08x" % zlib.crc32(body)
    assert wire.decode(line) == msg
    assert wire.decode(line.decode().rstrip("\n") + "\r\n") == msg


def test_soft_crc_matches_zlib():
    for data in (b"", b"a", b'{"t":"hello","id":1}', bytes(range(256))):
        assert wire._crc32_soft(data) == zlib.crc32(data)


def test_corrupted_line_is_bad_frame_with_readable_id():
    line = bytearray(wire.encode({"t": "load", "id": 7, "path": "m.npcm"}))
    line[-3] ^= 1 if chr(line[-3]) in "0123456789" else 2
    with pytest.raises(wire.WireError) as err:
        wire.decode(bytes(line))
    assert err.value.code == "bad_frame" and err.value.id == 7


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b'~{"t":"x"}\n', "bad_frame"),
        (b"hello\n", "bad_frame"),
        (b"~not json*" + b"%08x" % zlib.crc32(b"not json"), "bad_json"),
        (b"~[1,2]*" + b"%08x" % zlib.crc32(b"[1,2]"), "bad_json"),
        (b'~{"id":4}*' + b"%08x" % zlib.crc32(b'{"id":4}'), "bad_field"),
        (b"~" + b"x" * 5000 + b"*00000000", "bad_frame"),
    ],
)
def test_malformed_lines(line, code):
    with pytest.raises(wire.WireError) as err:
        wire.decode(line)
    assert err.value.code == code


def test_encode_refuses_oversized_and_typeless():
    with pytest.raises(ValueError, match="line limit"):
        wire.encode({"t": "x", "d": "a" * 5000})
    with pytest.raises(ValueError):
        wire.encode({"id": 1})


def test_reply_and_error_echo_id():
    assert wire.reply({"t": "ping", "id": 5}, "pong", {"d": 1}) == {"t": "pong", "d": 1, "id": 5}
    assert wire.error("busy", "loading") == {"t": "error", "code": "busy", "detail": "loading"}
    assert wire.error("busy", "x", 3)["id"] == 3
