"""`hilbench lab sync`: make the coordinator's places, matches and tags what the fleet file says.

Every place the bench creates carries the tag `hb_fleet=<fleet>`; sync removes such places that left the
fleet file and never touches places without it. Running it twice changes nothing the second time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bench.config.fleet import Device, Fleet
from bench.lab.client import LabClient, PlaceInfo

FLEET_TAG = "hb_fleet"


@dataclass(frozen=True)
class DesiredPlace:
    """A place as the fleet file wants it."""

    name: str
    matches: frozenset[str]
    tags: dict[str, str]


@dataclass
class SyncReport:
    """What sync changed (each entry is a human-readable action)."""

    actions: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def fleet_tag(fleet: Fleet) -> str:
    """The `hb_fleet` tag value of this fleet: its [bench] name, else its file name, as a labgrid tag value."""
    name = fleet.bench.name or fleet.path.stem
    return re.sub(r"[^a-z0-9_]", "_", name.lower())


def match_pattern(device: Device) -> str:
    """The resource match of a device's place: every resource in the device's group on its bench host."""
    assert device.lab is not None and device.lab.host is not None
    return f"{device.lab.host}/{device.name}/*"


def desired_places(fleet: Fleet) -> dict[str, DesiredPlace]:
    """Place name -> what it should look like, for every device with a named place."""
    tag = fleet_tag(fleet)
    return {
        d.lab.place: DesiredPlace(d.lab.place, frozenset({match_pattern(d)}), {**d.lab.tags, FLEET_TAG: tag})
        for d in fleet
        if d.lab is not None and d.lab.place is not None
    }


async def sync_places(client: LabClient, fleet: Fleet, *, dry_run: bool = False) -> SyncReport:
    """Create, update and remove places so the coordinator matches `fleet`."""
    report = SyncReport()
    want = desired_places(fleet)
    have = client.places()
    tag = fleet_tag(fleet)
    for name, place in want.items():
        current = have.get(name)
        if current is None:
            report.actions.append(f"add place {name}")
            if not dry_run:
                await client.add_place(name)
            current = PlaceInfo(name, {}, (), None, None)
        await _sync_one(client, place, current, report, dry_run)
    for name, current in have.items():
        if name in want or current.tags.get(FLEET_TAG) != tag:
            continue
        if current.acquired:
            report.skipped.append(f"place {name} left the fleet but is held by {current.acquired}: not removed")
            continue
        report.actions.append(f"remove place {name}")
        if not dry_run:
            await client.delete_place(name)
    return report


async def _sync_one(client: LabClient, want: DesiredPlace, have: PlaceInfo, report: SyncReport, dry_run: bool) -> None:
    for pattern in sorted(want.matches - set(have.matches)):
        report.actions.append(f"place {want.name}: add match {pattern}")
        if not dry_run:
            await client.add_match(want.name, pattern)
    for pattern in sorted(set(have.matches) - want.matches):
        if have.acquired:  # labgrid refuses match changes on a held place
            report.skipped.append(f"place {want.name}: match {pattern} stays while {have.acquired} holds it")
            continue
        report.actions.append(f"place {want.name}: remove match {pattern}")
        if not dry_run:
            await client.delete_match(want.name, pattern)
    changes = {k: v for k, v in want.tags.items() if have.tags.get(k) != v}
    changes.update({k: "" for k in have.tags if k not in want.tags})  # an empty value deletes a tag
    if changes:
        report.actions.append(
            f"place {want.name}: tags " + " ".join(f"{k}={v}" if v else f"-{k}" for k, v in sorted(changes.items()))
        )
        if not dry_run:
            await client.set_tags(want.name, changes)
