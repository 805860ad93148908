"""The host agent's frame-loop wake (npc_wake): a timerfd on the device clock, never early, no busy wait,
the event loop running meanwhile."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_wakes_at_the_device_clock_time_never_before_and_without_spinning() -> None:
    from npc_models import now_us
    from npc_wake import Waker

    async def run() -> tuple[list[int], float, int]:
        waker = Waker()
        ticks = 0

        async def other() -> None:  # the loop goes on while the frame loop waits (inputs are read)
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.005)

        task = asyncio.ensure_future(other())
        lags = []
        c0 = time.process_time()
        t = now_us() + 20_000
        for _ in range(10):
            await waker.wake_at(t)
            lags.append(now_us() - t)
            t += 20_000
        cpu = time.process_time() - c0
        task.cancel()
        await waker.wake_at(now_us() - 1000)  # a time already past returns at once
        waker.close()
        return lags, cpu, ticks

    lags, cpu, ticks = asyncio.run(run())
    assert min(lags) >= 0, lags
    assert sorted(lags)[5] < 10_000, lags  # asyncio.sleep's selector rounds to ms; loaded hosts add more
    assert cpu < 0.1, f"{cpu:.3f} s of CPU in 0.2 s of waiting: the wait spins"
    assert ticks >= 10


def test_sleep_until_spins_only_the_last_spin_us_and_warms_before_the_deadline() -> None:
    import npc_host_agent
    from npc_models import now_us
    from npc_wake import Waker

    async def run() -> tuple[int, int, list[int]]:
        waker = Waker()
        warmed = []
        t = now_us() + 60_000  # a 20 ms spin: the wake is ms late on a loaded host
        await npc_host_agent.sleep_until(waker, t, 20_000, lambda: warmed.append(t - now_us()))
        lag = now_us() - t
        late = now_us() - 5000  # woken after the deadline: no warm-up pass delays it further
        await npc_host_agent.sleep_until(waker, late, 2000, lambda: warmed.append(-1))
        waker.close()
        return lag, t, warmed

    lag, _t, warmed = asyncio.run(run())
    assert lag >= 0
    assert 1 <= len(warmed) <= npc_host_agent.WARM_PASSES and -1 not in warmed, warmed
    assert all(w > 0 for w in warmed), warmed  # each pass ran before the deadline
