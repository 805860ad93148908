"""Which of the bench's servers each running virtual board's network may reach: the one home of those grants.

A virtual board with a NAT of its own (the counted ESP32-C6's Wi-Fi, bench.virtual.esp32c6.wifi) reaches only the
host ports granted to it. `virtual_fleet` registers the boards it starts; the update path grants a board the port
of the server it sends the board to (`bench.ota.rollout.channel_url`), and a server that stops revokes its port
from every board (`bench.ota.channels.serve`), so a port a stopped server freed, which another user could then
bind, is no longer reached."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Protocol


class Gated(Protocol):
    """A running board whose network the bench grants ports on."""

    def grant_uplinks(self, ports: list[int]) -> None:
        """The board reaches exactly `ports` from now on."""

    def revoke_uplinks(self, ports: list[int]) -> None:
        """The board no longer reaches `ports`."""

    @property
    def host_address(self) -> str | None:
        """Where the board's network reaches the bench host (None: the host's own loopback)."""


_boards: dict[str, Gated] = {}


def register(name: str, board: object) -> None:
    """`board` serves the device `name` (nothing when it has no network to gate)."""
    if callable(getattr(board, "grant_uplinks", None)):
        _boards[name] = board  # type: ignore[assignment]


def unregister(name: str) -> None:
    """The device `name`'s board stopped."""
    _boards.pop(name, None)


def host_address(name: str) -> str | None:
    """Where the running board of the device `name` reaches the bench host (None: not a gated board of ours)."""
    board = _boards.get(name)
    return board.host_address if board is not None else None


def grant(name: str, port: int) -> None:
    """The device `name` (when the bench runs its board) reaches `port` on the host's loopback, and only it."""
    board = _boards.get(name)
    if board is not None:
        with contextlib.suppress(OSError, RuntimeError, ValueError):  # a board that is gone reaches nothing
            board.grant_uplinks([port])


def revoke(ports: Iterable[int]) -> None:
    """No board reaches `ports` any more (their servers stopped)."""
    gone = list(ports)
    for board in list(_boards.values()):
        with contextlib.suppress(OSError, RuntimeError, ValueError):
            board.revoke_uplinks(gone)
