"""Frame records written from a background thread, so a slow disk never stalls the bench's event loop.

The pacing loop shares its thread with the frame collectors; a commit that blocks in write() or in a
WAL checkpoint for milliseconds would delay the next replayed input by as much. The writer thread has
its own connection and commits whatever is queued (normally one to a few records) as soon as it can,
so a killed run loses at most the records of the last few hundred microseconds."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable
from typing import Protocol

from bench.agent.frame import Frame

_STOP = object()


class FrameRows(Protocol):
    """Where the writer thread's records go."""

    def add_frames(self, run_id: int, device: str, frames: Iterable[Frame]) -> None:
        """Write frame records in one transaction."""


class WriterConnection(Protocol):
    """The writer thread's own connection to a store."""

    @property
    def frames(self) -> FrameRows:
        """Its frame records."""

    def close(self) -> None:
        """Close the connection."""


class BackgroundFrameWriter:
    """Queue frame records from any thread; a writer thread commits them through its own connection, opened by
    `connect` in that thread (`FrameStore.frame_sink()` gives one on the same store)."""

    def __init__(self, connect: Callable[[], WriterConnection]) -> None:
        self.connect = connect
        self.written = 0
        self.error: BaseException | None = None
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="frame-writer", daemon=True)
        self._thread.start()

    def put(self, run_id: int, device: str, frame: Frame) -> None:
        """Queue one record (never blocks); its `rx_ns` attribute, if any, is stored with it."""
        self._queue.put((run_id, device, frame))

    def close(self, timeout: float = 30.0) -> None:
        """Write everything queued, then stop the thread; re-raises a write error."""
        self._queue.put(_STOP)
        self._thread.join(timeout)
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        store = self.connect()
        try:
            stop = False
            while not stop:
                batch = [self._queue.get()]
                while True:
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                if batch[-1] is _STOP:
                    stop = True
                    batch.pop()
                by_device: dict[tuple[int, str], list[Frame]] = {}
                for run_id, device, frame in batch:
                    by_device.setdefault((run_id, device), []).append(frame)
                for (run_id, device), frames in by_device.items():
                    store.frames.add_frames(run_id, device, frames)
                    self.written += len(frames)
        except BaseException as exc:  # reported by close()
            self.error = exc
        finally:
            store.close()
