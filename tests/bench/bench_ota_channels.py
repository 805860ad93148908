"""Benchmark: one model update over CoAP and over gRPC, to the host agent, from the same store.

The host agent (deployed as for the conformance suite, on this machine) takes the same full update
(npc-policy-large-int8, 131 KB) alternately over the `coap` channel (block-wise, 1 KB blocks, loopback timing)
and the `grpc` channel (server-streaming, 16 KB chunks), each through a byte-counting relay in front of the
server. Prints per channel the median wall time of the `update` request, the agent's transfer time, the
payload bytes, and the bytes that crossed the link both ways (UDP payloads / the TCP stream; IP headers
not counted), next to the issue's question: a gRPC update's time and bytes against CoAP's for the same model.

    python -m tests.bench bench_ota_channels [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from bench.agent.session import AgentSession
from bench.models.signing import DEV_PRIVATE_KEY, load_private_key
from bench.ota.grpc_server import GrpcUpdateServer
from bench.ota.server import UpdateServer
from bench.ota.store import ModelStore
from bench.ota.timing import timing_named
from tests.conformance.harness import MODELS, HostAgent

MODEL = "npc-policy-large-int8"


class UdpRelay(asyncio.DatagramProtocol):
    """Client <-> upstream UDP relay on loopback, counting payload bytes."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.bytes = 0
        self.client: tuple[str, int] | None = None
        self.transport: asyncio.DatagramTransport | None = None
        self.up: asyncio.DatagramTransport | None = None

    def connection_made(self, transport) -> None:  # type: ignore[no-untyped-def]
        self.transport = transport

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.bytes += len(data)
        self.client = addr
        assert self.up is not None
        self.up.sendto(data)

    async def start(self) -> int:
        loop = asyncio.get_running_loop()
        relay = self

        class Up(asyncio.DatagramProtocol):
            def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
                relay.bytes += len(data)
                assert relay.transport is not None and relay.client is not None
                relay.transport.sendto(data, relay.client)

        self.up, _ = await loop.create_datagram_endpoint(Up, remote_addr=self.upstream)
        await loop.create_datagram_endpoint(lambda: self, local_addr=("127.0.0.1", 0))
        assert self.transport is not None
        return self.transport.get_extra_info("sockname")[1]


class TcpRelay:
    """Client <-> upstream TCP relay on loopback, counting stream bytes."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.bytes = 0

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            self.bytes += len(data)
            writer.write(data)
            await writer.drain()
        writer.close()

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True)

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._on_client, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]


async def one_update(s: AgentSession, url: str, manifest: dict, coap: dict | None) -> tuple[float, dict]:
    t = time.perf_counter()
    reply = await s.update(url, manifest, coap=coap, timeout=120)
    return time.perf_counter() - t, reply


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        agent = HostAgent(Path(tmp) / "agent")
        store = ModelStore(Path(tmp) / "store")
        key = load_private_key(DEV_PRIVATE_KEY)
        store.publish(MODELS / "npc-policy-int8.tflite", key, name="npc-policy", fmt="tflite-int8")
        v2 = store.publish(MODELS / f"{MODEL}.tflite", key, name="npc-policy", fmt="tflite-int8").manifest
        path = "models/npc-policy/tflite-int8/2"
        coap_timing = timing_named("loopback").to_json()

        async def body(s: AgentSession) -> dict[str, list]:
            out: dict[str, list] = {"coap": [], "grpc": []}
            async with UpdateServer(store) as coap, GrpcUpdateServer(store) as grpc_srv:
                udp = UdpRelay(("127.0.0.1", coap.port))
                tcp = TcpRelay(("127.0.0.1", grpc_srv.port))
                urls = {
                    "coap": f"coap://127.0.0.1:{await udp.start()}/{path}",
                    "grpc": f"grpc://127.0.0.1:{await tcp.start()}/{path}",
                }
                relays = {"coap": udp, "grpc": tcp}
                for _ in range(args.runs):
                    for channel in ("coap", "grpc"):
                        before = relays[channel].bytes
                        wall, reply = await one_update(s, urls[channel], v2, coap_timing if channel == "coap" else None)
                        out[channel].append((wall, reply, relays[channel].bytes - before))
            return out

        results = agent.run(body)
    print(f"model {MODEL}: {v2['size']} B, full update, {args.runs} runs per channel (loopback, shared machine)")
    for channel, runs in results.items():
        wall = statistics.median(r[0] for r in runs) * 1e3
        transfer = statistics.median(r[1]["transfer_us"] for r in runs) / 1e3
        wire = statistics.median(r[2] for r in runs)
        chunks = runs[0][1]["blocks"]
        print(
            f"{channel:5s}: update {wall:7.1f} ms wall, transfer {transfer:7.1f} ms on the agent; "
            f"payload {runs[0][1]['bytes']} B in {chunks} {'blocks' if channel == 'coap' else 'chunks'}; "
            f"on the link {wire} B ({100 * (wire - v2['size']) / v2['size']:.1f} % overhead)"
        )
    c, g = (statistics.median(r[0] for r in results[ch]) for ch in ("coap", "grpc"))
    print(f"gRPC / CoAP update time: {g / c:.2f} (goal: report it; the product ships gRPC for Linux, CoAP for MCUs)")


if __name__ == "__main__":
    main()
