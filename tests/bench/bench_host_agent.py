"""Per-frame overhead of the host/ agent compared with a bare tflite interpreter invoke, on the bench host.

    python -m tests.bench bench_host_agent [--frames 300] [--json]

Prints, per model: the bare invoke (set_tensor + invoke + get_tensor), the agent's decision path in
process (features + quantize + invoke + argmax; hot in a loop, and right after a frame's sleep, cold and after
warm-up passes), and the real agent process over stdio holding a full
input window (frame records' t1 - t0, schedule lag t0 - due, and CPU time per frame, with the default
`--spin-us` and without spinning): the per-frame overhead (process t1 - t0 p50 minus the bare invoke p50), the
start lag p99 (<= 47 us) and the CPU per frame at 60 fps (<= 0.6 ms), the last two next to their goals.
These are the bench host's figures (a KVM guest's wall clock: its cold caches after a sleep are most of the
overhead). The agent's own cost has its goal on the device's counted clock, where it is the agent's
instructions: bench_agent_cost.py (the <= 50 us overhead goal it had here is retired).
On a loaded machine the process figures are noisy: run it on a quiet one for the record.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from ai_edge_litert.interpreter import Interpreter
from npc_host_agent import SPIN_US
from npc_models import PROBATION_US

from bench.agent.session import AgentSession, LoopStart
from bench.agent.transport import ProcessTransport
from bench.measure.frames import deviation_us
from tests.conformance.harness import HostAgent

ROOT = Path(__file__).resolve().parents[2]

MODELS = ["npc-policy-int8", "npc-policy-large-int8"]
GOAL_CPU_US = 600.0  # issue 30: CPU per frame at 60 fps (1 s / 60 = 16.7 ms: 3.6% of a core)
GOAL_LAG_P99_US = 47.0  # issue 30: schedule lag t0 - due p99 no worse than the spin's before the timerfd wake


def window_inputs() -> list[tuple[str, float, object]]:
    """A full 250 ms window on every channel (gaze, voice features, mocap, an event): what each frame's
    feature vector is computed over, in process and in the agent process alike."""
    out: list[tuple[str, float, object]] = []
    for k in range(25):
        out.append(("gaze", 4.0 * k, [0.5 + 0.01 * k, 0.5, 0.9]))
        out.append(("voicef", 10.0 * k, [0.1, 0.05, 180.0, 1]))
        out.append(("mocap", 11.0 * k, [0.01 * j + 0.001 * k for j in range(51)]))
    out.append(("event", 100.0, {"action": "attack", "target_id": 1, "context": {"hp_ratio": 0.5, "aggro_level": 0.5}}))
    return out


def summary(us: list[float]) -> dict[str, float]:
    a = np.asarray(us, dtype=np.float64)
    p50, p99 = np.percentile(a, [50, 99])
    return {"n": len(a), "mean": float(a.mean()), "p50": float(p50), "p99": float(p99)}


def bare_invoke(path: Path, n: int) -> dict[str, float]:
    it = Interpreter(model_path=str(path), num_threads=1)
    it.allocate_tensors()
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    x = np.zeros(inp["shape"], dtype=inp["dtype"])
    times = []
    for k in range(n + 200):
        t0 = time.perf_counter_ns()
        it.set_tensor(inp["index"], x)
        it.invoke()
        it.get_tensor(out["index"])
        if k >= 200:  # warm-up not timed
            times.append((time.perf_counter_ns() - t0) / 1000)
    return summary(times)


def agent_path_in_process(path: Path, n: int) -> dict[str, dict[str, float]]:
    import npcfeat
    from npc_models import Model

    data = path.read_bytes()
    model = Model(data, {"name": "bench", "version": 1, "format": "tflite-int8"}, Interpreter)
    feats = npcfeat.Features()
    for seq, (ch, ts, d) in enumerate(window_inputs()):
        feats.add(ch, ts, d, seq)
    fx, inf = [], []
    for k in range(n + 200):
        t0 = time.perf_counter_ns()
        x = feats.vector()
        t1 = time.perf_counter_ns()
        y = model.infer(x)
        int(y.argmax())
        t2 = time.perf_counter_ns()
        if k >= 200:
            fx.append((t1 - t0) / 1000)
            inf.append((t2 - t1) / 1000)
    return {"features": summary(fx), "model_infer": summary(inf)}


def after_sleep(path: Path, n: int, sleep_s: float = 1 / 60) -> dict[str, float]:
    """The decision path in process (features + model.infer + argmax) timed right after a frame's sleep, cold and
    after 1 and 3 warm-up passes (what the agent's spin runs before a deadline): p50 in us."""
    import npcfeat
    from npc_models import Model

    model = Model(path.read_bytes(), {"name": "bench", "version": 1, "format": "tflite-int8"}, Interpreter)
    feats = npcfeat.Features()
    for seq, (ch, ts, d) in enumerate(window_inputs()):
        feats.add(ch, ts, d, seq)
    out = {}
    for warm in (0, 1, 3):
        times = []
        for _ in range(n):
            time.sleep(sleep_s)
            for _ in range(warm):
                model.infer(feats.vector())
            t0 = time.perf_counter_ns()
            int(model.infer(feats.vector()).argmax())
            times.append((time.perf_counter_ns() - t0) / 1000)
        out[f"warm{warm}"] = summary(times)["p50"]
    return out


def cpu_seconds(pid: int) -> float:
    """CPU time the process has run, all threads, to the nanosecond (the scheduler's own account: schedstat)."""
    tasks = Path(f"/proc/{pid}/task")
    return sum(int((t / "schedstat").read_text().split()[0]) for t in tasks.iterdir()) / 1e9


async def agent_process(model: str, frames: int, spin_us: int, fps: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        host = HostAgent(Path(tmp) / "agent")
        argv = [*host.argv(), "--spin-us", str(spin_us)]
        argv[argv.index("--model") + 1] = str(host.models_dir / f"{model}.tflite")
        argv[argv.index("--manifest") + 1] = str(host.models_dir / f"{model}.json")
        # no remembered model: the command line's --model runs
        (host.models_dir / "current.json").unlink(missing_ok=True)
        if model != "npc-policy-int8":
            from bench.models import signing

            src = ROOT / "fixtures" / "models" / f"{model}.tflite"
            (host.models_dir / src.name).write_bytes(src.read_bytes())
            manifest = signing.sign_manifest(
                signing.model_manifest(src, model, 1, "tflite-int8"), signing.load_private_key(signing.DEV_PRIVATE_KEY)
            )
            (host.models_dir / f"{model}.json").write_text(json.dumps(manifest))
        transport = await ProcessTransport.spawn(argv, cwd=host.folder)
        s = await AgentSession.open(transport, device="bench")
        want = hashlib.sha256((ROOT / "fixtures" / "models" / f"{model}.tflite").read_bytes()).hexdigest()
        assert s.model and s.model["sha256"] == want, s.console
        for ch, ts, d in window_inputs():
            await s.send_input(ch, d, ts)
        await asyncio.sleep(PROBATION_US / 1e6)  # steady state: the model loaded at start is out of probation
        pid = transport.proc.pid
        c0 = cpu_seconds(pid)
        await s.start(LoopStart(fps=fps, vsync_hz=fps, frames=frames))
        recs = [r async for r in s.frames(timeout=20)]
        cpu = cpu_seconds(pid) - c0
        await s.shutdown()
        await s.close()
        await transport.close()
    ran = [r for r in recs if r.ran]
    lag = [deviation_us(r.t0, r.due) for r in ran]
    return {
        "frames": len(recs),
        "late": sum(r.late for r in recs),
        "skipped": sum(r.skip for r in recs),
        "decision_us": summary([r.infer_us for r in ran]),
        "lag_us": summary(lag),
        "lag_std_us": statistics.pstdev(lag),
        "cpu_us_per_frame": cpu * 1e6 / max(len(recs), 1),
    }


def goal(value: float, bound: float) -> str:
    return "met" if value <= bound else f"missed by {value - bound:.1f} us"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--invokes", type=int, default=5000)
    ap.add_argument("--fps", type=int, default=60, help="frame rate (= VSync rate) of the agent runs")
    ap.add_argument("--spin-us", type=int, default=SPIN_US, help="the agent's --spin-us for the main run")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results = {}
    for model in MODELS:
        path = ROOT / "fixtures" / "models" / f"{model}.tflite"
        r = {"bare_invoke_us": bare_invoke(path, args.invokes), **agent_path_in_process(path, args.invokes)}
        r["after_sleep_p50_us"] = after_sleep(path, args.frames)
        r["process"] = asyncio.run(agent_process(model, args.frames, args.spin_us, args.fps))
        r["process_nospin"] = asyncio.run(agent_process(model, args.frames, 0, args.fps))
        r["overhead_us"] = r["process"]["decision_us"]["p50"] - r["bare_invoke_us"]["p50"]
        results[model] = r
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    for model, r in results.items():
        b, f, m = r["bare_invoke_us"], r["features"], r["model_infer"]
        p, q = r["process"], r["process_nospin"]
        print(f"{model}")
        print(f"  bare invoke              mean {b['mean']:7.1f} us  p50 {b['p50']:7.1f}  p99 {b['p99']:7.1f}")
        print(f"  agent features (48)      mean {f['mean']:7.1f} us  p50 {f['p50']:7.1f}  p99 {f['p99']:7.1f}")
        print(f"  agent model.infer        mean {m['mean']:7.1f} us  p50 {m['p50']:7.1f}  p99 {m['p99']:7.1f}")
        a = r["after_sleep_p50_us"]
        print(f"  decision path after a 16.7 ms sleep, p50: cold {a['warm0']:.1f} us, after 1 warm-up pass"
              f" {a['warm1']:.1f} us, after 3 {a['warm3']:.1f} us")  # fmt: skip
        d, lag = p["decision_us"], p["lag_us"]
        print(f"  agent process, {p['frames']} frames at {args.fps} fps (--spin-us {args.spin_us}):")
        print(f"    decision t1-t0         mean {d['mean']:7.1f} us  p50 {d['p50']:7.1f}  p99 {d['p99']:7.1f}")
        print(
            f"    start lag t0-due       mean {lag['mean']:7.1f} us  p50 {lag['p50']:7.1f}  p99 {lag['p99']:7.1f}"
            f"  std {p['lag_std_us']:.1f}"
        )
        print(
            f"    late {p['late']}  skipped {p['skipped']}  start lag p99 {lag['p99']:.1f} us"
            f" (goal <= {GOAL_LAG_P99_US:.0f} us: {goal(lag['p99'], GOAL_LAG_P99_US)})"
        )
        cpu = p["cpu_us_per_frame"]
        print(f"    CPU per frame {cpu:.0f} us  (goal <= {GOAL_CPU_US:.0f} us: {goal(cpu, GOAL_CPU_US)})")
        ql = q["lag_us"]
        print(
            f"  agent process without spinning: CPU/frame {q['cpu_us_per_frame']:.0f} us,"
            f" start lag p50 {ql['p50']:.0f} us p99 {ql['p99']:.0f} us"
        )
        over = r["overhead_us"]
        print(
            f"  per-frame agent overhead over a bare invoke (p50): {over:.1f} us  (the bench host's; the goal is"
            " counted on the device's clock: bench_agent_cost)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
