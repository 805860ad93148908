"""Benchmark: energy per decision on every metered kind of the virtual fleet, night after night.

Runs unchanged reduced nightlies (one session, no update or fault stages) on the metered devices (default pi5-1,
orin-1 and switch-1, those of them the fleet gives a meter), each into one results store, and prints per night
every device's energy per decision, mean power and idle baseline with the label its meter gives (what the figure
is modelled from, how it was taken), and that night's alarms. Then the spread over the nights (CV of energy per
decision, goal < 1%) and the alarms on them (goal 0). With --model-night, a model with twice the
multiply-accumulates of each device's own model (its fleet entry's: the bundled orin-1 and pi5-1 run
npc-policy-large-int8, switch-1 npc-policy-int8) is put on it with `--model` (grown from that policy as
bench_verdicts.py grows it), one night per distinct model: the goal is an energy-per-decision regression on each
device that night. With --check, `hilbench check --replay-s 20` of its model on each device (goal: exit 1 naming
energy).

    .venv/bin/python -m tests.bench bench_energy_all [--nights 10] [--model-night] [--check] [--replay-s 20]
        [--device pi5-1 --device orin-1 --device switch-1] [--session fixtures/sessions/combat.mcap] [--out DIR]

Each night takes 2-4 minutes on the 2-core shared host (the guests replay for 45 s of its time each); the host's
load is printed with every night.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_check import load
from bench_verdicts import ENERGY_GROWTH, grown_model, night, own_model

from bench.store.results import open_store

REPO = Path(__file__).resolve().parents[2]
DEVICES = ("pi5-1", "orin-1", "switch-1")
# the check's replays: energy per decision is taken over the first 240 decisions (8 s of the session), and pi5-1 on
# the large policy plays ~160 of them in `hilbench check`'s default 12 s (an inconclusive figure); 20 s plays ~270
# and keeps the check's 6 replays within its 300 s budget
CHECK_REPLAY_S = 20.0
FIGURES = ("energy_per_decision_p50", "power_mean", "power_idle", "inference_latency_p50")


def figures(store: Path, run_id: int) -> dict[str, dict[str, object]]:
    """device -> its energy figures in run `run_id`, and the meter's label (the figure's description)."""
    out: dict[str, dict[str, object]] = {}
    with open_store(store) as db:
        for m in db.measures.measurements(run_id):
            if m.name in FIGURES:
                row = out.setdefault(m.device, {})
                row[m.name] = m.value
                if m.name == "energy_per_decision_p50":
                    row["label"] = (m.description or "").split("; meter: ", 1)[-1]
                    row["decisions"] = m.samples
    return out


def energy_alarms(result: dict) -> list[str]:
    """The night's regressions and drifts on an energy figure."""
    return [r for r in result["regressions"] if r.split(":")[1].startswith(("energy", "power"))]


def print_night(label: str, result: dict, figs: dict[str, dict[str, object]]) -> None:
    print(f"{label}: exit {result['exit']}, {result['seconds']:.0f} s, load {load()}, run {result['run']}; "
          f"alarms: {', '.join(result['regressions'] + result['alerts']) or 'none'}", flush=True)  # fmt: skip
    for device, row in sorted(figs.items()):
        epd = row.get("energy_per_decision_p50")
        text = "n/a" if epd is None else f"{epd:.4f} mJ over {row.get('decisions')} decisions"
        print(f"  {device}: energy per decision {text}; mean {row.get('power_mean')} mW, idle "
              f"{row.get('power_idle')} mW; inference P50 {row.get('inference_latency_p50')} us",
              flush=True)  # fmt: skip
        print(f"    {row.get('label')}", flush=True)


