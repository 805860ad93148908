"""Benchmark of the nightly's verdicts themselves: unchanged nightlies must not raise false alarms, injected
regressions must be reported the night they appear.

    .venv/bin/python tests/bench/bench_verdicts.py [--devices pi5-1,c6-a] [--unchanged 10] [--hog-night 7]
                                                   [--duration 10] [--steps] [--creep-nights 8] [--guest-clock]
                                                   [--out DIR] [--json]

A reduced nightly (one short synthetic combat session, the chosen devices, update and fault stages skipped; the
Linux boards as loopback stand-ins on the bench's real-time clock, see realtime_fleet; with --guest-clock the
bundled fleet as it is: the aarch64 guests under QEMU -icount, replayed on their own clock) runs from a scratch copy of
this checkout, so injections change files the way a team would, never this worktree:

  unchanged ........ nothing changed (the first `baseline_runs` nights collect the baseline)
  cpu-hog .......... unchanged, with one busy loop per host CPU running during the whole nightly
  slower-model ..... the fleet file asks for npc-policy-large-int8 (same input and output shapes, more compute)
  macs+3% .......... `--model` puts a policy with 3% more multiply-accumulates than each device's own under test
                     (built with bench.models; its last hidden layer is wider)
  memory+13% ....... the agents allocate and touch a ballast of ~13% of their memory peak at import
  first-frame+25% .. the agents wait ~25% of their first-frame time before starting the frame loop
  creep-K .......... (last, after the steps) each inference does ~5% more compute than the night before, K nights
                     in a row: a busy loop after the model's invoke, 5% of the unchanged inference P50 compounded
                     (a slower model a night, the way a retrained model grows); the window test alone absorbs it

Prints one line per night (exit code, regressions, not reproduced, inconclusive), then the false-alarm count
over the unchanged nights and which injections were caught on the night they appeared, and the run-to-run
coefficient of variation of each device's CV_FIGURES over the judged unchanged nights (the CPU-hog night left
out). Timing on a shared host is noisy: the bench host's load during each night is printed too.
"""

from __future__ import annotations

import argparse
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYTHON = Path(sys.executable)
HOST_AGENT = "host/npc_host_agent.py"
MPY_AGENT = "micropython/npc_agent.py"
# the figures whose run-to-run spread the benchmark prints (issue goals: inference P50 CV < 5% on c6-a, < 1% on
# the icount guests)
CV_FIGURES = ("inference_latency_p50", "decision_latency_p50", "first_frame_p50", "fps")
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


