"""Timing over a short replay at recorded pace: decisions within the kind's budget, FPS at the kind's target."""

FPS_TOLERANCE = 0.05


def test_decision_latency_within_budget(agent, replayed, record_measurement):
    budget_ms = float(agent.settings["decision_budget_ms"])
    p99_us = replayed.values["decision_latency_p99"]
    misses = replayed.values["decision_deadline_misses"]
    record_measurement("decision_latency_p50", replayed.values["decision_latency_p50"] / 1000, "ms")
    record_measurement("decision_latency_p99", p99_us / 1000, "ms")
    record_measurement("decision_deadline_misses", misses, "count")
    assert p99_us / 1000 <= budget_ms, (
        f"device {agent.name}: decision latency P99 {p99_us / 1000:.1f} ms over the {budget_ms:g} ms budget"
    )


def test_fps_within_5_percent_of_target(agent, replayed, record_measurement):
    target = float(agent.settings["fps_target"])
    fps = replayed.values["fps"]
    record_measurement("fps", fps, "FPS")
    record_measurement("frame_jitter_p99", replayed.values["frame_jitter_p99"], "us")
    assert abs(fps - target) <= FPS_TOLERANCE * target, (
        f"device {agent.name}: {fps:.2f} FPS, target {target:g} +- {FPS_TOLERANCE:.0%}"
    )
