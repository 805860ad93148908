"""How a device's figures are timed, read from its stored fingerprint (`clock`, `latency_clock`, `platform`): the
verdicts choose floors by it and the report labels figures by it."""

from __future__ import annotations

# how a device is timed (device_timing): the report's `clocks` values
REAL_TIMING, EMULATED_TIMING, GUEST_TIMING, ICOUNT_TIMING = "", "realtime", "guest", "icount"
COUNTED_TIMING = "counted"  # a microcontroller's firmware on an instruction-counted core, replayed on its clock
MCU_PLATFORM = "micropython-"  # the MicroPython agent's platform prefix (npc_agent.py hello)


def device_timing(clock: str | None, latency_clock: str | None, platform: str | None = None) -> str:
    """How a device's figures are timed, from its fingerprint's `clock`, `latency_clock` and `platform`: a
    microcontroller's firmware on a counted core replayed on its clock (COUNTED_TIMING), on the guest's clock end
    to end (GUEST_TIMING), an icount guest without latency figures (ICOUNT_TIMING), an emulator in real time
    (EMULATED_TIMING), or a real board's clocks (REAL_TIMING)."""
    if clock == "icount":
        if latency_clock != "device":
            return ICOUNT_TIMING
        return COUNTED_TIMING if (platform or "").startswith(MCU_PLATFORM) else GUEST_TIMING
    return EMULATED_TIMING if clock == "realtime" else REAL_TIMING


def fingerprint_timing(fingerprint: dict) -> str:
    """device_timing of a stored fingerprint."""
    return device_timing(fingerprint.get("clock"), fingerprint.get("latency_clock"), fingerprint.get("platform"))
