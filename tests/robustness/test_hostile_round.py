"""Hostile inputs of the shared-host, store and session families in forms found by a later round: FIFOs,
folders and links planted in the lease folder, a session written over a link, a store that is not a folder,
events nested past the protocol's depth or with a `true` where a number goes. Each is refused by name or
handled, never a hang or a traceback."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from bench.core.errors import ExitCode
from bench.replay import channels
from bench.replay.recording import Session, SessionMessage, write_session
from tests.conftest import REPO, hilbench

C6 = '[[device]]\nname = "c6-a"\nkind = "esp32c6"\nport = "socket://127.0.0.1:9"\n'


def _bench(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(hilbench(*argv), cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=60)  # fmt: skip


@pytest.fixture
def fleet(tmp_path: Path) -> str:
    path = tmp_path / "fleet.toml"
    path.write_text(C6)
    return str(path)


def _leases(tmp_path: Path) -> Path:
    folder = tmp_path / "leases"
    folder.mkdir(mode=0o700)
    return folder


def test_lease_file_that_is_a_fifo_never_hangs(tmp_path: Path, fleet: str) -> None:
    """A FIFO at a device's lease: `fleet leases` lists without waiting on it, and a lease taken replaces it."""
    folder = _leases(tmp_path)
    os.mkfifo(folder / "c6-a.lease")
    assert _bench(["fleet", "leases"], HILBENCH_LEASE_DIR=str(folder)).returncode == 0
    run = _bench(["fleet", "check", "--fleet", fleet, "--device", "c6-a", "--lease-wait", "0"],
               HILBENCH_LEASE_DIR=str(folder))  # fmt: skip
    assert run.returncode == ExitCode.UNREACHABLE and "Traceback" not in run.stderr  # the board is not there


@pytest.mark.parametrize("what", ["c6-a.lease", ".mutex"])
def test_folder_or_fifo_in_the_lease_folder_is_named(tmp_path: Path, fleet: str, what: str) -> None:
    """A folder at a lease's name, or a FIFO as the folder's mutex: exit 2 naming what to remove."""
    folder = _leases(tmp_path)
    if what == ".mutex":
        os.mkfifo(folder / what)
    else:
        (folder / what).mkdir()
    run = _bench(["fleet", "check", "--fleet", fleet, "--device", "c6-a", "--lease-wait", "0"],
               HILBENCH_LEASE_DIR=str(folder))  # fmt: skip
    assert run.returncode == ExitCode.USAGE and f"remove {folder / what}" in run.stderr, run.stderr


def test_session_is_not_written_through_a_link(tmp_path: Path) -> None:
    """`session synth` over a symbolic link at the session's name replaces the link, the target untouched."""
    out = tmp_path / "s"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (out / "combat-0.mcap").symlink_to(victim)
    run = _bench(["session", "synth", "--scenario", "combat", "--out", str(out), "--duration", "1"])
    assert run.returncode == 0, run.stderr
    assert victim.read_bytes() == b"precious" and not (out / "combat-0.mcap").is_symlink()


@pytest.mark.parametrize("kind", ["file", "fifo"])
def test_store_that_is_not_a_folder_is_named(tmp_path: Path, kind: str) -> None:
    """`--store` naming a file or a FIFO: `model list` and `ota serve` exit 2 instead of listing nothing or
    serving an empty store."""
    store = tmp_path / "store"
    store.write_text("x") if kind == "file" else os.mkfifo(store)
    for argv in (["model", "list", "--store", str(store)], ["ota", "serve", "--port", "0", "--store", str(store)]):
        run = _bench(argv)
        assert run.returncode == ExitCode.USAGE and f"model store {store} is not a folder" in run.stderr


def _event(**fields: object) -> dict:
    return {"session_id": "s", "timestamp_ms": 0, "action": "a", "target_id": None,
            "context": {"hp_ratio": 0.5, "aggro_level": 0.1}, **fields}  # fmt: skip


@pytest.mark.parametrize(
    ("event", "why"),
    [
        (_event(extra=json.loads("[" * 900 + "]" * 900)), "deeper than"),
        (_event(extra=json.loads("[" * 15 + "]" * 15)), "deeper than"),
        (_event(context={"hp_ratio": True, "aggro_level": 0.1}), "must hold numbers"),
        (_event(timestamp_ms=10**30), "timestamp_ms"),
        (_event(timestamp_ms=True), "timestamp_ms"),
    ],
    ids=["nested 900", "nested 15", "hp_ratio true", "timestamp_ms 10^30", "timestamp_ms true"],
)
def test_events_the_agents_would_refuse_are_refused_when_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, event: dict, why: str
) -> None:
    """An action the agents would refuse (past the protocol's depth, `true` for a number, a clock no agent reads
    exactly) is refused naming the message, before any replay."""
    path = tmp_path / "e.mcap"
    with monkeypatch.context() as m:
        m.setattr(channels, "check_event", lambda value: None)
        write_session(path, Session("s", "combat", [SessionMessage(0, "action", event)]))
    run = _bench(["session", "info", str(path)])
    assert run.returncode == ExitCode.USAGE and "action message #0" in run.stderr and why in run.stderr, run.stderr


def test_an_event_at_the_depth_limit_is_kept() -> None:
    """The deepest event the protocol carries (its `in` line at the limit) still passes."""
    channels.check_event(_event(extra=json.loads("[" * 13 + "]" * 13)))
