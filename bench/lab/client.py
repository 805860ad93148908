"""A connection to the labgrid coordinator, over labgrid's own gRPC client session.

labgrid has no public Python API for acquiring places; this uses `labgrid.remote.client.ClientSession`
(started on the running event loop) and the coordinator's gRPC requests, as `labgrid-client` does.
The coordinator never waits for a busy place (FAILED_PRECONDITION at once), so waiting until a deadline
happens here. Pinned: labgrid 26.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from bench.core.errors import BenchError, DeviceUnreachable, ExitCode

POLL_S = 0.25  # retry interval for a busy place or a pending reservation
CONNECT_TIMEOUT_S = 10.0
_CHANNEL_OPTIONS = [
    ("grpc.keepalive_time_ms", 7500),  # labgrid's client keepalive settings
    ("grpc.keepalive_timeout_ms", 10000),
    ("grpc.http2.ping_timeout_ms", 10000),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.use_local_subchannel_pool", 1),  # a connection per session
]
_RESERVATION_INVALID = 4  # labgrid.remote.common.ReservationState.invalid: no place could ever match


class LabBusy(BenchError):
    """A place (or every place matching some tags) stayed taken until the deadline."""

    exit_code = ExitCode.UNREACHABLE


@dataclass(frozen=True)
class LabResource:
    """One resource published by an exporter, as the coordinator reports it."""

    exporter: str
    group: str
    cls: str
    name: str
    params: dict[str, Any]
    avail: bool

    @property
    def path(self) -> tuple[str, str, str, str]:
        """The (exporter, group, class, name) path that place matches are checked against."""
        return (self.exporter, self.group, self.cls, self.name)


@dataclass(frozen=True)
class PlaceInfo:
    """A place as the coordinator holds it."""

    name: str
    tags: dict[str, str]
    matches: tuple[str, ...]
    acquired: str | None  # "host/user" of the holder
    reservation: str | None


class _LabgridClientNoise(logging.Filter):
    """Drops what labgrid's client session logs on the root logger ("coordinator is unavailable", tracebacks
    of its message pump): the bench reports coordinator trouble itself, as one error naming the address."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.pathname.replace("\\", "/").endswith("labgrid/remote/client.py")


def _quiet_labgrid_client() -> None:
    root = logging.getLogger()
    if not any(isinstance(f, _LabgridClientNoise) for f in root.filters):
        root.addFilter(_LabgridClientNoise())


def _session_class():
    import grpc
    from labgrid.remote.client import ClientSession
    from labgrid.remote.generated import labgrid_coordinator_pb2_grpc

    class _Session(ClientSession):
        """labgrid's client session with the run owner identity given per job, not per process env, and
        a connection of its own: the coordinator tells clients apart by peer address, and gRPC would
        otherwise share one connection between two sessions of a process (two owners would clash)."""

        identity: tuple[str, str] = ("", "")

        def __attrs_post_init__(self) -> None:
            super().__attrs_post_init__()  # its channel is never used (a channel connects on first call)
            self.channel = grpc.aio.insecure_channel(target=self.address, options=_CHANNEL_OPTIONS)
            self.stub = labgrid_coordinator_pb2_grpc.CoordinatorStub(self.channel)

        def gethostname(self) -> str:
            return self.identity[0]

        def getuser(self) -> str:
            return self.identity[1]

    return _Session


