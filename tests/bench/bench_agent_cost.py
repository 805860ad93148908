"""The agents' own cost per frame, on the device's counted clock, next to its goal.

    python -m tests.bench bench_agent_cost [--fleet FILE] [--session FILE] [--host-device pi5-1]
        [--models npc-policy-int8,npc-policy-large-int8] [--c6-device c6-a] [--no-host] [--no-c6]
        [--no-bench-host] [--no-breakdown] [--results PATH] [--logs DIR] [--json] [--save FILE]

Replays a session (default fixtures/sessions/combat.mcap) as `hilbench replay` does, one device at a time: the
host agent on an icount QEMU guest (pi5-1: CPython + ai-edge-litert on aarch64, one run per model, deployed
first) and the MicroPython agent on a counted ESP32-C6 (c6-a with `firmware = "counted"`: RV32 at 160 MHz
under -icount). Flash them first (`hilbench flash --fleet FILE --device c6-a`, `--device pi5-1 --os`). Both
clocks count instructions, so the figures are the device's, whatever else the bench host runs. From each
agent's closing `stats` (protocol.md: `busy_us` = rx, loop, release, and the host agent's invoke; the
MicroPython agent's invoke is infer_us_mean * infer_n) it prints per frame record:

- outside the invoke = (rx + loop - invoke) / frames, split into rx (reading and answering lines: the inputs),
  release (held inputs handed to the features), gc (the MicroPython agent's collection at each frame's idle
  point, busy_us.gc) and other (the rest of the loop: features vector, quantize,
  set/get tensor, the frame record);
- the invoke per inference;
- the goal max(5 % of the invoke, 50 us), met or not, and what bounds it when not.

A second table gives the bench host's figures (this KVM host's wall clock, not a device's): the same replay into
the host agent run as a local process, paced on the bench's clock (`--no-bench-host` leaves it out). The older
bench-host figures (overhead over a bare invoke, start lag, CPU per frame) are `bench_host_agent.py`'s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SESSION = ROOT / "fixtures" / "sessions" / "combat.mcap"
MODELS = ("npc-policy-int8", "npc-policy-large-int8")  # the host agent's two models (bench_host_agent.py's)
GOAL_SHARE = 0.05  # issue 41: the agent's own cost per frame <= 5 % of the frame's inference,
GOAL_FLOOR_US = 50.0  # or <= 50 us of device time, whichever is larger
PARTS = ("rx", "release", "gc", "other")
PART_WORDS = {
    "rx": "reading and answering the input lines",
    "release": "handing held inputs to the features",
    "gc": "the garbage collection at each frame's idle point (the MicroPython agent's busy_us.gc)",
    "other": "the rest of the frame events (feature vector, quantize, set/get tensor, the frame record)",
}


def agent_cost(stats: dict[str, Any]) -> dict[str, Any]:
    """The agent's own cost from its `stats` reply (protocol.md): per frame record (us of device time) outside the
    interpreter's invoke, its parts, the invoke per inference, and the goal max(5 % of the invoke, 50 us) with
    whether it is met and, when not, the part that bounds it. The invoke is `busy_us.invoke` (host agent) or
    `infer_us_mean * infer_n` (MicroPython agent: every inference since it started, the loop's and a warm-up's)."""
    busy = stats["busy_us"]
    frames, inferences, inputs = int(stats["frames"]), int(stats["inferences"]), int(stats.get("inputs", 0))
    if frames <= 0 or inferences <= 0:
        raise ValueError(f"no frames to share the cost over ({frames} frames, {inferences} inferences)")
    if "invoke" in busy:
        invoke, source = float(busy["invoke"]), "busy_us.invoke"
    else:
        invoke, source = float(stats["infer_us_mean"]) * int(stats["infer_n"]), "infer_us_mean * infer_n"
    rx, loop, release, gc = float(busy["rx"]), float(busy["loop"]), float(busy["release"]), float(busy.get("gc", 0))
    other = loop - release - gc - invoke
    outside = rx + loop - invoke
    per = {"rx": rx / frames, "release": release / frames, "gc": gc / frames, "other": other / frames}
    invoke_per = invoke / inferences
    goal = max(GOAL_SHARE * invoke_per, GOAL_FLOOR_US)
    out_per = outside / frames
    met = out_per <= goal
    bound = max(PARTS, key=lambda k: per[k])
    return {
        "frames": frames,
        "inferences": inferences,
        "inputs": inputs,
        "inputs_per_frame": inputs / frames,
        "invoke_source": source,
        "outside_us": out_per,
        "outside_per_inference_us": outside / inferences,
        "parts_us": per,
        "invoke_us": invoke_per,
        "goal_us": goal,
        "met": met,
        "share": out_per / invoke_per if invoke_per else None,
        "bound": None if met else bound,
        "bound_detail": None if met else bound_detail(bound, per, rx, release, inputs, frames),
    }


def bound_detail(part: str, per: dict[str, float], rx: float, release: float, inputs: int, frames: int) -> str:
    """What the largest part is, in words, with its per-input figure where inputs make it."""
    text = f"{PART_WORDS[part]}: {per[part]:.0f} us a frame"
    if part in ("rx", "release") and inputs:
        each = (rx if part == "rx" else release) / inputs
        text += f" ({inputs / frames:.1f} inputs a frame, {each:.0f} us each)"
    return text


# -- runs --------------------------------------------------------------------------------------------------


async def replay_stats(device, session: Path, store, logs: Path, deploy: bool, parts: bool = False) -> dict[str, Any]:
    """Replay `session` into `device` as `hilbench replay` does; its agent's closing stats and some run figures,
    and with `parts` (a Linux board) the host agent's parts timed one by one on it (`guest_breakdown`)."""
    from bench.commands import held_devices
    from bench.lab.acquire import reachable_devices
    from bench.replay.agents import fleet_opener
    from bench.replay.service import replay_fleet

    with held_devices([device], "bench_agent_cost", 60):
        async with reachable_devices([device]) as (resolved, _running):
            result = await replay_fleet(
                resolved, session, store, make_opener=lambda run_id: fleet_opener(store, run_id, logs, deploy)
            )
            breakdown = None
            if parts:
                try:
                    breakdown = await guest_breakdown(resolved[0], session)
                except Exception as exc:  # the replay's figures stand without it
                    breakdown = {"error": f"{type(exc).__name__}: {exc}"}
    (run,) = result.devices
    if run.status != "ok" or not run.stats:
        raise RuntimeError(f"{device.name}: replay {run.status}: {run.detail}")
    figures = {m.name: m.value for m in run.result.measurements} if run.result else {}
    return {
        "device": device.name,
        "run_id": result.run_id,
        "stats": run.stats[-1],
        "frames_received": len(run.frames),
        "replay_covered_s": figures.get("replay_covered"),
        "inference_p50_us": figures.get("inference_latency_p50"),
        "agent": (run.endpoint.session.info if run.endpoint else {}).get("platform"),
        "model": (run.endpoint.session.info if run.endpoint else {}).get("model"),
        "breakdown": breakdown,
    }


