"""The virtual fleet's USB hubs: which virtual board sits behind which hub port, for the stand-in `uhubctl`
(host_tools/uhubctl). One file per port, `state_dir()/usb-hubs/LOCATION/PORT`, holding the board's control URL."""

from __future__ import annotations

import contextlib
from pathlib import Path

from bench.config.fleet import Device
from bench.core.folders import write_file

UHUBCTL = Path(__file__).resolve().parent / "host_tools" / "uhubctl"


def _port_file(base: Path, device: Device) -> Path | None:
    spec = device.power
    if spec is None or spec.driver != "uhubctl":
        return None
    return base / "usb-hubs" / spec.settings.location / str(spec.settings.port)  # type: ignore[attr-defined]


def plug(base: Path, device: Device, control_url: str | None) -> None:
    """Put `device`'s virtual board behind its hub port (when its power is a uhubctl port and it has a control API)."""
    path = _port_file(base, device)
    if path is None or not control_url:
        return
    # the URL holds the board's control token: the bench's to read, nobody else's
    write_file(path, control_url + "\n", what="USB hub folder", mode=0o600)


def unplug(base: Path, device: Device) -> None:
    """Take `device`'s virtual board off its hub port."""
    path = _port_file(base, device)
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
