"""Benchmark: the replayer's send-time error with every channel of a fixture session playing into
4 agents at once (goal: P99 <= 0.5 ms).

    python -m tests.bench bench_replay [--target agents|tcp] [--session FILE] [--sinks 4] [--speed 1]

--target agents (default): 4 host/ agents deployed from their bundle and run as local processes over TCP,
frame loops running, through `replay_fleet` exactly as `hilbench replay` does (frames stored as they
arrive). --target tcp: 4 loopback TCP connections to one separate process that reads and discards (the
replayer alone). Prints one JSON line with the figures."""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from bench.agent import wire
from bench.measure.histogram import Histogram
from bench.replay.pacing import Pacer
from bench.replay.plan import build_plan
from bench.replay.player import Replayer, Track
from bench.replay.recording import read_session

ROOT = Path(__file__).resolve().parents[2]

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


async def main(args: argparse.Namespace) -> dict:
    """Run the chosen target; the figures as a dict."""
    if args.target == "agents":
        errors, extra = await play_into_agents(args)
    else:
        errors, extra = await play_into_tcp(args)
    s = Histogram("send_error", "ns").record_all(errors).summary()
    return {
        "benchmark": "replay_send_error",
        "target": args.target,
        "session": str(args.session),
        "sinks": args.sinks,
        "speed": args.speed,
        "sends": len(errors),
        "p50_ms": round(s.p50 / 1e6, 4),
        "p99_ms": round(s.p99 / 1e6, 4),
        "max_ms": round(s.max / 1e6, 4),
        "mean_ms": round(s.mean / 1e6, 4),
        "goal_p99_ms": 0.5,
        "goal_met": s.p99 <= 500_000,
        **extra,
    }


async def play_into_agents(args: argparse.Namespace) -> tuple[list[int], dict]:
    """replay_fleet into `args.sinks` host agents; every input's send error, and run figures."""
    import shutil
    import tempfile

    from bench import bundles
    from bench.agent.endpoint import AgentEndpoint
    from bench.agent.session import AgentSession
    from bench.agent.transport import StreamTransport
    from bench.config.fleet import Device
    from bench.replay.service import replay_fleet
    from bench.store.results import open_store
    from tests.host_agent_support import deploy_host_bundle

    tmp = Path(tempfile.mkdtemp(prefix="bench-replay-"))
    settings = {"model": "npc-policy-int8", "memory_limit_mb": 256, "fps_target": 30, "vsync_hz": 60}
    devices = [Device(f"host-{k}", "pi5", None, virtual=True, settings=settings) for k in range(args.sinks)]
    procs, ports = [], {}
    try:
        for dev in devices:
            folder = tmp / dev.name
            deploy_host_bundle(dev, folder)
            argv = bundles.host_agent_command(dev, str(folder), python=sys.executable, listen="127.0.0.1:0")
            log = (folder / "agent.log").open("wb")
            procs.append(subprocess.Popen([*argv, "--port-file", str(folder / "port")], cwd=folder, stdout=log,
                                          stderr=subprocess.STDOUT))  # fmt: skip
        for dev in devices:
            port_file = tmp / dev.name / "port"
            while not (port_file.is_file() and port_file.read_text().strip()):
                await asyncio.sleep(0.05)
            ports[dev.name] = int(port_file.read_text())

        async def open_agent(device: Device) -> AgentEndpoint:
            transport = await StreamTransport.connect("127.0.0.1", ports[device.name])
            session = await AgentSession.open(transport, device=device.name)
            return AgentEndpoint(session, session.close)

        store = open_store(tmp / "results.sqlite")
        result = await replay_fleet(
            devices, args.session, store, open_agent, speed=args.speed, realtime=not args.no_realtime
        )
        errors = [e for r in result.devices if r.track for e in r.track.send_errors_ns()]
        extra = {
            "inputs_per_sink": result.inputs,
            "devices_ok": sum(r.status == "ok" for r in result.devices),
            "frames_stored": store.frames.frame_count(result.run_id),
            "realtime_priority": result.realtime,
        }
        store.close()
        return errors, extra
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


async def play_into_tcp(args: argparse.Namespace) -> tuple[list[int], dict]:
    """The replayer alone into loopback TCP sinks; every input's send error, and run figures."""
    session = read_session(args.session)
    plan = build_plan(session, wire.encode)
    proc = subprocess.Popen([sys.executable, "-c", DRAIN, str(args.sinks)], stdout=subprocess.PIPE, text=True)
    try:
        ports = [int(p) for p in proc.stdout.readline().split()]
        writers = [(await asyncio.open_connection("127.0.0.1", p))[1] for p in ports]
        tracks = [Track(f"sink-{k}", TcpSink(w)) for k, w in enumerate(writers)]
        pacer = Pacer()
        outcome = await Replayer(plan, pacer, realtime=not args.no_realtime).play(tracks, args.speed)
        for w in writers:
            w.close()
            await w.wait_closed()
        await asyncio.to_thread(proc.wait, 10)
    finally:
        if proc.poll() is None:
            proc.kill()
    errors = [e for t in tracks for e in t.send_errors_ns()]
    extra = {
        "inputs_per_sink": len(plan.inputs),
        "seconds": round((outcome.finished_ns - outcome.started_ns) / 1e9, 2),
        "sleeps": outcome.sleeps,
        "spins": outcome.spins,
        "realtime_priority": outcome.realtime,
    }
    return errors, extra


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--session", type=Path, default=ROOT / "fixtures" / "sessions" / "combat.mcap")
    parser.add_argument("--target", choices=("agents", "tcp"), default="agents")
    parser.add_argument("--sinks", type=int, default=4)
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument("--no-realtime", action="store_true", help="pace at normal scheduling priority")
    result = asyncio.run(main(parser.parse_args()))
    print(json.dumps(result))
