"""The wire protocol's limits (docs/protocol.md, "Limits"), kept by every agent: a line nested too deep, a field
too long, a reply that would grow past the line limit and an unknown type of thousands of characters are each
answered with their named error, and the agent goes on; a half-sent line is completed by its rest."""

from __future__ import annotations

import ast
import asyncio
import time
import zlib

import pytest

from bench.agent import wire
from bench.agent.session import AgentSession, LoopStart

pytestmark = pytest.mark.e2e


def crc_line(body: bytes) -> bytes:
    return b"~" + body + b"*" + b"%08x" % zlib.crc32(body) + b"\n"


MANIFEST = b'{"name":"npc-policy","version":2,"sha256":"%s","size":10}' % (b"0" * 64)
# (line, error code, the id the error must carry or None)
LIMIT_CASES = {
    "2000-deep array": (crc_line(b"[" * 2000 + b"]" * 2000), "bad_json", None),
    "600-deep object": (crc_line(b'{"a":' * 600 + b"1" + b"}" * 600), "bad_json", None),
    "ping with a 40-deep b0": (crc_line(b'{"t":"ping","id":71,"b0":' + b"[" * 40 + b"]" * 40 + b"}"), "bad_json", None),
    "ping echoing a 4000-char b0": (crc_line(b'{"t":"ping","id":72,"b0":"' + b"x" * 4000 + b'"}'), "bad_field", 72),
    "ping echoing a 4000-digit b0": (crc_line(b'{"t":"ping","id":73,"b0":' + b"9" * 4000 + b"}"), "bad_field", 73),
    "unknown t of 4060 chars": (crc_line(b'{"t":"' + b"q" * 4060 + b'","id":74}'), "unknown_type", 74),
    "id of 4000 digits": (crc_line(b'{"t":"ping","b0":1,"id":' + b"7" * 4000 + b"}"), "bad_field", None),
    "id a 3000-char string": (crc_line(b'{"t":"ping","b0":1,"id":"' + b"i" * 3000 + b'"}'), "bad_field", None),
    "load path of 3900 chars": (
        crc_line(b'{"t":"load","id":75,"path":"' + b"p" * 3900 + b'","manifest":' + MANIFEST + b"}"),
        "bad_field",
        75,
    ),
    "update url of 3900 chars": (
        crc_line(b'{"t":"update","id":76,"url":"coap://' + b"u" * 3900 + b'","manifest":' + MANIFEST + b"}"),
        "bad_field",
        76,
    ),
    "manifest name of 3000 chars": (
        crc_line(b'{"t":"load","id":77,"path":"m.bin","manifest":{"name":"' + b"n" * 3000 + b'","version":2}}'),
        "bad_field",
        77,
    ),
}


def unexpected(s: AgentSession) -> list[dict]:
    """The messages the session took as unexpected (replies, not errors, to ids it did not ask with), in order."""
    head = "[bench] unexpected message: "
    return [ast.literal_eval(line[len(head) :]) for line in s.console if line.startswith(head)]


def errors_seen(s: AgentSession) -> list[dict]:
    """The `error` replies to lines the session sent without a pending request, in order."""
    return list(s.refusals)


def test_every_limit_is_a_named_error_and_the_agent_goes_on(agent) -> None:
    """Each case in one session: its error code (and id when the id was readable), counted once, nothing else
    happens, and the agent answers the next. Before, the 2000-deep array killed the host agent (RecursionError)
    and the MicroPython agent (RuntimeError / MemoryError), and the long echoes raised outside any handler."""

    async def body(s: AgentSession):
        got = []
        for case, (line, _, _) in LIMIT_CASES.items():
            before, seen = await s.stats(), len(errors_seen(s))
            await s.send_raw(line)
            deadline = time.monotonic() + 10
            while len(errors_seen(s)) == seen:
                assert time.monotonic() < deadline, (case, s.console[-5:])
                await s.ping()  # alive, and answering meanwhile
            got.append((case, errors_seen(s)[seen], before, await s.stats()))
        return got, await s.hello(), s.framing_errors

    got, hello, framing_errors = agent.run(body, timeout=120)
    assert framing_errors == 0  # every reply the agent sent was a valid line, within the limit
    assert hello["model"]["version"] == 1
    for case, error, before, after in got:
        _, code, msg_id = LIMIT_CASES[case]
        assert error["code"] == code and error.get("id") == msg_id, (case, error)
        assert len(wire.encode(error)) <= wire.MAX_LINE, case
        assert after["errors"].get(code, 0) == before["errors"].get(code, 0) + 1, case
        assert after.get("faults", 0) == before.get("faults", 0), case


def test_a_half_sent_line_is_kept_until_its_rest_comes(agent) -> None:
    """Half a line, then nothing for 1.5 s, then the rest: the agent kept what had come, and the completed line
    is answered. The host and web agents read lines without waiting for them, so their frame records keep coming
    at the loop's rate meanwhile. The MicroPython agent reads a line that has begun in C, to its newline
    (docs/agents.md: byte by byte in Python took the whole chip at a session's input rate), so its loop waits
    for the rest and goes on after it."""
    body_bytes = b'{"t":"ping","id":90,"b0":12345}'
    line = crc_line(body_bytes)

    async def body(s: AgentSession):
        await s.start(LoopStart(fps=20, vsync_hz=20))
        frames = s.frames(timeout=10)
        await frames.__anext__()  # the loop runs
        await s.send_raw(line[:17])
        t0 = time.monotonic()
        n = 0
        if agent.kind != "micropython":
            async for _ in frames:
                n += 1
                if time.monotonic() - t0 > 1.5:
                    break
        else:
            await asyncio.sleep(1.5)
        seen = len([m for m in unexpected(s) if m.get("id") == 90])
        await s.send_raw(line[17:])
        deadline = time.monotonic() + 10
        while not [m for m in unexpected(s) if m.get("t") == "pong" and m.get("id") == 90]:
            assert time.monotonic() < deadline, s.console[-5:]
            await asyncio.sleep(0.05)
        after = 0
        async for _ in frames:  # the loop goes on after the line
            after += 1
            if after == 5:
                break
        await s.stop()
        return n, seen, after

    n, seen, after = agent.run(body, timeout=30)
    if agent.kind != "micropython":
        assert n >= 20, f"{n} frame records in 1.5 s at 20 fps with half a line pending"
    assert seen == 0  # nothing was answered for half a line
    assert after == 5
