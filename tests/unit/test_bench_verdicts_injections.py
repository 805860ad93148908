"""tests/bench/bench_verdicts.py's code injections patch only the agents the selected devices run, find their
anchors in today's agents, and report a device no injection reaches instead of failing on it; its slower-model
fleet puts the large policy on each device it names, and the benchmarks grow each device's own model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.config.fleet import load_fleet
from bench.store.results import open_store
from tests.bench.bench_verdicts import (
    HOST_AGENT,
    MPY_AGENT,
    REPO,
    agent_runtimes,
    inject_creep,
    inject_first_frame,
    inject_memory,
    not_injected,
    own_model,
    slower_fleet,
)

C6_ONLY = {"c6-a": "micropython"}
BOTH = {"pi5-1": "host", "c6-a": "micropython"}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A copy of the two agents the injections patch, and an empty results store beside it."""
    for name in (HOST_AGENT, MPY_AGENT):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, tmp_path / name)
    with open_store(tmp_path / "results.sqlite"):
        pass
    return tmp_path


def changed(repo: Path) -> set[str]:
    return {name for name in (HOST_AGENT, MPY_AGENT) if (repo / name).read_text() != (REPO / name).read_text()}


@pytest.mark.parametrize(("runtimes", "agents"), [(C6_ONLY, {MPY_AGENT}), (BOTH, {HOST_AGENT, MPY_AGENT})])
def test_each_injection_patches_the_agents_the_devices_run(repo: Path, runtimes: dict, agents: set) -> None:
    store = repo / "results.sqlite"
    for inject in (
        lambda: inject_memory(repo, store, runtimes),
        lambda: inject_first_frame(repo, store, runtimes),
        lambda: inject_creep(repo, dict.fromkeys(runtimes, 13_860.0), runtimes, 1),
    ):
        for name in (HOST_AGENT, MPY_AGENT):
            shutil.copy2(REPO / name, repo / name)
        assert inject()
        assert changed(repo) == agents
        for name in agents:  # the patched agent still parses
            compile((repo / name).read_text(), name, "exec")


def test_a_device_whose_agent_no_injection_patches_is_named_not_injected(repo: Path) -> None:
    web = {"web-1": "web"}
    assert inject_memory(repo, repo / "results.sqlite", web) == [] and not changed(repo)
    assert not_injected({**C6_ONLY, **web}) == ["web-1 not injected (web agent)"]


def test_the_runtimes_come_from_the_fleets_kinds() -> None:
    fleet = REPO / "fixtures" / "fleets" / "virtual.toml"
    assert agent_runtimes(fleet, ["c6-a", "pi5-1", "web-1"]) == {"c6-a": "micropython", "pi5-1": "host",
                                                                  "web-1": "web"}  # fmt: skip
    with pytest.raises(SystemExit) as stopped:
        agent_runtimes(fleet, ["no-such-board"])
    assert stopped.value.code == 2


def test_the_slower_fleet_sets_the_large_policy_whether_a_device_named_a_model_or_not(tmp_path: Path) -> None:
    (tmp_path / "fixtures" / "fleets").mkdir(parents=True)
    base = REPO / "fixtures" / "fleets" / "virtual.toml"
    assert own_model("pi5-1", base) == own_model("orin-1", base) == "npc-policy-large-int8"  # the Jetson's policy
    assert own_model("c6-a", base) == "npc-policy-int8"
    fleet = load_fleet(slower_fleet(tmp_path, ["pi5-1", "c6-a"], base))  # pi5-1 names its model, c6-a does not
    models = {d.name: d.settings.model for d in fleet.devices}
    assert models["pi5-1"] == models["c6-a"] == "npc-policy-large-int8"
    assert models["c6-b"] == models["switch-1"] == "npc-policy-int8"  # the others as they were
