"""Run one virtual ESP32-C6 in this process: board + front ends + control API, until SIGTERM/SIGINT.

`python -m bench.virtual.esp32c6 --name c6-a --state DIR --mac 60:55:f9:c6:00:01` prints one JSON line
with its URLs ({"rfc2217": ..., "socket": ..., "pty": ..., "ppk2": ..., "control": ...}) once it is ready;
"ppk2" is the pty of the virtual PPK2 measuring the board's supply (bench/virtual/esp32c6/ppk2.py);
`--logic-input 0=6` wires its logic input D0 to the board's GPIO6; `--log FILE` makes FILE its log (stderr),
capped and rotated (bench.core.logcap).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from pathlib import Path

from bench.config.kinds import UART_BRIDGE, USB_PERSONALITIES
from bench.core.logcap import CappedLog
from bench.virtual.control import control_url, new_token
from bench.virtual.esp32c6.board import Board, BoardConfig, Mode
from bench.virtual.esp32c6.control import start_control
from bench.virtual.esp32c6.efuse import parse_mac
from bench.virtual.esp32c6.frontends import PtyFrontEnd, start_tcp, url_of
from bench.virtual.esp32c6.ppk2 import LOGIC_CHANNELS, VirtualPpk2
from bench.virtual.esp32c6.supply import Supply


async def serve(config: BoardConfig, host: str, wiring: dict[int, int]) -> None:
    """Serve `config`'s board until a termination signal, its PPK2's logic inputs wired as `wiring` (channel ->
    GPIO)."""
    board = Board(config)
    supply = Supply(
        lambda: (board.powered, board.mode == Mode.RESET, board.mode == Mode.APP, board.vm_pid), lambda: board.core
    )
    meter = VirtualPpk2(supply, wiring)
    rfc = await start_tcp(board, host, rfc2217_mode=True)
    raw = await start_tcp(board, host, rfc2217_mode=False)
    token = new_token()
    control = await start_control(board, host, token, meter)
    pty = PtyFrontEnd(board)
    supply.start()
    await board.power_on()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    urls = {
        "rfc2217": url_of(rfc, "rfc2217"),
        "socket": url_of(raw, "socket"),
        "pty": pty.path,
        "ppk2": meter.path,
        "control": control_url(control, token),
    }
    sys.stdout.write(json.dumps(urls) + "\n")
    sys.stdout.flush()
    await stop.wait()
    for server in (rfc, raw, control):
        server.close()
    pty.close()
    await supply.stop()
    meter.close()
    await board.close()


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and serve."""
    parser = argparse.ArgumentParser(prog="python -m bench.virtual.esp32c6", description=__doc__)
    parser.add_argument("--name", required=True)
    parser.add_argument("--state", required=True, type=Path, help="folder for flash.bin and the filesystem")
    parser.add_argument("--mac", required=True, help="base MAC, e.g. 60:55:f9:c6:00:01")
    parser.add_argument("--flash-size", type=int, default=8 * 1024 * 1024)
    parser.add_argument("--wire-speed", action="store_true", help="pace ROM/stub traffic at the simulated baud")
    parser.add_argument("--usb", choices=USB_PERSONALITIES, default=UART_BRIDGE, help="the board's USB personality")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--logic-input", action="append", default=[], metavar="CHANNEL=GPIO",
                        help="wire the PPK2's logic input D<CHANNEL> to the board's GPIO<GPIO>")  # fmt: skip
    parser.add_argument("--log", type=Path, help="the board's log (its stderr), capped and rotated")
    args = parser.parse_args(argv)
    if args.log is not None:  # Python's lines through the cap; the descriptor too, for anything written to fd 2
        sys.stderr = CappedLog(args.log, on_reopen=lambda fd: os.dup2(fd, 2))  # type: ignore[assignment]
    try:
        mac = parse_mac(args.mac)
        wiring = dict(parse_wire(w) for w in args.logic_input)
    except ValueError as exc:
        parser.error(str(exc))
    config = BoardConfig(args.name, args.state, mac, args.flash_size, args.wire_speed, args.usb)
    asyncio.run(serve(config, args.host, wiring))
    return 0


def parse_wire(text: str) -> tuple[int, int]:
    """(channel, GPIO) from `CHANNEL=GPIO`; ValueError naming what is wrong."""
    channel, _, pin = text.partition("=")
    if not (channel.isdigit() and pin.isdigit() and int(channel) < LOGIC_CHANNELS and int(pin) < 31):
        raise ValueError(f"--logic-input {text!r}: expected CHANNEL=GPIO, channel 0-7 and GPIO 0-30")
    return int(channel), int(pin)
