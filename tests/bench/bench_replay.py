"""Benchmark: the replayer's send-time error with every channel of a fixture session playing into
4 sinks at once (goal: P99 <= 0.5 ms).

    python tests/bench/bench_replay.py [--session fixtures/sessions/combat.mcap] [--sinks 4] [--speed 1]

The sinks are loopback TCP connections to a separate process that reads and discards (a stand-in for
4 agents that keeps their work off the bench's core); each send goes through the same Replayer, Pacer and
wire codec as `hilbench replay`. Prints one JSON line with the figures."""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.measure.histogram import Histogram  # noqa: E402
from bench.replay.pacing import Pacer  # noqa: E402
from bench.replay.plan import build_plan  # noqa: E402
from bench.replay.player import Replayer, Track  # noqa: E402
from bench.replay.session import read_session  # noqa: E402

DRAIN = textwrap.dedent(
    """
    import socket, sys, threading
    n = int(sys.argv[1])
    servers = []
    for _ in range(n):
        s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1); servers.append(s)
    print(" ".join(str(s.getsockname()[1]) for s in servers), flush=True)
    def drain(s):
        c, _ = s.accept()
        while c.recv(65536):
            pass
    threads = [threading.Thread(target=drain, args=(s,)) for s in servers]
    for t in threads: t.start()
    for t in threads: t.join()
    """
)


class TcpSink:
    """A loopback TCP connection taking protocol lines."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

    async def send_raw(self, data: bytes) -> int:
        sent = time.monotonic_ns()
        self.writer.write(data)
        if self.writer.transport.get_write_buffer_size() > 256 * 1024:
            await self.writer.drain()
        return sent


def encoder():
    """The wire codec when bench.agent is present, else the same framing written out here."""
    try:
        from bench.agent.wire import encode

        return encode, "bench.agent.wire"
    except ImportError:
        import zlib

        def encode(msg: dict) -> bytes:
            body = json.dumps(msg, separators=(",", ":")).encode()
            return b"~" + body + b"*" + f"{zlib.crc32(body):08x}".encode() + b"\n"

        return encode, "inline framing"


async def main(args: argparse.Namespace) -> dict:
    session = read_session(args.session)
    encode, codec = encoder()
    plan = build_plan(session, encode)
    proc = subprocess.Popen([sys.executable, "-c", DRAIN, str(args.sinks)], stdout=subprocess.PIPE, text=True)
    try:
        ports = [int(p) for p in proc.stdout.readline().split()]
        writers = [(await asyncio.open_connection("127.0.0.1", p))[1] for p in ports]
        tracks = [Track(f"sink-{k}", TcpSink(w)) for k, w in enumerate(writers)]
        pacer = Pacer()
        outcome = await Replayer(plan, pacer).play(tracks, args.speed)
        for w in writers:
            w.close()
            await w.wait_closed()
        await asyncio.to_thread(proc.wait, 10)
    finally:
        if proc.poll() is None:
            proc.kill()
    errors = [e for t in tracks for e in t.send_errors_ns()]
    s = Histogram("send_error", "ns").record_all(errors).summary()
    return {
        "benchmark": "replay_send_error",
        "session": str(args.session),
        "codec": codec,
        "sinks": args.sinks,
        "speed": args.speed,
        "inputs_per_sink": len(plan.inputs),
        "sends": len(errors),
        "seconds": round((outcome.finished_ns - outcome.started_ns) / 1e9, 2),
        "p50_ms": round(s.p50 / 1e6, 4),
        "p99_ms": round(s.p99 / 1e6, 4),
        "max_ms": round(s.max / 1e6, 4),
        "mean_ms": round(s.mean / 1e6, 4),
        "goal_p99_ms": 0.5,
        "goal_met": s.p99 <= 500_000,
        "sleeps": outcome.sleeps,
        "spins": outcome.spins,
        "realtime_priority": outcome.realtime,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--session", type=Path, default=ROOT / "fixtures" / "sessions" / "combat.mcap")
    parser.add_argument("--sinks", type=int, default=4)
    parser.add_argument("--speed", type=float, default=1.0)
    result = asyncio.run(main(parser.parse_args()))
    print(json.dumps(result))
