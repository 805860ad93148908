"""The virtual ESP32-C6 is a sandbox: code sent to it cannot run host programs or reach host files."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.landlock import abi_version, program_argv
from tests.conftest import REPO
from tests.esp32c6_support import FIRMWARE, Board, mpremote, preflash, virtual_c6

MAC = "60:55:f9:c6:20:09"


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory):
    state = preflash(tmp_path_factory.mktemp("c6"), FIRMWARE.read_bytes())
    (state / "host-secret.txt").write_text("HOST-SECRET")  # next to the board's folder, on the host
    with virtual_c6(state, name="c6-sb", mac=MAC) as running:
        assert running.wait_mode("app")["mode"] == "app"
        yield running


ESCAPES = {
    "os.system": "import os; os.system('touch /tmp/hilbench-escaped')",
    "uos.system": "import uos; uos.system('touch /tmp/hilbench-escaped')",
    "os.getenv": "import os; print(os.getenv('HOME'))",
    "vfs.VfsPosix": "import vfs; vfs.mount(vfs.VfsPosix('/'), '/host')",
    "dotdot from /": "print(open('/../host-secret.txt').read())",
    "dotdot relative": "import os; os.chdir('/lib'); print(open('../../../host-secret.txt').read())",
    "chdir above /": "import os; os.chdir('/..'); os.chdir('..'); print(open('host-secret.txt').read())",
    "listdir above /": "import os; print(os.listdir('/../..'))",
    "globals of os": "import os; print(os.uname.__globals__['_os'].system)",
    "os.VfsPosix": "import os; os.mount(os.VfsPosix('/'), '/host')",
    "mount table": "import os; fs = os.mount()[0][0]; print(fs.open('/../host-secret.txt', 'r').read())",
}


@pytest.mark.e2e
@pytest.mark.parametrize("name", list(ESCAPES))
def test_board_code_cannot_reach_the_host(name: str, board: Board) -> None:
    ran = mpremote("connect", board.urls["socket"], "exec", ESCAPES[name])
    assert "HOST-SECRET" not in ran.stdout and not Path("/tmp/hilbench-escaped").exists()
    if name == "listdir above /":  # `..` stops at the board's "/": it lists the board's own folder
        assert ran.returncode == 0 and "host-secret.txt" not in ran.stdout, ran.stdout
    else:
        assert ran.returncode != 0, ran.stdout + ran.stderr


@pytest.mark.e2e
def test_the_board_still_has_its_own_filesystem(board: Board) -> None:
    code = (
        "import os; os.mkdir('/d'); open('/d/f.part','w').write('x'); os.chdir('/d'); os.rename('f.part', 'f.txt'); "
        "print(os.getcwd(), os.listdir('.'), os.stat('/d/f.txt')[6], open('../d/f.txt').read())"
    )
    ran = mpremote("connect", board.urls["socket"], "exec", code)
    assert ran.returncode == 0 and "/d ['f.txt'] 1 x" in ran.stdout, ran.stdout + ran.stderr
    assert (board.fs_dir / "d" / "f.txt").read_text() == "x"


@pytest.mark.skipif(abi_version() < 4, reason="the kernel has no Landlock (ABI 4+: TCP rules)")
def test_landlock_confines_a_process_to_its_folder(tmp_path: Path) -> None:
    inside = tmp_path / "board"
    inside.mkdir()
    outside = tmp_path / "secret.txt"
    outside.write_text("s")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        argv = [sys.executable, "-m", "bench.core.landlock", "--rw", str(inside), "--",
                "tests.robustness.landlock_probe", str(inside), str(outside),
                str(listener.getsockname()[1])]  # fmt: skip
        ran = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["write inside"] == result["read inside"] == "allowed"
    for attempt in ("read outside", "read via ..", "write outside", "spawn", "tcp connect"):
        assert result[attempt].startswith("refused"), (attempt, result)


@pytest.mark.skipif(abi_version() < 1, reason="the kernel has no Landlock")
@pytest.mark.programs("qemu-system-aarch64")
def test_landlock_runs_qemu_with_its_given_files_only(tmp_path: Path) -> None:
    """QEMU confined as the counted ESP32-C6 core runs (bench.core.landlock.program_argv): a kernel among the files it
    was given loads; a host file it was not given cannot be opened, and no other program can be run."""
    qemu = shutil.which("qemu-system-aarch64")
    assert qemu is not None
    given = tmp_path / "given.bin"
    given.write_bytes(b"\x7f\x20\x03\xd5" * 4)  # `wfi`: a kernel QEMU loads as raw bytes
    secret = tmp_path / "secret.bin"
    secret.write_bytes(given.read_bytes())
    machine = [qemu, "-M", "virt", "-cpu", "cortex-a53", "-nodefaults", "-display", "none", "-monitor", "none"]
    quit_qmp = '{"execute": "qmp_capabilities"}\n{"execute": "quit"}\n'

    def run(kernel: Path) -> subprocess.CompletedProcess[str]:
        argv = program_argv([*machine, "-kernel", str(kernel), "-S", "-qmp", "stdio"], read_only=[str(given)])
        return subprocess.run(argv, cwd=REPO, input=quit_qmp, capture_output=True, text=True, timeout=60)

    allowed = run(given)
    assert allowed.returncode == 0 and '"return"' in allowed.stdout, allowed.stdout + allowed.stderr
    refused = run(secret)
    assert refused.returncode != 0 and "could not load kernel" in refused.stderr, refused.stderr
    other = program_argv([qemu])
    other[other.index("--") + 1] = "/bin/true"  # confined as QEMU is, another program
    spawn = subprocess.run(other, capture_output=True, text=True, timeout=60)
    assert spawn.returncode != 0 and "Permission denied" in spawn.stderr, spawn.stderr
