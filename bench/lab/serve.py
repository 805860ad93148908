"""`hilbench lab serve --host NAME`: what a bench host runs. Starts the host's virtual devices, writes its
exporter YAML with their live ports and keeps `labgrid-exporter` running (restarted when it exits, e.g.
code 100 while the coordinator is away) until SIGINT/SIGTERM, then stops the exporter before the devices.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from bench.config.fleet import Fleet, Link, SerialLink, SshLink
from bench.core.fields import not_option
from bench.core.folders import write_file
from bench.core.logcap import open_for_child
from bench.core.procs import stop_process, tied
from bench.lab.exporter import exporter_config, host_devices
from bench.virtual import virtual_fleet

RESTART_DELAY_S = 1.0
PROBE_TIMEOUT_S = 3.0  # how long `lab serve` tries the coordinator before saying it is away


async def coordinator_away(coordinator: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why the coordinator at HOST:PORT takes no TCP connection (None when it does)."""
    host, _, port = coordinator.rpartition(":")
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_connection(host or "127.0.0.1", int(port)), timeout_s)
    except (OSError, ValueError) as exc:
        return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    except TimeoutError:
        return f"no answer in {timeout_s:g} s"
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


def exporter_argv(coordinator: str, host: str, config: Path, address: str | None) -> list[str]:
    """The labgrid-exporter command line (this interpreter's labgrid, so the versions match); a value that
    starts with `-` is refused (ConfigError)."""
    not_option(coordinator, "[lab] coordinator")
    not_option(host, "--host")
    if address:
        not_option(address, "--address")
    argv = [sys.executable, "-m", "labgrid.remote.exporter", "-c", coordinator, "-n", host]
    if address:
        argv += ["--hostname", address]
    return [*argv, str(config)]


async def serve_host(
    fleet: Fleet,
    host: str,
    config_path: Path,
    stop: asyncio.Event,
    *,
    address: str | None = None,
    on_ready: Callable[[dict[str, str]], None] | None = None,
    log_path: Path | None = None,
    warn: Callable[[str], None] | None = None,
) -> None:
    """Serve bench host `host` until `stop` is set; `warn` hears at once when the coordinator is away (the
    exporter is started anyway and restarted until the coordinator answers)."""
    coordinator = fleet.lab.coordinator
    why = await coordinator_away(coordinator)
    if why is not None and warn is not None:
        warn(f"labgrid coordinator {coordinator} is not reachable ({why}); serving anyway, the exporter retries")
    devices = host_devices(fleet, host)
    # served here, so started here; boards listen on `address` so that other hosts reach them
    local = [replace(d, lab=None, listen=address or d.listen) for d in devices if d.virtual]
    async with virtual_fleet(local) as (resolved, _running):
        served = {d.name: d.link for d in resolved if d.link is not None}
        write_file(config_path, exporter_config(fleet, host, served, address), what="exporter folder")
        if on_ready is not None:
            on_ready({name: _address(link) for name, link in served.items()})
        argv = exporter_argv(fleet.lab.coordinator, host, config_path, address)
        log = open_for_child(log_path or config_path.with_suffix(".log"))  # kept open while serving (capped at start)
        try:
            while not stop.is_set():
                proc = await asyncio.create_subprocess_exec(*tied(argv), stdout=log, stderr=log)
                stopped = asyncio.create_task(stop.wait())
                exited = asyncio.create_task(proc.wait())
                await asyncio.wait({stopped, exited}, return_when=asyncio.FIRST_COMPLETED)
                if not exited.done():
                    await stop_process(proc, 5)
                stopped.cancel()
                if not stop.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), RESTART_DELAY_S)
        finally:
            os.close(log)


def _address(link: Link) -> str:
    """Where other hosts reach a served link: a serial port's URL, an SSH target."""
    return link.url if isinstance(link, SerialLink) else link.target if isinstance(link, SshLink) else ""
