"""Parsers for what power meters print: tegrastats rails, `vcgencmd pmic_read_adc`, hwmon files, and Joulescope
recordings (.jls, read through Joulescope's own reader, pyjls)."""

from __future__ import annotations

import re
from pathlib import Path

from bench.energy.protocol import MeterError, PowerSample
from bench.telemetry.parse import parse_tegrastats

# `vcgencmd pmic_read_adc` (Raspberry Pi 5): `   VDD_CORE_A current(7)=0.71556000A` / `VDD_CORE_V volt(15)=0.88V`
_PMIC = re.compile(r"^\s*(\S+)_([AV])\s+(?:current|volt)\(\d+\)=(-?[0-9.]+)([AV])\s*$")


def tegrastats_power_mw(line: str, rail: str) -> float | None:
    """The power (mW) of `rail` in one tegrastats line; None when the line is not one. MeterError when the line has
    rails but not this one (naming those it has)."""
    values = parse_tegrastats(line)
    rails = {k.removeprefix("power_").removesuffix("_mw"): v for k, v in values.items() if k.startswith("power_")}
    if not rails:
        return None
    if rail.lower() not in rails:
        raise MeterError(f"tegrastats shows no rail {rail!r}",
                         hint=f"rails on this board: {', '.join(r.upper() for r in rails)}")  # fmt: skip
    return rails[rail.lower()]


def pmic_rails(text: str) -> dict[str, tuple[float, float]]:
    """rail -> (current A, voltage V) of every rail `vcgencmd pmic_read_adc` printed both for."""
    amps: dict[str, float] = {}
    volts: dict[str, float] = {}
    for line in text.splitlines():
        if m := _PMIC.match(line):
            (amps if m[2] == "A" else volts)[m[1]] = float(m[3])
    return {rail: (amps[rail], volts[rail]) for rail in amps if rail in volts}


def pmic_power_mw(text: str) -> float:
    """Total power (mW) of the PMIC's rails: the sum of current x voltage (MeterError when none were printed)."""
    rails = pmic_rails(text)
    if not rails:
        raise MeterError("vcgencmd pmic_read_adc printed no rail currents and voltages",
                         hint="is this a Raspberry Pi 5 with firmware from 2023-10 or later?")  # fmt: skip
    return sum(a * v for a, v in rails.values()) * 1000.0


def hwmon_power_mw(
    power_uw: str | None = None, current_ma: str | None = None, voltage: str | float | None = None
) -> float:
    """Power (mW) from hwmon file contents: `power*_input` in uW, or `curr*_input` (mA) times `in*_input` (mV, the
    file's text) or a fixed voltage in mV (a float)."""
    try:
        if power_uw is not None:
            return int(power_uw.strip()) / 1000.0
        if current_ma is None or voltage is None:
            raise MeterError("hwmon: a current file needs a voltage")
        mv = float(voltage) if isinstance(voltage, float) else int(voltage.strip())
        return int(current_ma.strip()) * mv / 1000.0
    except ValueError as exc:
        raise MeterError(f"hwmon: not a sensor reading: {exc}") from None


def read_jls(path: Path, start_ns: int = 0, bin_s: float = 0.001) -> list[PowerSample]:
    """Power samples of a Joulescope recording, averaged into `bin_s` bins by the reader's own statistics: its
    `power` signal, or current x voltage when it has no power signal; sample 0 at `start_ns` on the bench clock."""
    from pyjls import Reader  # Joulescope's own reader of its recording format

    try:
        reader = Reader(str(path))
    except Exception as exc:  # pyjls raises its own RuntimeError for a file that is not a JLS recording
        raise MeterError(f"{path}: not a Joulescope recording: {exc}") from None
    try:
        by_name = {s.name: s for s in reader.signals.values() if s.signal_type == 0}  # fixed sample rate signals
        if "power" in by_name:
            return _bins(reader, by_name["power"], None, start_ns, bin_s, scale=1000.0)
        if "current" in by_name and "voltage" in by_name:
            return _bins(reader, by_name["current"], by_name["voltage"], start_ns, bin_s, scale=1000.0)
        raise MeterError(f"{path}: the recording has no power, or current and voltage, signal",
                         hint=f"signals: {', '.join(by_name) or 'none'}")  # fmt: skip
    finally:
        reader.close()


def _bins(reader, signal, other, start_ns: int, bin_s: float, scale: float) -> list[PowerSample]:
    rate = float(signal.sample_rate)
    step = max(1, round(rate * bin_s))
    count = signal.length // step
    if count == 0:
        return []
    means = reader.fsr_statistics(signal.signal_id, 0, step, count)[:, 0]
    if other is not None:
        means = means * reader.fsr_statistics(other.signal_id, 0, step, count)[:, 0]
    dt_ns = round(step / rate * 1e9)
    return [PowerSample(start_ns + (i + 1) * dt_ns, dt_ns, float(v) * scale) for i, v in enumerate(means)]
