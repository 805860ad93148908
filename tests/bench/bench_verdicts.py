"""Benchmark of the nightly's verdicts themselves: unchanged nightlies must not raise false alarms, injected
regressions must be reported the night they appear, with their cause; a hung board is the bench's failure, not the
product's; a bisection finds the first bad build.

    .venv/bin/python -m tests.bench bench_verdicts [--devices pi5-1,c6-a] [--unchanged 10] [--hog-night 7]
                                                   [--duration 10] [--steps] [--creep-nights 8] [--creep-rate 0.05]
                                                   [--guest-clock] [--two-change] [--hung-board] [--bisect]
                                                   [--bisect-runs 3] [--heavier 6] [--scenario-device NAME]
                                                   [--out DIR] [--json]

A reduced nightly (one short synthetic combat session, the chosen devices, update and fault stages skipped; the
Linux boards as loopback stand-ins on the bench's real-time clock, see realtime_fleet; with --guest-clock the
bundled fleet as it is: the aarch64 guests under QEMU -icount, replayed on their own clock) runs from a scratch copy of
this checkout, so injections change files the way a team would, never this worktree:

  unchanged ........ nothing changed (the first `baseline_runs` nights collect the baseline)
  cpu-hog .......... unchanged, with one busy loop per host CPU running during the whole nightly
  slower-model ..... the fleet file asks for npc-policy-large-int8 (same input and output shapes, more compute);
                     a device that runs it already (the bundled pi5-1 and orin-1) is not changed
  macs+3% .......... `--model` puts a policy with 3% more multiply-accumulates than each device's own under test
                     (built with bench.models; its last hidden layer is wider)
  memory+13% ....... the agents allocate and touch a ballast of ~13% of their memory peak at import
  first-frame+25% .. the agents wait ~25% of their first-frame time before starting the frame loop
                     (these two and the creep patch the agents the selected devices run, by their kinds in the
                     fleet file: the host agent, the MicroPython agent; a device running another agent, a web page,
                     is named "not injected", and a night that would reach no device is skipped, the reason printed)
  two-change ....... (--two-change, on by default) on the scenario device, the model AND the agent change the same
                     night: `--model` puts a policy with --heavier times the MACs, and both agents get a comment (a
                     new agent bundle sha256, no slower); the nightly's attribution (bench.nightly.attribution) must
                     name the model as the cause (read from what it stores with the device's run)
  hung-board ....... (--hung-board, on by default) unchanged, but the scenario device's virtual board is frozen
                     (SIGSTOP of its processes: the MicroPython VM, a loopback board's sshd and agent; not the
                     stand-in USB bridge and power switch) 2 s after its first frame; the nightly must class it
                     an infrastructure failure (on a C6 "recovered by <step>" from --duration 15: see
                     HANG_AFTER_S), retry it once ("passed on retry") and exit 0; the ladder's steps are printed
  macs x2 (energy) . (--energy, on by default) `--model` puts a policy with twice the MACs on the scenario device,
                     whose power meter (c6-a's virtual PPK2) must report an energy regression that night (issue 29)
  creep-K .......... (last, after the steps) each inference does --creep-rate (5%) more compute than the night
                     before, K nights in a row: a busy loop after the model's invoke, that share of the inference P50
                     of the last unchanged night compounded (a slower model a night, the way a retrained model
                     grows); where a night's step is inside a figure's noise the window test alone absorbs it (the
                     drift test's job); a step over the floor (+5% on a counted clock, floor 0.5%) is a regression
                     every night, and from its third night on also a drift (a regression that keeps growing);
                     printed per creep night with the alerts it opened or joined
  bisect-8 ......... (--bisect, on by default; after the nights, in its own results store) `hilbench bisect
                     --series` over 8 models of the scenario device in name order: 1-3 retrains of the same cost
                     (other weights), 4-8 with --heavier times the MACs; judged on any metric (bisect's default),
                     it must name model 4 in at most 3 steps of --bisect-runs replays each; the inference time of
                     model 4 and of the good one before it is printed whichever metric the verdict rests on

The scenario device is the first MicroPython board of --devices (a C6; else the first device): a model's compute
shows there. The heavier model has 6x the MACs, not the +30% a retrain might add, so that it shows on every C6:
on the unix-port VM the interpreter's fixed cost per invoke dilutes a model change (npc-policy's 5,376 MACs are
~15 us of a ~270 us inference, docs/report.md), while on the counted core the MACs are most of the inference
(+4% MACs is +2.5%, twice the MACs +68% of its 9.6 ms: docs/esp32c6.md); 6x is ~+37 kB of weights (a memory peak
well over its floor) and still fits the C6's heap. The x86 loopback stand-in runs both models in the same time.

Prints one line per night (exit code, regressions, not reproduced, inconclusive), then the false-alarm count
over the unchanged nights, which injections were caught on the night they appeared (for the two-change night the
cause named, for the hung board its outcome class and exit code, for the bisection the first bad build and the
steps taken, each next to its goal), and the run-to-run coefficient of variation of each device's CV_FIGURES over
the judged unchanged nights (the CPU-hog night left out). Timing on a shared host is noisy: the bench host's load
during each night is printed too."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.config.fleet import load_fleet
from bench.config.kinds import HOST_AGENT as HOST_RUNTIME
from bench.config.kinds import MICROPYTHON_AGENT
from bench.core.errors import BenchError

REPO = Path(__file__).resolve().parents[2]
PYTHON = Path(sys.executable)
HOST_AGENT = "host/npc_host_agent.py"
MPY_AGENT = "micropython/npc_agent.py"
AGENT_FILES = {HOST_RUNTIME: HOST_AGENT, MICROPYTHON_AGENT: MPY_AGENT}  # agent runtime -> the source injections patch
# the figures whose run-to-run spread the benchmark prints (issue goals: inference P50 CV < 5% on c6-a, < 1% on
# the icount guests)
CV_FIGURES = ("inference_latency_p50", "decision_latency_p50", "first_frame_p50", "fps", "energy_per_decision_p50")
MAC_GROWTH = 1.03


def scratch_copy(out: Path) -> Path:
    """The tracked files of this checkout (plus uncommitted edits) copied to `out`/repo."""
    repo = out / "repo"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split("\n")  # fmt: skip
    for name in filter(None, files):
        src = REPO / name
        if src.is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, repo / name)
    return repo


def hilbench(
    repo: Path, *args: str, timeout: float = 1200, during: Callable[[subprocess.Popen[str]], None] | None = None
) -> subprocess.CompletedProcess[str]:
    """`hilbench ARGS` of the scratch copy `repo`; `during(process)` runs while it does (e.g. a board frozen)."""
    env = {**os.environ, "PYTHONPATH": str(repo), "COLUMNS": "80"}
    with subprocess.Popen([str(PYTHON), "-m", "bench", *args], cwd=repo, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as proc:  # fmt: skip
        try:
            if during is not None:
                during(proc)
            stdout, stderr = proc.communicate(timeout=timeout)
        except BaseException:
            proc.kill()
            raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def measurement(store: Path, device: str, name: str) -> float | None:
    """The newest stored value of a measurement on a device."""
    with sqlite3.connect(store) as db:
        row = db.execute(
            "SELECT m.value FROM measurements m JOIN runs r ON r.id = m.run_id WHERE r.kind = 'replay'"
            " AND m.device = ? AND m.name = ? AND m.value IS NOT NULL ORDER BY m.run_id DESC LIMIT 1",
            (device, name),
        ).fetchone()
    return float(row[0]) if row else None


def patch(path: Path, anchor: str, replacement: str) -> None:
    text = path.read_text()
    if anchor not in text:
        raise SystemExit(f"{path}: cannot find {anchor!r} to inject into")
    path.write_text(text.replace(anchor, replacement, 1))


def agent_runtimes(fleet: Path, devices: list[str]) -> dict[str, str]:
    """device -> the agent runtime its kind runs (bench.config.kinds), read from the fleet file `fleet`."""
    try:
        return {d.name: d.kind_info.runtime for d in load_fleet(fleet).select(devices)}
    except BenchError as exc:
        print(f"bench_verdicts: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def largest(runtimes: dict[str, str], values: dict[str, float]) -> dict[str, float]:
    """runtime -> the largest of the per-device `values` over the devices that run it, for each runtime whose
    agent the injections patch (AGENT_FILES): an agent the selected devices do not run is left as it is."""
    out: dict[str, float] = {}
    for device, value in values.items():
        if (runtime := runtimes[device]) in AGENT_FILES:
            out[runtime] = max(out.get(runtime, value), value)
    return out


def not_injected(runtimes: dict[str, str]) -> list[str]:
    """The selected devices no code injection reaches (their agent is neither the host's nor MicroPython's), why."""
    return [f"{d} not injected ({r} agent)" for d, r in runtimes.items() if r not in AGENT_FILES]


def inject_memory(repo: Path, store: Path, runtimes: dict[str, str]) -> list[str]:
    """A ballast of ~13% of the agents' memory peak, allocated and touched at import, in each agent a selected
    device runs; what was injected."""
    peaks = largest(runtimes, {d: measurement(store, d, "mem_peak") or 0.0 for d in runtimes})
    done = []
    if HOST_RUNTIME in peaks:
        size = int(0.13 * peaks[HOST_RUNTIME])
        patch(repo / HOST_AGENT, "\nclass Agent",
              f"\n_BALLAST = bytes(range(256)) * {max(1, size // 256)}\n\n\nclass Agent")  # fmt: skip
        done.append(f"host agent +{size / 1e6:.1f} MB")
    if MICROPYTHON_AGENT in peaks:
        size = int(0.13 * peaks[MICROPYTHON_AGENT])
        patch(repo / MPY_AGENT, "\nimport npcfeat",
              f"\n_BALLAST = bytearray(b'\\x01' * {max(1, size)})\nimport npcfeat")  # fmt: skip
        done.append(f"MicroPython agent +{size / 1e3:.1f} kB")
    return done


def inject_first_frame(repo: Path, store: Path, runtimes: dict[str, str]) -> list[str]:
    """A wait of ~25% of the measured first-frame time (median of the cold starts, in µs) before the frame loop
    starts, in each agent a selected device runs: clear of the +15% floor, since an effect of exactly the floor is
    caught about half the time. What was injected."""
    delays = largest(runtimes, {d: 0.25 * (measurement(store, d, "first_frame_p50") or 50_000.0) / 1000
                                for d in runtimes})  # fmt: skip
    done = []
    if HOST_RUNTIME in delays:
        wait_ms = delays[HOST_RUNTIME]
        anchor = "        self.loop_task = asyncio.ensure_future(self.frame_loop("
        patch(repo / HOST_AGENT, anchor, f"        await asyncio.sleep({wait_ms / 1000:.4f})\n{anchor}")
        done.append(f"host agent waits {wait_ms:.0f} ms")
    if MICROPYTHON_AGENT in delays:
        wait_ms = delays[MICROPYTHON_AGENT]
        patch(repo / MPY_AGENT, "        self.loop = FrameLoop(",
              f"        __import__('time').sleep_ms({int(wait_ms)})\n        self.loop = FrameLoop(")  # fmt: skip
        done.append(f"MicroPython agent waits {int(wait_ms)} ms")
    return done


def run_values(store: Path, run_id: int, names: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """device -> measurement -> value of one stored run (non-null values only)."""
    marks = ",".join("?" * len(names))
    with sqlite3.connect(store) as db:
        rows = db.execute(
            "SELECT device, name, value FROM measurements WHERE run_id = ? AND value IS NOT NULL"
            f" AND name IN ({marks})",
            (run_id, *names),
        ).fetchall()
    out: dict[str, dict[str, float]] = {}
    for device, name, value in rows:
        out.setdefault(device, {})[name] = float(value)
    return out


def cv_table(nights: list[dict]) -> dict[str, dict[str, dict]]:
    """device -> figure -> {values, cv_pct} over `nights` (each with its `values`)."""
    import statistics

    table: dict[str, dict[str, dict]] = {}
    for n in nights:
        for device, figures in n["values"].items():
            for name, value in figures.items():
                table.setdefault(device, {}).setdefault(name, {"values": []})["values"].append(value)
    for figures in table.values():
        for row in figures.values():
            vals = row["values"]
            mean = statistics.fmean(vals)
            row["cv_pct"] = round(100 * statistics.stdev(vals) / mean, 2) if len(vals) >= 2 and mean else None
    return table


def grown_model(device_model: str, growth: float, path: Path, seed: str) -> str:
    """Write to `path` a .tflite of the fixture policy `device_model` with `growth` times its multiply-accumulates
    and weights drawn from `seed` (growth 1 and another seed: a retrain of the same cost), built with bench.models;
    returns what it is. The last hidden layer is widened up to the width of the one before it, then a new hidden
    layer follows it: no layer's weights outgrow the widest one's, since a MicroPython board's heap has no larger
    free block after boot (a 26 kB layer was refused, "oom")."""

    from bench.models import POLICY_LAYERS
    from bench.models.policy import calibration_inputs, make_policy, quantize_policy
    from bench.models.tflite_build import int8_graph, serialize

    name = device_model.removesuffix("-int8")
    widths = list(POLICY_LAYERS[name])

    def macs(w: list[int]) -> int:
        return sum(a * b for a, b in itertools.pairwise(w))

    base = macs(widths)
    while macs(widths) < base * growth:
        if widths[-2] >= widths[-3]:
            widths.insert(-1, 0)
        widths[-2] += 1
    mlp = make_policy(tuple(widths), seed)
    data = serialize(int8_graph(quantize_policy(mlp, calibration_inputs(widths[0]))), f"{name} x{growth:g} MACs int8")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return f"{name} {tuple(POLICY_LAYERS[name])} -> {tuple(widths)}: {base} -> {macs(widths)} MACs"


def more_macs_model(repo: Path, device_model: str) -> tuple[Path, str]:
    """A .tflite with MAC_GROWTH times the multiply-accumulates of the fixture policy `device_model`; its path
    and what it is."""
    name = device_model.removesuffix("-int8")
    path = repo / "fixtures" / "models" / f"{name}-macs3-int8.tflite"
    return path, grown_model(device_model, MAC_GROWTH, path, f"{name}-macs/v1")


ENERGY_GROWTH = 2.0  # issue 29: a model with twice the multiply-accumulates is an energy regression on night one
ENERGY_METRICS = ("energy_per_decision", "power_mean")  # the thresholds file's energy verdicts
CREEP_RATE = 0.05  # per night, compounded (--creep-rate)
HEAVIER = 6.0  # MAC factor of the heavier model of the two-change night and the bisection (why: module docstring)
SCENARIOS = ("two-change", "hung-board")  # nights printed by their own summary lines
# the hung board is frozen this long after its first frame of the night is stored. The replay finds a hang after
# the device's stall_s without a frame and as long again without an answer to a ping (10 s on a C6), and then
# climbs the recovery ladder mid-replay ("recovered by <step>"): that needs --duration 15 or more. With less of
# the session left the hang is found when the replay stops the agent ("no reply to 'stop'"), and the ladder
# brings the board back at the retry's start.
HANG_AFTER_S = 2.0


# where the creep's busy-wait goes in each agent: right after the model's invoke, timed by the agent's own clock
CREEP_SITES = (
    (HOST_RUNTIME, HOST_AGENT, "            self.last = decision(y)\n", "now_us()", "host agent"),
    (MICROPYTHON_AGENT, MPY_AGENT, "            self.last = (result[0], round(result[1], 4))\n", "self.clock.now()",
     "MicroPython agent"),
)  # fmt: skip


def inject_creep(
    repo: Path, base_us: dict[str, float], runtimes: dict[str, str], night: int, rate: float = CREEP_RATE
) -> list[str]:
    """Creep night `night` (1-based): every inference busy-waits base x ((1 + rate)^night - 1) µs after the
    model's invoke, inside the span the agent times as inference (t0 -> finish), on the device's own clock, in each
    agent a selected device with a base figure runs (`base_us`: device -> its unchanged inference P50). What was
    injected."""
    grown = (1 + rate) ** night - 1
    extra = largest(runtimes, {d: v * grown for d, v in base_us.items()})
    done = []
    for runtime, agent, anchor, clock, label in CREEP_SITES:
        if runtime in extra:
            wait_us = int(extra[runtime])
            busy = f"            _end = {clock} + {wait_us}\n            while {clock} < _end:\n                pass\n"
            patch(repo / agent, anchor, anchor + busy)
            done.append(f"{label} +{wait_us} µs")
    return [f"+{grown * 100:.1f}% compute: {', '.join(done)}"] if done else []


def realtime_fleet(repo: Path) -> Path:
    """The bundled fleet with its Linux boards as loopback stand-ins (no [device.os]): the aarch64 guests run
    under QEMU -icount, where bench-clock verdicts (latency, first frame) are not applicable, so they could
    not show whether those verdicts catch anything."""
    text = (repo / "fixtures" / "fleets" / "virtual.toml").read_text()
    text = text.replace('\n[device.os]\nimage = "build"\n', "\n")
    text = re.sub(r'\nota_server_host = "10.0.2.2"[^\n]*', "", text)  # QEMU's view of the host; none on loopback
    fleet = repo / "fixtures" / "fleets" / "bench-verdicts.toml"
    fleet.write_text(text)
    return fleet


def slower_fleet(repo: Path, devices: list[str], base: Path, name: str = "slower.toml") -> Path:
    """The benchmark's fleet `base` with the larger policy model on `devices` (written as fleet file `name`): a
    device's `model` set to it, or added after its name (a device that runs it already is left as it is)."""
    tables = base.read_text().split("[[device]]")
    for k, table in enumerate(tables):
        if any(f'name = "{device}"\n' in table for device in devices):
            large = 'model = "npc-policy-large-int8"'
            table, changed = re.subn(r'(?m)^model = "[^"\n]*"', large, table)
            tables[k] = table if changed else re.sub(r'(name = "[^"\n]*"\n)', rf"\1{large}\n", table, count=1)
    fleet = repo / "fixtures" / "fleets" / name
    fleet.write_text("[[device]]".join(tables))
    return fleet


