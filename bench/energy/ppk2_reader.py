"""Read a Nordic PPK2 through ppk2-api in a process of its own, and print its samples averaged into bins.

    python -m bench.energy.ppk2_reader --port /dev/ttyACM3 --voltage-mv 3300 --mode source --bin-us 1000 \
        [--logic-channel 0]

ppk2-api decodes each of the PPK2's 100 000 samples a second in Python; in the bench's own process that work
would hold the interpreter lock against the replayer's timing, so it runs here. The first line is JSON
(`{"ok": true, "hw": ...}` or `{"error": ...}`); then one line per bin: `@ END_NS DT_NS CURRENT_UA` (ppk2-api prints
its own remarks to stdout too; those lines have no `@`), END_NS on the
bench clock (CLOCK_MONOTONIC, shared by every process of the host). The PPK2 samples on its own crystal, so
sample k is placed at t_first + k x 10 us, t_first taken from when the first samples arrived.

With `--logic-channel N` a bin also ends at every edge of the logic input DN, and each line ends with that input's
level over the bin (`@ END_NS DT_NS CURRENT_UA LEVEL`): the bins of a high run are exactly its samples.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Callable
from itertools import groupby

SAMPLE_NS = 10_000  # 100 kS/s
DRAIN_S = 20.0  # at most this long reading away an earlier measurement's samples
SILENCE_S = 0.5  # the line is quiet once nothing arrived for this long (a busy host pauses a virtual meter)
METADATA_TRIES = 3  # asks for the calibration metadata before the meter counts as not answering
POLL_S = 0.0005  # a pty hands out at most 4 KiB a read: poll often enough to keep up with 400 kB/s


def drain(ppk, take: Callable[[tuple[list[float], list[int]]], None] | None = None) -> None:
    """Read what the PPK2 sends until the line is silent for SILENCE_S (at most DRAIN_S), giving each piece's decoded
    samples to `take` (None: dropped)."""
    deadline = time.monotonic() + DRAIN_S
    last = time.monotonic()
    while time.monotonic() < deadline:
        data = ppk.get_data()
        if data:
            if take is not None:
                take(ppk.get_samples(data))
            last = time.monotonic()
        elif time.monotonic() - last >= SILENCE_S:
            return
        else:
            time.sleep(POLL_S)


def quiet(ppk) -> None:
    """Stop a measurement an earlier reader left running and read away what it had queued, so the metadata reply is
    read alone (ppk2-api decodes whatever is waiting as text). Read, not the kernel's buffer discarded now and then:
    a reader that fell behind may have left up to a minute of samples queued."""
    ppk.stop_measuring()
    drain(ppk)


def calibration(ppk) -> bool:
    """Read the meter's calibration metadata (ppk2-api keeps it), quieting the line before each ask. ppk2-api reads
    the reply for half a second; a busy host can hold it longer, and then the next ask's quieting reads it away."""
    for _ in range(METADATA_TRIES):
        quiet(ppk)
        try:
            if ppk.get_modifiers():
                return True
        except UnicodeDecodeError:  # samples still streaming from an earlier measurement that was never stopped
            pass
    return False


class Bins:
    """Samples averaged into bins of `per_bin`; given the logic levels, a bin also ends where the level changes."""

    def __init__(self, per_bin: int) -> None:
        self.per_bin = per_bin
        self._values: list[float] = []  # the open bin's samples
        self._level: int | None = None  # and their level

    def add(self, values: list[float], levels: list[int] | None) -> list[tuple[int, float, int | None]]:
        """(samples, mean, level) of each bin that `values` (with their `levels`, or None) complete."""
        out = []
        runs = [(None, len(values))] if levels is None else [(k, sum(1 for _ in g)) for k, g in groupby(levels)]
        start = 0
        for level, count in runs:
            if self._values and level != self._level:  # an edge: the open bin ends at it
                out.append((len(self._values), sum(self._values) / len(self._values), self._level))
                self._values = []
            self._level = level
            self._values += values[start : start + count]
            start += count
            while len(self._values) >= self.per_bin:
                chunk, self._values = self._values[: self.per_bin], self._values[self.per_bin :]
                out.append((self.per_bin, sum(chunk) / self.per_bin, level))
        return out


class BinPrinter:
    """Prints bins as `@ END_NS DT_NS CURRENT_UA [LEVEL]` lines: END_NS on the meter's sample timeline, whose start is
    the monotonic time the first samples arrived, less their length."""

    def __init__(self, bins: Bins, channel: int | None) -> None:
        self.bins = bins
        self.channel = channel
        self.first_ns: int | None = None
        self.index = 0  # samples binned so far

    def write(self, decoded: tuple[list[float], list[int]]) -> None:
        """Bin one piece of ppk2-api's decoded samples (values, logic bytes) and print the bins it completes."""
        samples, logic = decoded
        if self.first_ns is None:
            self.first_ns = time.monotonic_ns() - len(samples) * SAMPLE_NS
        levels = None if self.channel is None else [b >> self.channel & 1 for b in logic]
        lines = []
        for count, mean, level in self.bins.add(samples, levels):
            self.index += count
            lines.append(f"@ {self.first_ns + self.index * SAMPLE_NS} {count * SAMPLE_NS} {mean:.3f}"
                         + ("" if level is None else f" {level}"))  # fmt: skip
        if lines:
            sys.stdout.write("\n".join(lines) + "\n")
            sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    """Open, configure and stream the PPK2 until SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m bench.energy.ppk2_reader", description=__doc__)
    parser.add_argument("--port", required=True)
    parser.add_argument("--voltage-mv", type=int, default=3300)
    parser.add_argument("--mode", choices=("source", "ampere"), default="source")
    parser.add_argument("--bin-us", type=int, default=1000)
    parser.add_argument("--logic-channel", type=int, choices=range(8), help="end bins at this logic input's edges")
    args = parser.parse_args(argv)
    from ppk2_api.ppk2_api import PPK2_API

    try:
        ppk = PPK2_API(args.port, timeout=1, write_timeout=1)
    except Exception as exc:  # pyserial's SerialException, or OSError for a missing port
        print(json.dumps({"error": f"cannot open {args.port}: {exc}"}), flush=True)
        return 3
    if not calibration(ppk):
        print(json.dumps({"error": f"{args.port}: no PPK2 answered (no calibration metadata)"}), flush=True)
        return 3
    if args.mode == "source":
        ppk.use_source_meter()
    else:
        ppk.use_ampere_meter()
    ppk.set_source_voltage(args.voltage_mv)
    if args.mode == "source":
        ppk.toggle_DUT_power("ON")
    print(json.dumps({"ok": True, "hw": ppk.modifiers.get("HW")}), flush=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    out = BinPrinter(Bins(max(1, args.bin_us * 1000 // SAMPLE_NS)), args.logic_channel)
    ppk.start_measuring()
    while not stop:
        data = ppk.get_data()
        if data:
            out.write(ppk.get_samples(data))
        else:
            time.sleep(POLL_S)
    # the samples made before the stop are the measured window's end: a reader behind on a busy host reads them
    # too, as a host reads what a real PPK2 sent before it stopped
    ppk.stop_measuring()
    drain(ppk, out.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
