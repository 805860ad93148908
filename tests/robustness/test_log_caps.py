"""Every log the bench keeps is capped and rotated (bench.core.logcap): a log at its cap is renamed NAME.1 and
begun again, a write longer than the cap keeps its end, a link planted at a log's name is not followed, and the
logs other programs write are rotated when they start."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from bench.core.folders import UnsafeFolder
from bench.core.logcap import CappedLog, open_for_child
from bench.devices.qemu_machine import _console_line


def test_a_log_rotates_at_its_cap_and_never_takes_more_than_twice_it(tmp_path: Path) -> None:
    path = tmp_path / "board.log"
    with CappedLog(path, cap=1000) as log:
        for n in range(500):
            log.write(f"wifi: dropped datagram {n}\n")
    assert path.stat().st_size <= 1000 and (tmp_path / "board.log.1").stat().st_size <= 1000
    assert "dropped datagram 499" in path.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["board.log", "board.log.1"]


def test_a_write_longer_than_the_cap_keeps_its_end(tmp_path: Path) -> None:
    path = tmp_path / "agent.log"
    with CappedLog(path, cap=100) as log:
        log.write(b"a" * 10_000 + b"END\n")
    assert path.read_bytes().endswith(b"END\n") and path.stat().st_size == 100


def test_text_and_bytes_both_go_in(tmp_path: Path) -> None:
    path = tmp_path / "c.log"
    with CappedLog(path) as log:
        log.write("é\n")
        log.write(b"\xff\n")
    assert path.read_bytes() == "é\n".encode() + b"\xff\n"


def test_a_link_planted_at_a_logs_name_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    (tmp_path / "board.log").symlink_to(victim)
    with pytest.raises(UnsafeFolder, match=r"cannot write board\.log"):
        CappedLog(tmp_path / "board.log")
    with pytest.raises(UnsafeFolder) as refused:
        open_for_child(tmp_path / "board.log")
    assert refused.value.exit_code == 2
    assert victim.read_text() == "keep me\n"


def test_a_log_another_program_writes_is_rotated_when_it_starts(tmp_path: Path) -> None:
    path = tmp_path / "sshd.log"
    path.write_bytes(b"x" * 2000)
    os.close(open_for_child(path, cap=1000))
    assert path.stat().st_size == 0 and (tmp_path / "sshd.log.1").stat().st_size == 2000
    path.write_bytes(b"y" * 10)
    os.close(open_for_child(path, cap=1000))  # under the cap: appended to
    assert path.read_bytes() == b"y" * 10


def test_descriptor_2_follows_the_rotation(tmp_path: Path) -> None:
    """The board's log takes its process's fd 2 along, so what C code writes there is capped with it."""
    path = tmp_path / "board.log"
    seen: list[int] = []
    with CappedLog(path, cap=50, on_reopen=seen.append) as log:
        log.write(b"a" * 40)
        log.write(b"b" * 40)
    assert len(seen) == 2 and seen[0] != -1


def test_a_guest_console_line_over_the_readers_limit_does_not_end_the_pump() -> None:
    """A Linux guest printing 100 KB without a newline: the console pump (bench.devices.qemu_machine) cuts it and
    reads on, where it used to die (asyncio's readline raises past 64 KiB) and leave QEMU's console pipe full."""

    async def run() -> list[bytes]:
        reader = asyncio.StreamReader()
        reader.feed_data(b"y" * 100_000 + b"\nNPC-SELFTEST ok\n")
        reader.feed_eof()
        lines = []
        while line := await _console_line(reader):
            lines.append(line)
        return lines

    lines = asyncio.run(run())
    assert lines[-1] == b"NPC-SELFTEST ok\n" and len(lines) <= 3 and all(len(x) < 2048 for x in lines), lines