def own_model(device: str, fleet: Path | None = None) -> str:
    """The fixture policy `device` runs in `fleet` (default: the bundled one), by its fleet entry."""
    return load_fleet(fleet).get(device).settings.model


def night(repo: Path, label: str, devices: list[str], session: Path, store: Path, reports: Path,
          fleet: Path | None = None, hog: bool = False, model: Path | None = None,
          during: Callable[[subprocess.Popen[str]], None] | None = None) -> dict:  # fmt: skip
    args = ["nightly", "--session", str(session), "--results", str(store), "--reports", str(reports), "--json",
            "--skip", "update", "--skip", "faults"]  # fmt: skip
    if model is not None:
        args += ["--model", str(model)]
    for d in devices:
        args += ["--device", d]
    if fleet is not None:
        args += ["--fleet", str(fleet)]
    hogs = (
        [subprocess.Popen([str(PYTHON), "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)] if hog else []
    )
    started = time.monotonic()
    try:
        proc = hilbench(repo, *args, during=during)
    finally:
        for h in hogs:
            h.send_signal(signal.SIGKILL)
            h.wait()
    try:
        summary = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"{label}: nightly gave no JSON (exit {proc.returncode}):\n{proc.stderr[-3000:]}") from None
    (run,) = summary["runs"]
    with sqlite3.connect(store) as db:
        row = db.execute("SELECT data FROM run_host WHERE run_id = ?", (run["run_id"],)).fetchone()
    host = json.loads(row[0]) if row else {}
    stages = {s["name"]: s for s in summary["stages"]}
    return {
        "night": label,
        "exit": summary["exit_code"],
        "seconds": round(time.monotonic() - started, 1),
        "run": run["run_id"],
        "regressions": sorted(f"{v['device']}:{v['metric']}" for v in run["regressions"]),
        "drifts": [v["reason"].split(";")[0] for v in run["regressions"] if v.get("drift_since") is not None],
        "alerts": night_alert_words(summary.get("alerts") or {}),
        "not_reproduced": sorted(f"{v['device']}:{v['metric']}" for v in run["not_reproduced"]),
        "inconclusive": sorted(f"{v['device']}:{v['metric']}" for v in run["inconclusive"]),
        "note": run["note"],
        "others_pct": host.get("others_pct"),
        "load": host.get("load_end"),
        "failed_stages": [n for n, s in stages.items() if not s["ok"]],
        "changes": _changes(store, run["run_id"]),
        "report": run["report"],
        "values": run_values(store, run["run_id"], CV_FIGURES),
        "outcomes": summary["outcomes"],  # each device's class over the night (the worst of its stages and verdicts)
        "replay_outcomes": {d: o["outcome"] for d, o in stages.get("replay", {}).get("devices", {}).items()},
        "causes": _causes(store, run["run_id"]),
    }


def night_alert_words(alerts: dict) -> list[str]:
    """The night's new and known alerts from the nightly's --json: "#1 drift untriaged (new)"."""
    return [f"#{a['id']} {a['kind']} {a['state']}" + (" (new)" if group == "new" else "")
            for group in ("new", "known") for a in alerts.get(group, [])]  # fmt: skip


def _causes(store: Path, run_id: int) -> dict[str, dict]:
    """device -> what attribution stored with its regression in run `run_id` (bench.nightly.attribution)."""
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT name, info FROM devices WHERE run_id = ?", (run_id,)).fetchall()
    infos = {name: json.loads(info) for name, info in rows}
    return {name: info["cause"] for name, info in infos.items() if info.get("cause")}


def _changes(store: Path, run_id: int) -> list[str]:
    """What the report says changed (from the stored report data next to the page)."""
    page = store.parent / "reports" / "runs" / f"{run_id}.json"
    if not page.is_file():
        return []
    data = json.loads(page.read_text())
    return [f"{d}: {'; '.join(c)}" for d, c in data.get("changes", {}).items() if c]


AGENT_COMMENT = "\n# bench_verdicts two-change night: a comment, the agent bundle's sha256 changes, nothing else\n"


def inject_agent_comment(repo: Path) -> str:
    """A harmless change of both agents (a comment at the end): a new agent bundle that is not slower."""
    for name in (HOST_AGENT, MPY_AGENT):
        path = repo / name
        path.write_text(path.read_text() + AGENT_COMMENT)
    return "a comment in both agents (new agent bundle)"


def two_change_summary(result: dict | None, device: str) -> dict:
    """Whether the two-change night was caught and whether attribution named the model (the goal)."""
    if result is None:
        return {"caught": None, "cause": None, "text": "two-change: not run"}
    found = result["causes"].get(device) or {}
    cause = found.get("cause")
    outcome = result["outcomes"].get(device) or {}
    why = "; ".join(x for x in (outcome.get("label", "no outcome"), result["note"]) if x)  # e.g. still collecting
    caught = ", ".join(result["regressions"]) or f"NOT caught ({why})"
    text = (f"two-change: {result['injected']} -> {caught}; exit {result['exit']}; cause named: {cause or 'none'}"
            " (goal: model)"
            + (f"; {found['text']}" if found.get("text") else ""))  # fmt: skip
    return {"caught": bool(result["regressions"]), "cause": cause, "model_named": cause == "model",
            "attribution": found or None, "exit": result["exit"], "text": text}  # fmt: skip


def board_processes(state: Path, device: str) -> list[int]:
    """The processes of virtual board `device`'s machine: those with its folder under the state dir on their
    command line (a MicroPython VM runs on <state>/<device>/fs, a loopback board's sshd reads its config there) or
    as their working folder (what runs on a loopback board). Not the board's stand-in hardware (`python -m
    bench.virtual...`: its USB-UART bridge, power switch and control port), which a hung chip leaves working."""
    folder = str((state / device).resolve())
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        hardware = any(a == "-m" and b.startswith("bench.virtual") for a, b in itertools.pairwise(argv))
        if not hardware and any(a == folder or a.startswith(folder + "/") for a in [*argv, cwd]):
            found.append(int(entry.name))
    return found


def hang_board(
    store: Path, state: Path, device: str, after_s: float, frozen: list[int]
) -> Callable[[subprocess.Popen[str]], None]:
    """What `night` runs while its nightly does: wait for `device`'s first frame of a new run, `after_s` seconds
    more, then freeze the board (SIGSTOP of its processes, the pids into `frozen`: the caller resumes any the
    recovery ladder left, once the nightly ended)."""
    with sqlite3.connect(store) as db:
        before = db.execute("SELECT COALESCE(MAX(id), 0) FROM runs").fetchone()[0]

    def frames() -> int:
        with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(store)) as db:
            return db.execute("SELECT COUNT(*) FROM frames WHERE run_id > ? AND device = ?", (before, device)
                              ).fetchone()[0]  # fmt: skip
        return 0

    def during(proc: subprocess.Popen[str]) -> None:
        deadline = time.monotonic() + 600  # check, flash (a blank board is flashed first), then the replay
        while frames() == 0 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(after_s)
        if proc.poll() is None:
            frozen.extend(board_processes(state, device))
            for pid in frozen:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)

    return during