def doubled_models(devices: list[str], out: Path) -> dict[Path, list[str]]:
    """Each device's own fleet model grown to twice its multiply-accumulates (bench_verdicts.grown_model), written
    to `out`: model file -> the devices it doubles (printing what each model is)."""
    groups: dict[Path, list[str]] = {}
    for device in devices:
        own = own_model(device)
        name = own.removesuffix("-int8")
        path = out / f"{name}-macs2-int8.tflite"
        if path not in groups:
            print(f"model for {device}: {grown_model(own, ENERGY_GROWTH, path, f'{name}-macs2/v1')}", flush=True)
        groups.setdefault(path, []).append(device)
    return groups


def check(device: str, model: Path, session: str, out: Path, replay_s: float) -> tuple[int, str]:
    """`hilbench check` of `model` on `device` (each replay `replay_s` bench seconds): its exit code and the
    metrics its output names."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "check", "--device", device, "--session", session, "--model", str(model),
         "--replay-s", f"{replay_s:g}", "--results", str(out / f"check-{device}.sqlite"),
         "--output-dir", str(out / f"check-{device}")],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    (out / f"check-{device}.log").write_text(proc.stdout + proc.stderr)
    named = [line.strip() for line in proc.stdout.splitlines() if "REGRESSION" in line]
    return proc.returncode, "; ".join(named) or "nothing named"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nights", type=int, default=10, help="unchanged nights (goal: CV < 1%%, 0 alarms)")
    p.add_argument("--device", action="append", help=f"a metered device (default: {', '.join(DEVICES)})")
    p.add_argument("--session", default=str(REPO / "fixtures" / "sessions" / "combat.mcap"))
    p.add_argument("--model-night", action="store_true", help="then a night with a 2x-MAC model (--model)")
    p.add_argument("--check", action="store_true", help="then `hilbench check` of that model on each device")
    p.add_argument("--replay-s", type=float, default=CHECK_REPLAY_S,
                   help="bench seconds of each check replay (default %(default)g: see CHECK_REPLAY_S)")  # fmt: skip
    p.add_argument("--out", type=Path, default=None, help="where the store and reports go (default: a temp dir)")
    args = p.parse_args()
    devices = args.device or list(DEVICES)
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-energy-"))
    out.mkdir(parents=True, exist_ok=True)
    store, reports, session = out / "results.sqlite", out / "reports", Path(args.session)
    series: dict[str, list[float]] = {}
    alarms = 0
    for n in range(1, args.nights + 1):
        result = night(REPO, f"night {n}", devices, session, store, reports)
        figs = figures(store, result["run"])
        print_night(f"night {n}", result, figs)
        alarms += len(result["regressions"]) + len(result["drifts"])
        for device, row in figs.items():
            if row.get("energy_per_decision_p50") is not None:
                series.setdefault(device, []).append(float(row["energy_per_decision_p50"]))  # type: ignore[arg-type]
    for device, values in sorted(series.items()):
        cv = statistics.pstdev(values) / statistics.fmean(values) * 100 if len(values) > 1 else float("nan")
        print(f"{device}: energy per decision {min(values):.4f}-{max(values):.4f} mJ over {len(values)} nights, "
              f"CV {cv:.2f}% (goal < 1%)")  # fmt: skip
    print(f"alarms on the unchanged nights: {alarms} (goal 0)")
    models = doubled_models(devices, out) if args.model_night or args.check else {}
    if args.model_night:
        caught: set[str] = set()
        for model, group in models.items():
            result = night(REPO, f"2x MACs ({model.name})", group, session, store, reports, model=model)
            print_night(f"2x-MAC night, {model.name} on {', '.join(group)}", result, figures(store, result["run"]))
            caught |= {r.split(":")[0] for r in energy_alarms(result) if ":energy_per_decision" in r}
        print(f"energy per decision caught on: {', '.join(sorted(caught)) or 'no device'} (goal: every device)")
    if args.check:
        for model, group in models.items():
            for device in group:
                code, named = check(device, model, args.session, out, args.replay_s)
                print(f"hilbench check {device} ({model.name}): exit {code} ({named}) (goal: exit 1 naming energy)",
                      flush=True)  # fmt: skip
    print(f"store and reports: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
