"""What probing a device's link saw: a leaf module, so link types, drivers and stand-ins share it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ProbeResult:
    """Whether a device answered on its link, and what was seen."""

    reachable: bool
    detail: str
