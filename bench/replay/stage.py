"""The nightly run's replay stage: every session in `ctx.sessions_dir` replayed into the devices still in
the run, one stored replay run per session. Add `("replay", stage_replay)` to `bench.nightly.STAGES`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.replay.agents import driver_opener
from bench.replay.run import OpenAgent
from bench.replay.service import replay_fleet
from bench.results.store import open_store

if TYPE_CHECKING:
    from bench.nightly import DeviceOutcome, NightlyContext


async def stage_replay(ctx: NightlyContext, open_agent: OpenAgent | None = None) -> dict[str, DeviceOutcome]:
    """Replay each session at 1x into all of `ctx.devices` at once; a device is ok when every replay
    finished on it. The store is the fleet's `[bench] results`, else `<reports_dir>/results.sqlite`;
    agents are opened through the devices' drivers unless `open_agent` says otherwise."""
    from bench.nightly import DeviceOutcome

    sessions = sorted(ctx.sessions_dir.glob("*.mcap"))
    if not sessions:
        return {d.name: DeviceOutcome(False, f"no session files in {ctx.sessions_dir}") for d in ctx.devices}
    location = ctx.fleet.bench.get("results") or ctx.reports_dir / "results.sqlite"
    outcomes = {d.name: DeviceOutcome(True, data={"runs": []}) for d in ctx.devices}
    with open_store(location) as store:
        for path in sessions:
            ctx.progress(f"replay {path.name} into {len(ctx.devices)} device(s)")
            result = await replay_fleet(
                ctx.devices, path, store, open_agent or driver_opener(ctx.reports_dir / "logs"),
                bench=str(ctx.fleet.bench.get("name", "")),
            )  # fmt: skip
            for r in result.devices:
                out = outcomes[r.device.name]
                out.data["runs"].append(result.run_id)
                if r.status != "ok":
                    out.ok = False
                    out.detail = f"{path.name}: {r.status}: {r.detail}"
    return outcomes
