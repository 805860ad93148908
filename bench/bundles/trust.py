"""Which public key a device trusts and which private key signs the models it gets: configuration.

The fleet names them: `[bench] trusted_key` (public key PEM, for every device) and `[bench] signing_key`
(private key PEM), and a device may name its own `trusted_key`. The committed development key pair
(fixtures/keys/) is used only where nothing is configured and the device is virtual, or where the user
allowed it for real devices with `--allow-dev-key` (which sets HILBENCH_ALLOW_DEV_KEY=1 for the job); each
such real device gets a warning, since anyone with this repository can sign models it accepts. A virtual
device trusting it is the bundled fleet's normal state and gets none (a warning every night is one nobody reads)."""

from __future__ import annotations

import os
from pathlib import Path

from bench.config.fleet import Device
from bench.core.console import err
from bench.core.errors import ConfigError
from bench.models.signing import DEV_PRIVATE_KEY, DEV_PUBLIC_KEY, load_public_key, public_key_raw

ALLOW_ENV = "HILBENCH_ALLOW_DEV_KEY"
_warned: set[str] = set()


def allow_dev_key() -> None:
    """Allow the development key for real devices in this job (--allow-dev-key)."""
    os.environ[ALLOW_ENV] = "1"


def trusted_key(device: Device) -> Path:
    """The public key `device` is given to trust."""
    return device.trusted_key or _dev_key(device, DEV_PUBLIC_KEY)


def signing_key(device: Device) -> Path:
    """The private key that signs the models `device` gets."""
    return device.signing_key or _dev_key(device, DEV_PRIVATE_KEY)


def check(devices: list[Device]) -> None:
    """Resolve every device's keys now (a ConfigError before any device is touched; the warnings up front)."""
    for device in devices:
        trusted_key(device)
        signing_key(device)


def run_signing_key(devices: list[Device]) -> Path:
    """The one signing key of a job over `devices` (a ConfigError when they are configured with several)."""
    keys = {signing_key(d) for d in devices} or {_dev_key(None, DEV_PRIVATE_KEY)}
    if len(keys) > 1:
        raise ConfigError(f"the selected devices are signed with different keys: {', '.join(map(str, sorted(keys)))}",
                          hint="run them in separate jobs")  # fmt: skip
    return keys.pop()


TRUST_FILES = ("trusted.pub.pem", "trust.key")  # where the host agent and the MicroPython agent keep the key


def refuse_key_downgrade(device: str, name: str, new: bytes, on_device_differs: bool) -> None:
    """A deploy must never put the development key over another key a device already trusts."""
    if name in TRUST_FILES and on_device_differs and is_dev_key(new):
        raise ConfigError(
            f"device {device!r}: it trusts another key than the development key; the deploy would replace it",
            hint="configure the key it trusts as trusted_key in the fleet file (and its signing_key)",
        )


def is_dev_key(data: bytes) -> bool:
    """True when `data` (a PEM file, or the hex a MicroPython board keeps) is the development public key."""
    pem = DEV_PUBLIC_KEY.read_bytes()
    return data.strip() in (pem.strip(), public_key_raw(load_public_key(DEV_PUBLIC_KEY)).hex().encode())


def _dev_key(device: Device | None, path: Path) -> Path:
    name = device.name if device is not None else "(no device)"
    if device is not None and not device.virtual and os.environ.get(ALLOW_ENV) != "1":
        raise ConfigError(
            f"device {name!r}: no trusted_key/signing_key configured, and it is a real device",
            hint="set trusted_key and signing_key in the fleet's [bench] table (trusted_key per device if it "
            "differs), or pass --allow-dev-key to use the committed development key on purpose",
        )
    if device is not None and not device.virtual and name not in _warned:
        _warned.add(name)
        err.print(
            f"[yellow]warning:[/yellow] device {name}: using the committed development key (fixtures/keys): "
            "anyone with this repository can sign models it accepts",
            highlight=False,
        )
    return path
