"""The counted C6 firmware's cache key: what changes the build changes it, Python's bytecode caches do not (pip
writes them into an installed package's copy of the port, different at each install)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.bundles import c6_firmware


@pytest.fixture
def port(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / "counted"
    shutil.copytree(c6_firmware.PORT_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(c6_firmware, "PORT_DIR", copy)
    return copy


def test_bytecode_caches_in_the_port_leave_the_digest_alone(port: Path) -> None:
    before = c6_firmware.firmware_digest("gcc 12")
    for folder in (port / "__pycache__", port / "modules" / "__pycache__"):
        folder.mkdir()
        (folder / "machine.cpython-311.pyc").write_bytes(b"\x00bytecode")
    assert c6_firmware.firmware_digest("gcc 12") == before


def test_a_changed_source_file_or_compiler_changes_the_digest(port: Path) -> None:
    before = c6_firmware.firmware_digest("gcc 12")
    assert c6_firmware.firmware_digest("gcc 13") != before
    main_c = port / "main.c"
    main_c.write_text(main_c.read_text() + "\n// changed\n")
    assert c6_firmware.firmware_digest("gcc 12") != before