async def bench_host_stats(model: str, session: Path, store, voice: str) -> dict[str, Any]:
    """The same replay into the host agent run as a process on this host (bench clock, wall time)."""
    from bench.agent.endpoint import AgentEndpoint
    from bench.agent.session import AgentSession
    from bench.agent.transport import StreamTransport
    from bench.config.fleet import Device
    from bench.replay.service import replay_fleet
    from tests.host_agent_support import HostAgentProcess

    device = Device("bench-host", "pi5", None, virtual=True, settings={"model": model, "voice": voice})
    with tempfile.TemporaryDirectory() as tmp:
        agent = HostAgentProcess(device, Path(tmp))

        async def open_agent(dev) -> AgentEndpoint:
            session = await AgentSession.open(await StreamTransport.connect("127.0.0.1", agent.port), device=dev.name)

            async def close() -> None:
                with contextlib.suppress(Exception):
                    await session.shutdown(timeout=5)
                await session.close()

            return AgentEndpoint(session, close)

        try:
            result = await replay_fleet([device], session, store, open_agent)
        finally:
            agent.stop()
    (run,) = result.devices
    if run.status != "ok" or not run.stats:
        raise RuntimeError(f"bench host agent ({model}): replay {run.status}: {run.detail}")
    if run.stats[-1].get("model_bytes") != (ROOT / "fixtures" / "models" / f"{model}.tflite").stat().st_size:
        raise RuntimeError(f"bench host agent ran a model of {run.stats[-1].get('model_bytes')} B, not {model}")
    return {"device": "bench host", "run_id": result.run_id, "stats": run.stats[-1], "frames_received": len(run.frames)}


