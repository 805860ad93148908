"""bench/core/programs.toml lists every program the bench and its tests start, and .ci/setup installs them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.programs import PIP, ManifestError, get_program, load_manifest, parse_manifest, setup_packages
from tests.program_scan import Use, scan, scan_source
from tests.requires import require_program

REPO = Path(__file__).resolve().parents[2]
SCANNED = [REPO / "bench", REPO / "tests", REPO / "hil"]


def unlisted(uses: list[Use]) -> list[Use]:
    """The uses of programs that no manifest entry names."""
    names = {name for program in load_manifest() for name in program.names}
    return [u for u in uses if u.program not in names]


def test_every_program_the_code_starts_is_in_the_manifest():
    uses = scan(SCANNED)
    assert {"bmaptool", "qemu-system-aarch64", "sshd", "chromium", "setpriv"} <= {u.program for u in uses}
    missing = unlisted(uses)
    assert not missing, "programs started but not in bench/core/programs.toml:\n" + "\n".join(map(str, missing))


PLANTED = """
import asyncio, shutil, subprocess
from bench.core.procs import tied

TOOL = "/usr/bin/frobnicate"

def a():
    subprocess.run(["bmaptool", "copy", "x", "y"], check=True)

async def b():
    argv = [TOOL, "--all"]
    await asyncio.create_subprocess_exec(*tied(argv))

def c():
    for name in ("chromium", "zorkmid"):
        if shutil.which(name):
            return name
    asyncio.run(main())  # not a program
    conn.run(["echo", "remote"])  # a remote command, not started on this host
"""


def test_scanner_fails_on_a_planted_unlisted_program():
    uses = list(scan_source(PLANTED, Path("planted.py")))
    assert {u.program for u in uses} == {"bmaptool", "frobnicate", "setpriv", "chromium", "zorkmid"}
    assert sorted(u.program for u in unlisted(uses)) == ["frobnicate", "zorkmid"]
    with pytest.raises(AssertionError, match="frobnicate"):  # what the real test above reports
        missing = unlisted(uses)
        assert not missing, "\n".join(map(str, missing))


def test_bmap_tools_comes_back_through_setup():
    packages = setup_packages(load_manifest())
    assert "bmap-tools" in packages and PIP not in packages and len(packages) == len(set(packages))
    assert get_program("coap-client-notls").debian == "libcoap3-bin"
    manifest = REPO / "bench" / "core" / "programs.py"
    printed = subprocess.run([sys.executable, str(manifest), "debian"], capture_output=True, text=True,
                             check=True).stdout.split()  # fmt: skip
    assert printed == packages
    assert "bench/core/programs.py debian" in (REPO / ".ci" / "setup").read_text()


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"program": "x", "debian": "x"}, "needed_by"),
        ({"program": "x", "debian": "x", "needed_by": ["bench"], "min_version": "1"}, "version_args"),
        ({"program": "x", "debian": "x", "needed_by": ["bench"], "colour": "red"}, "colour"),
        ({"debian": "x", "needed_by": ["bench"]}, "program #1"),
    ],
)
def test_malformed_entries_name_the_field(entry, message):
    with pytest.raises(ManifestError, match=message):
        parse_manifest({"program": [entry]}, Path("m.toml"))


@pytest.mark.parametrize(("ci", "outcome"), [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_a_missing_program_fails_under_ci_and_skips_elsewhere(tmp_path, monkeypatch, ci, outcome):
    monkeypatch.setenv("PATH", str(tmp_path))  # bmaptool is only ever found on PATH (no venv copy, no `paths`)
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match=r"bmaptool is not installed \(apt-get install -y bmap-tools\)"):
        require_program("bmaptool")


def test_a_program_there_is_found():
    assert Path(require_program("micropython")).name == "micropython"
