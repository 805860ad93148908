"""The fault matrix: a nightly killed (SIGTERM or SIGKILL) at each stage, on an ESP32-C6 board and a Pi 5.

After every fault: no process the bench started is left (checked with ps), no run stays `running` (a run
the dead process left is marked `interrupted` by the next command opening the store, and cannot become a
baseline), every frame record written before the fault is kept, and the devices still run their model
(a replay afterwards is ok). One case (replay, SIGTERM) runs by default, on the bundled counted c6-b and the
Pi 5's loopback stand-in (sshd and the host agent: a guest's image write and two boots were most of the case's
CPU); the whole matrix with HILBENCH_FAULT_MATRIX=1, on the bundled fleet's c6-b and pi5-1 (an aarch64 guest)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from bench.core.errors import ConfigError
from bench.results.baseline import set_baseline
from bench.store.results import open_store
from tests.conftest import REPO, hilbench
from tests.robustness.faults import kill_nightly_at, leftovers

pytestmark = pytest.mark.e2e
DEVICES = ["c6-b", "pi5-1"]  # one per kind family: MicroPython over serial, host agent over SSH
STAGES = ["check", "flash", "replay", "update", "faults"]
FULL = os.environ.get("HILBENCH_FAULT_MATRIX") == "1"
BUNDLED = REPO / "fixtures" / "fleets" / "virtual.toml"
DEFAULT_CASES = {("replay", signal.SIGTERM)}  # the default run's representative: ~75 s; the other nine with the matrix


def _synth(out: Path, seconds: int) -> Path:
    run = subprocess.run(hilbench("session", "synth", "--scenario", "combat", "--duration", str(seconds), "--out",
                                  str(out)), cwd=REPO, capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr
    return next(out.glob("*.mcap"))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled fleet (the matrix), else its c6-b as it is and pi5-1 as the loopback stand-in (no [device.os],
    the kind's own settings)."""
    if FULL:
        return BUNDLED
    (c6,) = [t for t in BUNDLED.read_text().split("[[device]]") if 'name = "c6-b"' in t]
    c6 = c6.replace('"../../bench/', f'"{REPO}/bench/')  # its hub stand-in, named from the bundled file's folder
    path = tmp_path_factory.mktemp("fleet") / "fleet.toml"
    path.write_text(f'[[device]]{c6}\n[[device]]\nname = "pi5-1"\nkind = "pi5"\nvirtual = true\n')
    return path


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The nightly's: long enough that its replay is still playing when the signal comes."""
    return _synth(tmp_path_factory.mktemp("sessions"), 8)


@pytest.fixture(scope="module")
def short_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The replay after the fault, which shows the devices still run their model: on their counted clocks the
    8 s session's replay played 22 s on a quiet host."""
    return _synth(tmp_path_factory.mktemp("short"), 3)


CASES = [
    pytest.param(stage, sig, marks=() if FULL or (stage, sig) in DEFAULT_CASES else pytest.mark.skip("opt-in"))
    for stage in STAGES
    for sig in (signal.SIGTERM, signal.SIGKILL)
]


@pytest.mark.parametrize(("stage", "sig"), CASES, ids=lambda v: getattr(v, "name", v))
def test_a_nightly_killed_at_a_stage_leaves_nothing_behind(
    stage: str, sig: signal.Signals, fleet: Path, session: Path, short_session: Path, tmp_path: Path
) -> None:
    killed = kill_nightly_at(tmp_path, stage, sig, DEVICES, session, fleet)
    if sig == signal.SIGTERM:  # handled like Ctrl-C: devices stopped, run marked, a message, no traceback
        assert killed.returncode == 128 + signal.SIGTERM, killed.stderr[-3000:]
        assert "interrupted (SIGTERM)" in killed.stderr and "Traceback" not in killed.stderr
    else:
        assert killed.returncode == -signal.SIGKILL
    assert leftovers(killed) == []

    if killed.results.exists():
        with open_store(killed.results) as store:  # opening it closes what the dead process left running
            runs = store.runs.latest()
            assert [r.id for r in runs if r.status == "running"] == []
            for r in runs:
                if r.status == "interrupted":
                    with pytest.raises(ConfigError, match="cannot be a baseline"):
                        set_baseline(store, r.id, "x")
                    if stage == "replay":  # every frame record stored before the fault is kept
                        for d in DEVICES:
                            assert store.frames.frame_count(r.id, d) >= killed.frames_before[d] > 0

    # the devices still run their model: a replay into them right after is ok
    after = subprocess.run(
        hilbench("replay", "--fleet", str(fleet), *(a for d in DEVICES for a in ("--device", d)), "--session",
                 str(short_session), "--speed", "max", "--results", str(tmp_path / "after.sqlite"), "--json",
                 *(["--deploy"] if stage in ("check", "flash") else [])),  # later: what the device runs as it is
        cwd=REPO, capture_output=True, text=True, timeout=600,
        env={**os.environ, "HILBENCH_STATE_DIR": str(killed.state)},
    )  # fmt: skip
    assert after.returncode == 0, after.stderr[-3000:] + after.stdout[-3000:]
    assert {d["name"]: d["status"] for d in json.loads(after.stdout)["devices"]} == dict.fromkeys(DEVICES, "ok")
