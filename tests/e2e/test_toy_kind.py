"""A device kind added by registering one entry from this test: the host agent as a local process, reached
by a link type of its own. `fleet check`, `flash`, `replay` and the pytest plugin serve it with no change
to the bench (issue 14's "done when": a kind is one registry entry plus the modules it names)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from bench.agent.transport import ProcessTransport
from bench.bundles import host_agent_command, host_bundle
from bench.cli import main
from bench.config.kinds import KINDS, Kind, MemoryLimited, register
from bench.core.errors import ConfigError, DeviceUnreachable
from bench.core.fields import Declared, settings_from
from bench.core.paths import SESSIONS_DIR
from bench.devices.base import Driver, Progress, StepResult, no_progress
from bench.links.probe_result import ProbeResult
from bench.links.spec import FleetEntry
from tests.conftest import REPO

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class LocalFields(Declared):
    """The local link's field: the folder the agent runs in (from the fleet file's folder)."""

    folder: Path | None = None


@dataclass(frozen=True)
class LocalLink:
    """A folder on the bench host where the agent is deployed and run as a child process."""

    family: ClassVar[str] = "local"
    fields: ClassVar[frozenset[str]] = frozenset({"folder"})
    lab_classes: ClassVar[tuple[str, ...]] = ()

    folder: Path

    @classmethod
    def parse(cls, entry: FleetEntry) -> LocalLink:
        given = settings_from(LocalFields, entry.raw, entry.where, adjust=entry.placed)
        if given.folder is None:
            raise ConfigError(f"{entry.where}: missing link: field 'folder'")
        return cls(given.folder)

    def describe(self) -> str:
        return f"local process in {self.folder}"

    @property
    def bytes_per_s(self) -> float | None:
        return None

    async def probe(self, kind: str, timeout_s: float) -> ProbeResult:
        ok = self.folder.parent.is_dir()
        return ProbeResult(ok, f"{self.folder.parent} {'exists' if ok else 'is missing'}")

    def lab_resource(self, address: str | None, baud: int) -> dict[str, Any]:
        raise ConfigError("a local process is not exported")

    @classmethod
    def lab_export(cls, device: Any, where: str, baud: int) -> dict[str, Any]:
        raise ConfigError(f"{where}: a local process is not exported")

    @classmethod
    def from_lab(cls, device: Any, params: dict[str, Any]) -> LocalLink:
        raise DeviceUnreachable("a local process has no lab place")


@dataclass(frozen=True)
class ToySettings(MemoryLimited):
    """The toy kind's settings: the common ones with its own defaults, and a memory limit (MemoryLimited)."""

    fps_target: int = 25  # keeps the common range (1 to 1000)


class ToyDriver(Driver):
    """Deploys the host agent's bundle into the link's folder and runs it there on stdin/stdout."""

    def __init__(self, device, log_dir: Path | None = None) -> None:
        super().__init__(device, log_dir)
        self.transport: ProcessTransport | None = None

    @property
    def folder(self) -> Path:
        return self.device.link.folder

    async def flash(self, progress: Progress = no_progress) -> list[StepResult]:
        files = host_bundle(self.device, self.folder / ".manifests")
        for done, (src, dest) in enumerate(files, 1):
            (self.folder / dest).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, self.folder / dest)
            progress(done, len(files), dest)
        return [StepResult("agent", True, f"{len(files)} files in {self.folder}")]

    async def open_agent(self) -> ProcessTransport:
        argv = host_agent_command(self.device, str(self.folder), python=sys.executable, stdio=True, isolated=True)
        stderr = (self.log_dir or self.folder) / f"{self.device.name}.stderr.log"
        self.transport = await ProcessTransport.spawn(argv, cwd=self.folder, stderr_path=stderr)
        return self.transport

    async def close_agent(self) -> None:
        if self.transport is not None:
            await self.transport.close(grace=5)
            self.transport = None


TOY = Kind("toy-host", "the host agent as a local process", LocalLink, ToySettings, driver=f"{__name__}:ToyDriver")


def register_toy() -> None:
    """Add the toy kind to the registry (a pytest run in a subprocess calls this from its conftest)."""
    register(TOY)


@pytest.fixture
def toy_fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setitem(KINDS, TOY.name, TOY)
    fleet = tmp_path / "toy.toml"
    fleet.write_text('[[device]]\nname = "toy-1"\nkind = "toy-host"\nfolder = "agent"\nfps_target = 20\n')
    return fleet


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def replayed_devices(capsys, fleet: Path, tmp_path: Path) -> list[tuple[str, str]]:
    """Replay the first bundled session on `fleet` at full speed (`hilbench replay`, exit 0); (name, kind) of
    each device of the stored run, each of which stored frames."""
    from bench.store.results import open_store

    session = sorted(SESSIONS_DIR.glob("*.mcap"))[0]
    code, replayed = run_cli(
        capsys, "replay", "--fleet", str(fleet), "--session", str(session), "--speed", "max",
        "--results", str(tmp_path / "results.sqlite"), "--logs", str(tmp_path / "logs"), "--no-realtime",
    )  # fmt: skip
    assert code == 0, replayed
    with open_store(tmp_path / "results.sqlite") as store:
        run = store.runs.latest(kind="replay", limit=1)[0]
        devices = store.runs.devices(run.id)
        assert all(store.frames.frame_count(run.id, d.name) > 0 for d in devices)
    return [(d.name, d.kind) for d in devices]


