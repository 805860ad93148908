"""The NPC agent for MicroPython boards (ESP32-C6): docs/protocol.md over the UART (stdin/stdout).

    import npc_agent; npc_agent.run()

The board folder holds this module, npcnn, npcnn_viper, npcmodels, npcsig, p256, npcclock and the
shared wire, npcsched and npcfeat; `models/` with .npcm files; `trust.key` (128 hex chars, X||Y).
One single-threaded loop: it waits on stdin with select.poll until the next VSync or due inference,
answers requests as they arrive, and runs the VSync-aligned scheduler on the unwrapped ticks_us clock.
`models/deployed.json` (written by the bench's bundle) names the model the board was deployed with;
`models/current.json` remembers the model the agent last switched to (or rolled back to), so a reboot
starts with it, under probation on top of the deployed one.
"""

import gc
import json
import os
import sys
import time

try:
    import select
except ImportError:  # pragma: no cover - every port used here has select
    import uselect as select

import npcfeat

# the input windows' 17 KB array, made before the other modules are compiled: on a young heap it finds a
# contiguous block, which the code objects of every module, scattered over the heap, would leave it no more
# (Agent takes it)
_features = npcfeat.Features()

import npcmanifest  # noqa: E402
import npcnn  # noqa: E402
import npcrecords  # noqa: E402
import npcsched  # noqa: E402
import wire  # noqa: E402
from npcclock import Clock  # noqa: E402
from npcmodels import Models, Refused  # noqa: E402

AGENT = "npc-mpy"
VERSION = "0.1.0"
SPIN_US = 1500  # wait on stdin until this close to a deadline, then spin
IDLE_MS = 1000  # longest wait on stdin (keeps the unwrapped clock fed)
STARVED_US = 100000  # a frame event this late lets a waiting line be read first
# a loop that reads its inputs on its own clock (`start`'s hold_count) reads those due up to this long after its next
# frame event before it sleeps to it: their parsing happens in the idle time before the event, not in its way
READ_AHEAD_US = 100000
CURRENT = "models/current.json"
DEPLOYED = "models/deployed.json"
EEXIST = 17
UPDATES = "updates"  # where a transfer lands (outside models/) until it is verified
# an empty file that stays in updates/, so moving a verified model out never empties the folder's metadata pair:
# littlefs (2.11, MicroPython 1.26.1's and the chip's) dereferences NULL when that move's commit relocates models/
# (wear levelling) while updates/ precedes it and holds only the moved file (littlefs-project/littlefs#949; docs/ota.md)
KEEP = UPDATES + "/.keep"
# bytes one C readline may take: it allocates that much before it is cut to what came, so a small piece fits the
# heap's small holes (pieces of 512 landed in the big free block, and a long-lived object after each split it:
# a model that had loaded no longer found 12 KB in one piece); a line is joined from its pieces
LINE_PIECE = 64
# inputs held at once (`hold` ahead of a loop, or `hold_ms`): the bench feeds at most 2 s of session time ahead of
# the newest frame record, ~620 inputs of `combat` with voice features; each held input is ~150 bytes of heap
MAX_HELD = 1024
# a held input's heap on a 32-bit core (a mocap input's 51 boxed floats and its list and tuple), and the heap
# kept free for the frame loop: `hold`'s `max` is what the free heap takes, at most MAX_HELD
HELD_BYTES = 1200
HOLD_RESERVE = 48 * 1024

# while an update waits for its server: the requests answered at once (None: a line that does not decode, whose
# error reply is immediate too); the others wait for the update's reply, at most DEFERRED_MAX lines of them
ANSWERED_DURING_UPDATE = ("ping", "in", "stats", None)
DEFERRED_MAX = 8


def platform_name():
    """`micropython-<sys.platform>`, plus `/qemu-icount` when the firmware's clock is QEMU's instruction count (its
    `os.uname().version` names `qemu-icount`, the counted ESP32-C6 firmware's build type), so every figure
    says which clock it came from."""
    try:
        version = os.uname().version
    except (AttributeError, OSError):
        version = ""
    return "micropython-" + sys.platform + ("/qemu-icount" if "qemu-icount" in version else "")


