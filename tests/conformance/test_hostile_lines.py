"""A round of hostile lines in forms the limits' own tests do not use (deep, long and odd JSON, odd numbers,
unicode, duplicate keys, mistyped fields): each is answered with one of the named errors it may get, or with
its normal reply, and the agent answers the next (docs/robustness.md, "Hostile input")."""

from __future__ import annotations

import asyncio
import time
import zlib

import pytest

from bench.agent.session import AgentSession

pytestmark = pytest.mark.e2e


def line(body: bytes) -> bytes:
    return b"~" + body + b"*" + b"%08x" % zlib.crc32(body) + b"\n"


SHA = b"0" * 64
X48 = b",".join([b"0.1"] * 48)
REPLY = "reply"  # the request's normal reply (not an error)
# name -> (line, the outcomes allowed: error codes and/or REPLY); every line carries an id >= 100 when readable
CASES: dict[str, tuple[bytes, set[str]]] = {
    "17-deep object in an input": (
        line(b'{"t":"in","id":100,"ch":"event","ts":1,"d":' + b'{"a":' * 17 + b"1" + b"}" * 17 + b"}"),
        {"bad_json"},
    ),
    "15 deep inside a ping (under the limit)": (
        line(b'{"t":"ping","id":101,"b0":1,"x":' + b"[" * 15 + b"]" * 15 + b"}"),
        {REPLY},
    ),
    "brackets inside a string": (line(b'{"t":"ping","id":102,"b0":1,"s":"' + b"[{" * 500 + b'"}'), {REPLY}),
    "escaped quote then brackets in a string": (
        line(b'{"t":"ping","id":103,"b0":1,"s":"\\"' + b"[" * 300 + b'"}'),
        {REPLY},
    ),
    "unicode type": (line(b'{"t":"\\u00e9\\u4e2d","id":104}'), {"unknown_type"}),
    "type of 33 characters": (line(b'{"t":"' + b"p" * 33 + b'","id":105}'), {"unknown_type"}),
    "empty type": (line(b'{"t":"","id":106}'), {"unknown_type"}),
    "type an object": (line(b'{"t":{"x":1},"id":107}'), {"bad_field"}),
    "lone surrogate type": (line(b'{"t":"\\ud800","id":108}'), {"unknown_type", "bad_json"}),
    "id 3.5": (line(b'{"t":"ping","id":3.5,"b0":1}'), {"bad_field"}),
    "id true": (line(b'{"t":"ping","id":true,"b0":1}'), {"bad_field"}),
    "id -2^53": (line(b'{"t":"ping","id":-9007199254740992,"b0":1}'), {"bad_field"}),
    "duplicate t (last wins)": (line(b'{"t":"load","t":"ping","id":109,"b0":1}'), {REPLY}),
    "b0 NaN": (line(b'{"t":"ping","id":110,"b0":NaN}'), {"bad_field", "bad_json"}),
    "b0 Infinity": (line(b'{"t":"ping","id":111,"b0":Infinity}'), {"bad_field", "bad_json"}),
    "b0 1e400": (line(b'{"t":"ping","id":112,"b0":1e400}'), {"bad_field"}),
    "b0 -0.0": (line(b'{"t":"ping","id":113,"b0":-0.0}'), {REPLY}),
    "b0 an object": (line(b'{"t":"ping","id":114,"b0":{"a":1}}'), {"bad_field"}),
    "b0 1e-400 (underflow)": (line(b'{"t":"ping","id":115,"b0":1e-400}'), {REPLY}),
    "input ts of 4000 digits": (
        line(b'{"t":"in","ch":"gaze","ts":' + b"9" * 4000 + b',"d":[0,0,1]}'),
        {"bad_field", "bad_json"},
    ),
    "BOM before the JSON": (b"~\xef\xbb\xbf" + line(b'{"t":"ping","id":116,"b0":1}')[1:], {"bad_frame", "bad_json"}),
    "raw control character in a string": (line(b'{"t":"ping","id":117,"b0":1,"s":"a\x01b"}'), {"bad_json", REPLY}),
    "invalid UTF-8 in a string": (
        line(b'{"t":"ping","id":118,"b0":1,"s":"\xff\xfe"}'),
        {"bad_json", "bad_frame", REPLY},
    ),
    "only the start mark": (b"~\n", {"bad_frame"}),
    "a star inside the JSON": (line(b'{"t":"ping","id":119,"b0":1,"s":"a*b*c"}'), {REPLY}),
    "manifest version 1e30": (
        line(
            b'{"t":"load","id":120,"path":"m.bin","manifest":{"name":"npc-policy","version":1e30,"sha256":"%s"}}' % SHA
        ),
        {"bad_field"},
    ),
    "manifest version -1": (
        line(b'{"t":"load","id":121,"path":"m.bin","manifest":{"name":"npc-policy","version":-1,"sha256":"%s"}}' % SHA),
        {"bad_field"},
    ),
    "manifest size 9824.5": (
        line(
            b'{"t":"load","id":122,"path":"m.bin","manifest":{"name":"npc-policy","size":9824.5,"sha256":"%s"}}' % SHA
        ),
        {"bad_field"},
    ),
    "manifest a list": (line(b'{"t":"load","id":123,"path":"m.bin","manifest":["npc-policy",2]}'), {"bad_field"}),
    "manifest sha256 a number": (line(b'{"t":"load","id":124,"path":"m.bin","manifest":{"sha256":7}}'), {"bad_field"}),
    "load path a list": (
        line(b'{"t":"load","id":125,"path":["m.bin"],"manifest":{"sha256":"%s"}}' % SHA),
        {"bad_field"},
    ),
    "load path with NUL": (
        line(b'{"t":"load","id":126,"path":"m\\u0000.bin","manifest":{"sha256":"%s"}}' % SHA),
        {"refused", "bad_field"},
    ),
    "update url not a string": (
        line(b'{"t":"update","id":127,"url":7,"manifest":{"sha256":"%s"}}' % SHA),
        {"bad_field"},
    ),
    "update coap timing 15 deep": (
        line(
            b'{"t":"update","id":128,"url":"coap://127.0.0.1:9/x","manifest":{"name":"npc-policy","version":2,'
            b'"sha256":"%s","size":10},"coap":' % SHA + b"[" * 14 + b"]" * 14 + b"}"
        ),
        {"bad_field", "refused"},  # refused: the web agent takes ws:// URLs only
    ),
    "infer x nested": (line(b'{"t":"infer","id":129,"x":[[' + X48 + b"]]}"), {"bad_field"}),
    "gaze d of 400 numbers": (
        line(b'{"t":"in","ch":"gaze","ts":1,"d":[' + b",".join([b"0"] * 400) + b"]}"),
        {"bad_field"},
    ),
    "event target_id of 3000 characters": (
        line(b'{"t":"in","ch":"event","ts":1,"d":{"action":"talk","target_id":"' + b"t" * 3000 + b'","context":{}}}'),
        {"bad_field", "accepted"},
    ),
    "start frames 1e300": (line(b'{"t":"start","id":130,"fps":60,"frames":1e300}'), {"bad_field"}),
}


