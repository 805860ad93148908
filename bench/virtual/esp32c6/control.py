"""The bench's control API for a virtual board (JSON lines over TCP): what a lab's relay and USB hub would do.

Requests: {"op": "power_cycle" | "power_off" | "power_on" | "hold_reset" | "boot" | "download" | "hang" |
"hang_stuck" | "repair" | "status" | "log" | "ppk2" | "uplinks"}; every reply is {"ok": true, ...} or {"ok": false,
"error": "..."}.
`hang` locks the firmware up until the next reset; `hang_stuck` until `repair` (a board no ladder brings back).
`ppk2` gives the virtual PPK2's settings and what the board drew over the meter's last measurement window.
`uplinks` with "ports": [...] sets the host ports the board's Wi-Fi may reach (the servers the bench started for it),
with "revoke": [...] takes ports away; `status` gives them and the Wi-Fi's datagram counts (relayed and dropped).
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

from bench.virtual.control import parse_control_url, serve_control
from bench.virtual.esp32c6.board import Board
from bench.virtual.esp32c6.ppk2 import VirtualPpk2


async def _handle(board: Board, meter: VirtualPpk2 | None, request: dict[str, Any]) -> dict[str, Any]:
    op = request.get("op")
    if op == "ppk2" and meter is not None:
        return {"ok": True, **meter.status()}
    if op == "uplinks":
        return _uplinks(board, request)
    if op in ("power_cycle", "power_on"):
        await board.power_on()
        if meter is not None:
            meter.supply.start()  # a power cycle brings back a meter's stream that had stopped
    elif op == "power_off":
        await board.power_off()
    elif op in ("hang", "hang_stuck"):
        await board.hang(stuck=op == "hang_stuck")
    elif op == "repair":
        board.repair()
    elif op == "hold_reset":
        await board.hold_reset()
    elif op == "boot":
        await board.reset(download=False)
    elif op == "download":
        await board.reset(download=True)
    elif op == "log":
        return {"ok": True, "log": board.log.decode("utf-8", "replace")}
    elif op != "status":
        ops = "power_cycle power_off power_on hold_reset boot download hang hang_stuck repair status log ppk2 uplinks"
        return {"ok": False, "error": f"unknown op {op!r}; ops: {ops}"}
    return {
        "ok": True,
        "mode": board.mode.value,
        "power": "on" if board.powered else "off",
        "events": board.events[-50:],
        "uplinks": sorted(board.gateway.ports),
        "wifi": dict(board.gateway.counts),
    }


def _uplinks(board: Board, request: dict[str, Any]) -> dict[str, Any]:
    ports, revoke = request.get("ports"), request.get("revoke")
    try:
        for value in (ports, revoke):
            if value is not None and not isinstance(value, list):
                raise ValueError("'ports' and 'revoke' are lists of port numbers")
        if ports is not None:
            board.gateway.grant(ports)
        if revoke is not None:
            board.gateway.revoke(p for p in revoke if isinstance(p, int))
    except ValueError as exc:
        return {"ok": False, "error": str(exc)}
    return {"ok": True, "uplinks": sorted(board.gateway.ports)}


async def start_control(board: Board, host: str, token: str, meter: VirtualPpk2 | None = None) -> asyncio.Server:
    """Serve the control API on a free port, to requests with `token` (`meter`: the board's virtual PPK2)."""
    return await serve_control(lambda request: _handle(board, meter, request), token, host)


def control_request(url: str, op: str, timeout_s: float = 10.0, **fields: Any) -> dict[str, Any]:
    """Send one request (`op` and its `fields`) to the control API at `tcp://host:port/token`; raise RuntimeError if
    it failed."""
    host, port, token = parse_control_url(url)
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(json.dumps({**fields, "op": op, "token": token}).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    reply = json.loads(data)
    if not reply.get("ok"):
        raise RuntimeError(f"virtual board control {op!r} failed: {reply.get('error')}")
    return reply
