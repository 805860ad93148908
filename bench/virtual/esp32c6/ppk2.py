"""A virtual Nordic Power Profiler Kit II on its own pty, measuring the virtual board's supply.

It speaks the PPK2's serial protocol as `ppk2-api` (IRNAS/ppk2-api-python) and the nRF Connect Power Profiler
use it: one-byte opcodes with their arguments (GET_META_DATA 0x19 -> the calibration text ending in `END`,
REGULATOR_SET 0x0d hi lo, SET_POWER_MODE 0x11 1|2 (ampere / source meter), DEVICE_RUNNING_SET 0x0c 0|1,
AVERAGE_START 0x06, AVERAGE_STOP 0x07), and while measuring streams 100 000 samples a second: little-endian
32-bit words of a 14-bit ADC value (bits 0-13), the measurement range (bits 14-16) and the eight logic inputs
(bits 24-31). The calibration it reports is ideal (no offsets, unit gains), so current = code * 4 * 1.8 V / 163840 /
R[range].

Each span of the supply (bench.virtual.esp32c6.supply) becomes as many samples as fit its length, the fraction
carried to the next in whole quarter nanoseconds, so sample k is at the first span's start + k x 10 us on the
supply's timeline; the ADC codes are dithered between the two nearest so that their mean is the span's current.
On the counted core that timeline is the chip's counted clock: the meter's samples, and the edges of its logic
inputs, are where the firmware's counted cycles put them ("modelled from counted cycles and the datasheet's
currents"). A logic input wired to a GPIO (`wiring`, channel -> GPIO) reads that GPIO's output level.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import struct

from bench.virtual.esp32c6.supply import Span, Supply
from bench.virtual.port_access import open_serial_pty

SAMPLE_RATE = 100_000  # samples/s: the PPK2's fixed rate
SAMPLE_Q = 4_000_000_000 // SAMPLE_RATE  # one sample in quarter nanoseconds (10 us)
LOGIC_CHANNELS = 8  # D0-D7
RESISTORS = (1031.64, 101.65, 10.15, 0.94, 0.043)  # ohms of the five ranges (the PPK2's nominal shunts)
ADC_MULT = 1.8 / 163840  # what ppk2-api multiplies the (code * 4) by
CODE_MAX = (1 << 14) - 1
RANGE_HEADROOM = 0.9  # a range is used up to this share of its full scale
MAX_BUFFER = 4 * SAMPLE_RATE * 60  # a minute of samples queued for a reader that falls behind (ppk2-api decodes
# in Python: on a loaded host it lags), so that sample k stays at k x 10 us; past that the oldest are lost

# opcode -> bytes of arguments that follow it
ARGUMENTS = {0x01: 3, 0x02: 1, 0x03: 1, 0x04: 1, 0x05: 0, 0x06: 0, 0x07: 0, 0x08: 1, 0x09: 1, 0x0A: 0, 0x0C: 1,
             0x0D: 2, 0x0E: 1, 0x0F: 1, 0x11: 1, 0x12: 1, 0x15: 0, 0x16: 0, 0x19: 0, 0x20: 0, 0x25: 5}  # fmt: skip
GET_META_DATA, REGULATOR_SET, SET_POWER_MODE, DEVICE_RUNNING_SET = 0x19, 0x0D, 0x11, 0x0C
AVERAGE_START, AVERAGE_STOP, RESET = 0x06, 0x07, 0x20
VDD_BASE_MV, VDD_OFFSET = 800, 32  # REGULATOR_SET's encoding: mV = 800 + (hi - 3) * 256 + lo - 32


def metadata(vdd_mv: int, mode: int) -> bytes:
    """The calibration text GET_META_DATA answers, in the firmware's `KEY: VALUE` lines ending with END."""
    lines = ["Calibrated: 0"]
    lines += [f"R{i}: {r:.4f}" for i, r in enumerate(RESISTORS)]
    for key, value in (("GS", 0.0), ("GI", 1.0), ("O", 0.0), ("S", 0.0), ("I", 0.0), ("UG", 1.0)):
        lines += [f"{key}{i}: {value:.4f}" for i in range(5)]
    lines += ["HW: 9173", "IA: 56", f"mode: {mode}", f"VDD: {vdd_mv}", "END", ""]
    return "\n".join(lines).encode()


def encode(current_ua: float, count: int, logic: int = 0) -> bytes:
    """`count` samples whose decoded mean is `current_ua`: the lowest range that holds it, two codes dithered; the
    logic inputs' levels `logic` (bit n: Dn) in each."""
    amps = max(current_ua, 0.0) / 1e6
    rng = next((i for i, r in enumerate(RESISTORS) if amps * r / ADC_MULT / 4 <= CODE_MAX * RANGE_HEADROOM), 4)
    exact = min(amps * RESISTORS[rng] / ADC_MULT / 4, CODE_MAX)
    low = int(exact)
    high_n = round((exact - low) * count)
    word_low = struct.pack("<I", low | rng << 14 | logic << 24)
    word_high = struct.pack("<I", min(low + 1, CODE_MAX) | rng << 14 | logic << 24)
    return word_low * (count - high_n) + word_high * high_n


def logic_bits(gpio: int, wiring: dict[int, int]) -> int:
    """The logic inputs' levels (bit n: Dn) for the GPIO output levels `gpio`, each channel wired to a GPIO."""
    return sum(1 << channel for channel, pin in wiring.items() if gpio >> pin & 1)