# -- the MicroPython agent's parts, timed on the counted core --------------------------------------------------

BREAKDOWN = """
import gc, sys, time, wire, npcfeat, npcrecords
T = time.ticks_us
D = time.ticks_diff
N = {n}
f = npcfeat.Features()
seq = 0
for ch, line in {lines!r}:
    gc.collect()
    t = T()
    for k in range(N):
        msg = wire.decode(line)
    dec = D(T(), t)
    t = T()
    for k in range(N):
        seq += 1
        f.add(msg['ch'], msg['ts'] + k, msg['d'], seq)
    print('in', ch, dec / N, D(T(), t) / N)
gc.collect()
t = T()
for k in range(N):
    f.vector()
print('part vector', D(T(), t) / N)
class Slot:
    i, vsync, due, t0, t1, skip, late, q = 1234, 41000000, 41000000, 41000020, 41011500, False, False, 0
t = T()
for k in range(N):
    line = wire.encode_reply(npcrecords.frame_record(Slot, 3, 0.7123, seq, 1))
print('part record', D(T(), t) / N)
t = T()
for k in range(N):
    sys.stdout.write(line)
print()
print('part write', D(T(), t) / N)
"""


GUEST_BREAKDOWN = """
import sys, time, wire, npcfeat, npcrecords, npc_models
T = time.monotonic_ns
N = {n}
f = npcfeat.Features()
seq = 0
for ch, line in {lines!r}:
    t = T()
    for k in range(N):
        msg = wire.decode(line)
    dec = T() - t
    t = T()
    for k in range(N):
        seq += 1
        f.add(msg['ch'], msg['ts'] + k, msg['d'], seq)
    print('in', ch, dec / N / 1e3, (T() - t) / N / 1e3)
t = T()
for k in range(N):
    x = f.vector()
print('part vector', (T() - t) / N / 1e3)
cls, _ = npc_models.runtime()
m = npc_models.Model(open('models/{model}.tflite', 'rb').read(), {{'format': 'tflite-int8'}}, cls)
m.infer(x)
m.tally[0] = 0
t = T()
for k in range(N):
    m.infer(x)
took = T() - t
print('part quantize_set_get', (took - m.tally[0]) / N / 1e3)
print('part invoke', m.tally[0] / N / 1e3)
class Slot:
    i, vsync, due, t0, t1, skip, late, q = 1234, 41000000, 41000000, 41000020, 41011500, False, False, 0
t = T()
for k in range(N):
    line = wire.encode_reply(npcrecords.frame_record(Slot, 3, 0.7123, seq, 1))
print('part record', (T() - t) / N / 1e3)
"""


async def guest_breakdown(device, session: Path, n: int = 200) -> dict[str, Any]:
    """The host agent's parts on its Linux board, in its deployed folder (on a guest's counted clock): per input of
    each channel, decoding its line and adding it to the features; per inference, the feature vector, quantizing
    and set/get tensor around the invoke, the invoke, and the frame record's line. us, mean of `n`."""
    from bench.devices import driver_for
    from bench.links.ssh import quote

    counts, lines = session_lines(session, None)
    model = Path(device.settings.model).name.removesuffix(".tflite")
    driver = driver_for(device)
    try:
        conn = await driver.connection()
        code = GUEST_BREAKDOWN.format(n=n, lines=lines, model=model)
        ran = await conn.run(f'cd "{driver.folder}" && {driver.python} -c {quote(code)}', timeout_s=900)
    finally:
        await driver.close()
    return parse_parts(ran.text, counts, lines)


def parse_parts(text: str, counts: dict[str, int], lines: list[tuple[str, bytes]]) -> dict[str, Any]:
    """The `in CH DECODE ADD` and `part NAME US` lines a breakdown program printed."""
    per_input: dict[str, dict[str, float]] = {}
    parts: dict[str, float] = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) == 4 and words[0] == "in":
            per_input[words[1]] = {"decode": float(words[2]), "add": float(words[3]), "n": counts[words[1]]}
        elif len(words) == 3 and words[0] == "part":
            parts[words[1]] = float(words[2])
    return {"per_input_us": per_input, "per_frame_us": parts, "line_bytes": {ch: len(b) for ch, b in lines}}


