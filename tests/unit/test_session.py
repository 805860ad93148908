"""AgentSession over TCP against a minimal scripted peer (the real agents are tested in tests/conformance)."""

import asyncio
import contextlib
import functools

import pytest

from bench.agent import wire
from bench.agent.session import AgentError, AgentSession, LoopStart, ProtocolMismatch
from bench.agent.transport import StreamTransport
from bench.core.errors import DeviceUnreachable


def run_async(fn):
    """Run an async test body in a fresh event loop (no pytest-asyncio needed)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


class ScriptedPeer:
    """Answers hello/ping/start/stop/stats like an agent would, with a clock offset of +7 s."""

    def __init__(self, proto=1):
        self.proto = proto
        self.received = []

    async def handle(self, reader, writer):
        loop = asyncio.get_running_loop()
        writer.write(b"boot: scripted peer\n")

        def now_us():
            return int(loop.time() * 1e6) + 7_000_000

        while line := await reader.readline():
            try:
                msg = wire.decode(line)
            except wire.WireError as exc:
                writer.write(wire.encode(wire.error(exc.code, exc.detail, exc.id)))
                continue
            self.received.append(msg)
            t = msg["t"]
            if t == "hello":
                out = [wire.reply(msg, "hello", {"proto": self.proto, "agent": "scripted", "model": None})]
            elif t == "ping":
                out = [wire.reply(msg, "pong", {"b0": msg["b0"], "d": now_us()})]
            elif t == "start":
                out = [wire.reply(msg, "ack")]
                for i in range(msg["frames"]):
                    out.append(
                        {
                            "t": "frame",
                            "i": i,
                            "vsync": 1000 * i,
                            "due": 1000 * i + 500,
                            "ran": True,
                            "t0": 1000 * i + 510,
                            "t1": 1000 * i + 600,
                            "act": 2,
                            "p": 0.5,
                            "seq": 0,
                            "skip": False,
                            "late": False,
                            "q": 1,
                            "model": 1,
                        }
                    )
                out.append({"t": "fault", "kind": "crash", "detail": "test"})
                out.append({"t": "log", "level": "warn", "msg": "hot"})
                out.append({"t": "stopped", "frames": msg["frames"]})
            elif t == "in":
                out = []
            elif t == "shutdown":
                out = [wire.reply(msg, "bye")]
            else:
                out = [wire.error("unknown_type", f"no message type '{t}'", msg.get("id"))]
            for m in out:
                writer.write(wire.encode(m))
            await writer.drain()
            if t == "shutdown":
                break
        writer.close()


@contextlib.asynccontextmanager
async def peer_session(peer, **kw):
    server = await asyncio.start_server(peer.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        transport = await StreamTransport.connect("127.0.0.1", port)
        session = await AgentSession.open(transport, device="peer", **kw)
        try:
            yield session
        finally:
            await session.close()
    finally:
        server.close()
        await server.wait_closed()


@run_async
async def test_hello_clock_frames_faults_and_console(tmp_path):
    peer = ScriptedPeer()
    async with peer_session(peer, log_path=tmp_path / "device.log") as s:
        assert s.info["agent"] == "scripted"
        clock = await s.sync_clock(8)
        assert clock.offset_ns == pytest.approx(7e9, abs=5e6)
        seq = await s.send_input("gaze", [0.1, 0.2, 0.9], ts=12)
        assert seq == 0 and 0 in s.sent_ns
        await s.start(LoopStart(fps=60, vsync_hz=60, frames=5))
        records = [r async for r in s.frames(timeout=5)]
        assert [r.i for r in records] == list(range(5))
        assert records[0].infer_us == 90 and records[0].seq == 0 and records[0].rx_ns > s.sent_ns[0]
        assert s.last_stopped == {"t": "stopped", "frames": 5}
        assert s.faults[0]["kind"] == "crash" and (await s.next_fault(1))["kind"] == "crash"
        assert (await s.shutdown())["t"] == "bye"
    text = (tmp_path / "device.log").read_text()
    assert "boot: scripted peer" in text and "[warn] hot" in text and "[fault]" in text


@run_async
async def test_error_reply_raises_agent_error_and_session_survives():
    async with peer_session(ScriptedPeer()) as s:
        with pytest.raises(AgentError) as err:
            await s.request("dance")
        assert err.value.code == "unknown_type"
        await s.send_raw(b'~{"t":"hello","id":99}*00000000\n')
        await s.ping()
        assert s.clock.synced


@run_async
async def test_an_echoing_link_is_not_mistaken_for_replies():
    peer = ScriptedPeer()
    original = peer.handle

    async def echo_then_handle(reader, writer):
        class Echo:
            def __init__(self, inner):
                self.inner = inner

            async def readline(self):
                line = await self.inner.readline()
                writer.write(line)  # a console echoing what it receives
                return line

        await original(Echo(reader), writer)

    peer.handle = echo_then_handle
    async with peer_session(peer) as s:
        assert s.info["agent"] == "scripted" and s.echoes >= 1
        await s.ping()


@run_async
async def test_protocol_mismatch_is_refused():
    with pytest.raises(ProtocolMismatch, match="protocol 2"):
        async with peer_session(ScriptedPeer(proto=2)):
            pass


@run_async
async def test_request_timeout_and_link_end():
    async def mute(reader, writer):
        await reader.readline()
        await asyncio.sleep(0.3)
        writer.close()

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    session = AgentSession(await StreamTransport.connect("127.0.0.1", port), device="mute", timeout=0.1)
    with pytest.raises(DeviceUnreachable, match="no reply to 'hello'"):
        await session.hello()
    with pytest.raises(DeviceUnreachable):
        await session.request("stats", timeout=2)
    assert [r async for r in session.frames(timeout=2)] == []
    await session.close()
    server.close()
    await server.wait_closed()
