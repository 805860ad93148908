"""The virtual ESP32-C6 as the real tools meet it (issue 31 case 5, issue 27 item 7): its ports admit whom a
board's /dev/ttyACM0 would and its control API only the token's holder; its filesystem is the chip's 6 MB vfs
partition; `mpremote mount` and mpremote's file commands work through the sandbox."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from bench.virtual.port_access import serial_gid
from tests.esp32c6_support import Board, mpremote, run_on

pytestmark = pytest.mark.e2e

VFS_BLOCKS = (8 * 1024 * 1024 - 0x200000) // 4096  # 8 MB flash, the vfs partition from 0x200000 to the end


def _mpremote_in(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mpremote", *args], capture_output=True, text=True, timeout=90, cwd=folder
    )


def test_mount_then_import_a_host_module(c6_board: Board, tmp_path: Path) -> None:
    (tmp_path / "hostmod.py").write_text("VALUE = 42\ndef hello():\n    return 'from the host'\n")
    blob = bytes(range(256)) * 64 + b"\x03\x04\n\r\x10R\x00\x01"  # Ctrl-C, Ctrl-D, newlines, the frame marker
    (tmp_path / "blob.bin").write_bytes(blob)
    code = (
        "import hostmod, os, hashlib, binascii\n"
        "print('imported', hostmod.VALUE, hostmod.hello(), os.getcwd())\n"
        "print('sha', binascii.hexlify(hashlib.sha256(open('blob.bin', 'rb').read()).digest()).decode())\n"
        "open('made_on_board.bin', 'wb').write(bytes(range(256)))\n"
    )
    ran = _mpremote_in(tmp_path, "connect", c6_board.urls["socket"], "mount", ".", "exec", code)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "imported 42 from the host /remote" in ran.stdout
    assert f"sha {hashlib.sha256(blob).hexdigest()}" in ran.stdout  # binary bytes crossed the console untouched
    assert (tmp_path / "made_on_board.bin").read_bytes() == bytes(range(256))
    assert not (c6_board.fs_dir / "made_on_board.bin").exists()
    after = mpremote("connect", c6_board.urls["socket"], "exec", "import os; print(os.getcwd(), os.mount())")
    assert after.returncode == 0 and "/remote" not in after.stdout, after.stdout  # unmounted at the end


def test_mpremote_file_commands(c6_board: Board, tmp_path: Path) -> None:
    src = tmp_path / "note.txt"
    src.write_text("line one\nline two\n")
    url = c6_board.urls["socket"]
    steps = [
        ("fs", "mkdir", ":box"),
        ("fs", "cp", str(src), ":box/note.txt"),
        ("fs", "ls", ":box"),
        ("fs", "cat", ":box/note.txt"),
        ("df",),
        ("exec", "import os; print(sorted(os.listdir('/box')), os.stat('/box/note.txt')[6])"),
        ("fs", "rm", ":box/note.txt"),
        ("fs", "rmdir", ":box"),
    ]
    out = {}
    for step in steps:
        ran = mpremote("connect", url, *step)
        assert ran.returncode == 0, (step, ran.stdout, ran.stderr)
        out[step[:2]] = ran.stdout
    assert "note.txt" in out[("fs", "ls")] and "18" in out[("fs", "ls")]
    assert out[("fs", "cat")].replace("\r\n", "\n") == "line one\nline two\n"
    assert str(VFS_BLOCKS * 4096 // 1024) in out[("df",)] or str(VFS_BLOCKS * 4096) in out[("df",)], out[("df",)]
    assert (
        "['note.txt'] 18" in out[("exec", "import os; print(sorted(os.listdir('/box')), os.stat('/box/note.txt')[6])")]
    )
    assert not (c6_board.fs_dir / "box").exists()


def test_os_and_vfs_have_the_esp32_ports_names(c6_board: Board) -> None:
    code = (
        "import os, vfs\n"
        "names = ['mount', 'umount', 'sep', 'unlink', 'VfsFat', 'VfsLfs2', 'statvfs', 'ilistdir', 'sync', 'uname']\n"
        "print('missing', [n for n in names if not hasattr(os, n)], [n for n in ('mount', 'umount', 'VfsLfs2')"
        " if not hasattr(vfs, n)], hasattr(vfs, 'VfsPosix'), os.sep)\n"
        "try:\n    os.nothere\nexcept AttributeError as e:\n    print('err', e)\n"
    )
    printed = run_on(c6_board, code)
    assert "missing [] [] False /" in printed
    assert "board_os" not in printed  # the module calls itself os, as on the chip


def test_flash_is_bounded_by_the_vfs_partition(c6_board: Board) -> None:
    code = (
        "import os\n"
        "print('statvfs', os.statvfs('/'))\n"
        "f = open('/fill.bin', 'wb'); n = 0\n"
        "try:\n"
        "    while n < 4000:\n"
        "        f.write(b'x' * 65536); n += 1\n"
        "except OSError as e:\n"
        "    print('full', e.errno, n)\n"
        "f.close(); print('size', os.stat('/fill.bin')[6], os.statvfs('/')[3])\n"
        "os.remove('/fill.bin'); print('after', os.statvfs('/')[3])\n"
    )
    printed = run_on(c6_board, code, timeout_s=120)
    lines = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in printed.splitlines() if " " in line}
    fields = [int(v) for v in lines["statvfs"].strip("()").split(",")]
    assert fields[:3] == [4096, 4096, VFS_BLOCKS] and fields[9] == 255  # what littlefs reports on the chip
    errno, chunks = map(int, lines["full"].split())
    assert errno == 28 and 80 < chunks < 96  # ENOSPC near 6 MB, not the host disk's 200 MB+
    size, free = map(int, lines["size"].split())
    assert size <= VFS_BLOCKS * 4096 and free < 16
    assert int(lines["after"]) >= VFS_BLOCKS - 4
    assert not (c6_board.fs_dir / "fill.bin").exists()


def test_control_port_needs_its_token(c6_board: Board) -> None:
    url = c6_board.urls["control"]
    address, _, token = url.removeprefix("tcp://").partition("/")
    host, _, port = address.rpartition(":")
    assert len(token) >= 32

    def ask(request: dict) -> dict:
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(json.dumps(request).encode() + b"\n")
            return json.loads(sock.makefile().readline())

    assert ask({"op": "status"})["ok"] is False
    refused = ask({"op": "power_off", "token": "x" * len(token)})
    assert refused["ok"] is False and "token" in refused["error"]
    assert c6_board.control("status")["power"] == "on"  # the refused power_off did nothing
    assert ask({"op": "status", "token": token})["ok"] is True


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the tools as another user")
def test_serial_ports_admit_whom_dev_ttyacm0_would(c6_board: Board) -> None:
    gid = serial_gid()
    assert gid is not None, "this host has a dialout group"
    pty = os.stat(c6_board.urls["pty"])
    assert pty.st_gid == gid and stat.S_IMODE(pty.st_mode) == 0o660
    home = Path(tempfile.mkdtemp(prefix="c6-user-"))
    os.chown(home, 54321, 54321)
    venv_python = str(Path(sys.prefix) / "bin" / "python")

    def as_user(groups: str, *argv: str) -> subprocess.CompletedProcess[str]:
        prefix = ["setpriv", "--reuid=54321", "--regid=54321", "--clear-groups" if not groups else f"--groups={groups}"]
        env = {"PATH": os.environ["PATH"], "HOME": str(home)}
        return subprocess.run([*prefix, "--", venv_python, "-m", *argv], capture_output=True, text=True, timeout=120,
                              cwd="/", env=env)  # fmt: skip

    try:
        mp = ["mpremote", "connect", c6_board.urls["socket"], "exec", "print('hello from', 6 * 7)"]
        esp = ["esptool", "--port", c6_board.urls["rfc2217"], "chip-id"]
        refused_mp, refused_esp = as_user("", *mp), as_user("", *esp)
        assert refused_mp.returncode != 0 and "hello from 42" not in refused_mp.stdout
        assert refused_esp.returncode != 0 and "ESP32-C6" not in refused_esp.stdout
        admitted_mp = as_user(str(gid), *mp)
        assert admitted_mp.returncode == 0 and "hello from 42" in admitted_mp.stdout, admitted_mp.stderr
        admitted_esp = as_user(str(gid), *esp)
        assert admitted_esp.returncode == 0 and "ESP32-C6" in admitted_esp.stdout, admitted_esp.stdout
    finally:
        c6_board.control("power_cycle")  # esptool left the chip in its loader
        shutil.rmtree(home, ignore_errors=True)
    log = c6_board.control("log")  # the board's UART log; refusals go to board.log
    assert log["ok"]
    assert "refused uid 54321" in (c6_board.virtual.state_dir / "board.log").read_text()
