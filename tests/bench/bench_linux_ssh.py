"""Benchmark: what the SSH path costs on a virtual Pi 5 (real sshd on loopback).

Prints: master connect time; remote command round trip over the ControlMaster vs a fresh ssh per
command; deploy time for a 1 MB + 8 small-file bundle (first, unchanged, one file changed); and the
round trip of a 64-byte line through the SSH-forwarded port vs straight to the same loopback server.

    python -m tests.bench bench_linux_ssh [--n 50]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import shlex
import statistics
import subprocess
import tempfile
import time

from bench.config.fleet import load_fleet
from bench.devices.deploy import deploy
from bench.links.ssh import SshConnection
from bench.virtual import virtual_fleet

ECHO = (
    "import socket\n"
    "s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(1)\n"
    "open('bench-echo.port','w').write(str(s.getsockname()[1]))\n"
    "c,_=s.accept(); f=c.makefile('rwb')\n"
    "for line in f: f.write(line); f.flush()\n"
)


def ms(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
    return f"P50 {statistics.median(values) * 1e3:.2f} ms, P95 {p95 * 1e3:.2f} ms (n={len(values)})"


async def line_rtts(port: int, n: int) -> list[float]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    out = []
    payload = b"x" * 63 + b"\n"
    for _ in range(n):
        t = time.perf_counter()
        writer.write(payload)
        await writer.drain()
        await reader.readline()
        out.append(time.perf_counter() - t)
    writer.close()
    return out


async def start_echo(conn: SshConnection) -> int:
    """Start a detached one-client echo server on the device (loopback only); the port it listens on there."""
    await conn.run(
        f"cd ~ && rm -f bench-echo.port && (setsid nohup python3 -c {shlex.quote(ECHO)} >/dev/null 2>&1 </dev/null &)"
    )
    wait = "cd ~; for i in $(seq 100); do [ -s bench-echo.port ] && break; sleep 0.1; done; cat bench-echo.port"
    return int((await conn.run(wait)).text)


async def main(n: int) -> None:
    device = dataclasses.replace(next(d for d in load_fleet() if d.kind == "pi5"), os=None)  # loopback stand-in
    async with virtual_fleet([device]) as (resolved, _running):
        dev = resolved[0]
        conn = SshConnection(dev.name, dev.link)
        t = time.perf_counter()
        await conn.connect()
        print(f"master connect: {(time.perf_counter() - t) * 1e3:.1f} ms")
        rtt = []
        for _ in range(n):
            t = time.perf_counter()
            await conn.run("true")
            rtt.append(time.perf_counter() - t)
        print(f"command over ControlMaster: {ms(rtt)}")
        fresh_args = ["ControlPath=none" if a.startswith("ControlPath=") else a for a in conn.base_args()]
        fresh = []
        for _ in range(max(5, n // 5)):
            t = time.perf_counter()
            subprocess.run([*fresh_args, conn.destination, "true"], check=True)
            fresh.append(time.perf_counter() - t)
        print(f"command with a fresh ssh each: {ms(fresh)}")

        files = {f"agent/mod{i}.py": os.urandom(4000) for i in range(8)}
        files["models/model.tflite"] = os.urandom(1 << 20)
        for label, bundle in (
            ("first", files),
            ("unchanged", files),
            ("one changed", {**files, "agent/mod3.py": os.urandom(4000)}),
        ):
            t = time.perf_counter()
            result = await deploy(conn, "$HOME/bench-deploy", bundle)
            took = (time.perf_counter() - t) * 1e3
            print(f"deploy {label}: {took:.1f} ms, sent {len(result.sent)} file(s), {result.bytes_sent} bytes")

        port = await start_echo(conn)
        local = await conn.forward(port)
        print(f"64-byte line via SSH forward: {ms(await line_rtts(local, n * 10))}")
        port = await start_echo(conn)
        print(f"64-byte line direct to loopback: {ms(await line_rtts(port, n * 10))}")
        await conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=50)
    args = parser.parse_args()
    os.environ.setdefault("HILBENCH_STATE_DIR", tempfile.mkdtemp(prefix="hilbench-bench-"))
    asyncio.run(main(args.n))
