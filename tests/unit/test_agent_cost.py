"""The agent-cost arithmetic of tests/bench/bench_agent_cost.py, on made-up `stats` replies (no timing)."""

from __future__ import annotations

import pytest

from tests.bench.bench_agent_cost import agent_cost


def host_stats(rx: int, loop: int, release: int, invoke: int, frames: int = 100, inferences: int = 100) -> dict:
    return {
        "frames": frames,
        "inferences": inferences,
        "inputs": 450,
        "busy_us": {"rx": rx, "loop": loop, "release": release, "invoke": invoke},
    }


def test_outside_the_invoke_is_rx_plus_loop_minus_invoke_per_frame() -> None:
    c = agent_cost(host_stats(rx=3_000, loop=150_000, release=1_000, invoke=145_000))
    assert c["outside_us"] == pytest.approx((3_000 + 150_000 - 145_000) / 100)
    assert c["parts_us"] == pytest.approx({"rx": 30.0, "release": 10.0, "gc": 0.0, "other": 40.0})
    assert sum(c["parts_us"].values()) == pytest.approx(c["outside_us"])
    assert c["invoke_us"] == 1450.0 and c["invoke_source"] == "busy_us.invoke"
    assert c["inputs_per_frame"] == 4.5


def test_the_goal_is_five_percent_of_the_invoke_or_fifty_us_whichever_is_larger() -> None:
    small = agent_cost(host_stats(rx=1_000, loop=101_000, release=0, invoke=100_000))  # 1 ms invoke: 50 us floor
    assert small["goal_us"] == 50.0 and small["outside_us"] == pytest.approx(20.0) and small["met"]
    assert small["bound"] is None and small["bound_detail"] is None
    large = agent_cost(host_stats(rx=0, loop=2_100_000, release=0, invoke=2_000_000))  # 20 ms invoke: 1 ms goal
    assert large["goal_us"] == pytest.approx(1_000.0) and large["outside_us"] == pytest.approx(1_000.0)
    assert large["met"]  # at the goal is within it


def test_a_missed_goal_names_the_largest_part_with_its_per_input_cost() -> None:
    c = agent_cost(host_stats(rx=900_000, loop=400_000, release=200_000, invoke=100_000))
    assert not c["met"] and c["bound"] == "rx"
    assert c["share"] == pytest.approx(12_000 / 1_000)
    assert "reading and answering the input lines: 9000 us a frame" in c["bound_detail"]
    assert "4.5 inputs a frame, 2000 us each" in c["bound_detail"]
    other = agent_cost(host_stats(rx=0, loop=900_000, release=0, invoke=100_000))
    assert other["bound"] == "other" and "inputs a frame" not in other["bound_detail"]


def test_the_micropython_invoke_is_its_mean_inference_times_their_count() -> None:
    stats = {
        "frames": 628,
        "inferences": 628,
        "inputs": 2827,
        "infer_us_mean": 11_300,
        "infer_n": 629,  # one more: the warm-up inference at start, outside the loop
        "busy_us": {"rx": 5_700_000, "loop": 16_000_000, "release": 5_000_000},
    }
    c = agent_cost(stats)
    invoke = 11_300 * 629
    assert c["invoke_source"] == "infer_us_mean * infer_n"
    assert c["outside_us"] == pytest.approx((5_700_000 + 16_000_000 - invoke) / 628)
    assert c["invoke_us"] == pytest.approx(invoke / 628)
    assert not c["met"] and c["bound"] == "rx"


def test_the_idle_point_collections_are_their_own_part() -> None:
    """The MicroPython agent's `busy_us.gc` (inside its loop) is taken out of "other" and can bound the cost."""
    stats = {"frames": 100, "inferences": 100, "infer_us_mean": 10_000, "infer_n": 100,
             "busy_us": {"rx": 0, "loop": 1_500_000, "release": 0, "gc": 400_000}}  # fmt: skip
    c = agent_cost(stats)
    assert c["parts_us"] == pytest.approx({"rx": 0.0, "release": 0.0, "gc": 4_000.0, "other": 1_000.0})
    assert c["bound"] == "gc"


def test_frames_records_and_inferences_are_counted_apart() -> None:
    c = agent_cost(host_stats(rx=0, loop=300_000, release=0, invoke=200_000, frames=200, inferences=100))
    assert c["outside_us"] == pytest.approx(500.0)  # per frame record
    assert c["invoke_us"] == pytest.approx(2_000.0)  # per inference


def test_no_frames_is_refused() -> None:
    with pytest.raises(ValueError, match="no frames"):
        agent_cost(host_stats(rx=1, loop=1, release=0, invoke=0, frames=0, inferences=0))