def spin_us(platform):
    """How long before a deadline the loop stops waiting on the UART and spins: none on a counted clock, whose
    timed waits end exactly when asked (a spin there would only count as busy time)."""
    return 0 if platform.endswith("/qemu-icount") else SPIN_US


def _mem_alloc():
    return gc.mem_alloc() if hasattr(gc, "mem_alloc") else 0


def _mem_free():
    return gc.mem_free() if hasattr(gc, "mem_free") else 0


def largest_free_block():
    """The largest single allocation the heap can take now (bytes, after a collection): a binary search with
    bytearrays freed at once. Only on request (`stats` with "heap": true): it costs ~20 allocations."""
    gc.collect()
    low = 0
    high = _mem_free()
    while low < high:
        mid = (low + high + 1) // 2
        try:
            block = bytearray(mid)
        except MemoryError:
            high = mid - 1
            continue
        del block
        low = mid
    gc.collect()
    return low


def _updates_dir():
    """updates/ and its KEEP file (made when missing): where transfers land until they are verified."""
    try:  # noqa: SIM105 (MicroPython has no contextlib)
        os.mkdir(UPDATES)
    except OSError:  # it exists
        pass
    try:
        os.stat(KEEP)
    except OSError:
        try:  # noqa: SIM105
            open(KEEP, "w").close()
        except OSError:  # a read-only flash: its transfer fails and says so
            pass
    return UPDATES


def _remove(path):
    try:  # noqa: SIM105 (MicroPython has no contextlib)
        os.remove(path)
    except OSError:
        pass


def update_path(manifest):
    """Where an update stores a verified model: `models/NAME-VERSION.npcm` (the name reduced to letters, digits,
    `-` and `_`)."""
    name = "".join(c for c in str(manifest["name"]) if c.isalpha() or c.isdigit() or c in "-_")
    return "models/%s-%d.npcm" % (name or "model", int(manifest["version"]))


def _type_of(line):
    """The `t` of a protocol line, or None when it is not one or does not decode."""
    if not wire.is_message(line):
        return None
    try:
        return wire.decode(line).get("t")
    except wire.WireError:
        return None


def _replace(src, dest):
    """Rename `src` to `dest`, over an existing `dest` (FAT will not rename over a file: it goes first, and
    only then: a rename that fails for another reason leaves `dest` as it was)."""
    try:
        os.rename(src, dest)
    except OSError as exc:
        if exc.args[0] != EEXIST:
            raise
        os.remove(dest)
        os.rename(src, dest)


class Link:
    """The UART: lines in from stdin, protocol lines out on stdout.

    `select.poll` says when a line has begun to arrive; the line is then read to its newline by the port's own
    `readline` in C. Reading it byte by byte in Python, each byte after a poll, kept a half-sent line from ever
    holding up the frame loop, but it cost about 3,000 instructions a byte on the RV32 core: at the 51 KB/s of a
    combat session that is the whole of the chip's 160 MHz (docs/agents.md). So a line that stops half-way holds
    the loop until its rest, or the next line, comes (the bench writes each line whole; a 470-byte line takes 5 ms
    at 921,600 baud)."""

    def __init__(self):
        self.rx = getattr(sys.stdin, "buffer", sys.stdin)
        self.tx = getattr(sys.stdout, "buffer", None)
        self.poller = select.poll()
        self.poller.register(sys.stdin, select.POLLIN)
        self.long = None  # the first MAX_LINE + 1 bytes of a line too long for the protocol, while its rest is read

    def ready(self, timeout_ms):
        """True when input can be read within `timeout_ms`. `ipoll` allocates nothing: how often the loop polls
        follows how fast the host sends, and garbage left by each poll would place the objects allocated after it
        elsewhere on the heap, so later allocations (inferences included) would search the heap for longer or
        shorter on a busy host (docs/replay.md)."""
        mask = select.POLLIN | select.POLLHUP | select.POLLERR
        for ev in self.poller.ipoll(timeout_ms):  # noqa: SIM110 (any() of a generator allocates the generator)
            if ev[1] & mask:
                return True
        return False

    def readline(self, wait=False):
        """The next whole line (ending in a newline); None when no input has come, or while a line too long for
        the protocol is read away (its first MAX_LINE + 1 bytes and a newline come back once its newline has come:
        the decoder answers them with `bad_frame`); b"" at the end of input. One call reads at most MAX_LINE + 1
        bytes, in pieces of at most LINE_PIECE. `wait`: wait for the line to come (on the counted firmware that wait
        stands still on the device's clock)."""
        if not wait and not self.ready(0):
            return None
        if self.long is not None:  # reading away the rest of a long line
            piece = self.rx.readline(LINE_PIECE)
            if piece and piece[-1] == 10:
                line, self.long = self.long, None
                return line
            if len(piece) < LINE_PIECE:  # the input ended inside it
                self.long = None
                return b""
            return None
        cap = wire.MAX_LINE + 1
        parts = []
        n = 0
        while n < cap:
            want = min(LINE_PIECE, cap - n)
            piece = self.rx.readline(want)
            parts.append(piece)
            n += len(piece)
            if piece and piece[-1] == 10:
                return piece if len(parts) == 1 else b"".join(parts)
            if len(piece) < want:  # the input ended inside the line
                return b""
        self.long = b"".join(parts) + b"\n"
        return None

    def write(self, data):
        if self.tx is not None:
            self.tx.write(data)
        else:
            sys.stdout.write(data.decode())
        flush = getattr(sys.stdout, "flush", None)
        if flush:
            flush()


