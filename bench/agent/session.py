"""AgentSession: the bench's side of one conversation with an NPC agent, over any line transport."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.agent import wire
from bench.agent.clock import ClockSync
from bench.agent.frame import Frame
from bench.agent.transport import LineTransport
from bench.config.kinds import DECISION_BUDGET_MS
from bench.core.errors import BenchError, DeviceUnreachable, ProductFailure
from bench.core.logcap import CappedLog

DEFAULT_TIMEOUT = 5.0


class AgentError(ProductFailure):
    """The agent answered a request with an `error` message (a product failure: bench.core.outcomes)."""

    def __init__(self, device: str, request: str, reply: dict[str, Any]) -> None:
        self.code = str(reply.get("code", "internal"))
        self.detail = str(reply.get("detail", ""))
        self.reply = reply
        super().__init__(f"agent on {device}: {request} failed: {self.code}: {self.detail}")


class ProtocolMismatch(BenchError):
    """The agent speaks another protocol version than the bench."""


@dataclass(frozen=True)
class LoopStart:
    """What a `start` request asks of the agent's frame loop (protocol.md `start`)."""

    fps: int  # inferences per second: the next one is due 1/fps after a VSync
    vsync_hz: int  # the agent's display clock
    key_every: int = 1  # frames that are not key frames may skip inference
    budget_ms: int = DECISION_BUDGET_MS  # the decision budget (informational: the bench counts the misses)
    frames: int = 0  # the loop stops after this many frames (0: at `stop`)
    # an agent with the `hold` cap holds each input until its clock reaches the input's `ts` after the loop's
    # epoch (its first VSync + hold_ms)
    hold_ms: int | None = None
    # with hold_ms: how many inputs the bench sends for the loop, those held ahead included; an agent that knows it
    # reads each input on its own clock (protocol.md `start`)
    hold_count: int | None = None

    def fields(self) -> dict[str, Any]:
        """The request's fields (`hold_ms` and `hold_count` only when they are set)."""
        return {k: v for k, v in asdict(self).items() if v is not None or k not in ("hold_ms", "hold_count")}