def test_fleet_check_flash_and_replay_serve_a_registered_kind(
    toy_fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, listed = run_cli(capsys, "fleet", "list", "--fleet", str(toy_fleet))
    assert code == 0 and listed["devices"][0]["link"] == f"local process in {tmp_path / 'agent'}"

    code, checked = run_cli(capsys, "fleet", "check", "--fleet", str(toy_fleet))
    (row,) = checked["devices"]
    assert code == 0 and row["status"] == "reachable" and row["driver"] == "yes"

    code, flashed = run_cli(capsys, "flash", "--fleet", str(toy_fleet), "--logs", str(tmp_path / "flash-logs"))
    assert code == 0 and flashed["ok"] and (tmp_path / "agent" / "npc_host_agent.py").is_file()

    assert replayed_devices(capsys, toy_fleet, tmp_path) == [("toy-1", "toy-host")]


PLUGIN_TESTS = """
import pytest

from bench.agent.session import AgentSession
from bench.devices import driver_for


@pytest.mark.kinds("toy-host")
def test_on_the_toy(device, bench_loop):
    async def hello():
        driver = driver_for(device)
        await driver.flash()
        session = await AgentSession.open(await driver.open_agent(), device=device.name)
        try:
            return session.info, device.settings.fps_target
        finally:
            await session.close()
            await driver.close_agent()

    info, fps = bench_loop.run(hello(), timeout_s=60)
    assert info["proto"] == 1 and fps == 20
"""


def test_the_pytest_plugin_serves_a_registered_kind(toy_fleet: Path, tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(f"from {__name__} import register_toy\n\nregister_toy()\n")
    (tmp_path / "test_toy.py").write_text(PLUGIN_TESTS)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "test_toy.py", "--fleet", str(toy_fleet), "-p", "no:cacheprovider", "-v"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "test_on_the_toy[toy-1] PASSED" in proc.stdout


# -- the Pi 4 example of docs/extending.md, applied as written ------------------------------------------------------

EXTENDING = REPO / "docs" / "extending.md"


def pi4_snippets() -> dict[str, str]:
    """The Pi 4 example's code blocks, by the file each says it goes in ("bench/config/kinds.py",
    "bench/virtual/linux.py")."""
    section = EXTENDING.read_text(encoding="utf-8").split("Worked example: a Raspberry Pi 4", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n# (\S+)\n(.*?)```", section, re.S)
    return dict(blocks)


def apply_pi4_example() -> None:
    """Add the example's code to the two modules it names, as if pasted at their ends (and register the kind)."""
    import bench.config.kinds
    import bench.virtual.linux

    snippets = pi4_snippets()
    for module in (bench.virtual.linux, bench.config.kinds):
        name = f"{module.__name__.replace('.', '/')}.py"
        exec(compile(snippets[name], f"{EXTENDING}:{name}", "exec"), module.__dict__)


PI4_PLUGIN_TEST = """
import pytest


@pytest.mark.kinds("pi4")
def test_on_the_pi4(device, agent):
    assert device.kind == "pi4" and device.settings.fps_target == 15
    assert agent.info["proto"] == 1
"""


def test_the_docs_pi4_example_touches_two_files_and_runs_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import bench.config.kinds
    import bench.virtual.linux

    assert sorted(pi4_snippets()) == ["bench/config/kinds.py", "bench/virtual/linux.py"]
    monkeypatch.setattr(bench.virtual.linux, "PI4", None, raising=False)  # taken back after the test
    monkeypatch.setattr(bench.virtual.linux, "virtual_pi4", None, raising=False)
    monkeypatch.setattr(bench.config.kinds, "Pi4Settings", None, raising=False)
    monkeypatch.setitem(KINDS, "pi4", None)
    apply_pi4_example()
    assert KINDS["pi4"].settings.__name__ == "Pi4Settings"

    fleet = tmp_path / "pi4.toml"
    fleet.write_text('[[device]]\nname = "pi4-1"\nkind = "pi4"\nvirtual = true\nfps_target = 15\n')
    code, listed = run_cli(capsys, "fleet", "list", "--fleet", str(fleet))
    assert code == 0 and listed["devices"][0]["kind"] == "pi4"

    code, flashed = run_cli(capsys, "flash", "--fleet", str(fleet), "--logs", str(tmp_path / "flash-logs"))
    assert code == 0 and flashed["ok"], flashed

    assert replayed_devices(capsys, fleet, tmp_path) == [("pi4-1", "pi4")]

    (tmp_path / "conftest.py").write_text(f"from {__name__} import apply_pi4_example\n\napply_pi4_example()\n")
    (tmp_path / "test_pi4.py").write_text(PI4_PLUGIN_TEST)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "test_pi4.py", "--fleet", str(fleet), "-p", "no:cacheprovider", "-v"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "test_on_the_pi4[pi4-1] PASSED" in proc.stdout