def test_hostile_lines_get_their_named_answer_and_the_agent_goes_on(agent) -> None:
    async def body(s: AgentSession):
        got = {}
        for name, (raw, _) in CASES.items():
            refusals, seen, faults = len(s.refusals), len(s.console), len(s.faults)
            await s.send_raw(raw)
            await s.ping()  # alive; an agent answers its lines in order, so the line's answer came before the pong
            t0 = time.monotonic()
            while True:  # (a request answered in the background, the host agent's `update`, may come later)
                answers = s.refusals[refusals:]
                replies = [c for c in s.console[seen:] if c.startswith("[bench] unexpected message")]
                if answers or replies or time.monotonic() - t0 > 1:
                    break
                await asyncio.sleep(0.05)
            got[name] = (
                answers[0]["code"] if answers else (REPLY if replies else "accepted"),
                len(s.faults) - faults,
            )
        return got, await s.hello(), await s.stats()

    got, hello, stats = agent.run(body, timeout=120)
    wrong = {name: got[name] for name, (_, allowed) in CASES.items() if got[name][0] not in allowed}
    assert not wrong, wrong
    assert all(faults == (answer == "refused") for answer, faults in got.values()), got  # a refusal's fault only
    assert hello["model"]["version"] == 1 and stats["frames"] == 0
