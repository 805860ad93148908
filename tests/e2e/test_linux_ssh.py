"""The SSH link through a real OpenSSH sshd (virtual Jetson and Pi 5): pinned host keys, clear errors,
commands over the ControlMaster, port forwards, and reconnecting after the connection is cut."""

from __future__ import annotations

import asyncio
import dataclasses
import shlex
import subprocess
from pathlib import Path

import pytest

from bench.core.errors import ConfigError, DeviceUnreachable, ExitCode
from bench.links.ssh import SshConnection, free_local_port
from tests.linux_support import RunningBoard

pytestmark = pytest.mark.e2e


def _connect(board: RunningBoard, timeout_s: float | None = None, **link_changes: object) -> None:
    """Connect to `board` over its link with `link_changes` and close: what a bench with that link meets."""
    link = dataclasses.replace(board.device.link, **link_changes)
    options = {} if timeout_s is None else {"connect_timeout_s": timeout_s}

    async def go() -> None:
        conn = SshConnection(board.device.name, link, **options)
        try:
            await conn.connect()
        finally:
            await conn.close()

    board.loop.run(go())


def test_commands_run_in_the_devices_own_root(linux_board: RunningBoard) -> None:
    async def go() -> tuple[str, list[str]]:
        conn = SshConnection(linux_board.device.name, linux_board.device.link)
        try:
            result = await conn.run('echo "$HOME"; command -v python3')
            return result.text, [e.kind for e in conn.events]
        finally:
            await conn.close()

    text, events = linux_board.loop.run(go())
    home, python = text.split()
    assert home == str(linux_board.virtual.root / "home")
    assert python == str(linux_board.virtual.root / "bin" / "python3")
    assert events == ["connected"]


def test_wrong_pinned_host_key_is_refused_naming_the_device(linux_board: RunningBoard, tmp_path: Path) -> None:
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    wrong = " ".join(other.with_suffix(".pub").read_text().split()[:2])
    with pytest.raises(ConfigError, match=f"device '{linux_board.device.name}'.*host key verification failed"):
        _connect(linux_board, host_key=wrong)


def test_unknown_host_key_is_refused_with_checking_on(linux_board: RunningBoard, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(ConfigError, match="hilbench linux pin"):
        _connect(linux_board, host_key=None, known_hosts=empty)


def test_unknown_user_key_is_unreachable_with_a_hint(linux_board: RunningBoard, tmp_path: Path) -> None:
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    with pytest.raises(DeviceUnreachable, match="authorized_keys") as info:
        _connect(linux_board, key=stranger)
    assert info.value.exit_code == ExitCode.UNREACHABLE and linux_board.device.name in str(info.value)


def test_closed_port_is_unreachable_naming_the_device(linux_board: RunningBoard) -> None:
    with pytest.raises(DeviceUnreachable, match=f"device '{linux_board.device.name}'.*cannot connect over SSH"):
        _connect(linux_board, timeout_s=3, port=free_local_port())


async def _echo_once(port: int, payload: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(payload)
    await writer.drain()
    data = await asyncio.wait_for(reader.readline(), 10)
    writer.close()
    return data


def test_forward_and_commands_survive_a_dropped_connection(linux_board: RunningBoard) -> None:
    """A detached loopback-only echo server on the device is reached through the same local forward
    before and after sshd cuts every connection; the bench logs the drop and the reconnect."""
    echo = (
        "import socket,sys\n"
        "s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(4)\n"
        "open('echo.port','w').write(str(s.getsockname()[1]))\n"
        "while True:\n"
        "    c,_=s.accept(); f=c.makefile('rwb'); f.write(b'echo:'+f.readline()); f.flush(); c.close()\n"
    )

    async def go() -> tuple[bytes, bytes, list[str]]:
        conn = SshConnection(linux_board.device.name, linux_board.device.link)
        try:
            await conn.run(
                f"cd ~ && rm -f echo.port && (setsid nohup python3 -c {shlex.quote(echo)} >/dev/null 2>&1 </dev/null &)"
            )
            port = await conn.run(
                "cd ~; for i in $(seq 100); do [ -s echo.port ] && break; sleep 0.1; done; cat echo.port"
            )
            local = await conn.forward(int(port.text))
            before = await _echo_once(local, b"one\n")
            assert linux_board.virtual.drop_connections() >= 1
            await asyncio.sleep(0.3)
            assert not conn.connected
            assert (await conn.run("echo back")).text.strip() == "back"
            after = await _echo_once(local, b"two\n")
            return before, after, [e.kind for e in conn.events]
        finally:
            await conn.close()

    before, after, events = linux_board.loop.run(go(), timeout_s=90)
    assert before == b"echo:one\n" and after == b"echo:two\n"
    assert events == ["connected", "dropped", "reconnected"]
