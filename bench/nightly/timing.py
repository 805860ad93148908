"""Where a nightly's time went: per stage, and in the replay stage per session and per wave, next to the floor
(the longest session's recorded length plus the flash, update and fault stages: what the night cannot go below
with every session replayed at once)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.table import Table

from bench.core.console import compact_table
from bench.replay.phases import Phase, wave_seconds

FLOOR_STAGES = ("flash", "update", "faults")
WAVE_PHASES = ("start", "play", "stop", "cold starts")


@dataclass
class SessionTime:
    """One replay run of the night: its session, kind (replay, retry, confirm, ...), recorded length and phases."""

    session: str
    kind: str
    recorded_s: float
    phases: list[Phase] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form, with each wave's total."""
        waves = wave_seconds(self.phases)
        return {"session": self.session, "kind": self.kind, "recorded_s": round(self.recorded_s, 3),
                "waves": {str(k): round(v, 3) for k, v in sorted(waves.items())},
                "phases": [p.to_json() for p in self.phases]}  # fmt: skip


@dataclass
class NightTime:
    """The night's wall time: in all, per stage, per replay run."""

    total_s: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)
    sessions: list[SessionTime] = field(default_factory=list)

    @property
    def floor_s(self) -> float:
        """The longest session's recorded length plus the flash, update and fault stages that ran."""
        longest = max((s.recorded_s for s in self.sessions if s.kind == "replay"), default=0.0)
        return longest + sum(self.stages.get(name, 0.0) for name in FLOOR_STAGES)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"total_s": round(self.total_s, 3), "floor_s": round(self.floor_s, 3),
                "over_floor_s": round(self.total_s - self.floor_s, 3),
                "stages": {k: round(v, 3) for k, v in self.stages.items()},
                "sessions": [s.to_json() for s in self.sessions]}  # fmt: skip

    def headline(self) -> str:
        """Two lines: the night's time, its floor and the gap; the stages' seconds."""
        stages = ", ".join(f"{name} {s:.0f}" for name, s in self.stages.items())
        return (f"time {_mmss(self.total_s)}, floor {_mmss(self.floor_s)} (longest session + flash, update, "
                f"faults): {_mmss(self.total_s - self.floor_s)} above it\n  stages (s): {stages}")  # fmt: skip

    def table(self) -> Table:
        """Per replay run and wave: its devices and the seconds of each phase (80 columns)."""
        table = compact_table("where the replay time went (s)")
        for name in ("session", "wave", "devices"):
            table.add_column(name, no_wrap=name != "devices")
        for name in ("start", "play", "stop", "cold", "total"):
            table.add_column(name, no_wrap=True, justify="right")
        for run in self.sessions:
            label = run.session if run.kind == "replay" else f"{run.session} ({run.kind})"
            slowest = max((p for p in run.phases if p.detail and p.name == "open"), key=lambda p: p.seconds,
                          default=None)  # fmt: skip
            for own in (p for p in run.phases if p.wave is None and p.name == "open" and not p.detail):
                what = f"open, {slowest.devices[0]} {slowest.seconds:.0f} s" if slowest else "open the agents"
                table.add_row(label, "-", what, "", "", "", "", f"{own.seconds:.1f}")
                label = ""
            for wave, seconds in sorted(wave_seconds(run.phases).items()):
                mine = [p for p in run.phases if p.wave == wave and not p.detail]
                by = {p.name: p.seconds for p in mine}
                devices = next((p.devices for p in mine if p.name == "start"), ())
                table.add_row(label, str(wave), " ".join(devices),
                              *(f"{by[n]:.1f}" if n in by else "" for n in WAVE_PHASES), f"{seconds:.1f}")  # fmt: skip
                label = ""
            for own in (p for p in run.phases if p.wave is None and p.name == "measure" and not p.detail):
                table.add_row(label, "-", "measure, store", "", "", "", "", f"{own.seconds:.1f}")
        return table


def _mmss(seconds: float) -> str:
    sign = "-" if seconds < 0 else ""
    whole = round(abs(seconds))
    return f"{sign}{whole // 60}:{whole % 60:02d}"
