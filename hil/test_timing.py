"""Timing over short replays at recorded pace: decisions within the kind's budget, FPS at the kind's target
(each the median over the replay windows, see conftest.py)."""

import pytest

from bench.replay.run import latency_clock

FPS_TOLERANCE = 0.05


def test_decision_latency_within_budget(agent, replayed, record_measurement):
    """On the bench clock, or on the guest's own clock for an icount guest whose agent holds inputs."""
    if latency_clock(agent.device, agent.hello()) is None:
        pytest.skip(f"device {agent.name}: its clock is emulated (QEMU -icount) and its agent cannot hold inputs")
    budget_ms = float(agent.settings.decision_budget_ms)
    p99_ms = replayed.median("decision_latency_p99") / 1000
    record_measurement("decision_latency_p50", replayed.median("decision_latency_p50") / 1000, "ms")
    record_measurement(
        "decision_latency_p99", p99_ms, "ms", samples=[v / 1000 for v in replayed.each("decision_latency_p99")]
    )
    record_measurement("decision_deadline_misses", sum(replayed.each("decision_deadline_misses")), "count")
    if p99_ms > budget_ms and (why := replayed.off_pace()):  # the bench's timing, not the device's: say so
        pytest.skip(f"device {agent.name}: inconclusive: {why}; decision latency P99 {p99_ms:.1f} ms")
    assert p99_ms <= budget_ms, (
        f"device {agent.name}: decision latency P99 {p99_ms:.1f} ms (median of {len(replayed.runs)} windows) "
        f"over the {budget_ms:g} ms budget"
    )


def test_fps_within_5_percent_of_target(agent, replayed, record_measurement):
    target = float(agent.settings.fps_target)
    fps = replayed.median("fps")
    record_measurement("fps", fps, "FPS", samples=replayed.each("fps"))
    record_measurement("frame_jitter_p99", replayed.median("frame_jitter_p99"), "us")
    assert abs(fps - target) <= FPS_TOLERANCE * target, (
        f"device {agent.name}: {fps:.2f} FPS (median of {len(replayed.runs)} windows), target {target:g} +- "
        f"{FPS_TOLERANCE:.0%}"
    )