class FrameLoop:
    """One run of the frame loop: display clock, scheduler, frame count, the pending stop reply."""

    def __init__(self, sched, clock, frames):
        self.sched = sched
        self.vsync = npcsched.VsyncClock(sched.vsync_hz, clock.now() + sched.vsync_us)
        self.frames = frames
        self.taken = 0
        self.stopping = False
        self.replies = []  # (request, reply type) answered once the loop has ended

    def more(self):
        return not self.stopping and (self.frames == 0 or self.taken < self.frames)

    def next_event(self):
        """(deadline us, slot to run or None for a VSync), or None when the loop is over."""
        nxt = self.sched.next_due()
        more = self.more()
        if nxt is None and not more:
            return None
        if nxt is not None and (not more or nxt.due <= self.vsync.next_tick()):
            return nxt.due, nxt
        return self.vsync.next_tick(), None


class Agent:
    """Protocol dispatch, the frame loop, inputs and models."""

    def __init__(self, link, key, key_error=None, mem_limit=0, marker_pin=None):
        self.link = link
        # the inference marker (agent.json `marker_pin`): a GPIO driven high around each frame's inference, whose
        # high runs a power meter's logic input integrates; its on/off pre-bound, so a frame pays two C calls
        self.marker_on = self.marker_off = None
        if marker_pin is not None:
            from machine import Pin

            pin = Pin(marker_pin, Pin.OUT, value=0)
            self.marker_on, self.marker_off = pin.on, pin.off
        self.clock = Clock()
        self.models = Models(key, self.clock, self.send, mem_limit, self.remember, self.forget)
        self.warm_up_pending = False
        self.key_error = key_error
        global _features
        self.features, _features = _features or npcfeat.Features(), None
        self.loop = None
        self.running = True
        self.deferred = []  # (line, rx us) of requests that came while an update was waiting
        self.last = (None, None)
        self.errors = {}
        for code in wire.ERROR_CODES:
            self.errors[code] = 0
        self.counts = {"frames": 0, "inferences": 0, "inputs": 0}
        self.mem_peak = 0
        # device time (us) the agent was busy: reading and answering lines (`rx`), in frame events (`loop`, which
        # holds the inferences, models' infer_us, `release`: held inputs handed to the features, and `gc`: the
        # collection at each frame's idle point, run_slot)
        self.busy = {"rx": 0, "loop": 0, "release": 0, "gc": 0}
        self.held = npcsched.Held(MAX_HELD)  # its limit: what the heap takes (`hold` says)
        self.spin_us = spin_us(platform_name())
        self.handlers = {
            "hello": self.on_hello,
            "ping": self.on_ping,
            "load": self.on_load,
            "update": self.on_update,
            "start": self.on_start,
            "stop": self.on_stop,
            "in": self.on_input,
            "hold": self.on_hold,
            "stats": self.on_stats,
            "infer": self.on_infer,
            "shutdown": self.on_shutdown,
        }

    # -- output --------------------------------------------------------------------------------------

    def send(self, msg):
        self.link.write(wire.encode_reply(msg))  # a reply over the line limit becomes an `internal` error

    def hello_msg(self):
        cur = self.models.current
        impl = sys.implementation
        return wire.hello(AGENT, VERSION, platform_name(), {
            "runtime": "%s %s npcnn %s" % (impl.name, ".".join(str(v) for v in impl.version[:3]), npcnn.KERNEL),
            "verifier": "p256.py",
            "model": cur.info if cur else None,
            "caps": ["npcm", "int8", "update-coap", "delta-bsdiff-zlib", "rollback", "stats", "infer", "hold"],
        })  # fmt: skip

    # -- input ---------------------------------------------------------------------------------------

    def handle_line(self, line, rx_us):
        """One received line: decode, dispatch, reply. Errors become `error` replies, never exits."""
        if not wire.is_message(line):
            return
        try:
            msg = wire.decode(line)
        except wire.WireError as exc:
            self.errors[exc.code] = self.errors.get(exc.code, 0) + 1
            self.send(wire.error(exc.code, exc.detail, exc.id))
            return
        handler = self.handlers.get(msg["t"])
        msg_id = msg.get("id")
        if handler is None:
            self.errors["unknown_type"] += 1
            self.send(wire.error("unknown_type", "no message type '%s'" % msg["t"], msg_id))
            return
        try:
            reply = handler(msg, rx_us)
        except Refused as exc:
            reply = wire.error("refused", "%s: %s" % (exc.kind, exc.detail), msg_id)
        except (KeyError, TypeError, ValueError) as exc:
            reply = wire.error("bad_field", "%s: %s" % (type(exc).__name__, exc), msg_id)
        except MemoryError:
            gc.collect()
            reply = wire.error("internal", "MemoryError", msg_id)
        except Exception as exc:  # an agent bug must not kill the agent
            reply = wire.error("internal", "%s: %s" % (type(exc).__name__, exc), msg_id)
        if reply is not None:
            if reply.get("t") == "error":
                self.errors[reply["code"]] = self.errors.get(reply["code"], 0) + 1
            self.send(reply)

    def on_hello(self, msg, rx_us):
        return wire.reply(msg, "hello", self.hello_msg())

    def on_ping(self, msg, rx_us):
        return wire.reply(msg, "pong", {"b0": wire.number(msg.get("b0"), "b0"), "d": rx_us})

    def resolve(self, path):
        """A `load` path: a file in models/ (relative, with or without the `models/` prefix, or absolute inside
        it); nothing else is read."""
        folder = os.getcwd().rstrip("/") + "/models/"
        parts = path.split("/")
        if path.lower().endswith(".json"):  # current.json, manifests: no model, and their hash is not revealed
            raise Refused("parse", "path %r: not a file in the models folder" % path)
        if path.startswith(folder) and ".." not in parts:
            return path
        if not path or path.startswith("/") or ".." in parts or path.rstrip("/") == "models":
            raise Refused("parse", "path %r: not a file in the models folder" % path)
        return path if parts[0] == "models" else "models/" + path

    def on_load(self, msg, rx_us):
        path = wire.text(msg["path"], "path")
        manifest = npcmanifest.fields(msg["manifest"])
        if "sig" in msg and "sig" not in manifest:
            manifest["sig"] = msg["sig"]
        if msg.get("cold") and self.loop is not None:
            return wire.error("busy", "a cold load needs the frame loop stopped", msg.get("id"))
        allow = bool(msg.get("allow_downgrade"))
        return self.switch_to(msg, "loaded", self.resolve(path), manifest, {"rx": rx_us}, bool(msg.get("cold")),
                              allow=allow)  # fmt: skip

    def on_update(self, msg, rx_us):
        """Fetch a model over CoAP Block2 (npcupdate: whole, or as a bsdiff4-zlib delta applied to the running
        model), verify it, and only then store it in models/ and switch as `load` does. A refused update leaves
        every installed file as it was."""
        manifest = npcmanifest.fields(msg["manifest"])
        url = wire.text(msg["url"], "url")
        allow = bool(msg.get("allow_downgrade"))
        path = update_path(manifest)
        import npcupdate  # only when an update comes: it and the CoAP client cost heap

        tmp = _updates_dir() + path[len("models") :]
        figures = npcupdate.fetch(self, msg, manifest, url, allow, tmp)
        return self.switch_to(msg, "updated", tmp, manifest, figures, store_as=path, allow=allow)

    def serve_during_update(self, *_progress):
        """Between an update's blocks and while it waits for its server: the frame events due, and the link's
        pings, inputs and stats answered at once (other requests wait for the update's reply, in order:
        DEFERRED_MAX lines at most)."""
        self.run_due()
        while len(self.deferred) < DEFERRED_MAX:
            line = self.link.readline()
            if not line:  # no input, part of a long line, or the end of input
                return
            rx = self.clock.now()
            if _type_of(line) in ANSWERED_DURING_UPDATE:
                self.handle_line(line, rx)
            else:
                self.deferred.append((line, rx))

    def run_due(self):
        """Run the frame events already due, so a running frame loop goes on (on the current model) while a new
        one downloads."""
        while self.loop is not None:
            event = self.loop.next_event()
            if event is None or event[0] > self.clock.now():
                return
            if event[1] is not None:
                self.run_slot(event[1])
            else:
                self.on_vsync()

    def switch_to(self, msg, reply_type, path, manifest, figures, cold=False, store_as=None, allow=False):
        """Verify the model at `path` (refusals become a fault and a `refused` error), switch, reply, warm up.
        `cold`: release the models in RAM first (Models.cold_check_and_parse). `store_as`: a verified model is
        moved there first (an update, from updates/ into models/, its manifest's signature checked before the
        transfer); a refused one is deleted."""
        t0 = self.clock.now()
        try:
            if cold:
                model = self.models.cold_check_and_parse(path, manifest, allow)
            else:
                model = self.models.check_and_parse(path, manifest, store_as is not None, allow)
            if store_as is not None:
                _replace(path, store_as)
                model.path = store_as
        except Refused as exc:
            if store_as is not None:
                _remove(path)
            self.models.refuse(exc, manifest)
            raise
        except OSError as exc:  # the verified file could not be moved into models/ (a full or read-only flash)
            _remove(path)
            refused = Refused("transfer", "cannot store %s: %s" % (store_as, exc))
            self.models.refuse(refused, manifest)
            raise refused
        verify_us = self.clock.now() - t0
        self.note_memory()
        switch_us = self.models.switch(model)
        fields = {"model": model.info, "verify_us": verify_us, "switch_us": switch_us}
        fields.update(figures)
        self.send(wire.reply(msg, reply_type, fields))
        self.warm_up()
        return None

    def remember(self, model):
        """Persist the verified model's path and manifest, so the next boot starts with it."""
        try:
            with open(CURRENT + ".tmp", "w") as f:
                json.dump({"path": model.path, "manifest": model.manifest}, f)
            _replace(CURRENT + ".tmp", CURRENT)
        except OSError:
            pass  # a read-only board still runs; it just boots without a model

    def forget(self, model):
        """Delete the file of a model the watchdog rolled back when an `update` installed it (a loaded file is the
        bench's, and stays): a faulty model is not kept on flash."""
        try:
            installed = model.path == update_path(model.manifest)
        except (KeyError, TypeError, ValueError):
            installed = False
        if installed:
            _remove(model.path)

    def warm_up(self):
        """The new model's first inference, under the watchdog, even when no frame loop runs."""
        try:  # noqa: SIM105 (MicroPython has no contextlib)
            self.models.infer(self.features.vector())
        except Exception:  # already reported as a fault
            pass

    def on_start(self, msg, rx_us):
        if self.loop is not None:
            return wire.error("busy", "the frame loop is already running", msg.get("id"))
        if self.models.current is None:
            return wire.error("not_loaded", "no model loaded", msg.get("id"))
        sched, frames, hold_ms = npcsched.from_start(msg)
        count = npcsched.hold_count(msg)
        self.loop = FrameLoop(sched, self.clock, frames)
        self.held.start(None if hold_ms is None else self.loop.vsync.origin + 1000 * hold_ms, count)
        epoch = self.held.epoch
        return wire.reply(msg, "ack", {} if epoch is None else {"epoch": epoch, "rx": rx_us})

    def on_hold(self, msg, rx_us):
        """Hold the inputs that arrive from now on for the next `start` with `hold_ms` (protocol.md `hold`)."""
        if self.loop is not None:
            return wire.error("busy", "the frame loop is running", msg.get("id"))
        self.held.hold()
        gc.collect()
        self.held.limit = max(16, min(MAX_HELD, (_mem_free() - HOLD_RESERVE) // HELD_BYTES))
        return wire.reply(msg, "ack", {"max": self.held.limit})

    def release(self, t_us):
        """Hand the held inputs due by `t_us` (device clock) to the features; a refused one gets its error."""
        for exc in self.held.release(t_us, self.features):
            self.errors["bad_field"] += 1
            self.send(wire.error("bad_field", "input: %s" % exc))

    def on_stop(self, msg, rx_us):
        if self.loop is None:
            return wire.reply(msg, "ack")
        self.loop.stopping = True
        self.loop.replies.append((msg, "ack"))
        return None

    def on_input(self, msg, rx_us):
        try:
            args = (msg["ch"], msg["ts"], msg["d"], int(msg.get("seq", -1)))
            if not self.held.active():
                self.features.add(*args)
            elif not self.held.add(args, rx_us):
                return wire.error("busy", "input: %d inputs are held already" % self.held.limit)
        except (KeyError, TypeError, ValueError) as exc:
            return wire.error("bad_field", "input: %s" % exc)
        self.counts["inputs"] += 1
        return None

    def on_stats(self, msg, rx_us):
        self.models.in_probation()  # releases the previous model once probation is over
        cur = self.models.current
        fields = dict(self.counts)
        fields["held"] = len(self.held)
        fields["held_late"] = self.held.late
        fields["held_dropped"] = self.held.dropped
        fields["held_late_max_us"] = self.held.late_max_us
        fields["busy_us"] = dict(self.busy)
        fields["mem"] = self.note_memory()
        fields["mem_peak"] = self.mem_peak
        fields["mem_free"] = _mem_free()
        fields["mem_limit"] = self.models.mem_limit
        if msg.get("heap"):
            fields["mem_max_free"] = largest_free_block()
        fields["model_bytes"] = cur.size if cur else 0
        fields["weight_bytes"] = cur.net.weight_bytes if cur else 0
        fields.update(self.models.counts)
        fields.update(self.models.timing())
        errors = {}
        for k in self.errors:
            if self.errors[k]:
                errors[k] = self.errors[k]
        fields["errors"] = errors
        return wire.reply(msg, "stats", fields)

    def on_infer(self, msg, rx_us):
        x = npcfeat.numbers(msg["x"], "x", npcfeat.N_FEATURES)
        if self.models.current is None:
            return wire.error("not_loaded", "no model loaded", msg.get("id"))
        result, model = self.models.infer(x)
        act, p, probs = result
        y = [(q + 128) / 256 for q in probs]
        return wire.reply(
            msg,
            "result",
            {"y": y, "q": probs, "act": act, "p": p, "us": self.models.infer_us_last, "model": model.version},
        )

    def on_shutdown(self, msg, rx_us):
        self.running = False
        if self.loop is not None:
            self.loop.stopping = True
            self.loop.replies.append((msg, "bye"))
            return None
        return wire.reply(msg, "bye")

    # -- frames --------------------------------------------------------------------------------------

    def note_memory(self):
        """Live heap after a collection; `mem_peak` is the largest seen (at stats requests and model switches)."""
        gc.collect()
        used = _mem_alloc()
        if used > self.mem_peak:
            self.mem_peak = used
        return used

    def run_slot(self, slot):
        sched = self.loop.sched
        t0 = start = self.clock.now()
        if self.held.epoch is not None:  # the inputs due by t0 reach the features in this frame's decision
            # those due before the frame first, then t0, then those that came due meanwhile (rarely any): the
            # frame's t0..t1 is its decision, not the features' work on inputs due before it
            self.release(start)
            t0 = self.clock.now()
            self.release(t0)
            self.busy["release"] += self.clock.now() - start
        sched.begin(slot, t0)
        if self.marker_on is not None:
            self.marker_on()
        try:
            result, model = self.models.infer(self.features.vector())
            self.last = (result[0], round(result[1], 4))
            version = model.version
        except Exception:  # reported as a fault by Models; the frame records no decision
            version = None
            self.last = (None, None)
        t1 = self.clock.now()
        if self.marker_off is not None:
            self.marker_off()
        sched.finish(slot, t1)
        self.counts["inferences"] += 1
        self.emit_frame(slot, version)
        # the frame's decision is out: collect now, in the idle time before the next frame, as real-time MicroPython
        # code does, so no inference pays a collection when its allocation finds the heap full (which frames did was
        # chance, and the night's inference P50 moved with how many: docs/esp32c6.md)
        idle = self.clock.now()
        gc.collect()
        self.busy["gc"] += self.clock.now() - idle
        self.busy["loop"] += self.clock.now() - start

    def emit_frame(self, slot, version):
        self.counts["frames"] += 1
        rec = npcrecords.frame_record(slot, self.last[0], self.last[1], self.features.seq, version)
        self.send(rec)

    def on_vsync(self):
        loop = self.loop
        t0 = self.clock.now()
        vsync = loop.vsync.take()
        if self.held.epoch is not None:
            self.release(vsync)
            self.busy["release"] += self.clock.now() - t0
        slot = loop.sched.on_vsync(vsync)
        loop.taken += 1
        if slot.skip:
            self.emit_frame(slot, None)
        self.busy["loop"] += self.clock.now() - t0

    def end_loop(self):
        loop = self.loop
        self.loop = None
        self.held.stop()
        s = loop.sched
        self.send(
            {"t": "stopped", "frames": loop.taken, "inferences": s.inferences, "skipped": s.skipped, "late": s.late}
        )
        for request, kind in loop.replies:
            self.send(wire.reply(request, kind))

    # -- the main loop -------------------------------------------------------------------------------

    def wait_input(self, deadline):
        """Wait for a line until `deadline` (us, or None). Returns True when a line is ready."""
        while True:
            if deadline is None:
                return self.link.ready(IDLE_MS)
            if self.held.fed():
                return self.wait_fed(deadline)
            rem = deadline - self.clock.now()
            if rem <= 0:  # a due event goes before waiting input, unless the loop is so far behind that input
                # would wait for ever (a core that cannot keep up never had a due event out of the way, so `stop`
                # was never read and the loop ran on)
                return rem < -STARVED_US and self.link.ready(0)
            if rem <= self.spin_us:  # too close to handle a line: spin, so the event starts on time
                while self.clock.now() < deadline:
                    pass
                return False
            if rem < 1000 and not self.spin_us:  # a counted clock: sleep the rest, the wait ends exactly then
                time.sleep_us(rem)
                return False
            if self.link.ready(min((rem - self.spin_us) // 1000, IDLE_MS)):
                return True

    def wait_fed(self, deadline):
        """Until the frame event at `deadline`, in a held loop whose inputs the bench counted (`start`'s hold_count):
        read the inputs due by READ_AHEAD_US after it, one by one, waiting for one that has not come yet, then sleep to
        the deadline, which no line ends. Every input is read when the device's clock says, and a wait for one stands
        still on the counted firmware's clock, so how fast the bench or the host sends them moves nothing on it
        (docs/replay.md). Returns True when the link has closed."""
        while not self.loop.stopping and self.held.wanted(deadline + READ_AHEAD_US):
            t0 = self.clock.now()
            line = self.link.readline(True)
            if line is None:
                continue  # part of a line too long for the protocol, read away
            if not line:
                return True  # stdin closed: serve reads the end
            self.handle_line(line, self.clock.now())
            self.busy["rx"] += self.clock.now() - t0
        rem = deadline - self.clock.now()
        if rem > 0:
            time.sleep_us(rem)
        return False

    def serve(self):
        """Run until `shutdown` or the end of stdin."""
        self.send(self.hello_msg())
        if self.key_error:
            self.send({"t": "log", "level": "error", "msg": self.key_error})
        if self.warm_up_pending:  # a remembered model on probation since boot: its first inference, after the hello
            self.warm_up_pending = False
            self.warm_up()
        while self.running or self.loop is not None:
            event = self.loop.next_event() if self.loop is not None else None
            if self.loop is not None and event is None:
                self.end_loop()
                continue
            if self.deferred:  # requests that came while an update was waiting, in their order
                line, rx = self.deferred.pop(0)
                self.handle_line(line, rx)
                continue
            if self.wait_input(event[0] if event else None):
                t0 = self.clock.now()
                line = self.link.readline()
                if line is None:
                    continue  # part of a line too long for the protocol, read away
                if not line:
                    break  # stdin closed: the bench has gone
                self.handle_line(line, self.clock.now())
                self.busy["rx"] += self.clock.now() - t0
                continue
            if event is None:
                self.models.in_probation()
                continue
            try:
                if event[1] is not None:
                    self.run_slot(event[1])
                else:
                    self.on_vsync()
            except Exception as exc:  # a frame-loop bug: end the loop, keep answering
                gc.collect()
                self.send(
                    {"t": "log", "level": "error", "msg": "frame loop stopped: %s: %s" % (type(exc).__name__, exc)}
                )
                self.loop.stopping = True
                self.loop.sched.pending = []


def read_record(path):
    """A {"path", "manifest"} record, or None when the file is missing or unreadable."""
    try:
        with open(path) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def boot_models(agent):
    """Start with the deployed model, then switch to the remembered one (verified again, on probation);
    returns console notes."""
    notes = []
    models = agent.models
    for label, record in (("deployed", read_record(DEPLOYED)), ("remembered", read_record(CURRENT))):
        if record is None:
            continue
        try:
            manifest = record["manifest"]
            if models.current is not None and manifest.get("sha256") == models.current.manifest.get("sha256"):
                continue  # the remembered model is the deployed one
            model = models.check_and_parse(agent.resolve(record["path"]), manifest, allow_downgrade=True)
        except Refused as exc:
            notes.append("%s model refused (%s): %s" % (label, exc.kind, exc.detail))
            continue
        except (KeyError, TypeError, AttributeError) as exc:
            notes.append("%s model record unusable: %s" % (label, exc))
            continue
        models.switch(model)
        if label == "deployed":
            models.prev = None  # nothing to roll back to
            models.line = manifest.get("name")
        else:
            agent.warm_up_pending = True
        notes.append("%s model %s v%s loaded" % (label, manifest.get("name"), manifest.get("version")))
    return notes


def load_config(path):
    """The board's agent settings (`agent.json`: {"mem_limit": bytes of live heap, 0 for none, "marker_pin": the
    inference marker's GPIO, absent for none}); {} if absent."""
    try:
        with open(path) as f:
            config = json.load(f)
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def run(trust_path="trust.key", config_path="agent.json"):
    """Start the agent on stdin/stdout; returns when the bench sends `shutdown` or closes the link."""
    import npcsig

    key = None
    key_error = None
    try:
        key = npcsig.load_trusted_key(trust_path)
    except (OSError, ValueError) as exc:
        key_error = "no usable trusted key %s: %s (every load will be refused)" % (trust_path, exc)
    config = load_config(config_path)
    marker = config.get("marker_pin")
    agent = Agent(Link(), key, key_error, int(config.get("mem_limit", 0)), None if marker is None else int(marker))
    for note in boot_models(agent):
        agent.link.write(("%s: %s\n" % (AGENT, note)).encode())
    gc.collect()
    agent.serve()
