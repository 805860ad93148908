"""`hilbench nightly` end to end on part of the virtual fleet: every stage, the report, the stored run."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench.core.errors import ExitCode
from bench.store.results import open_store
from tests.conftest import REPO, hilbench

pytestmark = pytest.mark.e2e


def run(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(hilbench(*args), cwd=REPO, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def short_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sessions")
    # 5 s: the counted devices play slower than real time (the first night played 21 s for an 8 s session)
    proc = run("session", "synth", "--scenario", "combat", "--duration", "5", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    (session,) = out.glob("*.mcap")
    return session


@pytest.fixture(scope="module")
def first_night(tmp_path_factory: pytest.TempPathFactory, short_session: Path) -> tuple[Path, Any]:
    """(its folder, the finished process): every stage on a board, a Linux device and a web device. The next
    night (`second_night`) runs on its results and boards: one whole nightly less for the file."""
    folder = tmp_path_factory.mktemp("night1")
    proc = run(
        "nightly", "--device", "c6-b", "--device", "pi5-1", "--device", "web-1", "--session", str(short_session),
        "--reports", str(folder / "reports"), "--results", str(folder / "results.sqlite"), "--json",
    )  # fmt: skip
    return folder, proc


@pytest.fixture(scope="module")
def second_night(first_night: tuple[Path, Any], short_session: Path) -> tuple[Path, Any]:
    """(its CI files' folder, the finished process): c6-b's next night after `first_night` (whose update stage
    left model v2 on the board), with the CI files written; no update or faults stages of its own."""
    folder, _ = first_night
    ci = folder / "ci"
    ci.mkdir()
    md, xml, prom, step = (ci / n for n in ("s.md", "j.xml", "m.prom", "step.md"))
    proc = subprocess.run(
        hilbench("nightly", "--device", "c6-b", "--session", str(short_session), "--skip", "update", "--skip",
                 "faults", "--reports", str(folder / "reports"), "--results", str(folder / "results.sqlite"),
                 "--json", "--summary-md", str(md), "--junit", str(xml), "--metrics", str(prom)),
        cwd=REPO, capture_output=True, text=True, timeout=900, env={**os.environ, "GITHUB_STEP_SUMMARY": str(step)},
    )  # fmt: skip
    return ci, proc


def test_nightly_runs_every_stage_on_a_board_a_linux_device_and_a_web_device(first_night: tuple[Path, Any]) -> None:
    tmp_path, proc = first_night
    results = tmp_path / "results.sqlite"
    devices = {"c6-b", "pi5-1", "web-1"}
    summary = json.loads(proc.stdout)
    stages = {s["name"]: s for s in summary["stages"]}
    assert list(stages) == ["check", "flash", "replay", "confirm", "update", "faults"], proc.stderr
    for name, stage in stages.items():
        assert stage["ok"], f"{name}: {stage}"
        assert set(stage["devices"]) == devices
    assert proc.returncode == ExitCode.OK, proc.stderr
    for name in ("pi5-1", "web-1"):
        cases = stages["faults"]["devices"][name]["data"]["cases"]
        assert set(cases) == {"forged-signature", "crash", "out-of-memory", "broken-weights"}
        assert all(c["kept_model"] and c["fault"] for c in cases.values())
    assert {c["fault"]["kind"] for c in cases.values()} == {"signature", "rollback", "parse"}  # web: two rollbacks
    # the fault models never enter the fleet's store, and the suite's own store is gone after it
    stores = list((tmp_path / "reports").rglob("ota-store"))
    assert stores and not [p for st in stores for p in st.rglob("*") if "fault" in p.name], stores
    assert not list((tmp_path / "reports").rglob("fault-store"))
    updates = stages["update"]["devices"]
    # the bundled pi5-1 runs the Jetson's policy, not the store's version 1: no delta from it, a full update (the
    # host agent's deltas: test_host_agent_update.py; web-1's below)
    assert updates["pi5-1"]["data"]["delta"] is False
    # the bundled pi5-1 is an aarch64 guest whose image has no grpcio yet: it updates over CoAP
    assert updates["pi5-1"]["data"]["channel"] == "coap"
    assert updates["web-1"]["data"]["channel"] == "websocket" and updates["web-1"]["data"]["delta"] is True

    (published,) = summary["runs"]
    page = Path(published["report"])
    html = page.read_text()
    assert "c6-b" in html and "pi5-1" in html and "web-1" in html
    assert (tmp_path / "reports" / "latest.html").is_file()
    assert published["note"] == "collecting baseline (0 of 5)"
    assert published["regressions"] == [] and published["verdicts"]

    db = sqlite3.connect(results)
    run_id = published["run_id"]
    with open_store(results) as store:  # packed once the run finished: counted through the store
        frames = {name: store.frames.frame_count(run_id, name) for name in ("c6-b", "pi5-1", "web-1")}
    # pi5-1 is an aarch64 guest under icount: its clock, and so its frame loop, runs slower than wall time
    assert frames["c6-b"] > 50 and frames["pi5-1"] > 20 and frames["web-1"] > 200
    ota_run = summary["ota_run"]["run_id"]  # updates and faults in their own run: session plots stay 5 s long
    assert ota_run != run_id and Path(summary["ota_run"]["report"]).is_file()
    replay_faults = db.execute("SELECT device, kind FROM faults WHERE run_id = ?", (run_id,)).fetchall()
    assert replay_faults == [], replay_faults  # cold starts free the MicroPython heap first (protocol `cold`)
    faults = dict(db.execute("SELECT device, COUNT(*) FROM faults WHERE run_id = ? GROUP BY device", (ota_run,)))
    assert faults["c6-b"] >= 4 and faults["pi5-1"] >= 4 and faults["web-1"] >= 4
    info = json.loads(
        db.execute("SELECT info FROM devices WHERE run_id = ? AND name = 'pi5-1'", (ota_run,)).fetchone()[0]
    )
    assert info["ota"][0]["ok"] is True
    retention = summary["retention"]  # pruned last; a first night keeps its raw rows (30 days, 30 runs)
    assert retention["keep_raw_days"] == 30 and retention["kept_device_runs"] >= 3 and retention["frames_removed"] == 0
    # what ran, and on which host, is kept with the run; the run joins later baselines
    prints = dict(db.execute("SELECT device, data FROM fingerprints WHERE run_id = ?", (run_id,)))
    c6 = json.loads(prints["c6-b"])
    assert c6["virtual"] is True and len(c6["model_sha256"]) == 64 and len(c6["firmware_sha256"]) == 64
    pi = json.loads(prints["pi5-1"])  # an aarch64 guest running the bench's own OS image
    assert pi["runtime"].startswith("tflite-runtime") and pi["platform"] == "linux-aarch64/qemu-icount"
    assert pi["clock"] == "icount"  # the guest's boot firmware says so; its bench-clock figures are n/a
    assert len(pi["os_image"]) == 64 and pi["os_kernel"].endswith("-arm64")
    host = json.loads(db.execute("SELECT data FROM run_host WHERE run_id = ?", (run_id,)).fetchone()[0])
    assert host["cores"] >= 1 and 0 <= host["others_pct"] <= 100
    rows = db.execute("SELECT device, accepted, why FROM baseline_members WHERE run_id = ?", (run_id,))
    members = {d: (a, why) for d, a, why in rows}
    assert set(members) == {"c6-b", "pi5-1", "web-1"}
    statuses = dict(db.execute("SELECT device || ' ' || metric, status FROM verdicts WHERE run_id = ?", (run_id,)))
    assert "regression" not in statuses.values()  # a first night has no window to regress against
    for device, (accepted, why) in members.items():  # on a loaded host a run may stay out: inconclusive timing
        inconclusive = [k for k, v in statuses.items() if k.startswith(device + " ") and v == "inconclusive"]
        assert accepted == 1 or (why.startswith("regressed: ") and inconclusive), (device, why)
    assert json.loads(prints["web-1"])["runtime"].startswith("litert.js")


def test_a_second_night_starts_each_device_from_its_configured_model(
    first_night: tuple[Path, Any], second_night: tuple[Path, Any]
) -> None:
    # night 1's update stage leaves model v2 on the board (and its faults stage rolled back from four bad ones);
    # night 2 needs no update of its own
    folder, proc = first_night
    assert proc.returncode == ExitCode.OK, proc.stdout + proc.stderr
    update = {s["name"]: s for s in json.loads(proc.stdout)["stages"]}["update"]["devices"]["c6-b"]
    assert update["ok"] and not update["skipped"], update  # the update stage put v2 on c6-b
    _, proc = second_night
    assert proc.returncode == ExitCode.OK, proc.stdout + proc.stderr
    db = sqlite3.connect(folder / "results.sqlite")
    query = "SELECT data FROM fingerprints WHERE device = 'c6-b' ORDER BY run_id"
    models = [json.loads(d)["model"] for (d,) in db.execute(query)]
    assert models == ["npc-policy@1 (npcm-int8)", "npc-policy@1 (npcm-int8)"]


def test_nightly_with_no_reachable_device_exits_3(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.toml"
    fleet.write_text('[[device]]\nname = "gone"\nkind = "pi5"\nssh = "u@127.0.0.1:1"\n')
    proc = run("nightly", "--fleet", str(fleet), "--reports", str(tmp_path), "--results", str(tmp_path / "r.sqlite"))
    assert proc.returncode == ExitCode.UNREACHABLE, proc.stdout + proc.stderr
    assert "gone" in proc.stdout


def test_nightly_refuses_a_bad_session_file_before_touching_devices(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mcap"
    bad.write_bytes(b"not an mcap file")
    proc = run("nightly", "--session", str(bad), "--reports", str(tmp_path))
    assert proc.returncode == ExitCode.USAGE and str(bad) in proc.stderr and "Traceback" not in proc.stderr


def test_nightly_refuses_an_unknown_baseline_or_model_before_touching_devices(tmp_path: Path) -> None:
    proc = run("nightly", "--baseline", "nope", "--results", str(tmp_path / "a.sqlite"), "--reports", str(tmp_path))
    assert proc.returncode == ExitCode.USAGE and "--baseline nope: no such baseline" in " ".join(proc.stderr.split())
    f32 = REPO / "fixtures" / "models" / "npc-policy-f32.tflite"
    results = ("--results", str(tmp_path / "b.sqlite"), "--reports", str(tmp_path))
    proc = run("nightly", "--model", str(f32), "--device", "c6-a", *results)
    words = " ".join(proc.stderr.split())
    assert proc.returncode == ExitCode.USAGE and "cannot be converted to .npcm for MicroPython boards" in words
    assert "Traceback" not in proc.stderr and not (tmp_path / "b.sqlite").exists()  # refused before anything ran


def test_nightly_writes_the_ci_files_their_consumers_read(second_night: tuple[Path, Any]) -> None:
    from junitparser import JUnitXml
    from markdown_it import MarkdownIt
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    ci, proc = second_night  # c6-b's night with --summary-md, --junit, --metrics and $GITHUB_STEP_SUMMARY
    md, xml, prom, step = (ci / n for n in ("s.md", "j.xml", "m.prom", "step.md"))
    # the files are written whatever the night's outcome (on a loaded host c6-b's agent may miss its hello: exit 3)
    assert proc.returncode in (ExitCode.OK, ExitCode.UNREACHABLE), proc.stdout + proc.stderr
    text = md.read_text()
    assert text.startswith("## hilbench nightly") and f"(exit {proc.returncode})" in text and step.read_text() == text
    assert "<table>" in MarkdownIt("commonmark").enable("table").render(text)
    cases = [c for suite in JUnitXml.fromfile(str(xml)) for c in suite]
    assert cases and {c.classname.rsplit(".", 1)[1] for c in cases} == {"c6-b"}
    families = {f.name: f for f in text_string_to_metric_families(prom.read_text())}
    assert families["hilbench_job_exit_code"].samples[0].value == proc.returncode
    if proc.returncode == ExitCode.OK:
        figures = {s.labels["metric"]: s for s in families["hilbench_figure"].samples}
        assert figures["inference_latency_p50"].labels["kind"] == "esp32c6" and figures["fps"].value > 0
