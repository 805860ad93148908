"""Acquire the labgrid places of a job's devices, hand out their links, release them in all cases.

Each place is acquired as this job's own owner identity (bench.core.identity). A device given by
`lab_tags` is reserved first (any matching place will do) and the allocated place acquired. The link
is read from the place's resources after every acquire (a restarted exporter publishes a new port), and
waited for until the deadline while the exporter is away. Everything is released on exit, also on an
error or SIGTERM; a job killed with -9 leaves its places to `hilbench lab janitor`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from bench.config.fleet import Device
from bench.core.errors import DeviceUnreachable
from bench.core.identity import job_identity
from bench.lab.client import POLL_S, LabClient
from bench.lab.links import link_from_resources
from bench.virtual import VirtualDevice, virtual_fleet


@dataclass
class LabTimes:
    """How long labgrid took for this job (seconds), for logs and the benchmark."""

    acquire_s: dict[str, float] = field(default_factory=dict)
    release_s: dict[str, float] = field(default_factory=dict)


@dataclass
class LabHold:
    """The places a job holds and the devices they resolved to."""

    owner: str
    places: dict[str, str]  # device name -> place
    devices: list[Device]
    times: LabTimes
    client: LabClient | None = None
    timeout_s: float = 60.0

    async def relink(self, devices: list[Device]) -> list[Device]:
        """`devices` with the links of their held places read again (an exporter that restarted meanwhile
        publishes a new port; waits up to the acquire timeout while it is away). Others are kept as they are."""
        if self.client is None:
            return list(devices)
        deadline = time.monotonic() + self.timeout_s
        return [
            d.with_link(await _link(self.client, d, self.places[d.name], deadline)) if d.name in self.places else d
            for d in devices
        ]


@contextlib.asynccontextmanager
async def lab_devices(devices: list[Device], *, timeout_s: float | None = None) -> AsyncIterator[LabHold]:
    """Acquire the places of `devices` that live in the lab; yield all devices with their links filled in."""
    in_lab = [d for d in devices if d.lab is not None]
    if not in_lab:
        yield LabHold(owner="", places={}, devices=list(devices), times=LabTimes())
        return
    lab = in_lab[0].lab
    assert lab is not None
    host, user = job_identity()
    timeout_s = timeout_s if timeout_s is not None else lab.acquire_timeout_s
    deadline = time.monotonic() + timeout_s
    times = LabTimes()
    held: dict[str, str] = {}
    tokens: list[str] = []
    async with LabClient(lab.coordinator, host, user) as client:
        try:
            resolved: dict[str, Device] = {}
            # one global order (named places by name, then reservations), so two jobs wanting overlapping
            # sets never each hold what the other waits for
            for dev in sorted(in_lab, key=lambda d: (d.lab.place is None, d.lab.place or "", d.name)):
                assert dev.lab is not None
                t0 = time.perf_counter()
                place = dev.lab.place
                if place is None:
                    token, place = await client.reserve(dev.lab.tags, deadline)
                    tokens.append(token)
                # counted as held before the call: a SIGTERM while the answer is on its way still releases
                # it (the release names this job as the holder, so a place never acquired is left alone)
                held[dev.name] = place
                await client.acquire(place, deadline)
                times.acquire_s[dev.name] = time.perf_counter() - t0
                resolved[dev.name] = dev.with_link(await _link(client, dev, place, deadline))
            yield LabHold(
                client.owner, dict(held), [resolved.get(d.name, d) for d in devices], times, client, timeout_s
            )
        finally:
            for name, place in held.items():
                t0 = time.perf_counter()
                with contextlib.suppress(Exception):
                    await client.release(place, from_owner=client.owner)
                times.release_s[name] = time.perf_counter() - t0
            for token in tokens:
                await client.cancel(token)


@contextlib.asynccontextmanager
async def reachable_devices(devices: list[Device]) -> AsyncIterator[tuple[list[Device], dict[str, VirtualDevice]]]:
    """`virtual_fleet` for a job: lab devices acquired (and released on exit) and local virtual ones started;
    yields the devices with links and the running stand-ins."""
    async with lab_devices(devices) as held, virtual_fleet(held.devices) as (resolved, running):
        yield resolved, running


async def _link(client: LabClient, dev: Device, place: str, deadline: float):
    """The device's link from its place's resources, waiting while its exporter is away."""
    while True:
        await client.refresh()
        resources = client.place_resources(place)
        try:
            return link_from_resources(dev, place, resources)
        except DeviceUnreachable:
            if time.monotonic() >= deadline:
                raise
        await asyncio.sleep(POLL_S)
