"""The agent answers, speaks the bench's protocol and names its platform and model."""

import time

from bench.agent import wire


def test_agent_answers_and_names_its_platform(agent, record_measurement):
    started = time.monotonic()
    info = agent.hello()
    record_measurement("hello_round_trip", (time.monotonic() - started) * 1000, "ms")
    assert info["proto"] == wire.PROTO
    assert info["platform"], f"device {agent.name}: the agent names no platform"
    assert info["model"] and len(info["model"]["sha256"]) == 64, f"device {agent.name}: no model running"
    stats = agent.stats()
    record_measurement("mem", stats["mem"], "B")
    assert 0 < stats["mem"] <= stats["mem_peak"]
