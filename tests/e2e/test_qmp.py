"""QMP against a real QEMU machine (a bare `virt` board, no guest needed): status, pause and resume (how a
console is made to hang), and QmpPower's off (`quit`) and status."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import pytest

from bench.power import PowerState
from bench.power.qmp import QmpClient, QmpPower

pytestmark = pytest.mark.e2e


def test_qmp_pause_resume_reset_and_power_off(tmp_path: Path) -> None:
    sock = tmp_path / "qmp.sock"
    argv = ["qemu-system-aarch64", "-M", "virt", "-cpu", "cortex-a57", "-m", "64", "-nographic", "-monitor", "none",
            "-serial", "none", "-S", "-qmp", f"unix:{sock},server=on,wait=off"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while not sock.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)

        async def scenario():
            client = await QmpClient.connect(sock)
            try:
                states = [(await client.execute("query-status"))["status"]]
                await client.execute("cont")
                states.append((await client.execute("query-status"))["status"])
                await client.execute("stop")  # the machine stops answering: a hung console
                states.append((await client.execute("query-status"))["status"])
                await client.execute("system_reset")
                await client.execute("cont")
                states.append((await client.execute("query-status"))["status"])
            finally:
                await client.close()
            booted: list[int] = []

            async def boot() -> None:
                booted.append(1)

            power = QmpPower("console", lambda: sock if proc.poll() is None else None, boot)
            before = await power.status()
            await power.off()
            await asyncio.to_thread(proc.wait, 10)
            after = await power.status()
            await power.on()
            return states, before, after, booted

        states, before, after, booted = asyncio.run(scenario())
        assert states[:3] == ["prelaunch", "running", "paused"] and states[3] == "running"
        assert before == PowerState.ON and after == PowerState.OFF and proc.returncode == 0
        assert booted == [1], "power on boots a machine that is off"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
