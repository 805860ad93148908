"""Bad input through the CLI, as a careless or hostile user types it: every case exits with its documented
code (2 usage/config, 3 unreachable), names the file, field or device, and never prints a traceback.
The count of cases is in docs/robustness.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bench.results import open_store
from tests.conftest import REPO, hilbench
from tests.stored_runs import build_store

KEY = str(REPO / "fixtures/keys/dev-model-signing.key.pem")
MODELS = REPO / "fixtures/models"
DEVICE = """[[device]]\nname = "d1"\nkind = "esp32c6"\nport = "socket://127.0.0.1:9"\n"""
PI = """[[device]]\nname = "p1"\nkind = "pi5"\nssh = "u@127.0.0.1:22"\n"""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The files the cases refer to as {name}."""
    tmp = tmp_path_factory.mktemp("bad")
    made: dict[str, str] = {"tmp": str(tmp), "key": KEY}

    def put(name: str, data: bytes | str) -> None:
        path = tmp / name
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
        made[name.replace(".", "_")] = str(path)

    put("bin", bytes(range(256)) * 8)
    put("file", "plain text\n")
    (tmp / "dir").mkdir()
    made["dir"] = str(tmp / "dir")
    session = REPO / "fixtures/sessions/combat.mcap"
    if not session.exists():
        session = next((REPO / "fixtures/sessions").glob("*.mcap"))
    made["session"] = str(session)
    data = session.read_bytes()
    put("cut.mcap", data[:20])
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF
    put("flip.mcap", bytes(flipped))
    put("cut.tflite", (MODELS / "npc-policy-int8.tflite").read_bytes()[:3000])
    put("thresholds.toml", bytes(range(256)))
    for name, text in FLEETS.items():
        put(f"fleet-{name}.toml", text)
    store = tmp / "results.sqlite"
    build_store(store, runs=2, devices=1, frames=50)
    with open_store(store) as s:  # a run left behind by a process that is gone
        run = s.begin_run("replay")
        s.db.execute("UPDATE runs SET summary = ? WHERE id = ?", ('{"owner": {"host": "x", "pid": 1}}', run))
        s.finish_run(run, "interrupted")
    made["store"] = str(store)
    made["interrupted"] = str(run)
    return made


FLEETS = {
    "toml": "[[device]\nname =",
    "fps0": DEVICE + "fps_target = 0\n",
    "fpsneg": DEVICE + "fps_target = -5\n",
    "fpsbig": DEVICE + "fps_target = 1000000\n",
    "fpsstr": DEVICE + 'fps_target = "fast"\n',
    "fpsbool": DEVICE + "fps_target = true\n",
    "vsyncfloat": DEVICE + "vsync_hz = 60.5\n",
    "baud": DEVICE + "baud = -1\n",
    "budget": DEVICE + "decision_budget_ms = -1\n",
    "memkb": DEVICE + "memory_limit_kb = 600\n",
    "flashsize": DEVICE + "flash_size = 5\n",
    "modelpath": DEVICE + 'model = "../../etc/passwd"\n',
    "modelver": DEVICE + "model_version = 0\n",
    "memmb": PI + "memory_limit_mb = -1\n",
    "telemetry": PI + "telemetry_interval_ms = 0\n",
    "python": PI + 'python = "python3; touch /tmp/pwned"\n',
    "agentdir": PI + 'agent_dir = "../../x; rm -rf ~"\n',
    "sshport": """[[device]]\nname = "p1"\nkind = "pi5"\nssh = "u@127.0.0.1:70000"\n""",
    "kind": """[[device]]\nname = "x"\nkind = "toaster"\n""",
    "dup": DEVICE + DEVICE,
    "noname": """[[device]]\nkind = "pi5"\n""",
    "badname": """[[device]]\nname = "a b/c"\nkind = "pi5"\n""",
    "trustkey": '[bench]\ntrusted_key = "/nonexistent/key.pem"\n' + DEVICE,
    "benchkey": "[bench]\ncolour = 1\n" + DEVICE,
    "toplevel": "[oops]\n" + DEVICE,
    "devicetable": 'device = "x"\n',
    "unknownfield": DEVICE + "turbo = true\n",
    "wronglink": DEVICE + 'ssh = "u@h:22"\n',
}


def publish_int8(model: str) -> list[str]:
    """`model publish MODEL` as tflite-int8 named m, signed with the test key, into {tmp}/st."""
    options = ["--key", "{key}", "--name", "m", "--format", "tflite-int8", "--store", "{tmp}/st"]
    return ["model", "publish", model, *options]


