"""Retransmission timing per link: a LAN-tuned default for the bench, RFC 7252 defaults for radio links."""

from __future__ import annotations

from dataclasses import dataclass

from bench.core.errors import ConfigError


@dataclass(frozen=True)
class LinkTiming:
    """CoAP confirmable-message timing (RFC 7252 section 4.8 names).

    The first wait is uniform in [ack_timeout, ack_timeout * ack_random_factor] seconds and doubles on
    each of at most `max_retransmit` retransmissions.
    """

    ack_timeout: float
    ack_random_factor: float = 1.5
    max_retransmit: int = 4

    def __post_init__(self) -> None:
        if not 0.001 <= self.ack_timeout <= 60:
            raise ConfigError(f"link timing: ack_timeout {self.ack_timeout} s is outside 0.001..60 s")
        if not 1.0 <= self.ack_random_factor <= 4.0:
            raise ConfigError(f"link timing: ack_random_factor {self.ack_random_factor} is outside 1..4")
        if not 0 <= self.max_retransmit <= 20:
            raise ConfigError(f"link timing: max_retransmit {self.max_retransmit} is outside 0..20")

    def to_json(self) -> dict[str, float | int]:
        """The form the `update` message and `--json` output carry."""
        return {
            "ack_timeout_ms": round(self.ack_timeout * 1000),
            "ack_random_factor": self.ack_random_factor,
            "max_retransmit": self.max_retransmit,
        }


LAN = LinkTiming(ack_timeout=0.05, ack_random_factor=1.5, max_retransmit=6)
"""Bench default: a wired or loopback link answers in well under a millisecond, so waiting 2 s per lost
datagram (RFC 7252) only measures the timer. 50-75 ms, doubling, 7 tries (worst case ~9 s)."""

RFC7252 = LinkTiming(ack_timeout=2.0, ack_random_factor=1.5, max_retransmit=4)
"""RFC 7252 defaults, for radio links (Thread, Wi-Fi with sleepy devices)."""

LOOPBACK = LinkTiming(ack_timeout=0.02, ack_random_factor=1.5, max_retransmit=5)
"""Virtual devices on the bench machine itself: a dead link is given up on within 1.3-1.9 s."""

PRESETS = {"lan": LAN, "rfc7252": RFC7252, "loopback": LOOPBACK}


def timing_named(name: str) -> LinkTiming:
    """A preset by name, or a ConfigError listing the presets."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown link timing {name!r}", hint=f"use one of {', '.join(PRESETS)}") from None
