"""The order of a check's replays and the time it is expected to take.

The baseline build (B) and the candidate (C) alternate in ABBA order (B C C B B C ...): a bench host that gets
busier or quieter during the check weighs on both alike, and the device switches build only every second
replay."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

BASE, CANDIDATE = "baseline", "candidate"
# agent start, clock sync, the cold starts of first-frame time and storing the figures, per replay: 16-21 s on pi5-1's
# guest with others using a quarter of the host (the check's own timing table), several times that on a host others
# keep 85% busy
REPLAY_OVERHEAD_S = 20.0
DEPLOY_S = 15.0  # one switch of build on pi5-1's guest (model signed and copied, OS checked): 5-15 s measured so


def order(runs: int) -> list[str]:
    """`runs` replays of each build in ABBA order."""
    pairs = [(BASE, CANDIDATE) if i % 2 == 0 else (CANDIDATE, BASE) for i in range(runs)]
    return [side for pair in pairs for side in pair]


def switches(sides: list[str], same_build: bool) -> int:
    """How many deploys the order needs: the first, then one per change of build (none when both are one)."""
    if same_build:
        return 1
    return 1 + sum(a != b for a, b in itertools.pairwise(sides))


@dataclass(frozen=True)
class Estimate:
    """What a check should take, by part."""

    replays: int
    replay_s: float  # each replay's length (the longest device's)
    deploys: int

    @property
    def seconds(self) -> float:
        """The whole check."""
        return self.replays * (self.replay_s + REPLAY_OVERHEAD_S) + self.deploys * DEPLOY_S

    def line(self) -> str:
        """One line for the terminal."""
        return (f"{self.replays} replays of ~{self.replay_s:.0f} s (+~{REPLAY_OVERHEAD_S:.0f} s each to start) and "
                f"{self.deploys} deploy(s) (~{DEPLOY_S:.0f} s): ~{self.seconds / 60:.1f} min")  # fmt: skip