def hilbench(repo: Path, *args: str, timeout: float = 1200) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(repo), "COLUMNS": "80"}
    return subprocess.run([str(PYTHON), "-m", "bench", *args], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


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


def inject_memory(repo: Path, store: Path, devices: list[str]) -> str:
    """A ballast of ~13% of the agents' memory peak, allocated and touched at import."""
    host = max((measurement(store, d, "mem_peak") or 0.0) for d in devices if not d.startswith("c6"))
    mcu = max((measurement(store, d, "mem_peak") or 0.0) for d in devices if d.startswith("c6")) if any(
        d.startswith("c6") for d in devices) else 0.0  # fmt: skip
    host_bytes, mcu_bytes = int(0.13 * host), int(0.13 * mcu)
    patch(
        repo / HOST_AGENT,
        "\nclass Agent",
        f"\n_BALLAST = bytes(range(256)) * {max(1, host_bytes // 256)}\n\n\nclass Agent",
    )
    patch(
        repo / MPY_AGENT, "\nimport npcfeat", f"\n_BALLAST = bytearray(b'\\x01' * {max(1, mcu_bytes)})\nimport npcfeat"
    )
    return f"host agent +{host_bytes / 1e6:.1f} MB, MicroPython agent +{mcu_bytes / 1e3:.1f} kB"


def inject_first_frame(repo: Path, store: Path, devices: list[str]) -> str:
    """A wait of ~25% of the measured first-frame time (median of the cold starts, in µs) before the frame loop
    starts: clear of the +15% floor, since an effect of exactly the floor is caught about half the time."""
    delays = {d: 0.25 * (measurement(store, d, "first_frame_p50") or 50_000.0) / 1000 for d in devices}
    host_ms = max((v for d, v in delays.items() if not d.startswith("c6")), default=10.0)
    mcu_ms = max((v for d, v in delays.items() if d.startswith("c6")), default=20.0)
    patch(repo / HOST_AGENT, "        self.loop_task = asyncio.ensure_future(self.frame_loop(sched, frames))",
          f"        await asyncio.sleep({host_ms / 1000:.4f})\n"
          "        self.loop_task = asyncio.ensure_future(self.frame_loop(sched, frames))")  # fmt: skip
    patch(repo / MPY_AGENT, "        self.loop = FrameLoop(",
          f"        __import__('time').sleep_ms({int(mcu_ms)})\n        self.loop = FrameLoop(")  # fmt: skip
    return f"host agent waits {host_ms:.0f} ms, MicroPython agent {int(mcu_ms)} ms"


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


def more_macs_model(repo: Path, device_model: str) -> tuple[Path, str]:
    """A .tflite with MAC_GROWTH times the multiply-accumulates of the fixture policy `device_model` (its last
    hidden layer widened), built with bench.models; returns its path and what it is."""
    import benchpath  # noqa: F401  (bench.models of the checkout; `repo` is its copy, same model code)

    from bench.models import POLICY_LAYERS
    from bench.models.policy import calibration_inputs, make_policy, quantize_policy
    from bench.models.tflite_build import int8_graph, serialize

    name = device_model.removesuffix("-int8")
    widths = list(POLICY_LAYERS[name])

    def macs(w: list[int]) -> int:
        return sum(a * b for a, b in itertools.pairwise(w))

    base = macs(widths)
    while macs(widths) < base * MAC_GROWTH:
        widths[-2] += 1
    mlp = make_policy(tuple(widths), f"{name}-macs/v1")
    data = serialize(int8_graph(quantize_policy(mlp, calibration_inputs(widths[0]))), f"{name} +3% MACs int8")
    path = repo / "fixtures" / "models" / f"{name}-macs3-int8.tflite"
    path.write_bytes(data)
    return path, f"{name} {tuple(POLICY_LAYERS[name])} -> {tuple(widths)}: {base} -> {macs(widths)} MACs"


CREEP_RATE = 0.05  # per night, compounded


def inject_creep(repo: Path, base_us: dict[str, float], night: int) -> str:
    """Creep night `night` (1-based): every inference busy-waits base x ((1 + CREEP_RATE)^night - 1) µs after the
    model's invoke, inside the span the agent times as inference (t0 -> finish), on the device's own clock."""
    extra = {d: v * ((1 + CREEP_RATE) ** night - 1) for d, v in base_us.items()}
    host_us = max((v for d, v in extra.items() if not d.startswith("c6")), default=0.0)
    mcu_us = max((v for d, v in extra.items() if d.startswith("c6")), default=0.0)
    patch(
        repo / HOST_AGENT,
        "            self.last = decision(y)\n",
        "            self.last = decision(y)\n"
        f"            _end = now_us() + {int(host_us)}\n            while now_us() < _end:\n                pass\n",
    )
    patch(repo / MPY_AGENT, "            self.last = (result[0], round(result[1], 4))\n",
          "            self.last = (result[0], round(result[1], 4))\n"
          f"            _end = self.clock.now() + {int(mcu_us)}\n            while self.clock.now() < _end:\n"
          "                pass\n")  # fmt: skip
    total = ((1 + CREEP_RATE) ** night - 1) * 100
    return f"+{total:.0f}% compute: host agent +{host_us:.0f} µs, MicroPython +{mcu_us:.0f} µs"


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


def slower_fleet(repo: Path, devices: list[str], base: Path) -> Path:
    """The benchmark's fleet `base` with the larger policy model on `devices`."""
    text = base.read_text()
    for name in devices:
        text = re.sub(rf'(name = "{re.escape(name)}"\n)', r'\1model = "npc-policy-large-int8"\n', text)
    fleet = repo / "fixtures" / "fleets" / "slower.toml"
    fleet.write_text(text)
    return fleet


def night(repo: Path, label: str, devices: list[str], session: Path, store: Path, reports: Path,
          fleet: Path | None = None, hog: bool = False, model: Path | None = None) -> dict:  # fmt: skip
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
        proc = hilbench(repo, *args)
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
        "not_reproduced": sorted(f"{v['device']}:{v['metric']}" for v in run["not_reproduced"]),
        "inconclusive": sorted(f"{v['device']}:{v['metric']}" for v in run["inconclusive"]),
        "note": run["note"],
        "others_pct": host.get("others_pct"),
        "load": host.get("load_end"),
        "failed_stages": [n for n, s in stages.items() if not s["ok"]],
        "changes": _changes(store, run["run_id"]),
        "report": run["report"],
        "values": run_values(store, run["run_id"], CV_FIGURES),
    }


