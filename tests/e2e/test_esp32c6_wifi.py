"""The counted firmware's `socket` over the board's Wi-Fi: the firmware in qemu-system-riscv32 with its packet
pipe (a virtio console on a socket pair) and the board's gateway (bench.virtual.esp32c6.wifi) on the other end,
driven through mpremote's serial transport. A datagram to 10.0.2.2 reaches a UDP echo server on the host's
loopback (a port granted to the board, as the bench grants its update server's) and its answer comes back;
nothing else is routed, and drops are counted, not logged; a wait that times out raises ETIMEDOUT.
The hostile side (neighbours, storms, ports not granted) is tests/robustness/test_board_network.py."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from mpremote.transport_serial import SerialTransport

from bench.bundles.c6_firmware import BuiltFirmware, build_firmware
from bench.core.loop_thread import LoopThread
from bench.virtual.esp32c6.wifi import Gateway, Wifi
from tests.esp32c6_support import counted_repl

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.programs("riscv64-unknown-elf-gcc", "picolibc.specs", "make", "qemu-system-riscv32"),
]

MAC = bytes.fromhex("6055f9c61002")


@pytest.fixture(scope="module")
def firmware() -> BuiltFirmware:
    return build_firmware()


@pytest.fixture
def echo() -> Iterator[int]:
    """A UDP echo server on the host's loopback (answers upper-cased); its port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                data, addr = sock.recvfrom(2048)
            except TimeoutError:
                continue
            sock.sendto(data.upper(), addr)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        sock.close()


@contextlib.contextmanager
def board(firmware: BuiltFirmware, lines: list[str], *grants: int) -> Iterator[tuple[SerialTransport, Wifi]]:
    """The firmware with its UART on a loopback socket and its Wi-Fi pipe on a socket pair to a gateway that
    lets it reach the host ports `grants`."""
    ours, theirs = socket.socketpair()
    loop = LoopThread()
    gateway = Gateway()
    gateway.grant(grants)
    wifi = Wifi(ours, gateway, log=lines.append)
    loop.run(wifi.start(), timeout_s=10)
    try:
        with counted_repl(firmware.elf, (theirs.fileno(),), mac=MAC, wifi_fd=theirs.fileno()) as transport:
            theirs.close()  # QEMU's end only now: the gateway sees the pipe close when QEMU exits
            yield transport, wifi
    finally:
        theirs.close()  # if QEMU did not start
        loop.run(wifi.close(), timeout_s=10)
        loop.close()


def run(transport: SerialTransport, code: str) -> str:
    return transport.exec(code).decode().strip()


def test_udp_round_trip_through_the_gateway(firmware: BuiltFirmware, echo: int):
    lines: list[str] = []
    with board(firmware, lines, echo) as (t, wifi):
        got = run(
            t,
            "import socket\n"
            f"ai = socket.getaddrinfo('10.0.2.2', {echo})\n"
            "print(ai)\n"
            "with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:\n"
            "    s.settimeout(5)\n"
            "    for n in (0, 5, 1024, 1500):\n"
            "        s.sendto(bytes(b'ab'[i % 2] for i in range(n)), ai[0][-1])\n"
            "        data, addr = s.recvfrom(2048)\n"
            "        print(n, len(data), data[:4], addr)\n",
        )
    assert got.splitlines() == [
        f"[(2, 2, 17, '', ('10.0.2.2', {echo}))]",
        f"0 0 b'' ('10.0.2.2', {echo})",
        f"5 5 b'ABAB' ('10.0.2.2', {echo})",
        f"1024 1024 b'ABAB' ('10.0.2.2', {echo})",
        f"1500 1500 b'ABAB' ('10.0.2.2', {echo})",
    ]
    assert wifi.counts["out"] == 4 and wifi.counts["in"] == 4 and not lines


def test_timeouts_refusals_and_no_route(firmware: BuiltFirmware, echo: int):
    lines: list[str] = []
    with board(firmware, lines, echo) as (t, wifi):
        got = run(
            t,
            "import socket, errno, time\n"
            "def err(f):\n"
            "    try:\n"
            "        f()\n"
            "    except OSError as e:\n"
            "        return e.errno\n"
            "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "s.settimeout(0.25)\n"
            "t0 = time.ticks_ms()\n"
            "print(err(lambda: s.recv(10)) == errno.ETIMEDOUT == 116, time.ticks_diff(time.ticks_ms(), t0))\n"
            f"s.sendto(b'lost', ('192.168.4.1', {echo}))\n"
            "print(err(lambda: s.recvfrom(10)))\n"
            "s.setblocking(False)\n"
            "print(err(lambda: s.recv(10)) == errno.EAGAIN)\n"
            "print(err(lambda: s.sendto(bytes(1501), ('10.0.2.2', 9))))\n"
            "s.close()\n"
            "print(err(lambda: s.recv(1)) == errno.EBADF)\n"
            "print(err(lambda: socket.getaddrinfo('bench.local', 5683)))\n"
            "print(err(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)) == errno.EOPNOTSUPP)\n",
        )
        assert wifi.counts["no_route"] == 1 and wifi.counts["out"] == 0 and not lines  # counted, not logged
    first, *rest = got.splitlines()
    ok, waited_ms = first.split()
    assert ok == "True" and 250 <= int(waited_ms) <= 260  # idle on the counted clock, to its end
    assert rest == ["116", "True", "122", "True", "-202", "True"]
    assert lines == ["wifi: dropped 1 not to the gateway"]  # the boot's one summary line


def test_ctrl_c_ends_a_blocking_recv(firmware: BuiltFirmware):
    with board(firmware, []) as (t, _):
        t.exec_raw_no_follow(
            "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\nprint('waiting')\ns.recv(10)\n"
        )
        seen = b""
        while b"waiting" not in seen:
            seen += t.serial.read(1)
        time.sleep(0.2)  # the core idles in recv
        t.serial.write(b"\x03")
        out, err = t.follow(10)
    assert b"KeyboardInterrupt" in err, (out, err)
