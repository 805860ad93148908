"""Stopping child processes the bench started."""

from __future__ import annotations

import asyncio
import contextlib


async def stop_process(proc: asyncio.subprocess.Process | None, grace_s: float) -> None:
    """SIGTERM `proc`, give it `grace_s` to exit, then SIGKILL it; nothing when it already ended."""
    if proc is None or proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), grace_s)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