# fmt: off
# (id, argv, exit code, words the message must contain)
CASES = [
    ("fleet missing", ["fleet", "list", "--fleet", "{tmp}/none.toml"], 2, ["none.toml", "does not exist"]),
    ("fleet binary", ["fleet", "list", "--fleet", "{bin}"], 2, ["bin", "UTF-8"]),
    ("fleet directory", ["fleet", "list", "--fleet", "{dir}"], 2, ["dir"]),
    ("fleet bad toml", ["fleet", "list", "--fleet", "{fleet-toml_toml}"], 2, ["fleet-toml", "TOML"]),
    *[
        (f"fleet {name}", ["fleet", "list", "--fleet", f"{{fleet-{name}_toml}}"], 2, [f"fleet-{name}", word])
        for name, word in [
            ("fps0", "'fps_target'"),
            ("fpsneg", "'fps_target'"),
            ("fpsbig", "'fps_target'"),
            ("fpsstr", "'fps_target'"),
            ("fpsbool", "'fps_target'"),
            ("vsyncfloat", "'vsync_hz'"),
            ("baud", "'baud'"),
            ("budget", "'decision_budget_ms'"),
            ("memkb", "'memory_limit_kb'"),
            ("flashsize", "'flash_size'"),
            ("modelpath", "'model'"),
            ("modelver", "'model_version'"),
            ("memmb", "'memory_limit_mb'"),
            ("telemetry", "'telemetry_interval_ms'"),
            ("python", "'python'"),
            ("agentdir", "agent_dir"),
            ("sshport", "ssh"),
            ("kind", "'kind'"),
            ("dup", "duplicate"),
            ("noname", "'name'"),
            ("badname", "'name'"),
            ("trustkey", "'trusted_key'"),
            ("benchkey", "colour"),
            ("toplevel", "oops"),
            ("devicetable", "[[device]]"),
            ("unknownfield", "turbo"),
            ("wronglink", "ssh"),
        ]
    ],
    ("replay speed nan", ["replay", "--session", "{session}", "--speed", "nan"], 2, ["--speed"]),
    ("replay speed inf", ["replay", "--session", "{session}", "--speed", "inf"], 2, ["--speed"]),
    ("replay speed -1", ["replay", "--session", "{session}", "--speed", "-1"], 2, ["--speed"]),
    ("replay speed word", ["replay", "--session", "{session}", "--speed", "fast"], 2, ["--speed"]),
    ("nightly speed nan", ["nightly", "--speed", "nan"], 2, ["--speed"]),
    ("lease wait -1", ["flash", "--lease-wait", "-1"], 2, ["--lease-wait"]),
    ("lease wait nan", ["replay", "--session", "{session}", "--lease-wait", "nan"], 2, ["--lease-wait"]),
    ("flash attempts 0", ["flash", "--attempts", "0"], 2, ["--attempts"]),
    ("flash attempts -3", ["flash", "--attempts", "-3"], 2, ["--attempts"]),
    ("flash firmware missing", ["flash", "--firmware", "{tmp}/no.bin"], 2, ["no.bin"]),
    ("flash no device", ["flash", "--device", "nosuch"], 2, ["nosuch"]),
    ("update loss 150", ["update", "--model", "x", "--loss", "150"], 2, ["--loss"]),
    ("update loss nan", ["update", "--model", "x", "--loss", "nan"], 2, ["--loss"]),
    ("update store is a file", ["update", "--model", "x", "--store", "{file}"], 2, ["file"]),
    ("ota port 70000", ["ota", "serve", "--port", "70000"], 2, ["--port"]),
    ("ota port -1", ["ota", "serve", "--port", "-1"], 2, ["--port"]),
    ("ota port word", ["ota", "serve", "--port", "http"], 2, ["--port"]),
    ("telemetry seconds 0", ["linux", "telemetry", "--seconds", "0"], 2, ["--seconds"]),
    ("telemetry seconds nan", ["linux", "telemetry", "--seconds", "nan"], 2, ["--seconds"]),
    ("synth seed -5", ["session", "synth", "--seed", "-5", "--out", "{tmp}/s"], 2, ["--seed"]),
    ("synth duration 0", ["session", "synth", "--duration", "0", "--out", "{tmp}/s"], 2, ["--duration"]),
    ("synth duration nan", ["session", "synth", "--duration", "nan", "--out", "{tmp}/s"], 2, ["--duration"]),
    (
        "synth out unwritable",
        ["session", "synth", "--scenario", "combat", "--duration", "1", "--out", "{file}/s"],
        2,
        ["file"],
    ),
    ("session cut to 20 bytes", ["session", "info", "{cut_mcap}"], 2, ["cut.mcap"]),
    ("session flipped chunk", ["session", "info", "{flip_mcap}"], 2, ["flip.mcap", "corrupt"]),
    ("session binary", ["session", "info", "{bin}"], 2, ["bin", "MCAP"]),
    ("session missing", ["session", "info", "{tmp}/none.mcap"], 2, ["none.mcap"]),
    ("session directory", ["session", "info", "{dir}"], 2, ["dir"]),
    ("replay cut session", ["replay", "--session", "{cut_mcap}"], 2, ["cut.mcap"]),
    ("nightly flipped session", ["nightly", "--session", "{flip_mcap}"], 2, ["flip.mcap"]),
    ("keys name ..", ["keys", "gen", "--name", "../x", "--out", "{tmp}/k"], 2, ["--name"]),
    ("keys name empty", ["keys", "gen", "--name", "", "--out", "{tmp}/k"], 2, ["--name"]),
    ("keys out unwritable", ["keys", "gen", "--out", "{file}/k"], 2, ["file"]),
    ("publish binary", publish_int8("{bin}"), 2, ["bin"]),
    ("publish truncated", publish_int8("{cut_tflite}"), 2, ["cut.tflite", "corrupt"]),
    (
        "publish wrong shape",
        ["model", "publish", str(MODELS / "npc-fault-arena-int8.tflite"), "--key", "{key}", "--store", "{tmp}/st"],
        2,
        ["arena", "shapes"],
    ),
    (
        "publish missing model",
        ["model", "publish", "{tmp}/none.tflite", "--key", "{key}", "--store", "{tmp}/st"],
        2,
        ["none.tflite"],
    ),
    (
        "publish missing key",
        ["model", "publish", str(MODELS / "npc-policy-int8.tflite"), "--key", "{tmp}/k.pem", "--store", "{tmp}/st"],
        2,
        ["k.pem"],
    ),
    (
        "publish key is binary",
        ["model", "publish", str(MODELS / "npc-policy-int8.tflite"), "--key", "{bin}", "--store", "{tmp}/st"],
        2,
        ["bin"],
    ),
    ("report store binary", ["report", "--results", "{bin}"], 2, ["bin"]),
    ("report store directory", ["report", "--results", "{dir}"], 2, ["dir"]),
    ("report store scheme", ["report", "--results", "ftp://x/y"], 2, ["ftp"]),
    ("report no such run", ["report", "999", "--results", "{store}"], 2, ["999"]),
    ("report run word", ["report", "first", "--results", "{store}"], 2, ["first"]),
    ("report out unwritable", ["report", "--results", "{store}", "--out", "{file}/r"], 2, ["file"]),
    (
        "report thresholds binary",
        ["report", "--results", "{store}", "--thresholds", "{thresholds_toml}"],
        2,
        ["thresholds.toml"],
    ),
    ("report thresholds missing", ["report", "--results", "{store}", "--thresholds", "{tmp}/t.toml"], 2, ["t.toml"]),
    ("baseline no such run", ["baseline", "set", "999", "--results", "{store}"], 2, ["999"]),
    ("baseline bad name", ["baseline", "set", "1", "--name", "../x", "--results", "{store}"], 2, ["../x"]),
    ("baseline interrupted run", ["baseline", "set", "{interrupted}", "--results", "{store}"], 2, ["interrupted"]),
]
# fmt: on


