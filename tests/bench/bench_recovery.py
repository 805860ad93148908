"""Benchmark: how long the recovery ladder takes to bring a hung virtual device back, step by step.

Scenarios (each repeated --n times): an ESP32-C6 whose firmware locked up (back by hard_reset over
DTR/RTS on RFC 2217), an ESP32-C6 whose hard reset is not wired (a socket:// link: back by the hub port's
power cycle), and a Pi 5 whose every process froze (back by power cycle, sshd restarted). Prints each
step's seconds (median) and the total from the start of the ladder until the agent answered.

    python -m tests.bench bench_recovery [--n 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path

from bench.config.fleet import SerialLink, load_fleet
from bench.devices import driver_for
from bench.recovery.ladder import answers, recover
from bench.virtual import virtual_fleet

UHUBCTL = Path(__file__).resolve().parents[2] / "bench" / "virtual" / "host_tools" / "uhubctl"
FLEET = f"""
[[device]]
name = "c6-bench"
kind = "esp32c6"
virtual = true
mac = "60:55:f9:c6:50:01"
power = {{ driver = "uhubctl", location = "9-1", port = 1, uhubctl = "{UHUBCTL}", off_s = 0.5 }}

[[device]]
name = "pi5-bench"
kind = "pi5"
virtual = true
power = {{ driver = "uhubctl", location = "9-1", port = 2, uhubctl = "{UHUBCTL}", off_s = 0.5 }}
"""


async def scenario(device, virtual, hang: str, n: int) -> list:
    results = []
    for _ in range(n):
        await answers(driver_for(device))  # the agent runs (and answers) before the hang
        await virtual.control(hang)
        results.append(await recover(device, f"bench: {hang}"))
    return results


def show(title: str, results: list) -> None:
    steps: dict[str, list[float]] = {}
    for r in results:
        for s in r.steps:
            steps.setdefault(s.step, []).append(s.seconds)
    back_by = {r.step for r in results}
    total = statistics.median(r.seconds for r in results)
    print(f"{title}: back by {', '.join(sorted(str(b) for b in back_by))}; ladder total {total:.1f} s (median)")
    for step, secs in steps.items():
        tried = any(s.tried for r in results for s in r.steps if s.step == step)
        print(f"  {step:<14} {statistics.median(secs):6.2f} s" + ("" if tried else "  (passed: not available)"))


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fleet.toml"
        path.write_text(FLEET)
        fleet = load_fleet(path)
        async with virtual_fleet(list(fleet.devices)) as (devices, running):
            c6, pi5 = devices
            for dev in devices:
                steps = await driver_for(dev).flash()
                assert all(s.ok for s in steps), steps
            show("esp32c6 hung (rfc2217)", await scenario(c6, running["c6-bench"], "hang", n))
            raw = c6.with_link(SerialLink(running["c6-bench"].urls()["socket"], 921600))
            show("esp32c6 hung (socket://, no DTR/RTS)", await scenario(raw, running["c6-bench"], "hang", n))
            show("pi5 frozen", await scenario(pi5, running["pi5-bench"], "hang", n))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3)
    asyncio.run(main(parser.parse_args().n))