def ladder_steps(store: Path, device: str, since_run: int) -> list[str]:
    """The recovery ladder's steps that brought `device` back in runs from `since_run` on ("step (run N)")."""
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT step, run_id FROM device_events WHERE event = 'recovered' AND device = ?"
                          " AND run_id >= ? ORDER BY rowid", (device, since_run)).fetchall()  # fmt: skip
    return [f"{step} (run {run})" for step, run in rows]


def hung_board_summary(result: dict | None, device: str, frozen: int, after_s: float, ladder: list[str]) -> dict:
    """The hung board's outcome class next to the goal: infrastructure (recovered by a ladder step, then passed on
    retry), no regression, exit 0; with the ladder's steps."""
    if result is None:
        return {"outcome": None, "text": "hung-board: not run"}
    outcome = result["replay_outcomes"].get(device) or {}  # the replay stage's: the night's may be a worse verdict
    night = result["outcomes"].get(device) or {}
    label = outcome.get("label", "no outcome")
    infra = outcome.get("class") == "infrastructure failure" or bool(outcome.get("passed_on_retry"))
    met = infra and not result["regressions"] and result["exit"] == 0
    regressions = ", ".join(result["regressions"]) or "none"
    text = (f"hung-board: {device} frozen {after_s:g} s after its first frame ({frozen} processes) -> replay: {label};"
            f" regressions: {regressions}; exit {result['exit']} (goal: infrastructure, recovered by a step, no"
            f" regression, exit 0): {'met' if met else 'NOT met'}")  # fmt: skip
    text += f"; ladder: {', '.join(ladder) or 'no step'}; the night's class: {night.get('class', '?')}"
    return {"device": device, "frozen_processes": frozen, "outcome": outcome, "night_outcome": night,
            "exit": result["exit"], "regressions": result["regressions"], "ladder": ladder, "goal_met": met,
            "text": text}  # fmt: skip


