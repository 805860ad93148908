"""host/ agent over TCP (how the bench reaches Jetson/Pi 5/ARM64 targets), and its portable verifier."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import bundles
from bench.agent.session import AgentError, AgentSession, LoopStart
from bench.agent.transport import open_transport
from bench.config.fleet import Device
from tests.conformance.harness import HostAgent

pytestmark = pytest.mark.e2e


@contextlib.contextmanager
def tcp_agent(folder: Path, extra: list[str] | None = None) -> Iterator[tuple[subprocess.Popen, int]]:
    """The host agent deployed in `folder`, listening on a free loopback port: (its process, the port); killed
    after if it is still running."""
    device = Device(name="tcp-host", kind="pi5", link=None, settings={"model": "npc-policy-int8"})
    HostAgent(folder)  # deploys the bundle
    port_file = folder / "port"
    argv = bundles.host_agent_command(device, str(folder), python=sys.executable, listen="127.0.0.1:0")
    proc = subprocess.Popen([*argv, "--port-file", str(port_file), *(extra or [])], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while not port_file.is_file() or not port_file.read_text().strip():
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "agent did not start listening"
            time.sleep(0.05)
        yield proc, int(port_file.read_text())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def connect(port: int, device: str) -> AgentSession:
    """A bench's session with the agent on loopback `port`."""
    return await AgentSession.open(await open_transport(f"tcp://127.0.0.1:{port}"), device=device)


def test_two_benches_on_tcp_both_get_frames_and_shutdown_ends_the_agent(tmp_path):
    async def body(port: int):
        a = await connect(port, "tcp-a")
        b = await connect(port, "tcp-b")
        await a.sync_clock(8)
        assert abs(a.clock.offset_ns) < a.clock.uncertainty_ns + 1_000_000  # same host, same monotonic clock
        await a.start(LoopStart(fps=30, vsync_hz=30, frames=5))
        fa = [r async for r in a.frames(timeout=10)]
        fb = [r async for r in b.frames(timeout=10)]
        assert [r.i for r in fa] == [r.i for r in fb] == list(range(5))
        await b.close()  # one bench leaving does not disturb the agent
        assert (await a.stats())["frames"] == 5
        assert (await a.shutdown())["t"] == "bye"
        await a.close()

    with tcp_agent(tmp_path / "agent") as (proc, port):
        asyncio.run(body(port))
        assert proc.wait(timeout=10) == 0


def test_portable_p256_verifier_accepts_good_and_refuses_bad_signatures(tmp_path):
    folder = tmp_path / "agent"
    agent = HostAgent(tmp_path / "deploy")  # a second deployment, only to sign and copy models
    good_path, good = agent.deploy("npc-policy-int8-v2", 2)
    bad_path, bad = agent.deploy("npc-policy-int8-v2", 3, tamper="sig")

    async def body(port: int):
        s = await connect(port, "p256")
        assert s.info["verifier"] == "p256"
        assert (await s.load(good_path, good))["model"]["version"] == 2
        with pytest.raises(AgentError, match="signature"):
            await s.load(bad_path, bad)
        await s.shutdown()
        await s.close()

    with tcp_agent(folder, ["--verifier", "p256"]) as (_, port):
        for name in (good_path, bad_path):
            shutil.copyfile(agent.models_dir / name, folder / "models" / name)
        asyncio.run(body(port))


def test_a_huge_line_costs_an_error_not_the_link(tmp_path):
    async def body(port: int):
        s = await connect(port, "huge")
        await s.send_raw(b"~" + b"y" * 200_000 + b"*00000000\n")
        assert (await s.hello())["proto"] == 1  # the next request is answered, not swallowed
        assert any("bad_frame" in line for line in s.console)
        await s.shutdown()
        await s.close()

    with tcp_agent(tmp_path / "agent") as (_, port):
        asyncio.run(body(port))
