"""`hilbench virtual up`: one JSON line of URLs per device, boards reachable, clean stop on SIGINT."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from bench.virtual.esp32c6.control import control_request
from tests.conftest import hilbench
from tests.esp32c6_support import REPO

pytestmark = pytest.mark.e2e


def test_virtual_up_serves_until_interrupted(tmp_path: Path) -> None:
    env = {**os.environ, "HILBENCH_STATE_DIR": str(tmp_path)}
    argv = hilbench("virtual", "up", "--device", "c6-a", "--device", "c6-b", "--json")
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        lines = [json.loads(proc.stdout.readline()) for _ in range(2)]
        assert [(d["name"], d["kind"]) for d in lines] == [("c6-a", "esp32c6"), ("c6-b", "esp32c6")]
        for entry in lines:
            urls = entry["urls"]
            assert urls["rfc2217"].startswith("rfc2217://") and urls["socket"].startswith("socket://")
            assert Path(urls["pty"]).exists()
            assert control_request(urls["control"], "status")["mode"] in ("boot-loop", "app")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 130  # 128 + SIGINT
        with pytest.raises(OSError):
            control_request(lines[0]["urls"]["control"], "status", timeout_s=2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_agent_transport_opens_an_rfc2217_board(tmp_path: Path) -> None:
    """bench.agent.transport.open_transport on an rfc2217:// URL (pyserial has no write timeout there)."""
    import asyncio

    from bench.agent.transport import open_transport
    from tests.esp32c6_support import FIRMWARE, preflash, virtual_c6

    with virtual_c6(preflash(tmp_path, FIRMWARE.read_bytes()), name="c6-tr") as board:
        board.wait_mode("app")

        async def talk() -> bytes:
            transport = await open_transport(board.urls["rfc2217"])
            try:
                await transport.send(b"\r\x03\r\x02")  # back to the friendly REPL: it prints its banner
                while b"MicroPython" not in (line := await asyncio.wait_for(transport.readline(), 10)):
                    pass
                return line
            finally:
                await transport.close()

        assert b"ESP32C6" in asyncio.run(talk())
