"""`hilbench lab janitor`: release the places of jobs that are gone (labgrid's locks never expire).

A place held by a bench job identity of this host whose process no longer runs is released (only from
that holder, so a job that acquires it meanwhile keeps it). `holders` names further owners to release
(e.g. the LG_USERNAME of a CI job that was cancelled). Other places are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.core.identity import holder_gone
from bench.lab.client import LabClient
from bench.lab.sync import FLEET_TAG


@dataclass
class JanitorReport:
    """Places freed and places left held."""

    released: list[tuple[str, str]] = field(default_factory=list)  # (place, former holder)
    kept: list[tuple[str, str, str]] = field(default_factory=list)  # (place, holder, why)


async def sweep(
    client: LabClient, fleet_tag: str, holders: tuple[str, ...] = (), dry_run: bool = False
) -> JanitorReport:
    """Release this fleet's places whose holder job is gone (or is one of `holders`)."""
    report = JanitorReport()
    for name, place in sorted(client.places().items()):
        if not place.acquired or place.tags.get(FLEET_TAG) != fleet_tag:
            continue
        gone = True if place.acquired in holders else holder_gone(place.acquired)
        if not gone:
            why = "its job still runs" if gone is False else "not a bench job of this host"
            report.kept.append((name, place.acquired, why))
            continue
        if not dry_run:
            await client.release(name, from_owner=place.acquired)
        report.released.append((name, place.acquired))
    return report
