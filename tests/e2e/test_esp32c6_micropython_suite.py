"""MicroPython's own test suite, of the firmware's release (tests/ of the pinned source), run on a counted virtual
ESP32-C6 through its pty as on a desk board: `run-tests.py -t port:PTY`.

By default a sample runs (every SAMPLE_EVERY-th test of basics, micropython, float and extmod, about 90 tests,
under a minute) and none may fail. HILBENCH_MPY_SUITE=full runs the four folders whole (about 6 minutes) and
checks the issue's limits: at most 3 failed in basics, at most 3 failed and 60 skipped in the others."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.bundles.c6_firmware import build_firmware, image_for, micropython_source
from tests.esp32c6_support import Board, preflash, virtual_c6

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.programs("riscv64-unknown-elf-gcc", "picolibc.specs", "make", "qemu-system-riscv32"),
]
DIRS = ("basics", "micropython", "float", "extmod")
SAMPLE_EVERY = 10
FULL = os.environ.get("HILBENCH_MPY_SUITE") == "full"
# tests that need micropython-lib's unittest, which the Debian source does not carry (run-tests.py stops the whole
# run at the first one); on a chip one would `mpremote mip install unittest`
NEEDS_UNITTEST = ("extmod/marshal_micropython.py", "extmod/machine1.py", "extmod/vfs_rom.py",
                  "extmod/tls_threads.py", "extmod/tls_noleak.py", "basics/fun_code_lnotab.py")  # fmt: skip


@dataclass(frozen=True)
class Counts:
    """What run-tests.py reported: test names by result."""

    passed: list[str]
    failed: list[str]
    skipped: list[str]


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Board]:
    image = image_for(build_firmware().elf).read_bytes()
    with virtual_c6(preflash(tmp_path_factory.mktemp("c6suite"), image), name="c6-suite") as running:
        assert running.wait_mode("app", timeout_s=60)["mode"] == "app"
        yield running


def run_tests(board: Board, args: list[str], results: Path) -> Counts:
    """run-tests.py of the pinned source against `board`'s pty; its _results.json read back."""
    tests = micropython_source() / "tests"
    cmd = [sys.executable, "run-tests.py", "-t", f"port:{board.urls['pty']}", "-r", str(results), *args]
    ran = subprocess.run(cmd, cwd=tests, capture_output=True, text=True, timeout=1800)
    report = results / "_results.json"
    assert report.is_file(), ran.stdout[-2000:] + ran.stderr[-2000:]
    by_result: dict[str, list[str]] = {"pass": [], "fail": [], "skip": []}
    for name, result, _reason in json.loads(report.read_text(encoding="utf-8"))["results"]:
        by_result[result].append(name)
    return Counts(by_result["pass"], by_result["fail"], by_result["skip"])


def sample() -> list[str]:
    """Every SAMPLE_EVERY-th test file of DIRS (sorted, so the same sample on every run), without the tests that
    need unittest."""
    tests = micropython_source() / "tests"
    names = sorted(p.relative_to(tests).as_posix() for d in DIRS for p in (tests / d).glob("*.py"))
    names = [n for n in names if n not in NEEDS_UNITTEST]
    return names[::SAMPLE_EVERY]


@pytest.mark.skipif(FULL, reason="HILBENCH_MPY_SUITE=full runs the whole folders instead")
def test_a_sample_of_micropythons_tests_passes(board: Board, tmp_path: Path) -> None:
    chosen = sample()
    counts = run_tests(board, chosen, tmp_path)
    assert counts.failed == [], counts.failed
    assert len(counts.passed) + len(counts.skipped) == len(chosen)
    assert len(counts.passed) >= 0.8 * len(chosen)  # most of them run (the skips are docs/esp32c6.md's list)


@pytest.mark.skipif(not FULL, reason="opt-in: HILBENCH_MPY_SUITE=full (several minutes)")
def test_micropythons_whole_test_folders(board: Board, tmp_path: Path) -> None:
    exclude = ["-e", "|".join(n.replace(".", r"\.") for n in NEEDS_UNITTEST)]
    basics = run_tests(board, [*exclude, "-d", "basics"], tmp_path / "basics")
    rest = run_tests(board, [*exclude, "-d", "micropython", "float", "extmod"], tmp_path / "rest")
    print(f"\nbasics: {len(basics.passed)} passed, {len(basics.failed)} failed, {len(basics.skipped)} skipped")
    print(f"micropython+float+extmod: {len(rest.passed)} passed, {len(rest.failed)} failed, "
          f"{len(rest.skipped)} skipped")  # fmt: skip
    assert len(basics.failed) <= 3, basics.failed
    assert len(rest.failed) <= 3, rest.failed
    assert len(rest.skipped) <= 60, rest.skipped
