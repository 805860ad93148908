"""Roll a model version out to agents: choose full or delta per device, send `update`, check the outcome
through the agent's hello, and report the figures. Used by `hilbench update` and by tests."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.agent.session import AgentSession
from bench.config.fleet import Device
from bench.core.errors import BenchError, ConfigError
from bench.core.outcomes import PASS, Outcome, infrastructure, product
from bench.devices import driver_for, has_driver
from bench.ota import channels
from bench.ota.impair import Impairment, ImpairmentProxy
from bench.ota.server import delta_segment, model_path
from bench.ota.store import ModelStore
from bench.ota.timing import LinkTiming, timing_named
from bench.recovery.ladder import recover
from bench.store.results import ResultStore
from bench.virtual import uplinks

DELTA_CAPS = {"delta-bsdiff": "bsdiff4", "delta-bsdiff-zlib": "bsdiff4-zlib"}  # agent cap -> delta container


@dataclass
class DeviceUpdate:
    """What happened on one device."""

    device: str
    ok: bool = False
    target: str = ""  # NAME@VERSION
    previous: dict[str, Any] | None = None  # the model the agent ran before
    running: dict[str, Any] | None = None  # the model the agent runs now (from its hello after the update)
    delta: bool = False
    channel: str = "coap"  # the update channel that carried it (bench/ota/channels.py)
    blocks: int = 0
    bytes: int = 0
    retransmits: int = 0
    resumed_from: int = 0  # first block fetched (> 0: an interrupted transfer was resumed)
    transfer_ms: float = 0.0
    delta_saved: int = 0
    verify_ms: float = 0.0
    switch_ms: float = 0.0
    total_s: float = 0.0
    detail: str = ""
    notes: list[str] = field(default_factory=list)
    checked: bool = True  # False when no hello after the attempt confirmed `running` (agent unreached or gone)

    @property
    def kept_previous(self) -> bool:
        """True when a failed update left the device on the model it ran before (checked through its hello)."""
        return not self.ok and self.checked and _same_model(self.previous, self.running)

    @property
    def outcome(self) -> Outcome:
        """The failure class (bench.core.outcomes): a pass; a product failure when the device answered but refused or
        rolled back the model; an infrastructure failure when the bench could not tell (the agent not reached)."""
        if self.ok:
            return PASS
        why = self.detail + (" (previous model kept)" if self.kept_previous else "")
        return product(why) if self.checked else infrastructure(why)

    def to_json(self) -> dict[str, Any]:
        """As JSON-ready data."""
        return {**asdict(self), "kept_previous": self.kept_previous, "outcome": self.outcome.to_json()}


def _same_model(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    return (a or {}).get("sha256") == (b or {}).get("sha256")


SLIRP_HOST = "10.0.2.2"  # QEMU user networking: the guest's view of the host's loopback


def device_base_url(port: int, host: str) -> str:
    """`coap://HOST:PORT` as the device reaches the bench."""
    return f"coap://{f'[{host}]' if ':' in host else host}:{port}"


def server_host_for(device: Device, driver: object | None) -> str:
    """Where `device` reaches the bench: its driver's `host_address` (QEMU), its virtual board's gateway (a counted
    ESP32-C6's Wi-Fi) or its `ota_server_host` setting."""
    return str(
        getattr(driver, "host_address", None) or uplinks.host_address(device.name) or device.settings.ota_server_host
    )


def channel_url(device: Device, driver: object | None, ports: dict[str, int]) -> str:
    """The base URL of `device`'s update channel (its `update_channel`), as the device reaches the bench;
    `ports`: the port each served channel listens on. A virtual board with a network of its own is granted that
    port, and only it (bench.virtual.uplinks)."""
    channel = channels.channel_of(device)
    uplinks.grant(device.name, ports[channel])
    return channels.base_url(channel, ports[channel], server_host_for(device, driver))


def bind_address(hosts: list[str]) -> str:
    """127.0.0.1 when every device reaches the bench over loopback (QEMU's 10.0.2.2 included), else all
    interfaces."""
    try:
        local = all(h == SLIRP_HOST or ipaddress.ip_address(h).is_loopback for h in hosts)
    except ValueError:
        local = False
    return "127.0.0.1" if local else "0.0.0.0"


def plan(
    store: ModelStore, manifest: dict[str, Any], hello: dict[str, Any], want_delta: bool
) -> tuple[int | None, str, str]:
    """(base version for a delta or None for a full update, the delta container, a note saying why not)."""
    if not want_delta:
        return None, "", ""
    current = hello.get("model") or {}
    algos = [algo for cap, algo in DELTA_CAPS.items() if cap in hello.get("caps", [])]
    if not algos:
        return None, "", f"agent has none of {', '.join(DELTA_CAPS)}: full update"
    dm = store.delta_from(
        manifest["name"], manifest["version"], current.get("sha256", ""), manifest["format"], algos[0]
    )
    if dm is None:
        return None, "", f"no delta from the running model (v{current.get('version')}): full update"
    if dm["patch_size"] >= manifest["size"]:
        return None, "", f"the delta ({dm['patch_size']} B) is no smaller than the model: full update"
    return dm["base_version"], algos[0], ""


async def update_device(
    session: AgentSession,
    store: ModelStore,
    manifest: dict[str, Any],
    base_url: str,
    *,
    timing: LinkTiming,
    want_delta: bool = False,
    allow_downgrade: bool = False,
) -> DeviceUpdate:
    """Update the agent behind `session` to `manifest`'s model, served at `base_url` (the update server, or
    an impairment proxy in front of it, as the device reaches it). Never raises for a device-side failure.
    `allow_downgrade`: the agent may install a model older than its own, or of another name (else it refuses)."""
    result = DeviceUpdate(device=session.device, target=f"{manifest['name']}@{manifest['version']}", checked=False)
    started = time.monotonic()
    faults_before = len(session.faults)
    try:
        hello = await session.hello()
        faults_before = len(session.faults)
        result.previous = hello.get("model")
        if _same_model(result.previous, manifest):
            result.ok, result.running, result.checked = True, result.previous, True
            result.detail = "already running this version"
            return result
        scheme = base_url.partition("://")[0]
        channel = next((c for c, sch in channels.SCHEMES.items() if sch == scheme), "coap")
        result.channel = channel
        if channels.CAPS[channel] not in hello.get("caps", []):
            result.running, result.checked = result.previous, True
            result.detail = f"the agent has no {channels.CAPS[channel]} (update_channel {channel}): not updated"
            return result
        base_version, algo, note = plan(store, manifest, hello, want_delta)
        if note:
            result.notes.append(note)
        url = f"{base_url}/{model_path(manifest['name'], manifest['format'], manifest['version'])}"
        if base_version is not None:
            url += f"/{delta_segment(algo)}/{base_version}"
        result.delta = base_version is not None
        blocks = -(-manifest["size"] // 1024)
        timeout = 60 + blocks * timing.ack_timeout * 4
        reply = await session.update(
            url, manifest, delta=result.delta, coap=timing.to_json(), timeout=timeout, allow_downgrade=allow_downgrade
        )
        result.ok = True
        result.blocks = int(reply.get("blocks", 0))
        result.bytes = int(reply.get("bytes", 0))
        result.retransmits = int(reply.get("retransmits", 0))
        result.resumed_from = int(reply.get("resumed_from", 0))
        result.transfer_ms = reply.get("transfer_us", 0) / 1000
        result.verify_ms = reply.get("verify_us", 0) / 1000
        result.switch_ms = reply.get("switch_us", 0) / 1000
        result.delta_saved = int(reply.get("delta_saved", manifest["size"] - result.bytes if result.delta else 0))
    except BenchError as exc:  # AgentError (refused), DeviceUnreachable, ProtocolMismatch
        result.detail = str(exc)
        if "refused" in result.detail and "version:" in result.detail:
            result.notes.append("an older model, or one of another name, installs only with --allow-downgrade")
    try:
        result.running = (await session.hello()).get("model")
        result.checked = True
    except BenchError as exc:
        result.notes.append(f"no hello after the update: {exc}")
    if result.ok and not _same_model(result.running, manifest):
        result.ok = False
        rollbacks = [f for f in session.faults[faults_before:] if f.get("kind") == "rollback"]
        result.detail = (
            f"switched, then rolled back by the agent's watchdog ({rollbacks[-1].get('cause')}: "
            f"{rollbacks[-1].get('detail', '')})"
            if rollbacks
            else "agent replied `updated` but its hello reports another model"
        )
    result.total_s = time.monotonic() - started
    return result


def device_format(device: Device) -> str:
    """The model format a device runs (its `model_format` setting, from its kind)."""
    return device.settings.model_format


def manifests_for(devices: list[Device], store: ModelStore, spec: str) -> dict[str, dict[str, Any]]:
    """The manifest of `spec` (NAME[@VERSION]) each device gets, in its format; ConfigError naming the device
    when the store lacks it."""
    out = {}
    for d in devices:
        try:
            out[d.name] = store.resolve(spec, device_format(d))
        except ConfigError as exc:
            raise ConfigError(
                f"device {d.name!r} (runs {device_format(d)}): {exc.message}", hint=exc.hint, device=d.name
            ) from None
    return out


async def _update_one(
    device: Device,
    store: ModelStore,
    manifest: dict[str, Any],
    ports: dict[str, int],
    *,
    want_delta: bool,
    allow_downgrade: bool = False,
    results: ResultStore | None = None,
) -> DeviceUpdate:
    """Open the device's agent through its driver (climbing the recovery ladder when it does not answer, recorded
    in `results`' device health), update it, close."""
    if not has_driver(device.kind):
        return DeviceUpdate(device.name, detail=f"no driver for kind {device.kind}", checked=False)
    driver = driver_for(device)
    recovered_by = None
    try:
        session = await AgentSession.open(await driver.open_agent(), device=device.name, timeout=driver.reply_timeout_s)
    except (BenchError, OSError, TimeoutError) as exc:
        with contextlib.suppress(BenchError, OSError):
            await driver.close_agent()
        why = f"no hello before the update: {(str(exc).strip().splitlines() or [type(exc).__name__])[0]}"
        recovery = await recover(device, why, driver=driver, store=results, keep_open=True)
        if not recovery.recovered or recovery.session is None:
            return DeviceUpdate(device.name, detail=f"cannot reach the agent: {recovery.reason}", checked=False)
        session, recovered_by = recovery.session, recovery.step
    try:
        timing = timing_named(device.settings.ota_timing)
        base_url = channel_url(device, driver, ports)
        result = await update_device(
            session, store, manifest, base_url, timing=timing, want_delta=want_delta, allow_downgrade=allow_downgrade
        )
        if recovered_by:
            result.notes.append(f"the agent did not answer; the recovery ladder brought it back by {recovered_by}")
        return result
    finally:
        await session.close()
        await driver.close_agent()


async def update_devices(
    devices: list[Device],
    store: ModelStore,
    spec: str,
    *,
    want_delta: bool = False,
    allow_downgrade: bool = False,
    impairment: Impairment | None = None,
    on_done: Callable[[DeviceUpdate], None] | None = None,
    results: ResultStore | None = None,
) -> list[DeviceUpdate]:
    """Serve `store` and update every device (links resolved: real, or from `virtual_fleet`) concurrently to
    `spec` (NAME[@VERSION]) in the format each device runs (`allow_downgrade`: see `update_device`).

    With `impairment`, devices fetch through a loopback impairment proxy in front of the server (only for
    devices that reach the bench over loopback)."""
    manifests = manifests_for(devices, store, spec)
    hosts = [d.settings.ota_server_host for d in devices]
    wanted = {channels.channel_of(d) for d in devices}
    async with channels.serve(store, wanted, bind_address(hosts)) as ports, contextlib.AsyncExitStack() as stack:
        if impairment is not None and "coap" in ports:  # the impairment proxy is for CoAP datagrams
            proxy = await stack.enter_async_context(ImpairmentProxy(("127.0.0.1", ports["coap"]), impairment))
            stack.callback(uplinks.revoke, [proxy.port])
            ports = {**ports, "coap": proxy.port}

        async def one(device: Device) -> DeviceUpdate:
            result = await _update_one(
                device,
                store,
                manifests[device.name],
                ports,
                want_delta=want_delta,
                allow_downgrade=allow_downgrade,
                results=results,
            )
            if on_done is not None:
                on_done(result)
            return result

        return list(await asyncio.gather(*(one(d) for d in devices)))