BISECT_BUILDS, BISECT_FIRST_BAD = 8, 4  # builds 1-3 the same cost, 4-8 heavier
SLOWER = "inference_p50"  # the figure that says a build is slower, printed whichever metric the bisection rests on


def bisect_series(folder: Path, device_model: str, growth: float) -> tuple[list[str], str]:
    """BISECT_BUILDS models of `device_model` in name order: retrains of the same cost up to BISECT_FIRST_BAD - 1,
    then `growth` times the multiply-accumulates; their names and what the two costs are."""
    name = device_model.removesuffix("-int8")
    names: list[str] = []
    costs: dict[bool, str] = {}
    for k in range(1, BISECT_BUILDS + 1):
        heavy = k >= BISECT_FIRST_BAD
        path = folder / f"{k:02d}-{name}-{f'x{growth:g}' if heavy else 'same'}-int8.tflite"
        costs[heavy] = grown_model(device_model, growth if heavy else 1.0, path, f"{name}-bisect/v{k}")
        names.append(path.name)
    return names, f"1-{BISECT_FIRST_BAD - 1}: {costs[False]}; {BISECT_FIRST_BAD}-{BISECT_BUILDS}: {costs[True]}"


def run_bisect(repo: Path, device: str, session: Path, fleet: Path, folder: Path, work: Path, runs: int) -> dict:
    """`hilbench bisect --series` over `folder` on `device` (any judged metric, its default): its JSON, an error's
    too, with its exit code and how long it took."""
    started = time.monotonic()
    proc = hilbench(repo, "bisect", "--device", device, "--session", str(session), "--series", str(folder),
                    "--fleet", str(fleet), "--runs", str(runs), "--output-dir", str(work), "--json",
                    timeout=3600)  # fmt: skip
    try:  # mpremote may print what a board said before it
        doc = json.loads(proc.stdout[proc.stdout.index('{\n  "') :])
    except ValueError:
        raise SystemExit(f"bisect gave no JSON (exit {proc.returncode}):\n{proc.stderr[-3000:]}") from None
    return {**doc, "exit": proc.returncode, "seconds": round(time.monotonic() - started, 1)}


