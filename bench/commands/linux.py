"""`hilbench linux check|pin|telemetry`: the SSH-reached Linux boards (Jetson Orin NX, Raspberry Pi 5)."""

from __future__ import annotations

import argparse
import asyncio
import shutil
from collections.abc import Awaitable, Callable

from rich.table import Table

from bench.commands import add_device_command, held_devices, selected_devices
from bench.commands.values import float_in
from bench.config.fleet import Device, SshLink
from bench.config.kinds import of_family
from bench.core.console import emit_json, out
from bench.core.errors import BenchError, ConfigError, DeviceUnreachable, ExitCode
from bench.core.stopping import run_stoppable
from bench.devices.linux import LinuxDriver
from bench.lab.acquire import reachable_devices
from bench.telemetry.monitor import summarize


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `linux` command group."""
    linux = sub.add_parser("linux", help="Linux boards over SSH (Jetson Orin NX, Raspberry Pi 5)")
    lsub = linux.add_subparsers(dest="linux_command", required=True)
    check = "connect over SSH and check Python and the tflite runtime (exit 3: unreachable)"
    add_device_command(lsub, "check", check, cmd_check)
    add_device_command(lsub, "pin", "print the devices' SSH host keys as fleet-file lines to pin them", cmd_pin)
    telemetry = "sample temperature, CPU frequency, throttling and memory for a while"
    p = add_device_command(lsub, "telemetry", telemetry, cmd_telemetry)
    p.add_argument(
        "--seconds", type=float_in(0.0, 86400.0, low_open=True), default=5.0, help="how long to sample (default 5)"
    )


def _linux_devices(args: argparse.Namespace) -> list[Device]:
    fleet, devices = selected_devices(args)
    chosen = [d for d in devices if d.kind_info.link is SshLink]
    if not chosen:
        raise ConfigError(
            f"{fleet.path}: no Linux board ({', '.join(of_family(SshLink))}) among the selected devices",
            file=str(fleet.path),
            hint="see `hilbench fleet list`",
        )
    return chosen


async def _check_one(device: Device) -> dict:
    row = {"name": device.name, "kind": device.kind, "link": device.link.target if device.link else None}
    driver = LinuxDriver(device)
    try:
        report = await driver.check()
        row.update(status="ok", python=report.python, machine=report.machine, runtime=report.runtime)
        row["numpy"] = report.numpy
    except DeviceUnreachable as exc:
        row.update(status="unreachable", detail=str(exc))
    except BenchError as exc:
        row.update(status="not ready", detail=str(exc))
    finally:
        await driver.close()
    return row


def _each_board(args: argparse.Namespace, one: Callable[[Device], Awaitable[dict]]) -> list[dict]:
    """The row `one(device)` gives for each selected board, all at once, with the boards held and reachable."""
    devices = _linux_devices(args)

    async def go() -> list[dict]:
        async with reachable_devices(devices) as (resolved, _running):
            return list(await asyncio.gather(*(one(d) for d in resolved)))

    with held_devices(devices, f"linux {args.linux_command}", args.lease_wait):
        return run_stoppable(go())


def cmd_check(args: argparse.Namespace) -> int:
    """Connect to each board and check what the agent needs."""
    rows = _each_board(args, _check_one)
    if args.json:
        emit_json({"devices": rows})
    else:
        table = Table(title="Linux boards")
        for col in ("name", "kind", "status", "python", "runtime", "detail"):
            table.add_column(col, overflow="fold")
        for r in rows:
            colour = {"ok": "green", "unreachable": "red"}.get(r["status"], "yellow")
            table.add_row(
                r["name"],
                r["kind"],
                f"[{colour}]{r['status']}[/{colour}]",
                r.get("python", ""),
                r.get("runtime") or "",
                r.get("detail", ""),
            )
        out.print(table)
    if any(r["status"] == "unreachable" for r in rows):
        return ExitCode.UNREACHABLE
    return ExitCode.OK if all(r["status"] == "ok" for r in rows) else ExitCode.FAILED


async def scan_host_keys(link: SshLink, timeout_s: int = 5) -> list[str]:
    """The device's host keys as `type base64` strings (ssh-keyscan), ed25519 first."""
    if shutil.which("ssh-keyscan") is None:
        raise ConfigError("ssh-keyscan not found", hint="apt-get install openssh-client")
    proc = await asyncio.create_subprocess_exec(
        "ssh-keyscan", "-T", str(timeout_s), "-p", str(link.port), link.host,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    stdout, _ = await proc.communicate()
    keys = []
    for line in stdout.decode().splitlines():
        parts = line.split()
        if len(parts) >= 3 and not line.startswith("#"):
            keys.append(f"{parts[1]} {parts[2]}")
    return sorted(keys, key=lambda k: (not k.startswith("ssh-ed25519"), k))


async def fingerprint(key: str) -> str:
    """SHA256 fingerprint of a public key, as `ssh-keygen -l` prints it (to compare with the device's console)."""
    proc = await asyncio.create_subprocess_exec(
        "ssh-keygen", "-l", "-f", "-",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    stdout, _ = await proc.communicate(key.encode() + b"\n")
    return stdout.decode().split()[1] if stdout.split() else "?"


def cmd_pin(args: argparse.Namespace) -> int:
    """Scan host keys and print `host_key = ...` lines (verify the fingerprint on the device first)."""

    async def one(dev: Device) -> dict:
        if not isinstance(dev.link, SshLink):
            return {"name": dev.name, "error": "no SSH link"}
        keys = await scan_host_keys(dev.link)
        if not keys:
            return {"name": dev.name, "error": f"no host key from {dev.link.host}:{dev.link.port}"}
        return {"name": dev.name, "host_key": keys[0], "fingerprint": await fingerprint(keys[0])}

    rows = _each_board(args, one)
    if args.json:
        emit_json({"devices": rows})
    else:
        for r in rows:
            if "error" in r:
                out.print(f"[red]{r['name']}: {r['error']}[/red]")
                continue
            check = "ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub"
            out.print(f"# {r['name']}: {r['fingerprint']} (compare on the device: {check})", highlight=False)
            out.print(f'host_key = "{r["host_key"]}"', highlight=False, soft_wrap=True)
    return ExitCode.UNREACHABLE if any("error" in r for r in rows) else ExitCode.OK


def cmd_telemetry(args: argparse.Namespace) -> int:
    """Sample each board's telemetry for --seconds and print min/mean/max."""

    async def one(dev: Device) -> dict:
        driver = LinuxDriver(dev)
        try:
            monitor = await driver.telemetry()
            async with monitor:
                await asyncio.sleep(args.seconds)
            return {"name": dev.name, "samples": len(monitor.samples), "summary": summarize(monitor.samples)}
        finally:
            await driver.close()

    rows = _each_board(args, one)
    if args.json:
        emit_json({"devices": rows})
        return ExitCode.OK
    for r in rows:
        table = Table(title=f"{r['name']}: {r['samples']} samples")
        for col in ("value", "min", "mean", "max", "unit"):
            table.add_column(col)
        for name, s in sorted(r["summary"].items()):
            table.add_row(name, f"{s['min']:.1f}", f"{s['mean']:.1f}", f"{s['max']:.1f}", s["unit"])
        out.print(table)
    return ExitCode.OK
