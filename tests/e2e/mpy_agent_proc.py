"""Drive the MicroPython agent in the real unix VM over stdin/stdout pipes (a small synchronous client)."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.agent import wire
from bench.bundles.mpy_board import ESP32C6_HEAP, agent_command, populate_board
from bench.models import model_file
from bench.models.signing import DEV_PRIVATE_KEY, load_private_key, model_manifest, sign_manifest


def signed(board: Path, name: str, version: int, key=None) -> dict[str, Any]:
    """A signed manifest for models/<name>.npcm on the board (dev key unless `key`)."""
    manifest = model_manifest(board / "models" / f"{name}.npcm", "npc-policy", version, "npcm-int8")
    return sign_manifest(manifest, key or load_private_key(DEV_PRIVATE_KEY))


def make_board(tmp: Path, names: tuple[str, ...] = ("npc-policy-int8", "npc-policy-int8-v2")) -> Path:
    """A board folder with the agent, the given .npcm fixtures and the dev trust key."""
    return populate_board(tmp / "board", [model_file(n, "npcm") for n in names])


class MpyAgent:
    """One agent process. A reader thread collects every message; `wait_for`/`request` take the oldest
    not-yet-taken message that matches, so nothing that arrives out of the expected order is lost."""

    def __init__(self, board: Path, heap: str = ESP32C6_HEAP) -> None:
        self.proc = subprocess.Popen(
            agent_command(heap), cwd=board, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.seen: list[dict[str, Any]] = []
        self.console: list[str] = []
        self._taken: set[int] = set()
        self._cond = threading.Condition()
        self._id = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            with self._cond:
                if wire.is_message(raw):
                    self.seen.append(wire.decode(raw))
                else:
                    self.console.append(raw.decode(errors="replace").rstrip())
                self._cond.notify_all()

    def send_raw(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, msg: dict[str, Any]) -> None:
        self.send_raw(wire.encode(msg))

    def take(self, match: Callable[[dict[str, Any]], bool], timeout: float = 10.0) -> dict[str, Any]:
        """The oldest untaken message for which `match` is true (waits up to `timeout` s)."""
        end = time.monotonic() + timeout
        with self._cond:
            while True:
                for k, msg in enumerate(self.seen):
                    if k not in self._taken and match(msg):
                        self._taken.add(k)
                        return msg
                left = end - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    err = self.proc.stderr.read() if self.proc.poll() is not None else b""
                    raise AssertionError(f"no matching message in {timeout} s; console {self.console} {err!r}")
                self._cond.wait(min(left, 0.2))

    def wait_for(self, t: str, timeout: float = 10.0, **fields: Any) -> dict[str, Any]:
        """The oldest untaken message of type `t` with the given field values."""
        return self.take(lambda m: m.get("t") == t and all(m.get(k) == v for k, v in fields.items()), timeout)

    def request(self, msg: dict[str, Any], timeout: float = 20.0) -> dict[str, Any]:
        """Send `msg` with a fresh id; return the reply carrying that id."""
        self._id += 1
        rid = self._id
        self.send({**msg, "id": rid})
        return self.take(lambda m: m.get("id") == rid, timeout)

    def close(self) -> int:
        if self.proc.poll() is None:
            try:
                self.request({"t": "shutdown"}, timeout=5)
            except (AssertionError, BrokenPipeError):
                self.proc.kill()
        with contextlib.suppress(BrokenPipeError):
            self.proc.stdin.close()
        return self.proc.wait(timeout=10)