def bisect_summary(doc: dict | None, names: list[str], what: str) -> dict:
    """Which build the bisection named first bad, in how many steps, next to the goals (build 4, <= 3 steps), with
    the figure it rests on and the inference time of the first bad build and the good one before it."""
    if doc is None:
        return {"first_bad": None, "text": "bisect-8: not run"}
    if "steps" not in doc:
        error = doc.get("error", {}).get("message", "no result")
        return {"first_bad": None, "text": f"bisect-8: hilbench bisect failed (exit {doc['exit']}): {error}",
                "bisection": doc}  # fmt: skip
    expected = names[BISECT_FIRST_BAD - 1]
    steps = {s["build"]: s for s in doc["steps"]}
    if doc.get("baseline"):
        steps.setdefault(doc["baseline"]["build"], doc["baseline"])
    bad, good = steps.get(doc["first_bad"]) or {}, steps.get(doc["last_good"]) or {}
    metric = bad.get("metric", "")

    def fig(step: dict, name: str) -> str:
        found = step.get("figures", {}).get(name)
        return f"{found['value']:g} {found['unit']}" if found else "no figure"

    right = doc["first_bad"] == expected and bad.get("status") == "bad"
    order = ", ".join(f"{s['build'][:2]} {s['status']}" for s in doc["steps"])
    figures = "; ".join(f"{m} {fig(good, m)} ({doc['last_good']}) -> {fig(bad, m)}" for m in dict.fromkeys(
        x for x in (metric, SLOWER) if x))  # fmt: skip
    text = (f"bisect-{len(names)} on {doc['device']} ({what}): first bad build {doc['first_bad']} (goal: {expected}):"
            f" {'right' if right else 'WRONG'}; {len(doc['steps'])} steps of {doc['runs_per_step']} replays (goal: at"
            f" most 3) [{order}]; resting on {metric or 'no metric'}: {figures}; {doc['seconds']:.0f} s,"
            f" exit {doc['exit']}")  # fmt: skip
    if doc.get("note"):
        text += f"; note: {doc['note']}"
    return {"first_bad": doc["first_bad"], "expected": expected, "right": right, "steps": len(doc["steps"]),
            "runs_per_step": doc["runs_per_step"], "metric": metric, "seconds": doc["seconds"], "text": text,
            "bisection": doc}  # fmt: skip


