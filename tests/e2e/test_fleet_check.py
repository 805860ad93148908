"""`hilbench fleet check` probes links for real: a live socket:// listener answers, a dead one does not."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from pathlib import Path

from bench.core.errors import ExitCode
from tests.conftest import REPO, hilbench


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_check(fleet: Path) -> tuple[int, dict]:
    proc = subprocess.run(
        hilbench("fleet", "check", "--fleet", str(fleet), "--json"), cwd=REPO, capture_output=True, text=True
    )
    return proc.returncode, json.loads(proc.stdout)


def test_check_live_and_dead_serial_links(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    live = listener.getsockname()[1]
    accepted = threading.Event()

    def accept() -> None:
        conn, _ = listener.accept()
        accepted.set()
        conn.close()

    threading.Thread(target=accept, daemon=True).start()
    dead = free_port()
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(
        f'[[device]]\nname = "live"\nkind = "esp32c6"\nport = "socket://127.0.0.1:{live}"\n'
        f'[[device]]\nname = "dead"\nkind = "esp32c6"\nport = "socket://127.0.0.1:{dead}"\n'
    )
    code, data = run_check(fleet)
    rows = {r["name"]: r for r in data["devices"]}
    assert code == ExitCode.UNREACHABLE
    assert rows["live"]["status"] == "reachable" and accepted.wait(5)
    assert rows["dead"]["status"] == "unreachable" and str(dead) in rows["dead"]["detail"]
    listener.close()


def test_check_all_live_exits_zero(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(
        f'[[device]]\nname = "live"\nkind = "esp32c6"\nport = "socket://127.0.0.1:{listener.getsockname()[1]}"\n'
    )
    code, data = run_check(fleet)
    assert code == ExitCode.OK and data["devices"][0]["reachable"]
    listener.close()


def test_check_ssh_port_that_is_not_ssh(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        conn, _ = listener.accept()
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\n")
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(f'[[device]]\nname = "pi"\nkind = "pi5"\nssh = "u@127.0.0.1:{listener.getsockname()[1]}"\n')
    code, data = run_check(fleet)
    assert code == ExitCode.UNREACHABLE and "not SSH" in data["devices"][0]["detail"]
    listener.close()
