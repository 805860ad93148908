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
from itertools import groupby

SAMPLE_NS = 10_000  # 100 kS/s
DRAIN_S = 20.0  # at most this long reading away an earlier measurement's samples
SILENCE_S = 0.1  # the line is quiet once nothing arrived for this long
POLL_S = 0.0005  # a pty hands out at most 4 KiB a read: poll often enough to keep up with 400 kB/s


def quiet(ppk) -> None:
    """Stop a measurement an earlier reader left running and read away what it had queued until the line is silent,
    so the metadata reply is read alone (ppk2-api decodes whatever is waiting as text). Reading, not discarding the
    kernel's buffer now and then: a reader that fell behind may have left up to a minute of samples queued."""
    ppk.stop_measuring()
    deadline = time.monotonic() + DRAIN_S
    last = time.monotonic()
    while time.monotonic() < deadline:
        waiting = ppk.ser.in_waiting
        if waiting:
            ppk.ser.read(waiting)
            last = time.monotonic()
        elif time.monotonic() - last >= SILENCE_S:
            return
        else:
            time.sleep(0.01)


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
    quiet(ppk)
    try:
        found = ppk.get_modifiers()
    except UnicodeDecodeError:  # samples still streaming from an earlier measurement that was never stopped
        found = None
    if not found:
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
    bins = Bins(max(1, args.bin_us * 1000 // SAMPLE_NS))
    channel = args.logic_channel
    ppk.start_measuring()
    first_ns: int | None = None
    index = 0
    while not stop:
        data = ppk.get_data()
        if not data:
            time.sleep(POLL_S)
            continue
        samples, logic = ppk.get_samples(data)
        if first_ns is None:
            first_ns = time.monotonic_ns() - len(samples) * SAMPLE_NS
        lines = []
        for count, mean, level in bins.add(samples, None if channel is None else [b >> channel & 1 for b in logic]):
            index += count
            lines.append(f"@ {first_ns + index * SAMPLE_NS} {count * SAMPLE_NS} {mean:.3f}"
                         + ("" if level is None else f" {level}"))  # fmt: skip
        if lines:
            sys.stdout.write("\n".join(lines) + "\n")
            sys.stdout.flush()
    ppk.stop_measuring()
    return 0


if __name__ == "__main__":
    sys.exit(main())
