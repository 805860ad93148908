"""What ran on a device in a run, so a verdict can say what changed against its baseline.

Per device: the model the agent announced (name, version, sha256, format), the agent and its runtime (as
the agent's hello reports them), a hash of the agent bundle the bench deployed, the firmware image's sha256
(kinds that flash one), whether the device is virtual; per run: the bench's git revision and the bench host."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from bench.bundles import HOST_FILES, OPTIONAL, PORTABLE
from bench.bundles.c6_firmware import device_firmware
from bench.config.fleet import Device, QemuLink
from bench.config.kinds import MICROPYTHON_AGENT, WEB_AGENT
from bench.core.errors import BenchError
from bench.core.paths import HOST_DIR, MICROPYTHON_DIR, MODELS_DIR, WEB_DIR

# fingerprint field -> how the report names it
FIELDS = {
    "model_sha256": "model sha256",
    "model": "model",
    "agent": "agent",
    "runtime": "runtime",
    "platform": "platform",
    "agent_bundle": "agent bundle",
    "firmware_sha256": "firmware sha256",
    "os_image": "OS image sha256",
    "os_kernel": "kernel",
    "os_release": "OS",
    "git_rev": "bench git rev",
    "host": "bench host",
}


def device_fingerprint(
    device: Device,
    hello: dict[str, Any],
    *,
    git_rev: str | None,
    host: str,
    os: dict[str, Any] | None = None,
    latency_clock: str | None = None,
) -> dict[str, Any]:
    """The fingerprint of `device` from the agent's hello message (its `agent` info in the results store), and
    for a Linux board with an OS image the OS fingerprint its flash step read (bench.provision.fingerprint);
    `latency_clock` is the clock the run's latency figures are on ("bench", "device" or None: none stored)."""
    model = hello.get("model") or {}
    label = f"{model.get('name', '?')}@{model.get('version', '?')} ({model.get('format', '?')})"
    out: dict[str, Any] = {
        "model_sha256": model.get("sha256"),
        "model": label if model else None,
        "agent": f"{hello.get('agent', '?')} {hello.get('version', '')}".strip() if hello else None,
        "runtime": hello.get("runtime"),
        "platform": hello.get("platform"),
        "agent_bundle": agent_bundle_hash(device),
        "firmware_sha256": firmware_sha256(device),
        "virtual": device.virtual,
        "clock": device_clock(device, hello),
        "latency_clock": latency_clock,
        "git_rev": git_rev,
        "host": host,
    }
    if os:
        out["os_image"] = os.get("image_sha256")
        out["os_kernel"] = os.get("kernel_release")
        out["os_release"] = (os.get("os_release") or {}).get("PRETTY_NAME")
    return out


# agent platforms that are an emulator on a host, in the host's real time: MicroPython's unix port (a virtual
# ESP32-C6 board; the chip's own port says "micropython-esp32")
REALTIME_EMULATOR_PLATFORMS = ("micropython-linux",)


def device_clock(device: Device, hello: dict[str, Any]) -> str:
    """The clock a device runs on: "icount" or "realtime" for an emulated machine, else "real time". From the
    link (a QEMU console), from the `/qemu-<timing>` the agent's platform names (an emulated board behind SSH), or
    from a platform that is an emulator running in real time (REALTIME_EMULATOR_PLATFORMS)."""
    timing = device.link.timing if isinstance(device.link, QemuLink) else None
    platform = str(hello.get("platform") or "")
    if not timing and "/qemu-" in platform:
        timing = platform.rsplit("/qemu-", 1)[1]
    if not timing and platform in REALTIME_EMULATOR_PLATFORMS:
        timing = "realtime"
    return timing or "real time"


def agent_bundle_hash(device: Device) -> str:
    """sha256 over the reference agent's source files the bench deploys to this kind of device (short)."""
    return agent_bundle_files(device)[0]


def agent_bundle_files(device: Device) -> tuple[str, list[Path]]:
    """The agent bundle's hash (sha256 over its source files, short) and the files, for this kind of device."""
    runtime = device.kind_info.runtime
    mcu = runtime == MICROPYTHON_AGENT
    folder = MICROPYTHON_DIR if mcu else HOST_DIR
    files = [p for p, _ in PORTABLE + OPTIONAL]
    files += sorted(folder.glob("*.py")) if mcu else [folder / f for f in HOST_FILES]
    if runtime == WEB_AGENT:  # web pages run the JS agent (docs/web.md)
        files = [*sorted((WEB_DIR / "agent").glob("*.js")), WEB_DIR / "index.html", WEB_DIR / "package-lock.json"]
    present = [path for path in files if path.is_file()]
    digest = hashlib.sha256()
    for path in present:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16], present


def firmware_sha256(device: Device) -> str | None:
    """sha256 of the firmware image flashed to the device (None for kinds that flash none: `Kind.firmware`)."""
    try:
        path = device_firmware(device)
        return None if path is None else hashlib.sha256(path.read_bytes()).hexdigest()
    except (OSError, BenchError):  # not built or not readable: the flash that needs it says why
        return None


def changes(current: dict[str, Any], baseline: dict[str, Any] | None) -> list[str]:
    """What differs between two fingerprints of a device, in words ("model sha256 3f2a… -> 9b1c…")."""
    if baseline is None:
        return []
    out = []
    for key, label in FIELDS.items():
        old, new = baseline.get(key), current.get(key)
        if old != new and key != "host":
            out.append(f"{label} {_short(old)} -> {_short(new)}")
    return out


def _short(value: Any) -> str:
    text = "-" if value is None else str(value)
    return text[:8] + "…" if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else text


def configured_model_sha256(device: Device) -> str | None:
    """sha256 of the model file the fleet configures for `device` (None when it cannot be resolved)."""
    from bench.models import kind_model

    try:
        path, _ = kind_model(device.kind, device.settings, MODELS_DIR)
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except (BenchError, OSError):
        return None
