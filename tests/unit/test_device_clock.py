"""Which clock a device's figures come from: reported by the device (its agent's platform), not assumed."""

from __future__ import annotations

import pytest

from bench.bundles.fingerprint import device_clock
from bench.config.fleet import Device


@pytest.mark.parametrize(
    ("cmdline", "suffix"),
    [
        ("console=ttyAMA0 root=/dev/vda1 npc_timing=icount", "/qemu-icount"),
        ("console=ttyAMA0 npc_timing=realtime quiet", "/qemu-realtime"),
        ("console=ttyAMA0 root=/dev/mmcblk0p2 rootwait", ""),  # a real board's firmware adds no such word
    ],
)
def test_the_host_agent_names_an_emulated_clock_from_the_kernel_command_line(tmp_path, monkeypatch, cmdline, suffix):
    import npc_host_agent as agent  # host/ is on the tests' path (pyproject's pythonpath)

    platform_name = agent.platform_name

    monkeypatch.delenv("NPC_PLATFORM_TAG", raising=False)
    path = tmp_path / "cmdline"
    path.write_text(cmdline + "\n")
    assert platform_name(str(path)).endswith(suffix)
    assert "/" not in platform_name(str(tmp_path / "missing"))
    # the agent spins before deadlines except on an instruction-counted clock, where it only spends guest time
    assert (agent.default_spin_us(platform_name(str(path))) == 0) == (suffix == "/qemu-icount")


def test_the_fingerprint_clock_follows_what_the_agent_reports() -> None:
    board = Device("orin-1", "jetson-orin-nx", None, virtual=True)
    assert device_clock(board, {"platform": "linux-aarch64/qemu-icount"}) == "icount"
    assert device_clock(board, {"platform": "linux-aarch64"}) == "real time"
    assert device_clock(board, {}) == "real time"
    # a virtual ESP32-C6 runs MicroPython's unix port on the bench host: its times are the host's, not the chip's
    assert device_clock(board, {"platform": "micropython-linux"}) == "realtime"
    assert device_clock(board, {"platform": "micropython-esp32"}) == "real time"


@pytest.mark.parametrize(
    ("version", "suffix"),
    [
        ("v1.29.0-preview on 2026-01-01 qemu-icount", "/qemu-icount"),  # the virtual ESP32-C6's counted firmware
        ("v1.28.0 on 2026-04-06", ""),  # a chip's own build says nothing of the kind
    ],
)
def test_the_micropython_agent_names_a_counted_clock_from_the_firmware(monkeypatch, version, suffix) -> None:
    import os
    import sys

    import npc_agent as agent  # micropython/ is on the tests' path (pyproject's pythonpath)

    monkeypatch.setattr(os, "uname", lambda: os.uname_result(("esp32", "", "", version, "")))
    name = agent.platform_name()
    assert name == "micropython-" + sys.platform + suffix
    assert (agent.spin_us(name) == 0) == (suffix == "/qemu-icount")
    board = Device("c6-a", "esp32c6", None, virtual=True)
    assert device_clock(board, {"platform": "micropython-esp32" + suffix}) == ("icount" if suffix else "real time")