def session_lines(session: Path, input_max_hz: float | None) -> tuple[dict[str, int], list[tuple[str, bytes]]]:
    """Inputs per channel of `session` as the counted C6 gets them (voice features, at most `input_max_hz` a
    channel), and one line per channel: its median-length one."""
    from bench.agent import wire
    from bench.replay.plan import VoiceMode, build_plan, sampled_at_most
    from bench.replay.recording import read_session

    plan = build_plan(read_session(session), wire.encode)
    keep = sampled_at_most(plan, input_max_hz) if input_max_hz else None
    by: dict[str, list[bytes]] = {}
    for p in plan.inputs:
        if keep is None or p.seq in keep:
            by.setdefault(p.channel, []).append(p.lines[VoiceMode.FEATURES])
    lines = [(ch, sorted(ls, key=len)[len(ls) // 2]) for ch, ls in sorted(by.items())]
    return {ch: len(ls) for ch, ls in by.items()}, lines


def c6_breakdown(session: Path, input_max_hz: float | None, n: int = 20) -> dict[str, Any]:
    """The MicroPython agent's parts on a fresh counted board (the firmware `hilbench flash` builds): per input of
    each channel, decoding its line (wire.decode) and adding it to the features; per frame, the feature vector,
    the frame record's line and writing it to the UART. us of the board's counted clock, mean of `n`."""
    from bench.bundles.c6_firmware import build_firmware, image_for
    from tests.esp32c6_support import run_on_fresh_board

    counts, lines = session_lines(session, input_max_hz)
    files = [ROOT / "micropython" / m for m in ("npcfeat.py", "npcrecords.py")] + [ROOT / "bench" / "agent" / "wire.py"]
    image = image_for(build_firmware().elf)
    ran = run_on_fresh_board(image.read_bytes(), files, BREAKDOWN.format(n=n, lines=lines))
    if ran.returncode != 0:
        raise RuntimeError(f"the board could not time the parts: {ran.stdout.strip()[-500:]}")
    return parse_parts(ran.stdout, counts, lines)


def breakdown_lines(b: dict[str, Any], cost: dict[str, Any]) -> list[str]:
    """The parts next to what the agent counted: decoding per input against rx, adding against release, and the
    per-inference parts (an invoke apart) against other."""
    frames, inferences = cost["frames"], cost["inferences"]
    lines = ["  its parts, timed one by one on the same clock (us; a frame's share = per input x inputs / frames):"]
    dec = add = 0.0
    for ch, p in sorted(b["per_input_us"].items()):
        share = p["n"] / frames
        dec += p["decode"] * share
        add += p["add"] * share
        lines.append(
            f"    {ch:7} {p['n']:5d} inputs ({b['line_bytes'][ch]:4d} B a line): decode {p['decode']:7.1f}"
            f"  add to the features {p['add']:7.1f}"
        )
    pc = cost["parts_us"]
    lines.append(
        f"    a frame's decoding {dec:.0f} of rx {pc['rx']:.0f}, adding {add:.0f} of release {pc['release']:.0f}"
    )
    parts = b["per_frame_us"]
    each = ", ".join(f"{k.replace('_', '/')} {v:.1f}" for k, v in parts.items())
    mine = sum(v for k, v in parts.items() if k != "invoke") * inferences / frames
    lines.append(f"    per inference: {each}; a frame's share outside the invoke {mine:.0f} of other {pc['other']:.0f}")
    return lines


# -- output ------------------------------------------------------------------------------------------------


def table(title: str, rows: list[dict[str, Any]]) -> list[str]:
    lines = [title, f"  {'agent / model':42} {'frames':>6} {'in/fr':>5} {'rx':>7} {'release':>7} {'other':>7}"
             f" {'outside':>8} {'/infer.':>8} {'invoke':>8} {'goal':>7}  verdict"]  # fmt: skip
    for r in rows:
        c, p = r["cost"], r["cost"]["parts_us"]
        share = f"{c['share']:.1f}x" if c["share"] >= 1 else f"{c['share'] * 100:.0f} % of"
        verdict = "met" if c["met"] else f"not met ({share} the invoke): bounded by {c['bound']}"
        lines.append(
            f"  {r['label']:42} {c['frames']:6d} {c['inputs_per_frame']:5.1f} {p['rx']:7.0f} {p['release']:7.0f}"
            f" {p['other']:7.0f} {c['outside_us']:8.0f} {c['outside_per_inference_us']:8.0f} {c['invoke_us']:8.0f}"
            f" {c['goal_us']:7.0f}  {verdict}"
        )
    for r in rows:
        if r["cost"]["bound_detail"]:
            lines.append(f"  {r['label']}: {r['cost']['bound_detail']}")
    lines.append(
        "  (us per frame record; /infer.: outside the invoke per inference; invoke per inference;"
        " goal = max(5 % of the invoke, 50 us), per frame record)"
    )
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fleet", type=Path, help="fleet file (as hilbench's --fleet: else $HILBENCH_FLEET, ...)")
    ap.add_argument("--session", type=Path, default=SESSION)
    ap.add_argument("--host-device", default="pi5-1")
    ap.add_argument("--models", default=",".join(MODELS), help="host agent models, comma-separated")
    ap.add_argument("--c6-device", default="c6-a")
    ap.add_argument("--no-host", action="store_true", help="leave out the host agent on the guest")
    ap.add_argument("--no-c6", action="store_true", help="leave out the MicroPython agent on the counted C6")
    ap.add_argument("--no-bench-host", action="store_true", help="leave out the bench host's table")
    ap.add_argument("--no-breakdown", action="store_true", help="leave out the agents' parts timed one by one")
    ap.add_argument("--results", type=Path, help="results store for the runs (default: a temporary one)")
    ap.add_argument("--logs", type=Path, help="device logs (default: a temporary folder)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--save", type=Path, help="also write the --json document here")
    args = ap.parse_args()

    from bench.config.fleet import find_fleet, load_fleet
    from bench.store.results import open_store

    models = [m for m in args.models.split(",") if m]
    counted, host = [], []
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(args.results or Path(tmp) / "results.sqlite")
        logs = args.logs or Path(tmp) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        fleet = load_fleet(find_fleet(args.fleet)[0]) if not (args.no_host and args.no_c6) else None
        if not args.no_host:
            base = fleet.get(args.host_device)
            for model in models:
                # the deploy points the agent's remembered model (models/current.json) back at this one
                dev = replace(base.with_settings(model=model), reset_model=True)
                r = asyncio.run(replay_stats(dev, args.session, store, logs, True, parts=not args.no_breakdown))
                ran = (r["model"] or {}).get("sha256")
                want = hashlib.sha256((ROOT / "fixtures" / "models" / f"{model}.tflite").read_bytes()).hexdigest()
                if ran != want:
                    raise RuntimeError(f"{dev.name} ran {r['model']}, not {model}")
                r["label"] = f"host agent, {dev.name}, {model}"
                counted.append(r)
        if not args.no_c6:
            dev = fleet.get(args.c6_device)
            r = asyncio.run(replay_stats(dev, args.session, store, logs, deploy=True))
            r["label"] = f"MicroPython agent, {dev.name}, {dev.settings.model}"
            counted.append(r)
            if not args.no_breakdown:
                try:
                    r["breakdown"] = c6_breakdown(args.session, dev.settings.input_max_hz)
                except Exception as exc:  # the replay's figures stand without it
                    r["breakdown"] = {"error": f"{type(exc).__name__}: {exc}"}
        if not args.no_bench_host:
            for model in models:
                r = asyncio.run(bench_host_stats(model, args.session, store, "voicef"))
                r["label"] = f"host agent, bench host, {model}"
                host.append(r)
        store.close()
    for r in counted + host:
        r["cost"] = agent_cost(r["stats"])
    load = os.getloadavg()
    doc = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load": [round(x, 2) for x in load],
        "session": str(args.session),
        "counted": counted,
        "bench_host": host,
    }
    if args.save:
        args.save.write_text(json.dumps(doc, indent=1, default=str))
    if args.json:
        print(json.dumps(doc, indent=1, default=str))
        return 0
    print(f"{doc['date']}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, session {args.session.name}")
    if counted:
        print("\n".join(table("The agents' own cost per frame, on the device's counted clock (us of device time)",
                              counted)))  # fmt: skip
        for r in counted:
            print(f"  {r['label']}: {r['agent']}, {r['stats']['frames']} frames in stats, {r['frames_received']} "
                  f"records received, {r['replay_covered_s']} s of the session played")  # fmt: skip
            if r.get("breakdown") and "error" in r["breakdown"]:
                print(f"  its parts could not be timed: {r['breakdown']['error']}")
            elif r.get("breakdown"):
                print("\n".join(breakdown_lines(r["breakdown"], r["cost"])))
    if host:
        print("\n".join(table("The bench host's figures (this host's wall clock, not a device's)", host)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