class VirtualPpk2:
    """The meter: a pty whose path `ppk2-api` opens; measures the board's supply while AVERAGE_START is on. Its logic
    inputs are wired to the board's GPIOs as `wiring` says (channel -> GPIO)."""

    def __init__(self, supply: Supply, wiring: dict[int, int] | None = None) -> None:
        self.supply = supply
        self.wiring = dict(wiring or {})
        self.master, self.slave, self.path = open_serial_pty()
        self.vdd_mv = 3300
        self.mode = 2  # 1 ampere meter, 2 source meter
        self.dut_power = True
        self.measuring = False
        self._starting = False  # told to measure; measuring from the supply's next tick (Supply.watch)
        self._sent = (0, 0.0)  # samples and their charge (uA x samples) of the last measurement
        self._phase_q = 0  # time of the supply not yet a whole sample (quarter ns)
        self._inbox = bytearray()
        self._out = bytearray()
        self._writing = False
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.master, self._read)
        supply.listeners.append(self._on_span)

    def status(self) -> dict[str, object]:
        """What the meter is set to, and what it measured over its last measurement window: the samples' time (s),
        charge (uC) and mean current (uA)."""
        mode = "source" if self.mode == 2 else "ampere"
        measuring = self.measuring or self._starting
        out: dict[str, object] = {"path": self.path, "vdd_mv": self.vdd_mv, "measuring": measuring,
                                  "mode": mode, "dut_power": self.dut_power}  # fmt: skip
        out["refused_events"] = self.supply.refused  # ring events not the firmware's: left out of the samples
        out["stream_faults"] = self.supply.faults
        count, charge = self._sent
        if count:
            out["window"] = {"samples": count, "seconds": count / SAMPLE_RATE, "charge_uc": charge / SAMPLE_RATE,
                             "mean_ua": charge / count}  # fmt: skip
        return out

    def _read(self) -> None:
        try:
            data = os.read(self.master, 4096)
        except OSError:
            return
        self._inbox += data
        self._read_commands()

    def _read_commands(self) -> None:
        """Act on the whole commands waiting (in one pass: a flood of bytes costs its length, not its square)."""
        pos = 0
        while pos < len(self._inbox):
            need = 1 + ARGUMENTS.get(self._inbox[pos], 0)
            if len(self._inbox) - pos < need:
                break
            self._command(bytes(self._inbox[pos : pos + need]))
            pos += need
        del self._inbox[:pos]

    def _command(self, cmd: bytes) -> None:
        op = cmd[0]
        if op == GET_META_DATA:
            # a reader starting: what a stopped measurement left queued for a reader that fell behind is not its (a
            if not (self.measuring or self._starting):  # real one's host buffer is per connection)
                self._out.clear()
            self._send(metadata(self.vdd_mv, self.mode))
        elif op == REGULATOR_SET:
            self.vdd_mv = VDD_BASE_MV + (cmd[1] - 3) * 256 + cmd[2] - VDD_OFFSET
        elif op == SET_POWER_MODE:
            self.mode = cmd[1]
        elif op == DEVICE_RUNNING_SET:
            self.dut_power = bool(cmd[1])
        elif op == AVERAGE_START:
            if self.measuring:  # started again: a new window
                self._sent, self._phase_q = (0, 0.0), 0
            elif not self._starting:
                self._starting = True
                self.supply.watch(self._begin)
        elif op in (AVERAGE_STOP, RESET):  # a stopped PPK2 makes no more samples; those already made still reach
            if self.measuring or self._starting:  # the reader that stopped it
                self.supply.unwatch()
            self.measuring = self._starting = False

    def _begin(self) -> None:
        """The supply has given the stretch before the start: the samples begin here."""
        if self._starting:
            self._starting = False
            self.measuring, self._sent, self._phase_q = True, (0, 0.0), 0

    def _on_span(self, span: Span) -> None:
        if not self.measuring:
            return
        count, self._phase_q = divmod(self._phase_q + max(0, span.dt_q), SAMPLE_Q)
        # in source-meter mode the PPK2 is the supply: with DUT power off nothing flows
        current = span.current_ua if (self.mode != 2 or self.dut_power) else 0.0
        sent, charge = self._sent
        self._sent = (sent + count, charge + current * count)
        # more samples than the buffer holds would only push each other out: the last MAX_BUFFER's worth are made
        self._send(encode(current, min(count, MAX_BUFFER // 4), logic_bits(span.gpio, self.wiring)))

    def _send(self, data: bytes) -> None:
        self._out += data
        if len(self._out) > MAX_BUFFER:  # the reader fell behind: the oldest samples are lost, as on USB
            drop = (len(self._out) - MAX_BUFFER) // 4 * 4
            del self._out[:drop]
        self._flush()

    def _flush(self) -> None:
        while self._out:
            try:
                sent = os.write(self.master, self._out[:65536])
            except BlockingIOError:
                break
            except OSError:
                self._out.clear()
                break
            del self._out[:sent]
        if self._out and not self._writing:
            self._loop.add_writer(self.master, self._flush)
            self._writing = True
        elif not self._out and self._writing:
            self._loop.remove_writer(self.master)
            self._writing = False

    def close(self) -> None:
        """Remove the pty."""
        with contextlib.suppress(ValueError):
            self.supply.listeners.remove(self._on_span)
        if self.measuring or self._starting:
            self.supply.unwatch()
        self._loop.remove_reader(self.master)
        if self._writing:
            self._loop.remove_writer(self.master)
        os.close(self.master)
        os.close(self.slave)
