"""Board code and neighbours against a whole virtual ESP32-C6 process running the counted firmware: 6 s of
datagram storms from board code, a neighbour's datagrams at the board's uplink and another user's connection
flood at its serial port at the same time leave board.log under 1 MB larger, and root's `mpremote exec` still gets
in at once afterwards; a client pushing UART input without end does not grow the board (it waits, as on USB), nor
does a client that never reads what the board prints. `python -m tests.robustness.test_board_floods` prints the
figures of a 20 s storm."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mpremote.transport_serial import SerialTransport

from bench.bundles.c6_firmware import build_firmware, image_for
from bench.virtual.esp32c6.control import control_request
from tests.esp32c6_support import Board, mpremote, preflash, virtual_c6

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.programs("riscv64-unknown-elf-gcc", "picolibc.specs", "make", "qemu-system-riscv32"),
]
STORM_S = 6.0  # the test's storm: every party runs flat out, so its CPU is its length (the script's: BENCH_STORM_S)
BENCH_STORM_S = 20.0
PUSH_S = 3.0  # how long a client pushes input without end: a board without backpressure would take GBs by then
LOG_BYTES_PER_S = 50_000  # board.log may grow by at most this a storm's second (114 bytes in 20 s measured)
NEIGHBOUR_UID = 54321
STORM = """
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setblocking(False)
t0 = time.ticks_ms(); n = 0
while time.ticks_diff(time.ticks_ms(), t0) < {ms}:
    for dst in (('192.0.2.1', 9), ('10.0.2.2', 5683), ('10.0.2.2', 9 + n % 1000), ('10.0.2.2', 9)):
        try:
            s.sendto(b'x' * 200, dst)
        except OSError:
            pass
    n += 1
print('sent', n)
"""
# another user connecting to the serial port and hanging up, as fast as it can, until killed
CONNECT_FLOOD = """
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
while True:
    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError:
        pass
