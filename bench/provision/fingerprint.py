"""A Linux board's OS fingerprint: /etc/os-release, the kernel release, /etc/nv_tegra_release (Jetson) and the
bench's marker file holding the sha256 of the image it wrote. Read in one SSH command; compared with what the
fleet expects; stored with every run so runs are never compared across an OS change without saying so."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from bench.links.ssh import SshConnection

MARKER = "/etc/npc-hil-bench/os-image.sha256"  # written by the bench after a verified write and boot
OS_RELEASE_KEYS = ("ID", "VERSION_ID", "PRETTY_NAME")
_SCRIPT = (
    "echo @os-release; cat /etc/os-release 2>/dev/null; "
    "echo @kernel; uname -r; "
    "echo @tegra; head -n 1 /etc/nv_tegra_release 2>/dev/null; "
    f"echo @marker; cat {MARKER} 2>/dev/null; echo @end"
)


@dataclass(frozen=True)
class Fingerprint:
    """What a board says about its OS."""

    os_release: dict[str, str] = field(default_factory=dict)
    kernel_release: str = ""
    nv_tegra_release: str | None = None
    image_sha256: str | None = None  # the marker file; None when the bench never wrote this OS

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)

    def summary(self) -> str:
        """One line for terminals and logs."""
        name = self.os_release.get("PRETTY_NAME") or self.os_release.get("ID", "?")
        tegra = f", {self.nv_tegra_release.split(',')[0].lstrip('# ')}" if self.nv_tegra_release else ""
        image = f", image {self.image_sha256[:12]}" if self.image_sha256 else ", no bench image marker"
        return f"{name}, kernel {self.kernel_release}{tegra}{image}"


def parse_fingerprint(text: str) -> Fingerprint:
    """Parse the output of the fingerprint command."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("@") and line[1:] in ("os-release", "kernel", "tegra", "marker", "end"):
            current = line[1:]
            sections[current] = []
        elif current is not None and line.strip():
            sections[current].append(line.strip())
    release = dict(line.split("=", 1) for line in sections.get("os-release", []) if "=" in line)
    return Fingerprint(
        os_release={k: release[k].strip('"') for k in OS_RELEASE_KEYS if k in release},
        kernel_release=(sections.get("kernel") or [""])[0],
        nv_tegra_release=(sections.get("tegra") or [None])[0],
        image_sha256=(sections.get("marker") or [None])[0],
    )


async def read_fingerprint(conn: SshConnection) -> Fingerprint:
    """Ask the board (one SSH command)."""
    return parse_fingerprint((await conn.run(_SCRIPT, timeout_s=60)).text)


async def write_marker(conn: SshConnection, sha256: str) -> None:
    """Record on the board which image the bench wrote (after the write was verified and the board booted)."""
    folder = MARKER.rsplit("/", 1)[0]
    await conn.run(f"mkdir -p {folder} && echo {sha256} > {MARKER} && sync", timeout_s=60)


def differences(expected: dict[str, Any], actual: Fingerprint) -> list[str]:
    """What differs between the expected fingerprint (keys: image_sha256, kernel_release, os_release,
    nv_tegra_release) and the board's; empty when it matches."""
    out = []
    if (want := expected.get("image_sha256")) and actual.image_sha256 != want:
        have = actual.image_sha256[:12] if actual.image_sha256 else "none"
        out.append(f"image marker {have} != {want[:12]}")
    if (want := expected.get("kernel_release")) and actual.kernel_release != want:
        out.append(f"kernel {actual.kernel_release or '?'} != {want}")
    for key, want in (expected.get("os_release") or {}).items():
        if actual.os_release.get(key) != want:
            out.append(f"os-release {key} {actual.os_release.get(key)!r} != {want!r}")
    if (want := expected.get("nv_tegra_release")) and not (actual.nv_tegra_release or "").startswith(want):
        out.append(f"nv_tegra_release {actual.nv_tegra_release!r} does not start with {want!r}")
    return out
