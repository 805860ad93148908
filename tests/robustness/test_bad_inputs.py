"""Bad input through the CLI, as a careless or hostile user types it: every case exits with its documented
code (2 usage/config, 3 unreachable), names the file, field or device, and never prints a traceback.
The count of cases is in docs/robustness.md."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bench.replay.recording import Session, SessionMessage, write_session
from bench.results.thresholds import DEFAULT_THRESHOLDS
from bench.store.results import open_store
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
        run = s.runs.begin_run("replay")
        s.db.execute("UPDATE runs SET summary = ? WHERE id = ?", ('{"owner": {"host": "x", "pid": 1}}', run))
        s.runs.finish_run(run, "interrupted")
    made["store"] = str(store)
    made["interrupted"] = str(run)
    _special_files(tmp, made, put)
    return made


GB = 1 << 30


def _event(ts_ms: int, **extra: object) -> dict:
    return {"session_id": "s", "timestamp_ms": ts_ms, "action": "attack", "target_id": None,
            "context": {"hp_ratio": 0.5, "aggro_level": 0.1}, **extra}  # fmt: skip


def _session(path: Path, *messages: tuple[int, dict]) -> None:
    write_session(path, Session("s", "combat", [SessionMessage(ts, "event", value) for ts, value in messages]))


def _special_files(tmp: Path, made: dict[str, str], put) -> None:
    """FIFOs, a socket, sparse giants, hostile sessions, TOML and stores (issue 31 cases 7-12)."""
    os.mkfifo(tmp / "fifo")
    made["fifo"] = str(tmp / "fifo")
    os.mkfifo(tmp / "fifo.tflite")
    made["fifo_tflite"] = str(tmp / "fifo.tflite")
    put("fleet-fifomodel.toml", DEVICE + f'model = "{tmp / "fifo.tflite"}"\n')
    put("fleet-fifofirmware.toml", DEVICE + f'firmware = "{tmp / "fifo"}"\n')
    with socket.socket(socket.AF_UNIX) as sock:  # the socket file stays after close
        sock.bind(str(tmp / "sock"))
    made["sock"] = str(tmp / "sock")
    with open(tmp / "sparse", "wb") as fh:  # 1 GB that takes no disk: it must never be read whole
        fh.truncate(GB)
    made["sparse"] = str(tmp / "sparse")
    padded = tmp / "padded.tflite"  # a valid model padded to 1 GB
    shutil.copy(MODELS / "npc-policy-int8.tflite", padded)
    with open(padded, "r+b") as fh:
        fh.truncate(GB)
    made["padded_tflite"] = str(padded)
    _session(tmp / "big-event.mcap", (0, _event(0, pad="x" * 5000)))
    _session(tmp / "gap.mcap", (0, _event(0)), (10**18, _event(10**12)))
    _session(tmp / "huge.mcap", (0, _event(0, pad="x" * (80 << 20))))  # 80 MB zstd-packed into a few KB
    made.update({n: str(tmp / f"{n}.mcap") for n in ("big-event", "gap", "huge")})
    deep = "a = " + "[" * 5000 + "]" * 5000 + "\n"
    put("deep.toml", deep)
    base = DEFAULT_THRESHOLDS.read_text()
    put("alpha-nan.toml", base.replace("alpha = 0.01", "alpha = nan", 1))
    put("pct-nan.toml", base.replace("threshold_pct = ", "threshold_pct = nan #", 1))
    nonfinite = {"fps-nan": "fps_target = nan", "baud-inf": "baud = inf", "budget-ninf": "decision_budget_ms = -inf"}
    for name, text in nonfinite.items():
        put(f"fleet-{name}.toml", DEVICE + text + "\n")
    corrupt = tmp / "corrupt.sqlite"
    shutil.copy(made["store"], corrupt)
    data = bytearray(corrupt.read_bytes())
    page = 4096
    for offset in range(2 * page, len(data) - page, page):  # every page after the schema's: garbage
        data[offset + 8 : offset + 64] = b"\xa5" * 56
    corrupt.write_bytes(bytes(data))
    made["corrupt"] = str(corrupt)
    (tmp / "readonly").write_text("")  # a store folder that cannot be made (a file is in the way)
    made["readonly"] = str(tmp / "readonly")
    stuck = tmp / "stuck" / "m" / "tflite-int8" / "1"  # a version folder in the way of the rename
    stuck.mkdir(parents=True)
    (stuck / "junk").write_text("x")
    made["stuck"] = str(tmp / "stuck")


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
    ("check no device", ["check", "--device", "nosuch", "--session", "{session}"], 2, ["nosuch"]),
    ("check missing model", ["check", "--device", "pi5-1", "--session", "{session}", "--model", "{tmp}/no.tflite",
                             "--output-dir", "{tmp}/o"], 2, ["no.tflite"]),
    ("check broken model", ["check", "--device", "pi5-1", "--session", "{session}", "--model", "{cut_tflite}",
                            "--output-dir", "{tmp}/o"], 2, ["cut.tflite"]),
    ("check bad ref", ["check", "--device", "pi5-1", "--session", "{session}", "--git", "no-such-ref", "--build",
                       "true", "--output-dir", "{tmp}/o"], 2, ["no-such-ref"]),
    ("check git without build", ["check", "--device", "pi5-1", "--session", "{session}", "--git", "HEAD"], 2,
     ["--build"]),
    ("check over budget", ["check", "--device", "pi5-1", "--session", "{session}", "--runs", "20", "--output-dir",
                           "{tmp}/o"], 2, ["--budget"]),
    ("check one run", ["check", "--device", "pi5-1", "--session", "{session}", "--runs", "1"], 2, ["--runs"]),
    ("check junit unwritable", ["check", "--device", "pi5-1", "--session", "{session}", "--junit", "{file}/j.xml"],
     2, ["--junit"]),
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
    # issue 31 cases 7-12: special files, sizes, nan/inf, nesting, gaps, stores, tracebacks
    *[
        (f"{what} {special}", [*argv, f"{{{special}}}", *rest], 2, [f"{{{special}}}", word])
        for special, word in [("fifo", "FIFO"), ("sock", "socket"), ("dir", "directory")]
        for what, argv, rest in [
            ("fleet", ["fleet", "list", "--fleet"], []),
            ("thresholds", ["report", "--results", "{store}", "--thresholds"], []),
            ("session", ["session", "info"], []),
            ("replay session", ["replay", "--session"], []),
            ("publish model", ["model", "publish"], ["--key", "{key}", "--name", "m", "--format", "tflite-int8",
                                                     "--store", "{tmp}/st"]),
            ("publish key", ["model", "publish", str(MODELS / "npc-policy-int8.tflite"), "--store", "{tmp}/st",
                             "--key"], []),
            ("firmware", ["flash", "--firmware"], []),
            ("convert", ["model", "convert"], ["{tmp}/x.npcm"]),
        ]
    ],
    ("nightly model fifo", ["nightly", "--model", "{fifo_tflite}"], 2, ["fifo.tflite", "FIFO"]),
    ("nightly fleet model fifo", ["nightly", "--fleet", "{fleet-fifomodel_toml}"], 2, ["'model'", "FIFO"]),
    ("flash fleet model fifo", ["flash", "--fleet", "{fleet-fifomodel_toml}"], 2, ["fifo.tflite", "FIFO"]),
    ("flash fleet firmware fifo", ["flash", "--fleet", "{fleet-fifofirmware_toml}"], 2, ["'firmware'", "FIFO"]),
    ("fleet 1 GB", ["fleet", "list", "--fleet", "{sparse}"], 2, ["{sparse}", "limit"]),
    ("thresholds 1 GB", ["report", "--results", "{store}", "--thresholds", "{sparse}"], 2, ["{sparse}", "limit"]),
    ("key 1 GB", [*publish_int8(str(MODELS / "npc-policy-int8.tflite"))[:3], "--key", "{sparse}"], 2,
     ["{sparse}", "limit"]),
    ("model 1 GB", publish_int8("{sparse}"), 2, ["{sparse}", "limit"]),
    ("model padded to 1 GB", publish_int8("{padded_tflite}"), 2, ["padded.tflite", "limit"]),
    ("firmware 1 GB", ["flash", "--firmware", "{sparse}"], 2, ["{sparse}", "limit"]),
    ("session huge zstd event", ["session", "info", "{huge}"], 2, ["huge.mcap", "limit"]),
    ("replay event over a line", ["replay", "--session", "{big-event}"], 2, ["big-event.mcap", "limit"]),
    ("session gap 10^18 ns", ["session", "info", "{gap}"], 2, ["gap.mcap", "gap", "60 s"]),
    ("replay gap 10^18 ns", ["replay", "--session", "{gap}"], 2, ["gap.mcap", "gap"]),
    ("fleet deep nesting", ["fleet", "list", "--fleet", "{deep_toml}"], 2, ["deep.toml", "not valid TOML"]),
    ("thresholds deep nesting", ["report", "--results", "{store}", "--thresholds", "{deep_toml}"], 2,
     ["deep.toml", "not valid TOML"]),
    ("thresholds alpha nan", ["report", "--results", "{store}", "--thresholds", "{alpha-nan_toml}"], 2,
     ["alpha-nan.toml", "alpha", "finite"]),
    ("thresholds threshold_pct nan", ["report", "--results", "{store}", "--thresholds", "{pct-nan_toml}"], 2,
     ["pct-nan.toml", "threshold_pct", "finite"]),
    ("fleet fps nan", ["fleet", "list", "--fleet", "{fleet-fps-nan_toml}"], 2, ["fps_target", "finite"]),
    ("fleet baud inf", ["fleet", "list", "--fleet", "{fleet-baud-inf_toml}"], 2, ["baud", "finite"]),
    ("fleet budget -inf", ["fleet", "list", "--fleet", "{fleet-budget-ninf_toml}"], 2, ["decision_budget_ms"]),
    ("report corrupt store", ["report", "--results", "{corrupt}", "--out", "{tmp}/r"], 2,
     ["corrupt.sqlite", "integrity_check"]),
    ("baseline set corrupt store", ["baseline", "set", "1", "--results", "{corrupt}"], 2,
     ["corrupt.sqlite", "integrity_check"]),
    ("report baseline nosuch", ["report", "--results", "{store}", "--baseline", "nosuch", "--out", "{tmp}/r"], 2,
     ["nosuch", "no such baseline"]),
    ("report run 10^23", ["report", "99999999999999999999999", "--results", "{store}"], 2,
     ["99999999999999999999999"]),
    ("publish to an unwritable store", [*publish_int8(str(MODELS / "npc-policy-int8.tflite"))[:-1],
                                        "{readonly}/st"], 2, ["readonly", "cannot write"]),
    ("publish rename refused", [*publish_int8(str(MODELS / "npc-policy-int8.tflite"))[:-1], "{stuck}"], 2,
     ["stuck", "cannot write"]),
    ("convert to a missing folder", ["model", "convert", str(MODELS / "npc-policy-int8.tflite"),
                                     "{tmp}/nofolder/x.npcm"], 2, ["nofolder", "cannot write"]),
    ("key is a directory", [*publish_int8(str(MODELS / "npc-policy-int8.tflite"))[:3], "--key", "{dir}"], 2,
     ["directory"]),
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


@pytest.mark.parametrize("name", [c[0] for c in CASES if c[0].split()[-1] in ("fifo", "sock", "dir")
                                  or "directory" in c[0]])  # fmt: skip
def test_special_files_are_not_called_missing(results: dict[str, dict], name: str) -> None:
    """A FIFO, socket or directory is named for what it is, never "does not exist" (issue 31 case 12)."""
    assert "does not exist" not in results[name]["stderr"]


def test_failed_writes_leave_no_temp_files(results: dict[str, dict], files: dict[str, str]) -> None:
    """The refused publish left no `.1.tmp/` behind (the version folder in the way is untouched)."""
    left = [p.name for p in Path(files["stuck"]).rglob("*") if ".tmp" in p.name]
    assert not left and (Path(files["stuck"]) / "m/tflite-int8/1/junk").exists()
    assert not Path(files["tmp"], "nofolder").exists()


_PEAK = """import json, os, subprocess, sys
proc = subprocess.Popen([sys.executable, "-m", "tests.robustness.cli_batch"], stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
proc.stdin.write(sys.argv[1])
proc.stdin.close()
codes = [json.loads(line)["code"] for line in proc.stdout]
print(json.dumps({"codes": codes, "maxrss_kb": os.wait4(proc.pid, 0)[2].ru_maxrss}))
"""


def test_giants_are_not_read(files: dict[str, str]) -> None:
    """The 1 GB model and the 80 MB zstd event are refused before they are read: the process that refuses them
    stays far below their size (its peak resident memory, from wait4; started from a small parent, whose
    resident memory a child's peak would start from)."""
    argvs = (publish_int8("{padded_tflite}"), ["session", "info", "{huge}"], ["fleet", "list", "--fleet", "{sparse}"])
    cases = [[a.format(**files) for a in argv] for argv in argvs]
    run = subprocess.run([sys.executable, "-c", _PEAK, json.dumps(cases)], cwd=REPO, capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout)
    assert got["codes"] == [2, 2, 2]
    # kB: the CLI with its imports is ~150 MB; reading the model would add 1 GB, inflating the event 160 MB
    assert got["maxrss_kb"] < 250_000, got


def test_at_least_sixty_cases() -> None:
    assert len(CASES) >= 60


@pytest.fixture
def full_disk(tmp_path: Path):
    """A 12 KiB tmpfs: a disk that fills at once (needs root to mount; skipped otherwise)."""
    folder = tmp_path / "full"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12k", "tmpfs", str(folder)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_full_disk_is_a_named_error_and_leaves_no_temp_files(files: dict[str, str], full_disk: Path) -> None:
    """Issue 31 case 11: a report, a session and a model written to a full disk: exit 2 naming the folder, and
    no `.N.html.PID.tmp`, 0-byte `.mcap` or `.1.tmp/` left behind."""
    large = str(MODELS / "npc-policy-large-int8.tflite")
    cases = [
        ["report", "--results", files["store"], "--out", str(full_disk / "r")],
        ["session", "synth", "--scenario", "combat", "--duration", "20", "--out", str(full_disk / "s")],
        ["model", "publish", large, "--key", KEY, "--name", "m", "--format", "tflite-int8", "--store", str(full_disk)],
    ]
    run = subprocess.run([sys.executable, "-m", "tests.robustness.cli_batch"], input=json.dumps(cases), cwd=REPO,
                         capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "300"})  # fmt: skip
    results = [json.loads(line) for line in run.stdout.splitlines()]
    assert [r["code"] for r in results] == [2, 2, 2], results
    for r in results:
        assert "Traceback" not in r["stderr"] and str(full_disk) in r["stderr"], r["stderr"]
    left = [str(p.relative_to(full_disk)) for p in full_disk.rglob("*")
            if ".tmp" in p.name or (p.suffix == ".mcap" and p.stat().st_size == 0)]  # fmt: skip
    assert not left