"""


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Board]:
    image = image_for(build_firmware().elf).read_bytes()
    with virtual_c6(preflash(tmp_path_factory.mktemp("c6flood"), image), mac="60:55:f9:c6:30:01") as running:
        assert running.wait_mode("app", timeout_s=60)["mode"] == "app"
        assert "app started (counted core)" in running.control("status")["events"]
        yield running


def log_bytes(board: Board) -> int:
    """board.log and its rotated copy, in bytes."""
    log = board.virtual.state_dir / "board.log"
    return sum(p.stat().st_size for p in (log, log.with_name("board.log.1")) if p.exists())


def board_pid(board: Board) -> int:
    proc = board.virtual._proc
    assert proc is not None
    return proc.pid


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def udp_ports(pid: int) -> list[int]:
    """The loopback UDP ports the board process holds (its Wi-Fi's uplink)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = []
    for row in Path(f"/proc/{pid}/net/udp").read_text().splitlines()[1:]:
        cols = row.split()
        if cols[9] in inodes:
            ports.append(int(cols[1].split(":")[1], 16))
    return ports


def neighbour_datagrams(ports: list[int], stop: threading.Event, sent: list[int]) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setblocking(False)
    n = 0
    while not stop.is_set():
        for port in ports:
            try:
                sock.sendto(b"\x40\x02\x12\x34forged", ("127.0.0.1", port))
                n += 1
            except OSError:
                time.sleep(0.001)
    sent.append(n)
    sock.close()


def connect_flood(url: str) -> subprocess.Popen[bytes] | None:
    """Another user's connection flood at the board's serial port (None when this host cannot switch user)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return None
    host, port = url.removeprefix("socket://").rsplit(":", 1)
    argv = ["setpriv", f"--reuid={NEIGHBOUR_UID}", f"--regid={NEIGHBOUR_UID}", "--clear-groups"]
    return subprocess.Popen([*argv, sys.executable, "-c", CONNECT_FLOOD, host, port], cwd="/")


def storms(board: Board, seconds: float = STORM_S) -> dict[str, float]:
    """Run the storms for `seconds`; the figures."""
    pid = board_pid(board)
    before = log_bytes(board)
    transport = SerialTransport(board.urls["socket"], baudrate=115200)
    try:
        transport.enter_raw_repl(soft_reset=False)
        transport.exec_raw_no_follow(STORM.format(ms=int(seconds * 1000)))
        time.sleep(1.0)  # the storm has begun: the board's uplink is open
        ports = udp_ports(pid)
        stop, sent = threading.Event(), []
        thread = threading.Thread(target=neighbour_datagrams, args=(ports, stop, sent), daemon=True)
        thread.start()
        flood = connect_flood(board.urls["socket"])
        time.sleep(seconds)
        stop.set()
        thread.join()
        if flood is not None:
            flood.kill()
            flood.wait()
        out, _err = transport.follow(60)
    finally:
        transport.close()
    started = time.monotonic()
    ran = mpremote("connect", board.urls["socket"], "exec", "print(6 * 7)", timeout_s=60)
    exec_s = time.monotonic() - started
    assert ran.returncode == 0 and ran.stdout.strip() == "42", ran.stdout + ran.stderr
    status = board.control("status")
    return {
        "log_growth_bytes": log_bytes(board) - before,
        "board_datagrams": float(out.decode().split()[-1]) if out.strip() else 0.0,
        "neighbour_datagrams": float(sum(sent)),
        "connect_flood": float(flood is not None),
        "mpremote_exec_s": exec_s,
        "dropped": float(sum(v for k, v in status["wifi"].items() if k not in ("in", "out"))),
        "rss_mb": rss_mb(pid),
        "uplinks": float(len(ports)),
    }


def test_storms_and_a_neighbours_floods_leave_the_log_small_and_the_board_answering(board: Board) -> None:
    figures = storms(board)
    assert figures["uplinks"] >= 1 and figures["neighbour_datagrams"] > 1000, figures
    assert figures["board_datagrams"] > 1000 and figures["dropped"] > 1000, figures
    assert figures["log_growth_bytes"] < LOG_BYTES_PER_S * STORM_S, figures
    assert figures["mpremote_exec_s"] < 15, figures


def push(url: str, seconds: float, limit: int) -> int:
    """Bytes a client that never reads got the board to take in `seconds` (at most `limit`)."""
    host, port = url.removeprefix("socket://").rsplit(":", 1)
    sent = 0
    chunk = b"x" * 65536
    with socket.create_connection((host, int(port))) as sock:
        sock.settimeout(0.2)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and sent < limit:
            try:
                sent += sock.send(chunk)
            except TimeoutError:
                continue
    return sent


def test_a_client_pushing_uart_input_without_end_waits_and_the_board_stays_small(board: Board) -> None:
    pid = board_pid(board)
    before = rss_mb(pid)
    sent = push(board.urls["socket"], PUSH_S, 300 * 1024 * 1024)
    grown = rss_mb(pid) - before
    board.control("power_cycle")  # what the firmware's REPL made of the bytes is not the point
    assert board.wait_mode("app", timeout_s=60)["mode"] == "app"
    assert grown < 40, (sent, grown)
    assert sent < 100 * 1024 * 1024, sent  # it waited: the chip takes input as fast as its REPL reads it


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        image = image_for(build_firmware().elf).read_bytes()
        with virtual_c6(preflash(Path(tmp), image), mac="60:55:f9:c6:30:01") as running:
            running.wait_mode("app", timeout_s=60)
            for key, value in storms(running, BENCH_STORM_S).items():
                print(f"{key:>22}: {value:,.2f}")


def test_a_client_that_negotiates_telnet_and_never_reads_stays_small(board: Board) -> None:
    """RFC 2217 port: IAC commands the board answers, sent without end by a client that reads nothing."""
    pid = board_pid(board)
    before = rss_mb(pid)
    host, port = board.urls["rfc2217"].removeprefix("rfc2217://").rsplit(":", 1)
    negotiation = b"\xff\xfd\x03\xff\xfb\x03\xff\xfd\x2c" * 7000  # DO/WILL SGA, DO COM-PORT-OPTION: ~63 KB
    sent = 0
    with socket.create_connection((host, int(port))) as sock:
        sock.settimeout(0.2)
        deadline = time.monotonic() + PUSH_S
        while time.monotonic() < deadline:
            try:
                sent += sock.send(negotiation)
            except TimeoutError:
                continue
    assert rss_mb(pid) - before < 40, sent
    assert board.control("status")["mode"] == "app"


def test_the_rom_loader_takes_input_with_backpressure_too(board: Board) -> None:
    """Download mode: a client pushing bytes that are no SLIP frames waits too."""
    pid = board_pid(board)
    board.control("download")
    try:
        before = rss_mb(pid)
        sent = push(board.urls["socket"], PUSH_S, 300 * 1024 * 1024)
        assert rss_mb(pid) - before < 40, sent
    finally:
        board.control("power_cycle")
    assert board.wait_mode("app", timeout_s=60)["mode"] == "app"


@pytest.mark.parametrize(
    "fields",
    [
        {"ports": [0]},
        {"ports": [70000]},
        {"ports": ["5683"]},
        {"ports": list(range(1000, 1100))},
        {"ports": {"a": 1}},
        {"revoke": 5683},
    ],
)
def test_uplink_grants_through_the_control_api_are_checked(board: Board, fields: dict) -> None:
    control = board.virtual.urls()["control"]
    with pytest.raises(RuntimeError, match=r"uplink port|lists of port"):
        control_request(control, "uplinks", **fields)
    assert control_request(control, "uplinks", ports=[5683])["uplinks"] == [5683]
    assert control_request(control, "uplinks", revoke=[5683])["uplinks"] == []
    assert board.control("status")["uplinks"] == []


def test_a_dialout_user_pushing_into_the_pty_without_end_waits(board: Board) -> None:
    pid = board_pid(board)
    before = rss_mb(pid)
    fd = os.open(board.urls["pty"], os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
    sent, chunk = 0, b"x" * 4096
    deadline = time.monotonic() + PUSH_S
    try:
        while time.monotonic() < deadline:
            try:
                sent += os.write(fd, chunk)
            except BlockingIOError:
                time.sleep(0.01)
    finally:
        os.close(fd)
    grown = rss_mb(pid) - before
    board.control("power_cycle")
    assert board.wait_mode("app", timeout_s=60)["mode"] == "app"
    assert grown < 40, (sent, grown)
