"""The habits users bring from esptool, labgrid and pytest: global options anywhere, a fleet from the
environment or the current folder, -v/-q and a log file, completion, one output folder name, a fast start."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cli import build_parser, split_globals
from bench.core.errors import ConfigError
from tests.conftest import REPO, hilbench

HEAVY = ("scipy", "numpy", "aiocoap", "labgrid", "jinja2", "grpc", "websockets")
LAB = """
[[device]]
name = "lab-c6"
kind = "esp32c6"
port = "/dev/ttyUSB9"
"""


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("HILBENCH_FLEET", "HILBENCH_LOG")}
    environ.update(PYTHONPATH=str(REPO), **(env or {}))
    return subprocess.run(hilbench(*args), cwd=cwd, env=environ, capture_output=True, text=True, timeout=120)


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    path = tmp_path / "lab.toml"
    path.write_text(LAB)
    return path


def test_global_options_move_after_the_command_and_verbosity_is_taken_anywhere():
    argv, opts, command = split_globals(["--fleet", "lab.toml", "-q", "fleet", "list", "-vv", "--log-file=x.log"])
    assert argv == ["fleet", "list", "--fleet", "lab.toml"] and command == "fleet"
    assert (opts.verbose, opts.quiet, opts.log_file) == (2, True, "x.log")
    argv, _, _ = split_globals(["--json", "session", "info", "F", "--", "-v"])
    assert argv == ["session", "info", "F", "--json", "--", "-v"]  # nothing after -- is ours
    with pytest.raises(ConfigError, match="--log-level"):
        split_globals(["--log-level", "loud", "fleet", "list"])


def test_fleet_before_the_command_and_v_after_it(lab, tmp_path):
    proc = run("--fleet", str(lab), "fleet", "list", "-v", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [d["name"] for d in json.loads(proc.stdout)["devices"]] == ["lab-c6"]
    assert f"fleet: {lab} (from --fleet)" in proc.stderr  # -v shows the INFO record


def test_fleet_from_the_environment_then_the_current_folder_then_bundled(lab, tmp_path):
    proc = run("fleet", "list", "--json", cwd=tmp_path, env={"HILBENCH_FLEET": str(lab)})
    assert proc.returncode == 0 and json.loads(proc.stdout)["fleet"] == str(lab), proc.stderr
    assert "bundled" not in proc.stderr
    here = tmp_path / "here"
    here.mkdir()
    (here / "fleet.toml").write_text(LAB.replace("lab-c6", "local-c6"))
    proc = run("fleet", "list", "--json", cwd=here)
    assert [d["name"] for d in json.loads(proc.stdout)["devices"]] == ["local-c6"]
    proc = run("fleet", "list", "--json", cwd=tmp_path)
    said = [line for line in proc.stderr.splitlines() if "using the bundled virtual fleet" in line]
    assert len(said) == 1 and len(json.loads(proc.stdout)["devices"]) > 1
    assert "bundled" not in run("-q", "fleet", "list", "--json", cwd=tmp_path).stderr  # -q: no notes


def test_port_is_a_fleet_of_one_board(tmp_path):
    proc = run("--port", "/dev/ttyACM3", "fleet", "list", "--json", cwd=tmp_path)
    (device,) = json.loads(proc.stdout)["devices"]
    assert device["kind"] == "esp32c6" and device["link"].startswith("/dev/ttyACM3") and not device["virtual"]
    both = run("fleet", "list", "--port", "/dev/ttyACM3", "--fleet", "x.toml", "--json", cwd=tmp_path)
    assert both.returncode == 2 and json.loads(both.stdout)["error"]["message"].startswith("--port and --fleet")


def test_log_file_from_option_or_environment(lab, tmp_path):
    log = tmp_path / "run.log"
    proc = run("fleet", "list", "--fleet", str(lab), "--log-file", str(log), "--log-level", "info", cwd=tmp_path)
    assert proc.returncode == 0 and f"fleet: {lab} (from --fleet)" in log.read_text()
    env_log = tmp_path / "env.log"
    run("fleet", "list", "--fleet", str(lab), cwd=tmp_path, env={"HILBENCH_LOG": str(env_log)})
    assert "INFO bench.commands: fleet:" in env_log.read_text()


def test_old_output_folder_spellings_still_work_with_a_note(tmp_path):
    proc = run("report", "--out", str(tmp_path / "r"), "--results", str(tmp_path / "none.sqlite"), cwd=tmp_path)
    assert "--out is deprecated: use --output-dir" in proc.stderr and "no runs yet" in proc.stderr
    for path in (["nightly"], ["report"], ["flash"], ["replay"], ["doctor"], ["bisect"], ["fleet", "health"]):
        parser = build_parser(path[0])
        for name in path:
            parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
        assert "--output-dir DIR" in parser.format_help(), path


def test_completion_scripts_for_bash_and_zsh(tmp_path):
    for shell, marker in (("bash", "complete "), ("zsh", "compdef")):
        proc = run("completion", shell, cwd=tmp_path)
        assert proc.returncode == 0 and "hilbench" in proc.stdout and marker in proc.stdout


def test_completion_protocol_answers_subcommands(tmp_path):
    env = {"_ARGCOMPLETE": "1", "COMP_LINE": "hilbench fle", "COMP_POINT": "12", "_ARGCOMPLETE_IFS": "\n"}
    out = tmp_path / "answer"
    environ = {**os.environ, "PYTHONPATH": str(REPO), **env}
    # argcomplete answers on file descriptor 8, which the shell hook reads
    code = (f"import os, runpy, sys; os.dup2(os.open({str(out)!r}, os.O_WRONLY | os.O_CREAT), 8); "
            "sys.argv = ['hilbench']; runpy.run_module('bench', run_name='__main__')")  # fmt: skip
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=environ, capture_output=True, timeout=120)
    assert "fleet" in out.read_text().split()


def test_version_and_fleet_list_load_no_heavy_module(tmp_path):
    code = (
        "import sys, contextlib, io\n"
        "from bench.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(sys.argv[1:])\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    for argv in (["fleet", "list", "--json"], ["fleet", "list"]):
        proc = subprocess.run([sys.executable, "-c", code, *argv], cwd=tmp_path, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)  # fmt: skip
        assert proc.returncode == 0 and proc.stdout.strip().splitlines()[-1:] in ([], [""]), proc.stdout


def test_help_lists_every_command_unbroken(tmp_path):
    proc = run("--help", cwd=tmp_path, env={"COLUMNS": "80"})
    assert proc.returncode == 0
    words = set(proc.stdout.split())
    from bench.cli import COMMANDS

    assert all(name in words for name in COMMANDS), proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
    assert not [line for line in proc.stdout.splitlines() if line.endswith("-") and line[-2:-1].isalpha()]
