"""The device suite's shared pieces: a short recorded session and its replays into each device.

Run it against any fleet: `pytest hil/ --fleet FILE` (default: the bundled virtual fleet)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.measure.host import HostNoise, HostNoiseMeter
from bench.measure.replay_timing import SEED_ALIGNMENT_MS
from bench.replay.recording import write_session
from bench.replay.synth import synth_session
from bench.results.thresholds import load_thresholds
from bench.testkit.agent import DeviceAgent, Replayed

# MLPerf Tiny's rule against one unlucky stretch: the median over a few windows. Each window holds more inputs
# (~310 per second in the combat session) than the 662 a P99 needs.
WINDOWS = 3
WINDOW_SECONDS = 3.0
_replays: dict[str, Windows] = {}


@dataclass(frozen=True)
class Windows:
    """The replay windows of one device."""

    runs: tuple[Replayed, ...]
    host: HostNoise  # what else used the bench host while they played

    def median(self, name: str) -> float:
        """The median over the windows of measurement `name`."""
        return statistics.median(float(r.values[name]) for r in self.runs)

    def each(self, name: str) -> list[float]:
        """Measurement `name` of every window."""
        return [float(r.values[name]) for r in self.runs]

    def off_pace(self) -> str | None:
        """Why the replays did not send their inputs on time (a busy bench host), or None: the median send error
        P99 over the seed's alignment, as a nightly calls its timing verdicts inconclusive."""
        sent = [float(v) for r in self.runs if (v := r.values.get("replay_send_error_p99")) is not None]
        p99_ms = statistics.median(sent) / 1e6 if sent else 0.0
        if p99_ms <= SEED_ALIGNMENT_MS:
            return None
        return f"replay off pace: send error P99 {p99_ms:.1f} ms > the seed's +-{SEED_ALIGNMENT_MS} ms alignment"

    def host_busy(self) -> str | None:
        """Why a virtual device's own timing is the bench host's load (other processes took more of the host than
        the thresholds' `[host] busy_others_pct` while the windows played), or None."""
        limit = load_thresholds().host.busy_others_pct
        return f"bench host busy: {self.host.describe()}" if self.host.busy(limit) else None


@pytest.fixture(scope="session")
def short_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short combat session (all channels, generated deterministically)."""
    path = tmp_path_factory.mktemp("hil-sessions") / "combat-short.mcap"
    write_session(path, synth_session("combat", seed=0, duration_s=WINDOW_SECONDS))
    return path


@pytest.fixture
def replayed(agent: DeviceAgent, short_session: Path) -> Windows:
    """The short session replayed at recorded pace into the test's device, WINDOWS times (once per device and
    pytest run: the timing tests share them)."""
    if agent.name not in _replays:
        runs = []
        meter = HostNoiseMeter()
        for _ in range(WINDOWS):
            run = agent.replay(short_session, speed=1.0)
            assert run.status == "ok", f"device {agent.name}: replay {run.status}: {run.detail}"
            runs.append(run)
        _replays[agent.name] = Windows(tuple(runs), meter.stop())
    return _replays[agent.name]