def _changes(store: Path, run_id: int) -> list[str]:
    """What the report says changed (from the stored report data next to the page)."""
    page = store.parent / "reports" / "runs" / f"{run_id}.json"
    if not page.is_file():
        return []
    data = json.loads(page.read_text())
    return [f"{d}: {'; '.join(c)}" for d, c in data.get("changes", {}).items() if c]


def creep_summary(creep: list[dict], runs: list[int]) -> dict:
    """Whether and when the creep was reported as a drift, and which first night it named."""
    if not creep:
        return {"caught_night": None, "text": "creep: not run"}
    hit = next((i for i, n in enumerate(creep) if n["drifts"]), None)
    if hit is None:
        flagged = next((i for i, n in enumerate(creep) if n["regressions"]), None)
        also = (
            f"; a regression on creep night {flagged + 1}: {creep[flagged]['regressions']}"
            if flagged is not None
            else ""
        )
        return {"caught_night": None, "text": f"creep over {len(creep)} nights: no drift reported{also}"}
    cumulative = ((1 + CREEP_RATE) ** (hit + 1) - 1) * 100
    text = (f"creep +{CREEP_RATE:.0%} a night: drift reported on creep night {hit + 1} (cumulative +{cumulative:.0f}%;"
            f" first creep night is run {runs[0]}): {' | '.join(creep[hit]['drifts'])}")  # fmt: skip
    return {"caught_night": hit + 1, "cumulative_pct": cumulative, "first_creep_run": runs[0], "text": text,
            "drifts": creep[hit]["drifts"]}  # fmt: skip


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
    p.add_argument("--creep-nights", type=int, default=8, help="nights of the +5%%-a-night creep, last (0: none)")
    p.add_argument(
        "--guest-clock",
        action="store_true",
        help="Linux boards as the bundled QEMU guests (icount clock) instead of loopback stand-ins",
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
    for k in range(1, args.unchanged + 1):
        hog = k == args.hog_night
        show(night(repo, "cpu-hog" if hog else f"unchanged-{k}", devices, session, store, reports, fleet, hog))
    originals = {name: (repo / name).read_text() for name in (HOST_AGENT, MPY_AGENT)}
    injections = [
        ("slower-model", lambda: ("fleet model npc-policy-large-int8", slower_fleet(repo, devices, fleet))),
        ("memory+13%", lambda: (inject_memory(repo, store, devices), fleet)),
        ("first-frame+25%", lambda: (inject_first_frame(repo, store, devices), fleet)),
    ]
    for label, inject in injections if args.steps else []:
        what, night_fleet = inject()
        result = night(repo, label, devices, session, store, reports, fleet=night_fleet)
        result["injected"] = what
        show(result)
        for name, text in originals.items():
            (repo / name).write_text(text)
    for device in devices:  # one night per device: --model puts one file on every selected device
        model_name = "npc-policy-large-int8" if device.startswith("orin") else "npc-policy-int8"
        path, what = more_macs_model(repo, model_name)
        result = night(repo, "macs+3%", [device], session, store, reports, fleet=fleet, model=path)
        result["injected"] = f"{device}: {what}"
        show(result)
    base = {d: measurement(store, d, "inference_latency_p50") for d in devices}  # the last unchanged-code night's
    base_us = {d: v for d, v in base.items() if v}
    creep_runs = []
    for k in range(1, args.creep_nights + 1):
        what = inject_creep(repo, base_us, k)
        result = night(repo, f"creep-{k}", devices, session, store, reports, fleet=fleet)
        result["injected"] = what
        creep_runs.append(result["run"])
        show(result)
        for name, text in originals.items():
            (repo / name).write_text(text)
    unchanged = [n for n in nights if "injected" not in n]
    judged = [n for n in unchanged if not n["note"].startswith("collecting")]
    spread = cv_table([n for n in unchanged if n["night"] != "cpu-hog"])
    summary = {
        "cv": spread,
        "devices": devices,
        "unchanged_nights": len(unchanged),
        "judged_unchanged_nights": len(judged),
        "false_alarms": sum(len(n["regressions"]) for n in unchanged),
        "nonzero_exits_unchanged": sum(n["exit"] != 0 for n in unchanged),
        "caught": {n["night"]: n["regressions"] for n in nights if "injected" in n},
        "creep": creep_summary([n for n in nights if n["night"].startswith("creep-")], creep_runs),
        "nights": nights,
        "work": str(out),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"\nunchanged nights: {len(unchanged)} ({len(judged)} judged); false alarms: {summary['false_alarms']}"
              f" (goal 0); non-zero exits: {summary['nonzero_exits_unchanged']} (goal 0)")  # fmt: skip
        print(summary["creep"]["text"])
        for n in nights:
            if "injected" in n and not n["night"].startswith("creep-"):
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
