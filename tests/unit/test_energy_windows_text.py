"""The report's energy line says where a device's decision windows came from: the inference marker, or the
frames' windows mapped to the bench clock."""

from __future__ import annotations

from dataclasses import dataclass

from bench.measure.energy import ATTRIBUTED, MARKER
from bench.report.view_adapter import _meter


@dataclass
class Stored:
    name: str
    value: float | None
    flags: tuple[str, ...] = ()
    description: str = ""


def _stored(*flags: str) -> list[Stored]:
    return [Stored("energy_session", 1310.0, description="energy over the span; meter: PPK2 at /dev/pts/0"),
            Stored("energy_per_decision_p50", 1.71, flags)]  # fmt: skip


def test_marker_windows_are_named_as_the_marker() -> None:
    meter, why, windows = _meter(_stored(MARKER))
    assert meter == "PPK2 at /dev/pts/0" and why == ""
    assert "inference marker" in windows and "mapped" not in windows


def test_frame_windows_are_named_as_mapped_through_the_clock() -> None:
    _meter_name, _why, windows = _meter(_stored(ATTRIBUTED))
    assert "mapped to the bench clock" in windows and "marker" not in windows


def test_no_meter_no_line() -> None:
    assert _meter([]) == ("", "", "")
