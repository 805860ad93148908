"""Virtual ESP32-C6 board that the real esptool and mpremote accept (one process per board).

`VirtualEsp32c6(device, state_dir)` starts `python -m bench.virtual.esp32c6` and reads its URLs.
Its link is RFC 2217: DTR/RTS reach the chip as the device's `usb` setting says (a USB-UART bridge's
auto-reset circuit, or the chip's own USB-Serial-JTAG port); its virtual PPK2's logic input `logic_channel` is wired
to the board's `marker_gpio`;
`urls()` also gives `socket://` and a pty path, and `control` (power-cycle, hold in reset, ...).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
from pathlib import Path

from bench.config.fleet import Device, SerialLink
from bench.config.kinds import Esp32c6Settings, runs_counted
from bench.core.errors import ConfigError, DeviceUnreachable
from bench.core.logcap import open_for_child
from bench.core.procs import stop_process, tied
from bench.energy.spec import Ppk2Settings
from bench.virtual.esp32c6.control import control_request
from bench.virtual.esp32c6.efuse import parse_mac
from bench.virtual.esp32c6.supply import MODELLED_COUNTED, MODELLED_VM
from bench.virtual.esp32c6.wifi import GATEWAY

START_TIMEOUT_S = 20.0
GRANT_TIMEOUT_S = 2.0  # a grant is a loopback request the board answers at once; the update path waits this at most


def logic_wiring(device: Device) -> dict[int, int]:
    """The virtual PPK2's logic inputs wired to the board's GPIOs (channel -> GPIO): the meter's `logic_channel` to
    the device's `marker_gpio`, as on a bench where a jumper wire joins them."""
    meter = device.energy.settings if device.energy is not None else None
    channel = meter.logic_channel if isinstance(meter, Ppk2Settings) else None
    pin = device.settings.marker_gpio if isinstance(device.settings, Esp32c6Settings) else None
    return {channel: pin} if channel is not None and pin is not None else {}


def default_mac(name: str) -> str:
    """A stable, locally administered MAC for a device without a configured one."""
    digest = hashlib.sha256(name.encode()).digest()
    return ":".join(f"{b:02x}" for b in (0x02, 0x55, *digest[:4]))


class VirtualEsp32c6:
    """A virtual ESP32-C6 for one fleet device, served by a child process."""

    def __init__(self, device: Device, state_dir: Path, *, wire_speed: bool | None = None) -> None:
        if not isinstance(device.settings, Esp32c6Settings):
            raise ConfigError(f"device {device.name!r}: kind {device.kind!r} is not an ESP32-C6: no virtual C6 for it")
        self.device = device
        self.settings: Esp32c6Settings = device.settings
        self.state_dir = state_dir
        self.mac = device.mac or default_mac(device.name)
        try:
            parse_mac(self.mac)
        except ValueError as exc:
            raise ConfigError(f"device {device.name!r}: field 'mac': {exc}") from None
        self.wire_speed = self.settings.wire_speed if wire_speed is None else wire_speed
        self._proc: asyncio.subprocess.Process | None = None
        self._urls: dict[str, str] = {}
        self._uplinks: list[int] = []  # the host ports its Wi-Fi may reach (bench.virtual.uplinks)

    async def start(self) -> SerialLink:
        """Start the board process; return its RFC 2217 link."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        argv = [
            sys.executable,
            "-m",
            "bench.virtual.esp32c6",
            "--name",
            self.device.name,
            "--state",
            str(self.state_dir),
            "--mac",
            self.mac,
            "--flash-size",
            str(self.settings.flash_size),
            "--usb",
            self.settings.usb,
        ]
        if self.wire_speed:
            argv.append("--wire-speed")
        argv += [f"--logic-input={channel}={pin}" for channel, pin in logic_wiring(self.device).items()]
        if self.device.listen:  # set by `hilbench lab serve --address`: reachable from other hosts
            argv += ["--host", self.device.listen]
        argv += ["--log", str(self.state_dir / "board.log")]
        log = open_for_child(self.state_dir / "board.log")  # until the board takes its log over (capped)
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *tied(argv), stdout=asyncio.subprocess.PIPE, stderr=log, start_new_session=True
            )
        finally:
            os.close(log)
        assert self._proc.stdout is not None
        try:
            line = await asyncio.wait_for(self._proc.stdout.readline(), START_TIMEOUT_S)
            self._urls = json.loads(line)
        except (TimeoutError, ValueError):
            await self.stop()
            raise DeviceUnreachable(
                f"virtual board {self.device.name!r} did not start",
                hint=f"see {self.state_dir / 'board.log'}",
            ) from None
        return SerialLink(url=self._urls["rfc2217"], baud=self.settings.baud)

    async def stop(self) -> None:
        """Stop the board process (its flash file stays)."""
        proc, self._proc = self._proc, None
        await stop_process(proc, 5)

    async def kill(self) -> None:
        """Cut power abruptly (SIGKILL): what a board does when unplugged mid-write."""
        if self._proc is not None and self._proc.returncode is None:
            self._proc.kill()
            await self._proc.wait()
        self._proc = None

    def grant_uplinks(self, ports: list[int]) -> None:
        """Its Wi-Fi reaches exactly `ports` on the host's loopback from now on (a blocking loopback request)."""
        if sorted(ports) != self._uplinks and "control" in self._urls:
            control_request(self._urls["control"], "uplinks", GRANT_TIMEOUT_S, ports=list(ports))
            self._uplinks = sorted(ports)

    def revoke_uplinks(self, ports: list[int]) -> None:
        """Its Wi-Fi no longer reaches `ports`."""
        if set(ports) & set(self._uplinks) and "control" in self._urls:
            control_request(self._urls["control"], "uplinks", GRANT_TIMEOUT_S, revoke=list(ports))
            self._uplinks = sorted(set(self._uplinks) - set(ports))

    def urls(self) -> dict[str, str]:
        """rfc2217, socket, pty and control URLs of the running board."""
        return dict(self._urls)

    @property
    def host_address(self) -> str | None:
        """Where its agent reaches the bench host: the counted core's Wi-Fi gateway (None: the host-clock VM is a
        host process, on the host's own loopback)."""
        return GATEWAY if runs_counted(self.settings.firmware, True) else None

    @property
    def meter_modelled(self) -> str:
        """What its virtual PPK2's figures are modelled from: the counted core's cycles, or the unix-port VM's CPU
        time (bench.virtual.esp32c6.supply)."""
        return MODELLED_COUNTED if runs_counted(self.settings.firmware, True) else MODELLED_VM

    async def control(self, op: str) -> dict:
        """One control API request (power_cycle, hold_reset, boot, download, status, log)."""
        return await asyncio.to_thread(control_request, self._urls["control"], op)
