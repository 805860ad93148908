"""The bench as an installed package, outside a checkout: the wheel carries the agents, fixtures and firmware
(bench/core/paths.py finds them) and every file a bundled fleet, thresholds file or image recipe names; an installed
wheel's `hilbench` runs the README's commands from an empty folder on the bundled fleet. The full
install-and-nightly run takes minutes: set HILBENCH_INSTALL_TEST=1 to run it too."""

from __future__ import annotations

import itertools
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.e2e

DATA = "npc_hil_bench-0.1.0.data/data/share/npc-hil-bench/"  # where a wheel keeps the data files
PACKAGE_PREFIX = "package:"  # a recipe's [files] source inside the bench package (bench/image/recipe.py)
COMMAND_WORD = re.compile(r"[a-z][a-z0-9-]*")  # a (sub)command's name: not FILE, [--opt] or ...


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
        if src.is_file() and not src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip wheel` builds from the checkout's files."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = source_copy(tmp / "src")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp / "dist"), str(src)],
        check=True,
        capture_output=True,
    )
    (built,) = (tmp / "dist").glob("npc_hil_bench-*.whl")
    return built


def test_the_wheel_carries_what_the_paths_module_finds(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    data = {n.removeprefix(DATA) for n in names if n.startswith(DATA)}
    tracked = subprocess.run(
        ["git", "ls-files", "host", "micropython", "web", "fixtures", "firmware"],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    wanted = {p for p in tracked.stdout.decode().split() if not (REPO / p).is_symlink()}  # every shipped file
    shipped = {"fixtures/fleets/virtual.toml", "host/npc_host_agent.py", "firmware/esp32c6/host-clock-vm.bin"}
    assert shipped <= wanted
    assert wanted <= data, f"missing from the wheel: {sorted(wanted - data)}"
    assert "bench/virtual/linux_tools/tegrastats" in names and "bench/report/templates/report.html.j2" in names


def bundled_files() -> list[str]:
    """The TOML files the package ships and reads: fleets, thresholds, image recipes (checkout-relative)."""
    listed = subprocess.run(["git", "ls-files", "fixtures", "firmware"], cwd=REPO, check=True, capture_output=True)
    return [p for p in listed.stdout.decode().split() if p.endswith(".toml")]


def strings(value: object, where: str) -> Iterator[tuple[str, str]]:
    """(key path, text) of every string value in a TOML document (keys are names, not files)."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(item, f"{where}.{key}" if where else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from strings(item, f"{where}[{index}]")


def named_paths(rel: str) -> list[tuple[str, str, str]]:
    """(key path, text, checkout-relative target) of every file or folder the bundled file `rel` names: a text
    that resolves from the file's folder to something in the checkout (or starts with ./ or ../, which must),
    or a recipe's `package:PATH` inside the bench package."""
    doc = tomllib.loads((REPO / rel).read_text())
    found = []
    for where, text in strings(doc, ""):
        if text.startswith(PACKAGE_PREFIX):
            found.append((where, text, f"bench/{text.removeprefix(PACKAGE_PREFIX)}"))
            continue
        if text.startswith("/") or "://" in text or not text.strip():
            continue  # a host's own file (a keyring), a URL
        target = posixpath.normpath(posixpath.join(posixpath.dirname(rel), text))
        if text.startswith(("./", "../")) or (not target.startswith("..") and (REPO / target).exists()):
            found.append((where, text, target))
    return found


def test_every_path_a_bundled_file_names_resolves_in_the_wheel(wheel: Path) -> None:
    """Resolved as the installed package resolves it: from the bundled file's own place in the data folder."""
    archive = zipfile.ZipFile(wheel)
    entries = {info.filename: info for info in archive.infolist()}
    missing, walked = [], set()
    for rel in bundled_files():
        assert DATA + rel in entries, f"{rel} is not in the wheel"
        for where, text, target in named_paths(rel):
            walked.add(text)
            assert (REPO / target).exists(), f"{rel}: {where} = {text!r} names nothing in the checkout"
            if text.startswith(PACKAGE_PREFIX):
                shipped = target  # inside the bench package
            else:
                shipped = posixpath.normpath(posixpath.join(posixpath.dirname(DATA + rel), text))
            found = entries.get(shipped) or next((e for n, e in entries.items() if n.startswith(shipped + "/")), None)
            if found is None:
                missing.append(f"{rel}: {where} = {text!r} -> {shipped}")
            elif (REPO / target).is_file() and os.access(REPO / target, os.X_OK):
                assert (found.external_attr >> 16) & 0o111, f"{shipped} lost its executable bit in the wheel"
    assert not missing, "named by a bundled file but not in the wheel where it resolves:\n" + "\n".join(missing)
    # the walk reaches each kind of reference: a fleet's tool, a recipe's package file, a recipe's sibling folder
    assert {"../../bench/virtual/host_tools/uhubctl", "package:virtual/linux_tools/vcgencmd"} <= walked
    assert "../../fixtures/keys/dev-board-host_ed25519" in walked and "../linux-arm64/guest.toml" in walked


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv with the wheel installed, its bin/. Its dependencies come from this venv: their modules through a
    .pth file (a path: the editable bench here is not imported), their programs (micropython, ...) linked in."""
    env_dir = tmp_path_factory.mktemp("installed") / "venv"
    venv.create(env_dir, with_pip=False)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(env_dir), "platbase": str(env_dir)}))
    (site / "bench-test-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"), "install", "-q", "--compile",
         "--no-deps", "--no-index", "--ignore-installed", str(wheel)],  # beside this venv's editable bench, not over it
        capture_output=True, text=True,
    )  # fmt: skip
    assert pip.returncode == 0, pip.stderr[-2000:]
    bin_dir = env_dir / "bin"
    for program in Path(sys.executable).parent.iterdir():
        if not (bin_dir / program.name).exists():
            (bin_dir / program.name).symlink_to(program)
    return bin_dir


def run_installed(bin_dir: Path, cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`hilbench ARGS` of the installed package in `cwd`, with no checkout on its path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HILBENCH_FLEET")}
    env["COLUMNS"] = "80"
    return subprocess.run(
        [str(bin_dir / "hilbench"), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )


def bench_from(bin_dir: Path) -> str:
    """The folder the installed venv's Python imports `bench` from."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = "import bench, os; print(os.path.dirname(bench.__file__))"
    return subprocess.run([str(bin_dir / "python"), "-c", code], capture_output=True, text=True, env=env,
                          cwd="/", check=True).stdout.strip()  # fmt: skip


def readme_commands() -> list[list[str]]:
    """The commands of the README's command table, as words (`hilbench fleet list / check` -> two commands)."""
    table = (REPO / "README.md").read_text().split("## Commands", 1)[1].split("\n#", 1)[0]
    commands = []
    for row in table.splitlines():
        cells = row.split("|")
        for code in re.findall(r"`hilbench ([^`]+)`", cells[1] if len(cells) > 2 else ""):
            first, *alternatives = code.split(" / ")
            words = list(itertools.takewhile(COMMAND_WORD.fullmatch, first.split()))
            commands += [words, *([*words[:-1], alt.split()[0]] for alt in alternatives)]
    return commands


# each command's --help through the installed package's bench.cli, in one process (35 processes of `hilbench` took
# ~20 s of this test; the console script itself runs below, for the real uses)
HELP_EACH = """
import contextlib, io, json, sys, traceback
from bench.cli import main
answers = {}
for words in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([*words, "--help"])
    except SystemExit as exc:
        code = exc.code
    except BaseException:
        code, err = "raised", io.StringIO(traceback.format_exc())
    answers[" ".join(words)] = [code or 0, out.getvalue()[:200], err.getvalue()[-1500:]]
print(json.dumps(answers))
"""


def test_the_installed_package_answers_every_readme_command_from_an_empty_folder(
    installed: Path, tmp_path: Path
) -> None:
    work = tmp_path / "empty"
    work.mkdir()
    commands = readme_commands()
    assert {("doctor",), ("fleet", "list"), ("suite",), ("completion", "bash")} <= {tuple(c) for c in commands}
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HILBENCH_FLEET")}
    helps = subprocess.run([str(installed / "python"), "-c", HELP_EACH, json.dumps(commands)], cwd=work,
                           capture_output=True, text=True, timeout=300, env={**env, "COLUMNS": "80"})  # fmt: skip
    assert helps.returncode == 0, helps.stderr[-3000:]
    answers = json.loads(helps.stdout)
    for words in commands:
        code, out, err = answers[" ".join(words)]
        assert code == 0, f"hilbench {' '.join(words)} --help: {err}"
        assert out.startswith(f"usage: hilbench {words[0]}") and "Traceback" not in err, (out, err)
    assert bench_from(installed) != str(REPO / "bench")  # the wheel's bench answered, not the checkout's
    # simplest real uses on the bundled fleet, each of which reads a bundled file or a shipped tool
    share = installed.parent / "share" / "npc-hil-bench"
    doctor = run_installed(installed, work, "doctor", "--json")
    failed = [f for f in json.loads(doctor.stdout)["findings"] if f["status"] == "fail"]
    # an installed package's web agent has no npm packages yet: doctor names the folder to run `npm ci` in
    assert doctor.returncode == 2 and [f["check"] for f in failed] == ["web npm packages"], failed
    assert failed[0]["fix"] == f"cd {share / 'web'} && npm ci"
    (share / "web" / "node_modules").symlink_to(REPO / "web" / "node_modules")  # as `npm ci` there would
    doctor = run_installed(installed, work, "doctor", "--json")
    failed = [f for f in json.loads(doctor.stdout)["findings"] if f["status"] == "fail"]
    assert doctor.returncode == 0 and not failed, failed  # e.g. the fleet's stand-in uhubctl, in the installed data
    listed = run_installed(installed, work, "fleet", "list", "--json")
    assert listed.returncode == 0, listed.stderr[-1500:]
    session = share / "fixtures" / "sessions" / "combat.mcap"
    info = run_installed(installed, work, "session", "info", str(session))
    assert info.returncode == 0, info.stderr[-1500:]
    power = run_installed(installed, work, "power", "status", "--device", "c6-a")
    assert power.returncode == 0, power.stdout[-1500:] + power.stderr[-1500:]
    # a board of the bundled fleet started, probed, flashed and deployed from the installed data alone (the
    # nightly's check and flash stages; HILBENCH_INSTALL_TEST=1 runs the whole nightly)
    for words in (["fleet", "check"], ["flash"]):
        proc = run_installed(installed, work, *words, "--device", "c6-a", "--json")
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    completion = run_installed(installed, work, "completion", "bash")
    assert completion.returncode == 0 and "hilbench" in completion.stdout
    assert sorted(p.name for p in work.iterdir()) in ([], ["reports"])  # nothing but the output folder


@pytest.mark.skipif(not os.environ.get("HILBENCH_INSTALL_TEST"), reason="set HILBENCH_INSTALL_TEST=1 (minutes)")
def test_pip_install_then_nightly_from_another_folder(tmp_path: Path) -> None:
    src = source_copy(tmp_path / "src")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    pip = subprocess.run([env_dir / "bin" / "python", "-m", "pip", "install", "-q", str(src)], capture_output=True)
    assert pip.returncode == 0, pip.stderr.decode()[-2000:]
    shutil.rmtree(src)  # nothing may come from the source tree any more
    # the one setup step an installed package's doctor names: the web agent's npm packages (`npm ci` in its web/)
    (env_dir / "share" / "npc-hil-bench" / "web" / "node_modules").symlink_to(REPO / "web" / "node_modules")
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