@pytest.fixture(scope="module")
def results(files: dict[str, str]) -> dict[str, dict]:
    """Every case run once, all in one `hilbench` process (tests.robustness.cli_batch)."""
    cases = [[a.format(**files) if "{" in a else a for a in argv] for _, argv, _, _ in CASES]
    run = subprocess.run([sys.executable, "-m", "tests.robustness.cli_batch"], input=json.dumps(cases), cwd=REPO,
                         capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "300"})  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert len(lines) == len(CASES), run.stderr[-3000:]
    return {case[0]: json.loads(line) for case, line in zip(CASES, lines, strict=True)}


@pytest.mark.parametrize(("name", "code", "words"), [(c[0], c[2], c[3]) for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_a_named_error(results: dict[str, dict], files: dict[str, str], name: str, code: int,
                                    words: list[str]) -> None:  # fmt: skip
    got = results[name]
    text = " ".join((got["stderr"] + got["stdout"]).split())
    assert "Traceback" not in text, got["stderr"][-3000:]
    assert got["code"] == code, text[-1500:]
    for word in words:
        assert word.format(**files) in text, text[-1500:]


def test_one_case_through_the_real_executable(files: dict[str, str]) -> None:
    """The batch runs main() as the `hilbench` entry point does: spot-check one case in its own process."""
    run = subprocess.run(hilbench("replay", "--session", files["session"], "--speed", "nan"), cwd=REPO,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 2 and "--speed" in run.stderr and "Traceback" not in run.stderr


def test_at_least_sixty_cases() -> None:
    assert len(CASES) >= 60