def creep_summary(creep: list[dict], runs: list[int], rate: float = CREEP_RATE) -> dict:
    """When the creep of `rate` a night was first a regression and when it was first named a drift (the first night
    and cumulative change it names), with each creep night's regressions, drifts and alerts."""
    if not creep:
        return {"caught_night": None, "text": "creep: not run"}
    flagged = next((i for i, n in enumerate(creep) if n["regressions"]), None)
    hit = next((i for i, n in enumerate(creep) if n["drifts"]), None)

    def cumulative(i: int) -> float:
        return ((1 + rate) ** (i + 1) - 1) * 100

    text = [f"creep +{rate:.1%} a night over {len(creep)} nights (first creep night is run {runs[0]})"]
    text.append("never a regression" if flagged is None else
                f"a regression from creep night {flagged + 1} (injected +{cumulative(flagged):.1f}%)")  # fmt: skip
    text.append("never named a drift" if hit is None else
                f"named a drift on creep night {hit + 1} (injected +{cumulative(hit):.1f}%):"
                f" {' | '.join(creep[hit]['drifts'])}")  # fmt: skip
    text += [f"  {n['night']}: exit {n['exit']}; {', '.join(n['regressions']) or 'no regression'}"
             + "".join(f"; {d}" for d in n["drifts"]) + (f"; alerts {', '.join(n['alerts'])}" if n["alerts"] else "")
             for n in creep]  # fmt: skip
    return {"caught_night": None if hit is None else hit + 1, "regression_night": None if flagged is None else
            flagged + 1, "cumulative_pct": None if hit is None else cumulative(hit), "first_creep_run": runs[0],
            "drifts": creep[hit]["drifts"] if hit is not None else [], "text": "\n".join(text)}  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--devices", default="pi5-1,c6-a")
    p.add_argument("--unchanged", type=int, default=10, help="unchanged nightlies (the first ones collect)")
    p.add_argument("--hog-night", type=int, default=7, help="which unchanged night runs with a CPU hog (0: none)")
    p.add_argument("--duration", type=float, default=10.0, help="seconds of the synthetic session")
    p.add_argument(
        "--steps",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the step injections (slower model, memory, first frame); --no-steps skips them",
    )
    p.add_argument("--creep-nights", type=int, default=8, help="nights of the creep, last (0: none)")
    p.add_argument(
        "--creep-rate", type=float, default=CREEP_RATE, help="the creep's growth a night (default %(default)g)"
    )
    p.add_argument(
        "--guest-clock",
        action="store_true",
        help="Linux boards as the bundled QEMU guests (icount clock) instead of loopback stand-ins",
    )
    scenarios = {  # on by default, each with its --no-... to leave it out
        "--two-change": "a night where the model (heavier) and the agent (a comment) both change; is the model named?",
        "--hung-board": "a night where a board is frozen (SIGSTOP) mid-replay and the recovery ladder brings it back",
        "--bisect": f"`hilbench bisect` over {BISECT_BUILDS} models, the first heavier one #{BISECT_FIRST_BAD}",
        "--energy": "a night with a model of twice the MACs on the scenario device (its power meter must report it)",
    }
    for flag, what in scenarios.items():
        p.add_argument(flag, action=argparse.BooleanOptionalAction, default=True, help=what)
    p.add_argument("--bisect-runs", type=int, default=3, help="replays per bisection step (hilbench bisect --runs)")
    p.add_argument(
        "--heavier",
        type=float,
        default=HEAVIER,
        help="MAC factor of the two-change night's and the bisection's heavier model (default %(default)g)",
    )
    p.add_argument("--scenario-device", help="the device of those three scenarios (default: the first C6, else the"
                   " first device)")  # fmt: skip
    p.add_argument(
        "--large",
        default="",
        help="devices that run npc-policy-large-int8 every night (comma-separated;"
        " the +3%% MACs model then grows that one: on the interpreter's fixed cost per invoke, see above)",
    )
    p.add_argument("--out", help="work folder (default: a temporary one, kept)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    devices = args.devices.split(",")
    out = Path(args.out or tempfile.mkdtemp(prefix="bench-verdicts-"))
    out.mkdir(parents=True, exist_ok=True)
    repo = scratch_copy(out)
    # private virtual devices: another bench run on this host (other lease folder) must not reflash them mid-run
    os.environ.setdefault("HILBENCH_LEASE_DIR", str(out / "leases"))
    os.environ["HILBENCH_STATE_DIR"] = str(out / "state")
    sessions = out / "sessions"
    synth = hilbench(repo, "session", "synth", "--scenario", "combat", "--duration", str(args.duration),
                     "--out", str(sessions))  # fmt: skip
    if synth.returncode:
        raise SystemExit(synth.stderr)
    (session,) = sessions.glob("*.mcap")
    store, reports = out / "results.sqlite", out / "reports"
    nights = []

    def show(result: dict) -> None:
        nights.append(result)
        if not args.json:
            flagged = ", ".join(result["regressions"]) or "-"
            print(f"{result['night']:<16} exit {result['exit']}  regressions: {flagged}  not reproduced: "
                  f"{len(result['not_reproduced'])}  inconclusive: {len(result['inconclusive'])}  "
                  f"host others {result['others_pct']}%  {result['note']}", flush=True)  # fmt: skip

    # --guest-clock: the bundled fleet as it is, its Linux boards QEMU guests under -icount, whose inference time on
    # the guest's clock varies by ~1.2% from night to night (bench-clock verdicts are n/a there)
    fleet = repo / "fixtures" / "fleets" / "virtual.toml" if args.guest_clock else realtime_fleet(repo)
    large = [d for d in args.large.split(",") if d]
    if large:  # every night, these devices run the larger policy (the +3% MACs model then grows that one)
        fleet = slower_fleet(repo, large, fleet, "large.toml")

    def policy(device: str) -> str:
        """The fixture policy `device` runs in this benchmark (the bundled fleet's orin-1 and pi5-1 run the large
        one)."""
        return own_model(device, fleet)

    runtimes = agent_runtimes(fleet, devices)
    skipped = not_injected(runtimes)

    def injected(label: str, done: list[str]) -> str | None:
        """What an injection did, with the devices it could not reach; None (and why, printed) when it reached
        none: that night is not run."""
        if not done:
            print(f"{label}: skipped, no selected device runs an agent it patches ({'; '.join(skipped)})", flush=True)
            return None
        return "; ".join(done + skipped)

    for k in range(1, args.unchanged + 1):
        hog = k == args.hog_night
        show(night(repo, "cpu-hog" if hog else f"unchanged-{k}", devices, session, store, reports, fleet, hog))
    # the creep's base: each device's inference P50 on the last night with unchanged code and model
    base_us = {d: v for d in devices if (v := measurement(store, d, "inference_latency_p50"))}
    originals = {name: (repo / name).read_text() for name in (HOST_AGENT, MPY_AGENT)}
    injections = [
        ("slower-model", lambda: (["fleet model npc-policy-large-int8"], slower_fleet(repo, devices, fleet))),
        ("memory+13%", lambda: (inject_memory(repo, store, runtimes), fleet)),
        ("first-frame+25%", lambda: (inject_first_frame(repo, store, runtimes), fleet)),
    ]
    for label, inject in injections if args.steps else []:
        done, night_fleet = inject()
        if (what := injected(label, done)) is not None:
            result = night(repo, label, devices, session, store, reports, fleet=night_fleet)
            result["injected"] = what
            show(result)
        for name, text in originals.items():
            (repo / name).write_text(text)
    for device in devices:  # one night per device: --model puts one file on every selected device
        path, what = more_macs_model(repo, policy(device))
        result = night(repo, "macs+3%", [device], session, store, reports, fleet=fleet, model=path)
        result["injected"] = f"{device}: {what}"
        show(result)
    target = args.scenario_device or next((d for d in devices if runtimes[d] == MICROPYTHON_AGENT), devices[0])
    if args.energy:  # issue 29: twice the multiply-accumulates, caught as an energy regression on the metered board
        path = repo / "fixtures" / "models" / "npc-policy-macs2-int8.tflite"
        what = grown_model("npc-policy-int8", ENERGY_GROWTH, path, "npc-policy-macs2/v1")
        result = night(repo, "macs x2 (energy)", [target], session, store, reports, fleet=fleet, model=path)
        result["injected"] = f"{target}: {what}"
        result["energy_caught"] = [r for r in result["regressions"] if r.split(":")[1].startswith(ENERGY_METRICS)]
        show(result)
    target_model = policy(target)
    two_change: dict | None = None
    if args.two_change:
        heavy = repo / "fixtures" / "models" / "two-change-int8.tflite"
        what = grown_model(target_model, args.heavier, heavy, "two-change/v1")
        agent = inject_agent_comment(repo)
        two_change = night(repo, "two-change", [target], session, store, reports, fleet=fleet, model=heavy)
        two_change["injected"] = f"{target}: model {what}; {agent}"
        show(two_change)
        for name, text in originals.items():
            (repo / name).write_text(text)
    hung: dict | None = None
    frozen: list[int] = []
    ladder: list[str] = []
    hang_after = HANG_AFTER_S
    if args.hung_board:
        state = Path(os.environ["HILBENCH_STATE_DIR"])
        during = hang_board(store, state, target, hang_after, frozen)
        try:
            hung = night(repo, "hung-board", devices, session, store, reports, fleet=fleet, during=during)
        finally:
            for pid in frozen:  # what the ladder did not restart
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
        ladder = ladder_steps(store, target, hung["run"])
        hung["injected"] = f"{target} frozen (SIGSTOP, {len(frozen)} processes) {hang_after:g} s after its first frame"
        show(hung)
    creep_runs = []
    for k in range(1, args.creep_nights + 1):
        if (what := injected("creep", inject_creep(repo, base_us, runtimes, k, args.creep_rate))) is None:
            break
        result = night(repo, f"creep-{k}", devices, session, store, reports, fleet=fleet)
        result["injected"] = what
        creep_runs.append(result["run"])
        show(result)
        for name, text in originals.items():
            (repo / name).write_text(text)
    bisection: dict | None = None
    series: list[str] = []
    series_what = ""
    if args.bisect:
        folder = out / "bisect-series"
        series, series_what = bisect_series(folder, target_model, args.heavier)
        bisection = run_bisect(repo, target, session, fleet, folder, out / "bisect", args.bisect_runs)
    unchanged = [n for n in nights if "injected" not in n]
    judged = [n for n in unchanged if not n["note"].startswith("collecting")]
    spread = cv_table([n for n in unchanged if n["night"] != "cpu-hog"])
    summary = {
        "cv": spread,
        "devices": devices,
        "unchanged_nights": len(unchanged),
        "judged_unchanged_nights": len(judged),
        "false_alarms": sum(len(n["regressions"]) for n in unchanged),
        "energy_false_alarms": sum(
            r.split(":")[1].startswith(ENERGY_METRICS) for n in unchanged for r in n["regressions"]
        ),
        "nonzero_exits_unchanged": sum(n["exit"] != 0 for n in unchanged),
        "caught": {n["night"]: n["regressions"] for n in nights if "injected" in n},
        "creep": creep_summary([n for n in nights if n["night"].startswith("creep-")], creep_runs, args.creep_rate),
        "two_change": two_change_summary(two_change, target),
        "hung_board": hung_board_summary(hung, target, len(frozen), hang_after, ladder),
        "bisect": bisect_summary(bisection, series, series_what),
        "nights": nights,
        "work": str(out),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"\nunchanged nights: {len(unchanged)} ({len(judged)} judged); false alarms: {summary['false_alarms']}"
              f" (goal 0); non-zero exits: {summary['nonzero_exits_unchanged']} (goal 0)")  # fmt: skip
        energy = next((n for n in nights if "energy_caught" in n), None)
        if energy is not None:
            hit = ", ".join(energy["energy_caught"]) or "NOT caught"
            print(f"energy x{ENERGY_GROWTH:g} MACs: {hit} (goal: an energy regression that night); energy alarms on"
                  f" unchanged nights: {summary['energy_false_alarms']} (goal 0)")  # fmt: skip
        print(summary["creep"]["text"])
        for key in ("two_change", "hung_board", "bisect"):
            print(summary[key]["text"])
        for n in nights:
            if "injected" in n and not n["night"].startswith(("creep-", *SCENARIOS)):
                caught = ", ".join(n["regressions"]) or "NOT caught"
                print(f"{n['night']}: {n['injected']} -> {caught}" + (f"; changed: {' | '.join(n['changes'])}"
                                                                        if n["changes"] else ""))  # fmt: skip
        for device, figures in sorted(spread.items()):
            for name, row in sorted(figures.items()):
                vals = ", ".join(f"{v:g}" for v in row["values"])
                print(f"CV {device} {name}: {row['cv_pct']}% over {len(row['values'])} unchanged nights ({vals})")
        print(f"work folder: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