class LabClient:
    """One session with the coordinator at `address` ("host:port"), acting as `host/user`."""

    def __init__(self, address: str, host: str, user: str) -> None:
        self.address = address
        self.owner = f"{host}/{user}"
        self._identity = (host, user)
        self._session: Any = None

    async def __aenter__(self) -> LabClient:
        from labgrid.remote.common import labgrid_coordinator_pb2  # noqa: F401  (fail early if labgrid is missing)

        _quiet_labgrid_client()
        session = _session_class()(self.address, asyncio.get_running_loop())
        session.identity = self._identity
        try:
            await asyncio.wait_for(session.start(), CONNECT_TIMEOUT_S)
        except Exception as exc:  # the session raises ServerError or times out; both mean "not reachable"
            with contextlib.suppress(Exception):
                await session.stop()
                await session.close()
            raise DeviceUnreachable(
                f"labgrid coordinator {self.address}: not reachable ({type(exc).__name__})",
                hint="check [lab] coordinator in the fleet file and that labgrid-coordinator runs there",
            ) from None
        self._session = session
        return self

    async def __aexit__(self, *exc: object) -> None:
        session, self._session = self._session, None
        if session is not None:
            with contextlib.suppress(Exception):
                await session.stop()
                await session.close()

    # -- reading --------------------------------------------------------------------------------------

    def places(self) -> dict[str, PlaceInfo]:
        """Every place by name."""
        return {
            name: PlaceInfo(
                name=name,
                tags=dict(p.tags),
                matches=tuple(repr(m) for m in p.matches),
                acquired=p.acquired or None,
                reservation=p.reservation or None,
            )
            for name, p in self._session.places.items()
        }

    def resources(self) -> Iterator[LabResource]:
        """Every resource the exporters publish right now."""
        for exporter, groups in self._session.resources.items():
            for group, entries in groups.items():
                for name, entry in entries.items():
                    if "cls" in entry.data:
                        yield LabResource(exporter, group, entry.cls, name, dict(entry.args), bool(entry.avail))

    def place_resources(self, place: str) -> list[LabResource]:
        """The available resources that `place`'s matches select."""
        p = self._session.places.get(place)
        if p is None:
            return []
        return [r for r in self.resources() if r.avail and p.hasmatch(r.path)]

    async def refresh(self) -> None:
        """Wait until every update the coordinator sent so far has been applied."""
        await self._session.sync_with_coordinator()

    # -- places, matches, tags ------------------------------------------------------------------------

    async def add_place(self, name: str) -> None:
        """Create an empty place."""
        await self._call("AddPlace", "AddPlaceRequest", name=name)

    async def delete_place(self, name: str) -> None:
        """Delete a place."""
        await self._call("DeletePlace", "DeletePlaceRequest", name=name)

    async def add_match(self, place: str, pattern: str) -> None:
        """Add a resource match `exporter/group/cls[/name]` to a place."""
        await self._call("AddPlaceMatch", "AddPlaceMatchRequest", placename=place, pattern=pattern)

    async def delete_match(self, place: str, pattern: str) -> None:
        """Remove a resource match from a place."""
        await self._call("DeletePlaceMatch", "DeletePlaceMatchRequest", placename=place, pattern=pattern)

    async def set_tags(self, place: str, tags: dict[str, str]) -> None:
        """Set a place's tags (labgrid merges; an empty value deletes a key)."""
        await self._call("SetPlaceTags", "SetPlaceTagsRequest", placename=place, tags=tags)

    # -- locking --------------------------------------------------------------------------------------

    async def acquire(self, place: str, deadline: float) -> None:
        """Acquire `place`, retrying while it is busy until `deadline` (time.monotonic()); LabBusy names it."""
        import grpc

        while True:
            try:
                await self._call("AcquirePlace", "AcquirePlaceRequest", placename=place, raw=True)
                return
            except grpc.aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.INVALID_ARGUMENT:
                    raise BenchError(
                        f"labgrid place {place!r} does not exist on {self.address}",
                        hint="run `hilbench lab sync` with this fleet file",
                    ) from None
                if exc.code() not in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.PERMISSION_DENIED):
                    raise DeviceUnreachable(f"labgrid place {place!r}: {exc.details()}") from None
                if time.monotonic() >= deadline:
                    holder = self.places().get(place)
                    who = holder.acquired if holder and holder.acquired else "a reservation"
                    raise LabBusy(
                        f"labgrid place {place!r} is still held by {who} after waiting",
                        hint="wait for that job, or free a dead job's place with `hilbench lab janitor`",
                    ) from None
            await asyncio.sleep(POLL_S)

    async def release(self, place: str, from_owner: str | None = None) -> None:
        """Release `place` (only if `from_owner` still holds it, when given)."""
        kwargs: dict[str, Any] = {"placename": place}
        if from_owner is not None:
            kwargs["fromuser"] = from_owner
        await self._call("ReleasePlace", "ReleasePlaceRequest", **kwargs)

    async def reserve(self, tags: dict[str, str], deadline: float) -> tuple[str, str]:
        """Reserve any place whose tags include `tags`; returns (token, place). LabBusy at the deadline."""
        from labgrid.remote.generated import labgrid_coordinator_pb2 as pb

        request = pb.CreateReservationRequest(filters={"main": pb.Reservation.Filter(filter=tags)}, prio=0.0)
        response = await self._rpc("CreateReservation", request)
        token = response.reservation.token
        try:
            while True:
                polled = await self._rpc("PollReservation", pb.PollReservationRequest(token=token))
                allocated = polled.reservation.allocations.get("main")
                if allocated:
                    return token, allocated
                if polled.reservation.state == _RESERVATION_INVALID:
                    raise BenchError(f"no labgrid place has tags {_tags_text(tags)}", hint="run `hilbench lab sync`")
                if time.monotonic() >= deadline:
                    holders = sorted(
                        f"{p.name} ({p.acquired})"
                        for p in self.places().values()
                        if tags.items() <= p.tags.items() and p.acquired
                    )
                    raise LabBusy(
                        f"no labgrid place with tags {_tags_text(tags)} came free in time; held: "
                        + (", ".join(holders) or "(reserved by other jobs)"),
                        hint="wait for those jobs, or free dead jobs' places with `hilbench lab janitor`",
                    )
                await asyncio.sleep(POLL_S)
        except BaseException:
            await self.cancel(token)
            raise

    async def cancel(self, token: str) -> None:
        """Cancel a reservation (errors ignored: an expired one is gone anyway)."""
        with contextlib.suppress(Exception):
            await self._call("CancelReservation", "CancelReservationRequest", token=token)

    # -- plumbing -------------------------------------------------------------------------------------

    async def _rpc(self, method: str, request: Any) -> Any:
        import grpc

        try:
            return await getattr(self._session.stub, method)(request)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNAVAILABLE:
                raise DeviceUnreachable(f"labgrid coordinator {self.address}: {exc.details()}") from None
            raise

    async def _call(self, method: str, request_name: str, *, raw: bool = False, **fields: Any) -> None:
        import grpc
        from labgrid.remote.generated import labgrid_coordinator_pb2 as pb

        try:
            await self._rpc(method, getattr(pb, request_name)(**fields))
        except grpc.aio.AioRpcError as exc:
            if raw:
                raise
            raise BenchError(f"labgrid coordinator {self.address}: {method}: {exc.details()}") from None
        await self._session.sync_with_coordinator()


def _tags_text(tags: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(tags.items()))
