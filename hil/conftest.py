"""The device suite's shared pieces: a short recorded session, one replay per device, the reference runtimes.

Run it against any fleet: `pytest hil/ --fleet FILE` (default: the bundled virtual fleet)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.replay.session import write_session
from bench.replay.synth import synth_session
from bench.testkit.agent import DeviceAgent, Replayed

REPLAY_SECONDS = 6.0  # long enough for a few hundred decisions at the slowest kind's frame rate
_replays: dict[str, Replayed] = {}


@pytest.fixture(scope="session")
def short_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short combat session (all channels, generated deterministically)."""
    path = tmp_path_factory.mktemp("hil-sessions") / "combat-short.mcap"
    write_session(path, synth_session("combat", seed=0, duration_s=REPLAY_SECONDS))
    return path


@pytest.fixture
def replayed(agent: DeviceAgent, short_session: Path) -> Replayed:
    """The short session replayed at recorded pace into the test's device (once per device and pytest run)."""
    if agent.name not in _replays:
        _replays[agent.name] = agent.replay(short_session, speed=1.0)
    result = _replays[agent.name]
    assert result.status == "ok", f"device {agent.name}: replay {result.status}: {result.detail}"
    return result
