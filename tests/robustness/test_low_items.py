"""Smaller misuse cases, each a bound or a message that says what is wrong: oversize versions and counts,
option ranges that agree with their messages, a planted `runs/` link in the report folder, a fleet file with
a byte-order mark, negative power timeouts and hub locations with `..`, a run stopped twice, and what
`model publish` says of a patch larger than its model."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.store.results import open_store
from tests.conftest import REPO, hilbench
from tests.stored_runs import build_store

KEY = str(REPO / "fixtures/keys/dev-model-signing.key.pem")
MODELS = REPO / "fixtures/models"
C6 = '[[device]]\nname = "c6-a"\nkind = "esp32c6"\nport = "socket://127.0.0.1:9"\n'


def _batch(argvs: list[list[str]]) -> list[dict]:
    run = subprocess.run([sys.executable, "-m", "tests.robustness.cli_batch"], input=json.dumps(argvs), cwd=REPO,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines()]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("store") / "r.sqlite"
    build_store(path, runs=2, devices=1, frames=50)
    return path


def _cases(tmp: Path, store: Path) -> list[tuple[str, list[str], int, list[str]]]:
    """(name, argv, exit code, what stderr names)."""
    text = (REPO / "fixtures/baselines/default.toml").read_text()
    (tmp / "huge.toml").write_text(re.sub(r"baseline_runs = \d+", "baseline_runs = 1000000000000", text))
    (tmp / "bom.toml").write_bytes(b"\xef\xbb\xbf" + C6.encode())
    command = 'power = { driver = "command", on = "true", off = "true", '
    (tmp / "timeout.toml").write_text(C6 + command + "timeout_s = -1 }\n")
    (tmp / "hub.toml").write_text(C6 + 'power = { driver = "uhubctl", location = "../../../../tmp/x", port = 1 }\n')
    (tmp / "port.toml").write_text(C6 + 'power = { driver = "uhubctl", location = "1-1", port = 100000 }\n')
    (tmp / "off.toml").write_text(C6 + command + "off_s = 1e300 }\n")
    out = tmp / "out"
    (out / "elsewhere").mkdir(parents=True)
    (out / "runs").symlink_to(out / "elsewhere")
    model = str(MODELS / "npc-policy-int8.tflite")
    st = str(tmp / "ota")
    return [
        ("publish --version 10^23", ["model", "publish", model, "--key", KEY, "--store", st, "--version",
                                     "1" + "0" * 23], 2, ["--version", "<= 999999999"]),
        ("publish --version 0", ["model", "publish", model, "--key", KEY, "--store", st, "--version", "0"], 2,
         ["--version", ">= 1"]),
        ("update --loss 60", ["update", "--fleet", str(tmp / "bom.toml"), "--model", "npc-policy", "--loss", "60"], 2,
         ["--loss", "60", "<= 50"]),
        ("baseline_runs 10^12", ["report", "--results", str(store), "--thresholds", str(tmp / "huge.toml"),
                                 "--output-dir", str(tmp / "o2")], 2,
         ["defaults.baseline_runs = 1000000000000 must be at most 100"]),
        ("runs/ symlink", ["report", "--results", str(store), "--output-dir", str(out)], 2,
         [f"report folder {out / 'runs'} is a symbolic link"]),
        ("power.timeout_s -1", ["fleet", "list", "--fleet", str(tmp / "timeout.toml")], 2,
         ["power.timeout_s", "-1", "out of range (must be 0.1 to 3600.0)"]),
        ("uhubctl location ..", ["fleet", "list", "--fleet", str(tmp / "hub.toml")], 2,
         ["power.location", "is not a location"]),
        ("uhubctl port 100000", ["fleet", "list", "--fleet", str(tmp / "port.toml")], 2,
         ["power.port", "out of range (must be 1 to 255)"]),
        ("power.off_s 1e300", ["fleet", "list", "--fleet", str(tmp / "off.toml")], 2, ["power.off_s"]),
        ("fleet with a BOM", ["fleet", "list", "--fleet", str(tmp / "bom.toml")], 0, []),
    ]  # fmt: skip


def test_low_items(tmp_path: Path, store: Path) -> None:
    """Each case exits with its code and names what is wrong, no traceback."""
    cases = _cases(tmp_path, store)
    failures = []
    for (name, _, code, named), got in zip(cases, _batch([c[1] for c in cases]), strict=True):
        if got["code"] != code or "Traceback" in got["stderr"] or any(n not in got["stderr"] for n in named):
            failures.append(f"{name}: exit {got['code']} (want {code}): {got['stderr'][-400:]}")
    assert not failures, "\n".join(failures)
    assert not list((tmp_path / "out" / "elsewhere").iterdir())  # nothing written through the planted link


def test_finished_run_leaves_no_device_running(tmp_path: Path) -> None:
    """A run finished (interrupted) while a device row still says `running` (a second Ctrl-C stopped the
    command before it wrote the device's end): the device becomes `interrupted` with its run."""
    with open_store(tmp_path / "r.sqlite") as s:
        run = s.runs.begin_run("replay")
        s.runs.add_device(run, "c6-a", "esp32c6")
        s.runs.add_device(run, "pi5-1", "pi5")
        s.runs.update_device(run, "pi5-1", status="ok")
        s.runs.finish_run(run, "interrupted")
        assert {d.name: d.status for d in s.runs.devices(run)} == {"c6-a": "interrupted", "pi5-1": "ok"}


def test_publish_says_larger_for_a_larger_patch(tmp_path: Path) -> None:
    """A patch larger than its model is "N% larger", never "-N% smaller"; the figure agrees with the sizes."""
    store = str(tmp_path / "ota")
    runs = [
        subprocess.run(hilbench("model", "publish", str(MODELS / name), "--key", KEY, "--store", store, "--name",
                                "npc-policy", "--format", "tflite-int8"), cwd=REPO, capture_output=True, text=True)
        for name in ("npc-policy-large-int8.tflite", "npc-policy-int8.tflite")
    ]  # fmt: skip
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr
    line = next(x for x in runs[1].stdout.splitlines() if "delta from" in x)
    patch, pct, word = re.search(r"(\d+) B \((\d+)% (smaller|larger) than the model\)", line).groups()
    size = (MODELS / "npc-policy-int8.tflite").stat().st_size
    assert word == ("larger" if int(patch) > size else "smaller") and "-" not in pct
    assert int(pct) == round(abs(100 * (int(patch) / size - 1)))
