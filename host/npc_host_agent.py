"""The NPC agent for Linux targets (Jetson, Pi 5, the ARM64 image): docs/protocol.md over TCP or stdio.

Deployed as one flat folder with `wire.py`, `npcsched.py`, `npcfeat.py`, `npcrecords.py` (and `p256.py` where
`cryptography` is missing) beside it (bench.bundles.host_bundle); needs numpy and a tflite runtime (ai-edge-litert
or tflite-runtime). It imports them as the flat modules they are there, from the script's own folder: run it from
such a folder, not from host/ in a checkout (tests find the same modules through pyproject's pytest pythonpath).

    python3 npc_host_agent.py --listen 0.0.0.0:7700 --pubkey trusted.pub.pem [--model m.tflite --manifest m.json]
    python3 npc_host_agent.py --stdio ...
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import platform
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import npcfeat
import npcmanifest
import npcrecords
import npcsched
import wire
from npc_links import serve_stdio, serve_tcp
from npc_models import ModelManager, now_us
from npc_verify import Refused, Verifier
from npc_wake import Waker

if TYPE_CHECKING:
    import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))  # the deployed folder: its trusted key and models by default

AGENT = "npc-host"
VERSION = "0.1.0"
CAPS = ["tflite", "int8", "float32", "rollback", "stats", "infer", "hold"]
if importlib.util.find_spec("aiocoap") is not None:  # npc_update needs it
    CAPS += ["update-coap", "delta-bsdiff"]
    if importlib.util.find_spec("grpc") is not None and importlib.util.find_spec("google.protobuf") is not None:
        CAPS += ["update-grpc"]  # npc_grpc: the `grpc` update channel
# in the models folder: the model the last `load`/`update` switched to, run at start. The deploy bundle
# ships one naming the deployed model, so a flash (which re-sends changed files) resets it.
CURRENT = "current.json"
MAX_UNDELIVERED = 16
# wake this long before a deadline (a timerfd, npc_wake), warm the caches and spin the rest: the wake itself comes
# tens of microseconds late on a busy machine, and a decision run straight after a sleep runs cold
SPIN_US = 200
# warm-up passes in the spin (each trains the branch predictors further: decision p50 ~40/34/30 us after 1/2/3),
# a second or third only while over half the spin remains
WARM_PASSES = 3
BACKGROUND = ("update",)  # requests that wait on the network: the link is read on meanwhile (a second gets `busy`)
MAX_HELD = 65_536  # inputs held at once (`hold` ahead of a loop, or `hold_ms`): ~3.5 min of a 310/s session


def platform_name(cmdline: str = "/proc/cmdline") -> str:
    """`linux-<machine>`, plus `/qemu-<timing>` on an emulated machine, so every figure says which clock it came
    from: NPC_PLATFORM_TAG when set (the ARM64 console image's /init), else `npc_timing=` on the kernel
    command line (the virtual boards' boot firmware puts it there; a real board has none)."""
    tag = os.environ.get("NPC_PLATFORM_TAG")
    if not tag:
        try:
            with open(cmdline, encoding="ascii", errors="replace") as f:
                words = f.read().split()
        except OSError:
            words = []
        tag = next(("qemu-" + w.split("=", 1)[1] for w in words if w.startswith("npc_timing=")), "")
    return "linux-" + platform.machine() + ("/" + tag if tag else "")


async def sleep_until(waker: Waker, t_us: int, spin_us: int = SPIN_US, warm=None) -> None:
    """Wait until the device clock reaches `t_us`: the event loop runs (inputs are read) until `spin_us` before it,
    when `waker`'s timer fires; then warm and spin the rest (neither when `spin_us` is 0: it wakes at `t_us`)."""
    if now_us() < t_us - spin_us:
        await waker.wake_at(t_us - spin_us)
    if spin_us > 0:
        spin_until(t_us, spin_us, warm)


def spin_until(t_us: int, spin_us: int, warm=None) -> None:
    """Busy-wait until `t_us`, running `warm()` first: once, then again while over half of `spin_us` remains, up to
    WARM_PASSES times (none when the wake came after `t_us`)."""
    for _ in range(WARM_PASSES if warm is not None else 0):
        if now_us() >= t_us:
            break
        warm()
        if t_us - now_us() < spin_us // 2:
            break
    while now_us() < t_us:
        pass


def decision(y: np.ndarray) -> tuple[int, float]:
    """The action a model's output `y` picks and its probability, as a frame record reports them."""
    act = int(y.argmax())
    return act, round(float(y[act]), 4)


class Agent:
    """Protocol dispatch, the frame loop, inputs and models for one agent process."""

    def __init__(self, verifier: Verifier, models_dir: str, mem_limit: int = 0, spin_us: int = SPIN_US) -> None:
        self.links = set()
        self.models = ModelManager(
            verifier, self.broadcast, mem_limit, on_current=self.remember, on_rolled_back=self.forget
        )
        self.models_dir = models_dir
        # where a transfer lands until it is verified: beside the models folder, not in it
        self.updates_dir = os.path.join(os.path.dirname(os.path.abspath(models_dir)), "updates")
        self.spin_us = spin_us
        self.waker = Waker()
        self.features = npcfeat.Features()
        self.loop_task = None
        self.stopping = False
        self.loading = False
        self.background = set()  # requests answered in the background (BACKGROUND), until they reply
        self.coap = None  # the CoAP client context, made at the first `update`
        self.undelivered = []  # fault lines raised before any bench connected
        self.exit = asyncio.Event()
        self.last = (None, None)  # last decision (act, p), repeated by skipped frames
        self.errors = {code: 0 for code in wire.ERROR_CODES}
        self.counts = {"frames": 0, "inferences": 0, "inputs": 0}
        # device time (us) the agent was busy, as the MicroPython agent's: reading and answering lines (`rx`), in
        # frame events (`loop`, which holds `release`, held inputs handed to the features, and `invoke`, the
        # interpreter's invoke in the loop's inferences): the agent's own cost is rx + loop - invoke
        self.busy = {"rx": 0, "loop": 0, "release": 0}
        self.invoke_ns = 0
        self.held = npcsched.Held(MAX_HELD)
        self.handlers = {
            "hello": self.on_hello,
            "ping": self.on_ping,
            "load": self.on_load,
            "hold": self.on_hold,
            "start": self.on_start,
            "stop": self.on_stop,
            "in": self.on_input,
            "stats": self.on_stats,
            "infer": self.on_infer,
            "update": self.on_update,
            "shutdown": self.on_shutdown,
        }

    # -- links ---------------------------------------------------------------------------------------

    def broadcast(self, msg: dict) -> None:
        """Send an unsolicited message to every connected bench; faults raised while no bench is connected
        (at start) wait for the first one."""
        line = wire.encode_reply(msg)
        if not self.links and msg["t"] == "fault" and len(self.undelivered) < MAX_UNDELIVERED:
            self.undelivered.append(line)
        for link in list(self.links):
            link.write(line)

    def hello_msg(self) -> dict:
        cur = self.models.current
        return wire.hello(AGENT, VERSION, platform_name(), {
            "runtime": self.models.runtime_name,
            "verifier": self.models.verifier.name,
            "model": cur.info if cur else None,
            "caps": CAPS,
        })  # fmt: skip

    async def handle_line(self, link, line: bytes, rx_us: int) -> None:
        """One received line: decode, dispatch, reply; errors become `error` replies, never exits. The time from its
        receipt (`rx_us`) to here counts as busy reading lines (`busy_us.rx`)."""
        try:
            await self._handle_line(link, line, rx_us)
        finally:
            self.busy["rx"] += now_us() - rx_us

    async def _handle_line(self, link, line: bytes, rx_us: int) -> None:
        if not wire.is_message(line):
            return  # console text from the bench side is ignored
        try:
            msg = wire.decode(line)
        except wire.WireError as exc:
            self.errors[exc.code] = self.errors.get(exc.code, 0) + 1
            link.write(wire.encode_reply(wire.error(exc.code, exc.detail, exc.id)))
            return
        handler = self.handlers.get(msg["t"])
        if handler is None:
            self.errors["unknown_type"] += 1
            link.write(wire.encode_reply(wire.error("unknown_type", f"no message type '{msg['t']}'", msg.get("id"))))
            return
        if msg["t"] in BACKGROUND:  # the link goes on being read (pings, inputs) while it waits for its server
            task = asyncio.ensure_future(self.dispatch(link, handler, msg, rx_us))
            self.background.add(task)
            task.add_done_callback(self.background.discard)
            return
        await self.dispatch(link, handler, msg, rx_us)

    async def dispatch(self, link, handler, msg, rx_us: int) -> None:
        """Run one request's handler and write its reply (or the error it raised)."""
        msg_id = msg.get("id")
        try:
            reply = await handler(msg, rx_us)
        except Refused as exc:
            reply = wire.error("refused", f"{exc.kind}: {exc.detail}", msg_id)
        except (KeyError, TypeError, ValueError) as exc:
            reply = wire.error("bad_field", f"{type(exc).__name__}: {exc}", msg_id)
        except Exception as exc:  # an agent bug must not kill the agent
            reply = wire.error("internal", f"{type(exc).__name__}: {exc}", msg_id)
        if reply is not None:
            if reply.get("t") == "error":
                self.errors[reply["code"]] = self.errors.get(reply["code"], 0) + 1
            link.write(wire.encode_reply(reply))

    # -- requests ------------------------------------------------------------------------------------

    async def on_hello(self, msg, rx_us):
        return wire.reply(msg, "hello", self.hello_msg())

    async def on_ping(self, msg, rx_us):
        return wire.reply(msg, "pong", {"b0": wire.number(msg.get("b0"), "b0"), "d": rx_us})

    async def on_load(self, msg, rx_us):
        path = wire.text(msg["path"], "path")
        manifest = npcmanifest.fields(msg["manifest"])
        if "sig" in msg and "sig" not in manifest:
            manifest["sig"] = msg["sig"]
        if self.loading:
            return wire.error("busy", "a load is in progress", msg.get("id"))
        self.loading = True
        try:
            model, verify_us = await self._verified(path, manifest, bool(msg.get("allow_downgrade")))
        except Refused as exc:
            self.models.refuse(exc, manifest)
            raise
        finally:
            self.loading = False
        model.source = self.model_path(path)
        switch_us = self.models.switch(model)
        asyncio.get_running_loop().call_soon(self._warm_up)
        reply = {"model": model.info, "verify_us": verify_us, "switch_us": switch_us, "rx": rx_us}
        return wire.reply(msg, "loaded", reply)

    def model_path(self, path: str) -> str:
        """The file `path` names inside the models folder; Refused (saying nothing of the file) otherwise."""
        root = os.path.realpath(self.models_dir)
        full = os.path.realpath(os.path.join(root, path)) if isinstance(path, str) and path else root
        if not isinstance(path, str) or not full.startswith(root + os.sep) or full.lower().endswith(".json"):
            # a .json (the agent's own current.json, a manifest) is no model: its hash must not be revealed
            raise Refused("parse", f"path {path!r}: not a file in the models folder")
        return full

    async def _verified(self, path: str, manifest: dict, allow_downgrade: bool):
        full = self.model_path(path)
        t0 = now_us()
        data = read_model_file(full, path, manifest.get("size"))
        loop = asyncio.get_running_loop()
        model = await loop.run_in_executor(None, self.models.check_and_parse, data, manifest, allow_downgrade)
        return model, now_us() - t0

    async def on_update(self, msg, rx_us):
        """Fetch a model over CoAP (npc_update) into updates/ (beside the models folder), verify it there (hash,
        signature, parse), and only then rename it into the models folder and switch as `load` does: a refused
        update leaves every installed file as it was."""
        url = wire.text(msg["url"], "url")
        manifest = npcmanifest.fields(msg["manifest"])
        if self.loading:
            return wire.error("busy", "a load is in progress", msg.get("id"))
        try:
            import npc_update
        except ImportError as exc:  # a target without aiocoap
            return wire.error("internal", f"no CoAP update support on this agent: {exc}", msg.get("id"))
        timing = npc_update.Timing.from_json(msg.get("coap"))  # a bad value is bad_field before anything is fetched
        allow = bool(msg.get("allow_downgrade"))
        self.loading = True
        try:
            if self.models.verifier.signed(manifest):  # (a forged one is refused as `signature` before any fetch)
                self.models.check_forward(manifest, allow)  # an older or foreign model: nothing is fetched
            if self.coap is None:
                import aiocoap

                self.coap = await aiocoap.Context.create_client_context(transports=["udp6"])
            current = self.models.current.data if self.models.current else None
            try:
                result = await npc_update.fetch_update(
                    self.coap,
                    url,
                    manifest,
                    self.models.verifier.signed,
                    Path(self.updates_dir),
                    delta=bool(msg.get("delta")),
                    current=current,
                    timing=timing,
                )
            except npc_update.UpdateFailed as exc:
                raise Refused(exc.kind, str(exc)) from None
            loop = asyncio.get_running_loop()
            try:
                model = await loop.run_in_executor(
                    None, self.models.check_and_parse, result.path.read_bytes(), manifest, allow
                )
                dest = self.update_path(manifest)
                os.replace(result.path, dest)
            except OSError as exc:
                raise Refused("transfer", f"cannot store the update: {exc.strerror}") from None
            finally:
                result.path.unlink(missing_ok=True)  # refused, or already moved
        except Refused as exc:
            self.models.refuse(exc, manifest)
            raise
        finally:
            self.loading = False
        model.source = dest
        switch_us = self.models.switch(model)
        asyncio.get_running_loop().call_soon(self._warm_up)
        fields = {"model": model.info, **result.figures(), "switch_us": switch_us}
        return wire.reply(msg, "updated", fields)

    def update_path(self, manifest: dict) -> str:
        """Where a verified update is stored: `models/NAME-VERSION.tflite` (the name reduced to [A-Za-z0-9_-])."""
        name = "".join(c for c in str(manifest.get("name")) if c.isascii() and (c.isalnum() or c in "-_")) or "model"
        return os.path.join(os.path.abspath(self.models_dir), f"{name}-{int(manifest['version'])}.tflite")

    def record_path(self, path: str) -> str:
        """`path` as the record stores it: relative to the models folder when inside it (as the deploy
        bundle writes it), so a deployed folder can move."""
        rel = os.path.relpath(path, os.path.abspath(self.models_dir))
        return path if rel.startswith("..") else rel

    def remember(self, model) -> None:
        """Record the current model (after a switch, or a rollback), so the agent's next start runs it (as the
        MicroPython agent does). A model rolled back is never left recorded."""
        if not model.source:
            return
        record = os.path.join(self.models_dir, CURRENT)
        with contextlib.suppress(OSError):  # a read-only folder: the agent still runs, and starts as deployed
            with open(record + ".tmp", "w") as f:
                json.dump({"path": self.record_path(model.source), "manifest": model.manifest}, f)
            os.replace(record + ".tmp", record)

    def forget(self, model) -> None:
        """Delete the file of a model the watchdog rolled back when an `update` installed it (a loaded file is the
        bench's, and stays): a faulty model is not kept on the device."""
        if (
            model.source
            and isinstance(model.manifest.get("version"), int)
            and model.source == self.update_path(model.manifest)
        ):
            with contextlib.suppress(OSError):
                os.remove(model.source)

    def _warm_up(self) -> None:
        """The new model's first inference, under the watchdog, even when no frame loop runs."""
        if self.models.current is not None:
            with contextlib.suppress(Exception):  # a fault is reported by the model manager
                self.models.infer(self.features.vector())

    async def on_start(self, msg, rx_us):
        if self.loop_task is not None and not self.loop_task.done():
            return wire.error("busy", "the frame loop is already running", msg.get("id"))
        if self.models.current is None:
            return wire.error("not_loaded", "no model loaded", msg.get("id"))
        sched, frames, hold_ms = npcsched.from_start(msg)
        origin = now_us() + sched.vsync_us
        self.held.start(None if hold_ms is None else origin + 1000 * hold_ms)
        self.stopping = False
        self.loop_task = asyncio.ensure_future(self.frame_loop(sched, frames, origin))
        epoch = self.held.epoch
        return wire.reply(msg, "ack", {} if epoch is None else {"epoch": epoch, "rx": rx_us})

    async def on_hold(self, msg, rx_us):
        """Hold the inputs that arrive from now on for the next `start` with `hold_ms` (protocol.md `hold`)."""
        if self.loop_task is not None and not self.loop_task.done():
            return wire.error("busy", "the frame loop is running", msg.get("id"))
        self.held.hold()
        return wire.reply(msg, "ack", {"max": MAX_HELD})

    async def on_stop(self, msg, rx_us):
        self.stopping = True
        await self.wait_loop()
        return wire.reply(msg, "ack")

    async def wait_loop(self) -> None:
        """Wait for the frame loop to end; the wait is not counted as busy reading lines (`busy_us.rx`)."""
        if self.loop_task is not None:
            t0 = now_us()
            await asyncio.shield(self.loop_task)
            self.busy["rx"] -= now_us() - t0  # handle_line counts the whole request

    async def on_input(self, msg, rx_us):
        try:
            args = (msg["ch"], msg["ts"], msg["d"], int(msg.get("seq", -1)))
            if not self.held.active():
                self.features.add(*args)
            elif not self.held.add(args, rx_us):
                return wire.error("busy", f"input: {MAX_HELD} inputs are held already")
        except (KeyError, TypeError, ValueError) as exc:
            return wire.error("bad_field", f"input: {exc}")  # counted with every error reply
        self.counts["inputs"] += 1
        return None

    def release(self, t_us: int) -> None:
        """Hand the held inputs due by `t_us` (device clock) to the features; a refused one gets its error."""
        for exc in self.held.release(t_us, self.features):
            self.errors["bad_field"] += 1
            self.broadcast(wire.error("bad_field", f"input: {exc}"))

    async def on_stats(self, msg, rx_us):
        self.models.in_probation()  # releases the previous model once probation is over
        fields = dict(self.counts)
        fields["held"] = len(self.held)
        fields["held_late"] = self.held.late
        fields["held_dropped"] = self.held.dropped
        fields["held_late_max_us"] = self.held.late_max_us
        fields["busy_us"] = {**self.busy, "invoke": self.invoke_ns // 1000}
        fields.update(self.models.memory())
        fields.update(self.models.counts)
        fields["errors"] = {k: v for k, v in self.errors.items() if v}
        return wire.reply(msg, "stats", fields)

    async def on_infer(self, msg, rx_us):
        x = npcfeat.numbers(msg["x"], "x", npcfeat.N_FEATURES)
        if self.models.current is None:
            return wire.error("not_loaded", "no model loaded", msg.get("id"))
        t0 = now_us()
        y, model = self.models.infer(x)
        us = now_us() - t0
        act = int(y.argmax())
        return wire.reply(
            msg,
            "result",
            {
                "y": [round(float(v), 6) for v in y],
                "act": act,
                "p": round(float(y[act]), 6),
                "us": us,
                "model": model.version,
            },
        )

    async def on_shutdown(self, msg, rx_us):
        self.stopping = True
        await self.wait_loop()
        self.exit.set()
        return wire.reply(msg, "bye")

    # -- the frame loop ------------------------------------------------------------------------------

    async def frame_loop(self, sched, frames: int, origin: int) -> None:
        """Display clock (first VSync at `origin`) + scheduler: one `frame` record per VSync until stopped or
        `frames` reached. Held inputs are released at each VSync and before each inference."""
        clock = npcsched.VsyncClock(sched.vsync_hz, origin)
        taken = 0
        while True:
            more = not self.stopping and (frames == 0 or taken < frames)
            nxt = sched.next_due()
            if nxt is None and not more:
                break
            if nxt is not None and (not more or nxt.due <= clock.next_tick()):
                await sleep_until(self.waker, nxt.due, self.spin_us, self.warm_caches)
                self.run_slot(sched, nxt)
            else:
                await sleep_until(self.waker, clock.next_tick(), 0)  # a VSync alone needs no spin: its tick is exact
                if self.stopping:
                    continue
                t0 = now_us()
                vsync = clock.take()
                if self.held.epoch is not None:
                    self.release(vsync)
                    self.busy["release"] += now_us() - t0
                slot = sched.on_vsync(vsync)
                taken += 1
                if slot.skip:
                    self.emit_frame(slot, None)
                self.busy["loop"] += now_us() - t0
        self.held.stop()
        self.broadcast(
            {
                "t": "stopped",
                "frames": taken,
                "inferences": sched.inferences,
                "skipped": sched.skipped,
                "late": sched.late,
            }
        )

    def warm_caches(self) -> None:
        """Just before a decision is due: run the decision path and drop the result, so the code and data
        it touches are in the CPU caches again after the frame's sleep (cold, the same work took ~8x longer on
        a busy machine), argmax and rounding included. The decision itself is computed afresh at its deadline, from
        the inputs of then. Not for a model in probation: an untrusted model runs under the watchdog only."""
        model = self.models.current
        if model is not None and not self.models.in_probation():
            with contextlib.suppress(Exception):  # faults are the real decision's to report
                decision(model.infer(self.features.vector()))

    def run_slot(self, sched, slot) -> None:
        t0 = now_us()
        if self.held.epoch is not None:  # the inputs due by now reach the features first
            self.release(t0)
            self.busy["release"] += now_us() - t0
        sched.begin(slot, t0)
        invoked = self.models.invoked[0]
        try:
            y, model = self.models.infer(self.features.vector())
            self.last = decision(y)
            version = model.version
        except Exception:  # reported as a fault by the model manager; the frame records no decision
            version = None
            self.last = (None, None)
        sched.finish(slot, now_us())
        self.counts["inferences"] += 1
        self.emit_frame(slot, version)
        self.invoke_ns += self.models.invoked[0] - invoked
        self.busy["loop"] += now_us() - t0

    def emit_frame(self, slot, version) -> None:
        self.counts["frames"] += 1
        rec = npcrecords.frame_record(slot, self.last[0], self.last[1], self.features.seq, version)
        self.broadcast(rec)


def read_model_file(full: str, shown: str, size) -> bytes:
    """The bytes of the regular file `full` (`shown` in messages), read once; Refused("parse") for anything else
    (a FIFO would block the agent: it is opened without waiting, and refused), Refused("hash") when its size is not
    the manifest's `size` (nothing more is read of a file that cannot match)."""
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise Refused("parse", f"cannot read {shown}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused("parse", f"{shown} is not a regular file")
        if isinstance(size, int) and st.st_size != size:
            raise Refused("hash", f"{shown} has {st.st_size} B, the manifest says {size}")
        try:
            return f.read()
        except OSError as exc:
            raise Refused("parse", f"cannot read {shown}: {exc.strerror}") from None


def load_initial(agent: Agent, model_path: str, manifest_path: str) -> str:
    """Verify and switch to the model given on the command line; returns a console line."""
    try:
        with open(manifest_path, "rb") as f:
            manifest = json.load(f)
        data = read_model_file(model_path, model_path, manifest.get("size"))
        model = agent.models.check_and_parse(data, manifest, allow_downgrade=True)
        model.source = os.path.abspath(model_path)
        agent.models.switch(model)
        agent.models.line = manifest.get("name")
        return f"model {manifest.get('name')} v{manifest.get('version')} loaded"
    except Refused as exc:
        return f"model {model_path} refused ({exc.kind}): {exc.detail}"
    except (OSError, ValueError) as exc:
        return f"model {model_path} not loaded: {exc}"


def read_remembered(agent: Agent):
    """The record of the model the last `load`/`update` switched to (`{"path", "manifest"}`), or None."""
    try:
        with open(os.path.join(agent.models_dir, CURRENT)) as f:
            saved = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or not isinstance(saved.get("path"), str):
        return None
    saved["path"] = os.path.join(os.path.abspath(agent.models_dir), saved["path"])  # an absolute one stays
    return saved


def load_remembered(agent: Agent, saved: dict) -> str:
    """Switch to the remembered model (verified again) on top of the deployed one, and run its first inference
    at once: it is in probation, so if it faults the agent rolls back to the deployed model. A console line."""
    try:
        manifest = saved["manifest"]
        cur = agent.models.current
        if cur is not None and cur.manifest.get("sha256") == manifest.get("sha256"):
            return "remembered model is the deployed one"
        data = read_model_file(saved["path"], saved["path"], manifest.get("size"))  # a planted FIFO is refused
        model = agent.models.check_and_parse(data, manifest, allow_downgrade=True)  # accepted when it was switched to
        model.source = saved["path"]
        agent.models.switch(model)
    except Refused as exc:
        return f"remembered model refused ({exc.kind}): {exc.detail}"
    except (OSError, KeyError, TypeError, AttributeError) as exc:
        return f"remembered model not loaded: {exc}"
    agent._warm_up()
    if agent.models.current is not model:
        return f"remembered model v{manifest.get('version')} rolled back at start (see the fault)"
    return f"remembered model {manifest.get('name')} v{manifest.get('version')} loaded"


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="npc_agent", description="NPC agent for Linux targets (docs/protocol.md)")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--listen", metavar="HOST:PORT", help="serve the protocol over TCP (port 0: any free port)")
    mode.add_argument("--stdio", action="store_true", help="speak the protocol on stdin/stdout")
    p.add_argument("--port-file", help="write the bound TCP port here once listening")
    p.add_argument("--pubkey", default=os.path.join(HERE, "trusted.pub.pem"), help="trusted P-256 public key (PEM)")
    p.add_argument("--models-dir", default=os.path.join(HERE, "models"), help="where `load` paths are resolved")
    p.add_argument("--model", help="model to run at start (.tflite)")
    p.add_argument("--manifest", help="its signed manifest (JSON)")
    p.add_argument("--mem-limit-mb", type=int, default=0, help="memory limit (resident MB) for the watchdog")
    p.add_argument(
        "--verifier",
        choices=["auto", "p256"],
        default="auto",
        help="signature verifier: `cryptography` when importable (auto), or the portable p256.py",
    )
    p.add_argument("--spin-us", type=int, default=None, help="busy-wait this close to each deadline")
    args = p.parse_args(argv)
    if args.spin_us is None:
        args.spin_us = default_spin_us(platform_name())
    return args


def default_spin_us(platform_tag: str) -> int:
    """SPIN_US, but none on an instruction-counted clock (QEMU -icount): there a timer fires on time in guest time
    and the cache warm-up the spin runs changes nothing, so spinning would only spend the guest's instructions
    (its clock), slowing a replay on it several-fold."""
    return 0 if platform_tag.endswith("/qemu-icount") else SPIN_US


async def amain(args) -> int:
    try:
        with open(args.pubkey, "rb") as f:
            verifier = Verifier(f.read(), use_cryptography=args.verifier != "p256")
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"npc_agent: trusted key {args.pubkey}: {exc}\n")
        return 2
    agent = Agent(verifier, args.models_dir, args.mem_limit_mb * 1024 * 1024, args.spin_us)
    boot = [f"{AGENT} {VERSION} ({platform.machine()}, {agent.models.runtime_name}, verifier {verifier.name})"]
    saved = read_remembered(agent)  # before the deployed model's switch records itself
    if args.model:
        boot.append(load_initial(agent, args.model, args.manifest or os.path.splitext(args.model)[0] + ".json"))
    if saved:
        boot.append(load_remembered(agent, saved))
    if args.stdio:
        await serve_stdio(agent, boot)
    else:
        await serve_tcp(agent, args.listen, boot, args.port_file)
    return 0


def main(argv=None) -> int:
    return asyncio.run(amain(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
