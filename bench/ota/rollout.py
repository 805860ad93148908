"""Roll a model version out to agents: choose full or delta per device, send `update`, check the outcome
through the agent's hello, and report the figures. Used by `hilbench update` and by tests."""

from __future__ import annotations

import ipaddress
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from bench.errors import BenchError
from bench.ota.server import UpdateServer
from bench.ota.store import ModelStore
from bench.ota.timing import LinkTiming

if TYPE_CHECKING:
    from bench.agent.session import AgentSession

DELTA_CAP = "delta-bsdiff"


@dataclass
class DeviceUpdate:
    """What happened on one device."""

    device: str
    ok: bool = False
    target: str = ""  # NAME@VERSION
    previous: dict[str, Any] | None = None  # the model the agent ran before
    running: dict[str, Any] | None = None  # the model the agent runs now (from its hello after the update)
    delta: bool = False
    blocks: int = 0
    bytes: int = 0
    retransmits: int = 0
    transfer_ms: float = 0.0
    delta_saved: int = 0
    verify_ms: float = 0.0
    switch_ms: float = 0.0
    total_s: float = 0.0
    detail: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def kept_previous(self) -> bool:
        """True when a failed update left the device on the model it ran before."""
        return not self.ok and _same_model(self.previous, self.running)

    def to_json(self) -> dict[str, Any]:
        """As JSON-ready data."""
        return {**asdict(self), "kept_previous": self.kept_previous}


def _same_model(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    return (a or {}).get("sha256") == (b or {}).get("sha256")


def device_base_url(server: UpdateServer, host: str) -> str:
    """The server's URL as the device reaches it (`host` from the device's `ota_server_host` setting)."""
    return f"coap://{f'[{host}]' if ':' in host else host}:{server.port}"


def bind_address(hosts: list[str]) -> str:
    """127.0.0.1 when every device reaches the bench over loopback, else all interfaces."""
    try:
        return "127.0.0.1" if all(ipaddress.ip_address(h).is_loopback for h in hosts) else "0.0.0.0"
    except ValueError:
        return "0.0.0.0"


def plan(
    store: ModelStore, manifest: dict[str, Any], hello: dict[str, Any], want_delta: bool
) -> tuple[int | None, str]:
    """(base version for a delta or None for a full update, a note saying why)."""
    if not want_delta:
        return None, ""
    current = hello.get("model") or {}
    if DELTA_CAP not in hello.get("caps", []):
        return None, f"agent has no {DELTA_CAP}: full update"
    dm = store.delta_from(manifest["name"], manifest["version"], current.get("sha256", ""))
    if dm is None:
        return None, f"no delta from the running model (v{current.get('version')}): full update"
    return dm["base_version"], ""


async def update_device(
    session: AgentSession,
    store: ModelStore,
    server: UpdateServer,
    manifest: dict[str, Any],
    *,
    server_host: str = "127.0.0.1",
    timing: LinkTiming,
    want_delta: bool = False,
) -> DeviceUpdate:
    """Update the agent behind `session` to `manifest`'s model; never raises for a device-side failure."""
    result = DeviceUpdate(device=session.device, target=f"{manifest['name']}@{manifest['version']}")
    started = time.monotonic()
    try:
        hello = await session.hello()
        result.previous = hello.get("model")
        if _same_model(result.previous, manifest):
            result.ok, result.running, result.detail = True, result.previous, "already running this version"
            return result
        base_version, note = plan(store, manifest, hello, want_delta)
        if note:
            result.notes.append(note)
        base = device_base_url(server, server_host)
        if base_version is None:
            url = server.model_url(manifest["name"], manifest["version"], base)
        else:
            url = server.delta_url(manifest["name"], manifest["version"], base_version, base)
        result.delta = base_version is not None
        blocks = -(-manifest["size"] // 1024)
        timeout = 60 + blocks * timing.ack_timeout * 4
        reply = await session.request(
            "update", timeout=timeout, url=url, manifest=manifest, delta=result.delta, coap=timing.to_json()
        )
        result.ok = True
        result.blocks = int(reply.get("blocks", 0))
        result.bytes = int(reply.get("bytes", 0))
        result.retransmits = int(reply.get("retransmits", 0))
        result.transfer_ms = reply.get("transfer_us", 0) / 1000
        result.verify_ms = reply.get("verify_us", 0) / 1000
        result.switch_ms = reply.get("switch_us", 0) / 1000
        result.delta_saved = int(reply.get("delta_saved", 0))
    except BenchError as exc:  # AgentError (refused), DeviceUnreachable, ProtocolMismatch
        result.detail = str(exc)
    try:
        result.running = (await session.hello()).get("model")
    except BenchError as exc:
        result.notes.append(f"no hello after the update: {exc}")
    if result.ok and not _same_model(result.running, manifest):
        result.ok = False
        result.detail = "agent replied `updated` but its hello reports another model"
    result.total_s = time.monotonic() - started
    return result
