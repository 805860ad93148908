"""The pytest plugin's failure classes and quarantine, in a real pytest subprocess (no device needed: the
tests raise what a device's trouble raises)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

TESTS = """
import os
from bench.core.errors import DeviceUnreachable
from bench.recovery.surviving import AgentGaveUp

def test_board_gone():
    raise DeviceUnreachable("device c6-a: no frame record for 5 s")

def test_agent_crashed():
    raise AgentGaveUp("device c6-a: the agent died 4 times; giving up")

def test_wrong_answer():
    assert 1 + 1 == 3

def test_flaky():
    assert os.environ["FLAKY"] == "pass"

def test_fine():
    pass
"""


def _pytest(tmp: Path, *extra: str, flaky: str) -> tuple[subprocess.CompletedProcess[str], ElementTree.Element]:
    junit = tmp / "junit.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "test_things.py", f"--junitxml={junit}",
         "-o", "cache_dir=" + str(tmp / "cache"), "-rA", *extra],
        cwd=tmp, capture_output=True, text=True, timeout=120, env={**_env(), "FLAKY": flaky},
    )  # fmt: skip
    return proc, ElementTree.parse(junit).getroot()


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


def test_an_infrastructure_failure_is_an_error_naming_the_class(tmp_path: Path) -> None:
    (tmp_path / "test_things.py").write_text(TESTS)
    proc, _ = _pytest(tmp_path, "-k", "not flaky", flaky="pass")
    text = proc.stdout
    assert proc.returncode == 1, text
    assert "ERROR (infrastructure failure)" in text or "1 error" in text, text
    assert "infrastructure failure: device c6-a: no frame record for 5 s" in text
    assert "product failure: device c6-a: the agent died 4 times" in text
    tail = text.strip().splitlines()[-1]
    assert "2 failed" in tail and "1 error" in tail and "1 passed" in tail, tail


def test_a_quarantined_test_runs_is_reported_does_not_fail_the_session_and_shows_its_history(tmp_path: Path) -> None:
    (tmp_path / "test_things.py").write_text(TESTS)
    quarantine = tmp_path / "quarantine.toml"
    quarantine.write_text('[[test]]\nid = "test_things.py::test_flaky"\nreason = "loose USB cable on desk 1"\n')
    runs = [_pytest(tmp_path, "-k", "flaky or fine", "--quarantine", str(quarantine), flaky=f) for f in
            ("no", "pass", "no")]  # fmt: skip
    for proc, _ in runs:
        assert proc.returncode == 0, proc.stdout
    last = runs[-1][0].stdout
    assert "quarantined tests" in last
    assert "test_things.py::test_flaky: failed this run; history FPF (1 passed, 2 failed of 3" in last, last
    assert "loose USB cable on desk 1" in last
    case = next(c for c in runs[0][1].iter("testcase") if c.get("name") == "test_flaky")
    assert case.find("skipped") is not None and "quarantined" in case.find("skipped").get("message", "")


def test_a_bad_quarantine_file_is_a_usage_error_naming_the_field(tmp_path: Path) -> None:
    (tmp_path / "test_things.py").write_text(TESTS)
    bad = tmp_path / "q.toml"
    bad.write_text('[[test]]\nreason = "no id"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "test_things.py", "--quarantine", str(bad)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "[[test]] #1: field 'id'" in proc.stderr
