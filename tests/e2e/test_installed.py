"""The bench as an installed package, outside a checkout: the wheel carries the agents, fixtures and firmware
(bench/core/paths.py finds them), and `pip install .` into a new venv gives a `hilbench nightly` that passes every
stage from any folder. The full install-and-nightly run takes minutes: set HILBENCH_INSTALL_TEST=1 to run it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.e2e


def source_copy(dest: Path) -> Path:
    """The checkout's files (tracked and new, not ignored) copied to `dest`: no build/ or .venv leftovers."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def test_the_wheel_carries_what_the_paths_module_finds(tmp_path: Path) -> None:
    src = source_copy(tmp_path / "src")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(src)],
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("npc_hil_bench-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    data = {n.split("/data/share/npc-hil-bench/", 1)[1] for n in names if "/data/share/npc-hil-bench/" in n}
    tracked = subprocess.run(
        ["git", "ls-files", "host", "micropython", "web", "fixtures", "firmware"],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    wanted = set(tracked.stdout.decode().split())  # every shipped file of the checkout
    shipped = {"fixtures/fleets/virtual.toml", "host/npc_host_agent.py", "firmware/esp32c6/virtual-micropython.bin"}
    assert shipped <= wanted
    assert wanted <= data, f"missing from the wheel: {sorted(wanted - data)}"
    assert "bench/virtual/linux_tools/tegrastats" in names and "bench/report/templates/report.html.j2" in names


@pytest.mark.skipif(not os.environ.get("HILBENCH_INSTALL_TEST"), reason="set HILBENCH_INSTALL_TEST=1 (minutes)")
def test_pip_install_then_nightly_from_another_folder(tmp_path: Path) -> None:
    src = source_copy(tmp_path / "src")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    pip = subprocess.run([env_dir / "bin" / "python", "-m", "pip", "install", "-q", str(src)], capture_output=True)
    assert pip.returncode == 0, pip.stderr.decode()[-2000:]
    shutil.rmtree(src)  # nothing may come from the source tree any more
    work = tmp_path / "elsewhere"
    work.mkdir()
    session = next((env_dir / "share" / "npc-hil-bench" / "fixtures" / "sessions").glob("*.mcap"))
    proc = subprocess.run(
        [env_dir / "bin" / "hilbench", "nightly", "--session", str(session), "--results", "results.db", "--json"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=1200,
        env={**os.environ, "HILBENCH_STATE_DIR": str(tmp_path / "state")},  # its own boards: others' stay as they are
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert [s["name"] for s in summary["stages"] if not s["ok"]] == []
    assert {"check", "flash", "replay", "update", "faults"} <= {s["name"] for s in summary["stages"]}
    assert (work / "reports").is_dir() and not list(work.glob("*.console.log"))