class AgentSession:
    """Speaks the wire protocol to one agent: requests by id, clock sync, frames, faults, console.

    Use `await AgentSession.open(transport, device=...)` (or `async with`); it checks the agent's hello."""

    def __init__(
        self,
        transport: LineTransport,
        *,
        device: str = "agent",
        log_path: Path | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.transport = transport
        self.device = device
        self.timeout = timeout
        self.info: dict[str, Any] = {}
        self.clock = ClockSync()
        self.console: list[str] = []  # console text and agent `log` messages, in arrival order
        self.console_listeners: list[Callable[[str], None]] = []  # called with each console line as it arrives
        self.faults: list[dict[str, Any]] = []
        self.framing_errors = 0
        self.refusals: list[dict[str, Any]] = []  # `error` replies no request waited for: lines sent as is (`in`)
        self.last_stats: dict[str, Any] | None = None
        self.last_stopped: dict[str, Any] | None = None
        self.sent_ns: dict[int, int] = {}  # input seq -> bench send time
        self.closed = False
        self._log = CappedLog(log_path) if log_path else None
        self._next_id = 1
        self._seq = 0
        self._pending: dict[int, asyncio.Future[tuple[dict[str, Any], int]]] = {}
        self._sent: dict[int, dict[str, Any]] = {}  # pending requests, to recognise a link that echoes them
        self.echoes = 0
        self._frames: asyncio.Queue[Frame | None] = asyncio.Queue()
        self._fault_q: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._send_lock = asyncio.Lock()
        self._reader = asyncio.create_task(self._read_loop(), name=f"agent-reader-{device}")

    # -- lifecycle ---------------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        transport: LineTransport,
        *,
        device: str = "agent",
        log_path: Path | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        hello_timeout: float = 15.0,
    ) -> AgentSession:
        """A session whose hello succeeded and whose agent speaks our protocol version."""
        session = cls(transport, device=device, log_path=log_path, timeout=timeout)
        try:
            await session.hello(timeout=hello_timeout)
        except BaseException:
            await session.close()
            raise
        return session

    async def __aenter__(self) -> AgentSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop reading and close the transport (does not ask the agent to exit: see `shutdown`)."""
        if self.closed:
            return
        self.closed = True
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader
        await self.transport.close()
        self._fail_pending(f"agent on {self.device}: session closed")
        if self._log:
            self._log.close()

    # -- sending -----------------------------------------------------------------------------------

    async def send(self, msg: dict[str, Any]) -> int:
        """Send one message as is; returns the bench send time (ns)."""
        return await self.send_raw(wire.encode(msg))

    async def send_raw(self, data: bytes) -> int:
        """Send raw bytes (tests use it for malformed lines); returns the bench send time (ns)."""
        async with self._send_lock:
            sent = time.monotonic_ns()
            await self.transport.send(data)
        return sent

    async def request(self, t: str, timeout: float | None = None, **fields: Any) -> dict[str, Any]:
        """Send request `t` with `fields`; return the reply, or raise AgentError (an `error` reply) or
        DeviceUnreachable (no reply in time, or the link ended)."""
        reply, _ = await self._request_timed(t, timeout, fields)
        return reply

    async def _request_timed(self, t: str, timeout: float | None, fields: dict[str, Any]) -> tuple[dict[str, Any], int]:
        if self.closed:
            raise DeviceUnreachable(f"agent on {self.device}: session closed")
        msg_id = self._next_id
        self._next_id += 1
        fut: asyncio.Future[tuple[dict[str, Any], int]] = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = fut
        request = {"t": t, "id": msg_id, **fields}
        self._sent[msg_id] = request
        try:
            await self.send(request)
            wait = self.timeout if timeout is None else timeout
            try:
                reply, rx_ns = await asyncio.wait_for(fut, wait)
            except TimeoutError:
                raise DeviceUnreachable(f"agent on {self.device}: no reply to '{t}' within {wait:g} s") from None
        finally:
            self._pending.pop(msg_id, None)
            self._sent.pop(msg_id, None)
        if reply.get("t") == "error":
            raise AgentError(self.device, t, reply)
        return reply, rx_ns

    # -- protocol requests -------------------------------------------------------------------------

    async def hello(self, timeout: float | None = None) -> dict[str, Any]:
        """Ask the agent who it is; raises ProtocolMismatch if its `proto` differs from the bench's."""
        reply = await self.request("hello", timeout=timeout)
        if reply.get("proto") != wire.PROTO:
            raise ProtocolMismatch(
                f"agent on {self.device} speaks protocol {reply.get('proto')!r}, the bench speaks {wire.PROTO}",
                hint="deploy the agent from this bench version (`hilbench flash`)",
            )
        self.info = reply
        return reply

    @property
    def model(self) -> dict[str, Any] | None:
        """The model the agent said it runs (hello, load or update reply)."""
        return self.info.get("model")

    async def ping(self) -> tuple[int, int, int]:
        """One clock exchange: (bench send ns, bench receive ns, device us), added to `clock`."""
        b0 = time.monotonic_ns()
        reply, b1 = await self._request_timed("ping", None, {"b0": b0})
        d = int(reply["d"])
        self.clock.add(b0, b1, d)
        return b0, b1, d

    async def sync_clock(self, n: int = 16, interval: float = 0.0) -> ClockSync:
        """`n` ping/pong exchanges; returns the refreshed offset/drift estimate."""
        for k in range(n):
            await self.ping()
            if interval and k < n - 1:
                await asyncio.sleep(interval)
        return self.clock

    def bench_ns(self, device_us: int) -> int:
        """A device timestamp on the bench clock (needs `sync_clock` first)."""
        return self.clock.to_bench_ns(device_us)

    async def load(
        self,
        path: str,
        manifest: dict[str, Any],
        timeout: float = 60.0,
        *,
        cold: bool = False,
        allow_downgrade: bool = False,
    ) -> dict[str, Any]:
        """Switch to the model file `path` on the device, described by the signed `manifest`.
        `cold`: a cold start (the agent may release the models it holds first; the frame loop must be stopped).
        `allow_downgrade`: a model older than the running one, or of another name, is taken too.
        On refusal raises AgentError (code `refused`); the matching fault is in `faults`."""
        fields: dict[str, Any] = {"path": path, "manifest": manifest}
        if cold:
            fields["cold"] = True
        if "sig" in manifest:
            fields["sig"] = manifest["sig"]
        return await self._switch("load", fields, timeout, allow_downgrade)

    async def update(
        self,
        url: str,
        manifest: dict[str, Any],
        *,
        delta: bool = False,
        coap: dict[str, Any] | None = None,
        timeout: float = 600.0,
        allow_downgrade: bool = False,
    ) -> dict[str, Any]:
        """Have the agent fetch a model over CoAP from `url`, verify and switch (see `load` for errors).
        `coap`: the link's retransmission timing (`ack_timeout_ms`, `ack_random_factor`, `max_retransmit`).
        `allow_downgrade`: the agent may take a model older than its own or of another name (it refuses, kind
        `version`, otherwise)."""
        fields: dict[str, Any] = {"url": url, "manifest": manifest, "delta": delta}
        if coap is not None:
            fields["coap"] = coap
        return await self._switch("update", fields, timeout, allow_downgrade)

    async def _switch(self, op: str, fields: dict[str, Any], timeout: float, allow_downgrade: bool) -> dict[str, Any]:
        """Send the model switch `op` (`load` or `update`); the agent's model is then the one it reports."""
        if allow_downgrade:
            fields["allow_downgrade"] = True
        reply = await self.request(op, timeout=timeout, **fields)
        self.info["model"] = reply.get("model")
        return reply

    async def start(self, loop: LoopStart) -> dict[str, Any]:
        """Start the frame loop `loop` asks for; frame records then arrive through `frames()`. With `hold_ms` (an
        agent with the `hold` cap) the reply's `epoch` says when the held inputs' clock starts, in device us."""
        self.last_stopped = None
        return await self.request("start", **loop.fields())

    async def hold(self) -> dict[str, Any]:
        """Have an agent with the `hold` cap hold the inputs sent from now on for the next `start` with `hold_ms`
        (protocol.md `hold`); the reply's `max` is how many it can hold."""
        return await self.request("hold")

    async def stop(self, timeout: float | None = None) -> dict[str, Any]:
        """Stop the frame loop; the ack comes after the last frame record."""
        return await self.request("stop", timeout=timeout)

    async def send_input(self, ch: str, d: Any, ts: float) -> int:
        """Send one replayed input (fire-and-forget); returns its `seq`. Its send time is kept in `sent_ns`."""
        seq = self._seq
        self._seq += 1
        self.sent_ns[seq] = await self.send({"t": "in", "seq": seq, "ch": ch, "ts": ts, "d": d})
        return seq

    async def stats(self) -> dict[str, Any]:
        """Memory in use and peak (bytes), frame and inference counts, error counters."""
        self.last_stats = await self.request("stats")
        return self.last_stats

    async def infer(self, x: list[float], timeout: float | None = None) -> dict[str, Any]:
        """Run the current model once on feature vector `x`: {y (probabilities), act, p, us, model}."""
        return await self.request("infer", timeout=timeout, x=list(x))

    async def shutdown(self, timeout: float | None = None) -> dict[str, Any]:
        """Ask the agent to exit its loop (`bye`)."""
        return await self.request("shutdown", timeout=timeout)

    # -- what the agent sends ----------------------------------------------------------------------

    async def frames(self, timeout: float | None = None) -> AsyncIterator[Frame]:
        """Frame records as they arrive, until the agent reports the loop `stopped` (or the link ends).
        With `timeout`, raises DeviceUnreachable when no record comes for that long."""
        while True:
            try:
                rec = await asyncio.wait_for(self._frames.get(), timeout)
            except TimeoutError:
                raise DeviceUnreachable(f"agent on {self.device}: no frame record for {timeout:g} s") from None
            if rec is None:
                return
            yield rec

    async def next_fault(self, timeout: float | None = None) -> dict[str, Any]:
        """The next `fault` message not yet taken (all of them also stay in `faults`)."""
        wait = self.timeout if timeout is None else timeout
        try:
            return await asyncio.wait_for(self._fault_q.get(), wait)
        except TimeoutError:
            raise DeviceUnreachable(f"agent on {self.device}: no fault reported within {wait:g} s") from None

    def drain_faults(self) -> list[dict[str, Any]]:
        """Take every fault not yet taken by `next_fault` (they stay in `faults`)."""
        taken = []
        while not self._fault_q.empty():
            taken.append(self._fault_q.get_nowait())
        return taken

    # -- reading -----------------------------------------------------------------------------------

    def _note(self, text: str) -> None:
        self.console.append(text)
        for listener in self.console_listeners:
            listener(text)
        if self._log:
            self._log.write(f"{time.monotonic_ns()} {text}\n")
            self._log.flush()

    async def _read_loop(self) -> None:
        try:
            while True:
                line = await self.transport.readline()
                rx_ns = time.monotonic_ns()
                if not line:
                    break
                if not wire.is_message(line):
                    self._note(line.decode("utf-8", "replace").rstrip("\r\n"))
                    continue
                try:
                    msg = wire.decode(line)
                except wire.WireError as exc:
                    self.framing_errors += 1
                    self._note(f"[bench] dropped line ({exc.code}: {exc.detail}): {line[:200]!r}")
                    continue
                self._dispatch(msg, rx_ns)
        finally:
            self._fail_pending(f"agent on {self.device}: link ended")
            self._frames.put_nowait(None)

    def _dispatch(self, msg: dict[str, Any], rx_ns: int) -> None:
        t = msg["t"]
        msg_id = msg.get("id")
        if msg_id is not None and msg_id in self._pending:
            if msg == self._sent.get(msg_id):  # our own request echoed back (a serial console in echo mode)
                self.echoes += 1
                return
            fut = self._pending[msg_id]
            if not fut.done():
                fut.set_result((msg, rx_ns))
            return
        if t == "frame":
            try:
                self._frames.put_nowait(Frame.from_msg(msg, rx_ns))
            except (KeyError, TypeError, ValueError):
                self.framing_errors += 1
                self._note(f"[bench] malformed frame record: {msg!r}")
        elif t == "stopped":
            self.last_stopped = msg
            self._frames.put_nowait(None)
        elif t == "fault":
            self.faults.append(msg)
            self._fault_q.put_nowait(msg)
            self._note(f"[fault] {msg!r}")
        elif t == "error":  # the agent refused a line the bench sent without an id (an input)
            self.refusals.append(msg)
            self._note(f"[bench] the agent refused a line: {msg!r}")
        elif t == "log":
            self._note(f"[{msg.get('level', 'info')}] {msg.get('msg', '')}")
        elif t == "stats":
            self.last_stats = msg
        elif t == "hello":
            self._note(f"[hello] {msg!r}")
        else:
            self._note(f"[bench] unexpected message: {msg!r}")

    def _fail_pending(self, why: str) -> None:
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(DeviceUnreachable(why))
