"""The scheduler rules on a fake VSync clock, run inside each agent's own VM from its deployed bundle."""

from __future__ import annotations

import json
import subprocess

import pytest

pytestmark = pytest.mark.e2e  # runs inside each agent's VM, from its deployed bundle

# Portable (MicroPython and CPython): a display loop taking VSync ticks and an accelerator running queued
# inferences one after another, events in time order, printed as JSON.
SCENARIO = r"""
import json
import npcsched

def run(fps, vsync_hz, key_every, infer_us, n):
    sched = npcsched.Scheduler(fps, vsync_hz, key_every)
    clock = npcsched.VsyncClock(vsync_hz, 1000000)
    slots = []
    running = None
    now = 1000000
    while len(slots) < n or sched.pending:
        events = []
        if running is not None:
            events.append((running.t0 + infer_us, 0))
        elif sched.next_due() is not None:
            events.append((max(sched.next_due().due, now), 1))
        if len(slots) < n:
            events.append((clock.next_tick(), 2))
        when, what = min(events)
        now = when
        if what == 0:
            sched.finish(running, when)
            running = None
        elif what == 1:
            running = sched.next_due()
            sched.begin(running, when)
        else:
            slots.append(sched.on_vsync(clock.take()))
    return [[s.i, s.vsync, s.due, s.key, s.skip, s.q, s.late, s.t0, s.t1] for s in slots]

out = {}
for cfg in CONFIGS:
    out["%d/%d/%d/%d" % tuple(cfg)] = run(cfg[0], cfg[1], cfg[2], cfg[3], 90)
print(json.dumps(out))
"""

CONFIGS = [(60, 60, 1, 1500), (60, 144, 1, 1500), (60, 60, 1, 40000), (30, 30, 3, 2000), (20, 20, 1, 24600)]


def scenario(agent) -> dict[str, list[list]]:
    # a file, not an argument: MicroPython interns argv strings as qstrs, which stop at 255 bytes
    (agent.folder / "scenario.py").write_text(f"CONFIGS = {json.dumps(CONFIGS)}\n" + SCENARIO)
    proc = subprocess.run(
        [*agent.vm_argv(), "scenario.py"], cwd=agent.folder, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_scheduler_rules_on_a_fake_vsync_clock(agent):
    results = scenario(agent)
    for key, slots in results.items():
        fps, vsync_hz, key_every, infer_us = map(int, key.split("/"))
        frame_us, vsync_us = 1_000_000 // fps, 1_000_000 // vsync_hz
        prev_due = None
        prev_t1 = 0
        for i, vsync, due, is_key, skip, q, late, t0, t1 in slots:
            assert is_key == (i % key_every == 0), key
            assert q <= 2, key
            if not is_key:
                assert skip and due is None, key
                continue
            if skip:
                assert q == 2, f"{key}: frame {i} skipped with only {q} pending"
                continue
            natural = vsync + frame_us
            if prev_due is not None and natural < prev_due + 8000:
                assert due == prev_due + 16000, f"{key}: frame {i} not pushed to previous + 16 ms"
            else:
                assert due == natural, f"{key}: frame {i} due {due} != vsync + 1/fps"
            prev_due = due
            assert t0 >= due and t0 >= prev_t1 and t1 == t0 + infer_us, key
            prev_t1 = t1
            after_due = vsync + ((due - vsync) // vsync_us + 1) * vsync_us
            assert late == (t0 >= after_due), f"{key}: frame {i} late flag"
    # the scenarios exercise every rule: pushes, full-queue skips, late frames, non-key skips
    assert any(s[2] is not None and s[2] - s[1] != 1_000_000 // 60 for s in results["60/144/1/1500"])
    assert any(s[4] and s[3] for s in results["60/60/1/40000"])
    assert any(s[6] for s in results["60/60/1/40000"])
    assert not any(s[6] or s[4] for s in results["60/60/1/1500"])
    assert sum(s[4] for s in results["30/30/3/2000"]) == 60


def test_esp32c6_published_inference_time_fits_its_frame_rate(agent):
    # 24.6 ms mean inference (product.md) at the esp32c6 kind's 20 fps: no frame should skip or be late
    slots = scenario(agent)["20/20/1/24600"]
    assert not any(s[4] or s[6] for s in slots)
