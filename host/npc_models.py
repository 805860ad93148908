"""The host agent's models: a tflite model wrapper, and the manager that switches, watches and rolls back.

Runs without the bench package (deployed as a flat folder). Memory figures are the process's resident
set (what the device really spends), read from /proc.
"""

from __future__ import annotations

import os
import time

import npcmanifest
import npcrecords
import numpy as np
from npc_verify import Refused

N_FEATURES = 48
N_ACTIONS = 8
PROBATION_US = 3_000_000  # a new model that crashes or runs out of memory within this is rolled back
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def now_us() -> int:
    """The device clock: monotonic microseconds (never wraps)."""
    return time.monotonic_ns() // 1000


_statm_fd = -1


def rss_bytes() -> int:
    """Resident memory of this process: one pread of /proc/self/statm, kept open (checked every frame in
    probation: opening the file each time cost ~8 us)."""
    global _statm_fd
    try:
        if _statm_fd < 0:
            _statm_fd = os.open("/proc/self/statm", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        return int(os.pread(_statm_fd, 128, 0).split()[1]) * _PAGE
    except (OSError, AttributeError):  # no /proc, or no pread
        return 0


def peak_rss_bytes() -> int:
    """Peak resident memory of this process (VmHWM)."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def runtime():
    """(Interpreter class, "name version") of the tflite runtime on this device, or (None, reason)."""
    try:
        import ai_edge_litert
        from ai_edge_litert.interpreter import Interpreter

        return Interpreter, "ai-edge-litert " + getattr(ai_edge_litert, "__version__", "?")
    except ImportError:
        pass
    try:
        import tflite_runtime
        from tflite_runtime.interpreter import Interpreter

        return Interpreter, "tflite-runtime " + getattr(tflite_runtime, "__version__", "?")
    except ImportError:
        return None, "no tflite runtime (install ai-edge-litert or tflite-runtime)"


class OutOfMemory(Exception):
    """The agent's memory limit was exceeded while a model ran."""


class Model:
    """One verified .tflite model: weights read-only, interpreter built once (num_threads=1).

    Parsing happens at construction (before any switch); tensors are allocated on first use."""

    def __init__(self, data: bytes, manifest: dict, interpreter_cls) -> None:
        self.manifest = manifest
        self.data = bytes(data)  # immutable: the interpreter reads its weights from here
        self.weights = np.frombuffer(self.data, dtype=np.uint8)
        assert not self.weights.flags.writeable
        if interpreter_cls is None:
            raise Refused("parse", "this agent has no tflite runtime")
        fmt = str(manifest.get("format", "tflite"))
        if not fmt.startswith("tflite"):
            raise Refused("parse", f"format {fmt!r} is not a .tflite model")
        try:
            self.interp = interpreter_cls(model_content=self.data, num_threads=1)
            inp = self.interp.get_input_details()
            out = self.interp.get_output_details()
        except (ValueError, RuntimeError) as exc:
            raise Refused("parse", f"the runtime refuses the model: {exc}") from None
        if len(inp) != 1 or len(out) != 1:
            raise Refused("parse", f"expected 1 input and 1 output, found {len(inp)} and {len(out)}")
        self.inp, self.out = inp[0], out[0]
        if self.inp["shape"][-1] != N_FEATURES or self.out["shape"][-1] != N_ACTIONS:
            raise Refused(
                "parse",
                f"expected {N_FEATURES} features -> {N_ACTIONS} actions, "
                f"found {list(self.inp['shape'])} -> {list(self.out['shape'])}",
            )
        self.in_index, self.out_index = self.inp["index"], self.out["index"]
        self.in_dtype = self.inp["dtype"]
        self.in_scale, self.in_zp = self.inp["quantization"]
        self.out_scale, self.out_zp = self.out["quantization"]
        # the interpreter's invoke alone: [ns, count] over every inference (its manager shares one among its models)
        self.tally = [0, 0]
        # per-inference buffers, allocated once
        self._x = np.zeros((1, N_FEATURES), dtype=np.float64)
        self._half = np.zeros((1, N_FEATURES), dtype=np.float64)
        self._xin = np.zeros((1, N_FEATURES), dtype=self.in_dtype)
        self.prepared = False
        self.source = ""  # the file it was loaded from (set by whoever loads it)

    @property
    def info(self) -> dict:
        """The model's identity as the protocol reports it."""
        m = self.manifest
        return {k: m[k] for k in ("name", "version", "sha256", "size", "format") if k in m}

    @property
    def version(self):
        return self.manifest.get("version")

    def prepare(self) -> None:
        """Allocate the tensors (the arena) once."""
        if not self.prepared:
            self.interp.allocate_tensors()
            self.prepared = True

    def infer(self, x) -> np.ndarray:
        """Action probabilities (float64, N_ACTIONS) for one feature vector (copied into the input tensor)."""
        self.prepare()
        v, xin = self._x, self._xin
        v[0] = x
        if self.in_dtype == np.int8:  # round half away from zero, as TFLite quantizes; then clamp
            np.divide(v, self.in_scale, out=v)
            np.add(v, np.copysign(0.5, v, out=self._half), out=v)
            np.trunc(v, out=v)
            np.add(v, self.in_zp, out=v)
            np.clip(v, -128, 127, out=v)
        xin[...] = v
        self.interp.set_tensor(self.in_index, xin)
        t0 = time.monotonic_ns()
        self.interp.invoke()
        self.tally[0] += time.monotonic_ns() - t0
        self.tally[1] += 1
        y = self.interp.get_tensor(self.out_index).reshape(-1).astype(np.float64)
        if self.out_scale:
            np.subtract(y, self.out_zp, out=y)
            np.multiply(y, self.out_scale, out=y)
        return y

    def release(self) -> None:
        """Drop the interpreter and its arena."""
        self.interp = None
        self.prepared = False


class ModelManager:
    """Holds the running model, switches atomically, and rolls back a new model that faults in probation.

    `emit(msg)` sends unsolicited messages (faults). The frame loop and `infer` requests go through `infer`."""

    def __init__(self, verifier, emit, mem_limit: int = 0, on_current=None, on_rolled_back=None) -> None:
        self.verifier = verifier
        self.emit = emit
        self.on_current = on_current or (lambda model: None)  # told of every switch and rollback
        self.on_rolled_back = on_rolled_back or (lambda model: None)  # told of the model a rollback left
        self.mem_limit = mem_limit
        self.interpreter_cls, self.runtime_name = runtime()
        self.current = None
        self.prev = None
        self.line = None  # the deployed model's name: a model of another name needs allow_downgrade
        self.t_switch = 0
        self.counts = {"loads": 0, "refused": 0, "faults": 0, "rollbacks": 0}
        self.invoked = [0, 0]  # ns in the interpreter's invoke and invokes, every model it parsed (Model.tally)

    def check_and_parse(self, data: bytes, manifest: dict, allow_downgrade: bool = False) -> Model:
        """Everything before a switch: hash, signature, version, parse. Raises Refused."""
        self.verifier.check(data, manifest)
        self.check_forward(manifest, allow_downgrade)
        model = Model(data, manifest, self.interpreter_cls)
        model.tally = self.invoked
        return model

    def check_forward(self, manifest: dict, allow_downgrade: bool = False) -> None:
        """Refused("version") for a model of another line, or older than the running one, unless allowed."""
        running = self.current.manifest if self.current is not None else None
        why = npcmanifest.forward(manifest, running, self.line, allow_downgrade)
        if why:
            raise Refused("version", why)

    def refuse(self, exc: Refused, manifest) -> None:
        """Report a refused load as a fault (the running model is untouched)."""
        self.counts["refused"] += 1
        self.counts["faults"] += 1
        running = self.current.version if self.current is not None else None
        self.emit(npcrecords.refused_record(exc.kind, exc.detail, now_us(), manifest, running))

    def switch(self, model: Model) -> int:
        """Make `model` current (one reference swap); the old one is kept for rollback. Returns switch us."""
        t = now_us()
        if self.prev is not None:  # a switch during probation: the model in probation is dropped
            self.prev.release()
        self.prev = self.current
        self.current = model
        self.t_switch = now_us()
        self.counts["loads"] += 1
        switch_us = self.t_switch - t
        self.on_current(model)
        return switch_us

    def in_probation(self) -> bool:
        if self.prev is None:
            return False
        if now_us() - self.t_switch < PROBATION_US:
            return True
        self.prev.release()  # probation passed: the previous model is no longer needed
        self.prev = None
        return False

    def _run(self, model: Model, x, watch: bool) -> np.ndarray:
        try:
            model.prepare()
            if watch:
                self._check_memory()
            y = model.infer(x)
            if watch:
                self._check_memory()
            return y
        except MemoryError:
            raise OutOfMemory("MemoryError") from None

    def _check_memory(self) -> None:
        if self.mem_limit:
            rss = rss_bytes()
            if rss > self.mem_limit:
                raise OutOfMemory(f"resident memory {rss} B over the limit of {self.mem_limit} B")

    def infer(self, x):
        """(probabilities, model that produced them). A model in probation that crashes or runs out of
        memory is rolled back and the inference re-run on the previous one; outside probation the
        fault is reported and the exception re-raised (the model stays: there is nothing to go back to)."""
        cur = self.current
        if cur is None:
            raise LookupError("no model loaded")
        watch = self.in_probation()
        t_start = now_us()
        try:
            return self._run(cur, x, watch), cur
        except Exception as exc:
            cause = "oom" if isinstance(exc, OutOfMemory) else "crash"
            detail = f"{type(exc).__name__}: {exc}"
            t_fault = now_us()
            self.counts["faults"] += 1
            if not watch:
                self.emit(npcrecords.model_fault_record(cause, cur.version, detail, t_fault))
                raise
            prev = self.prev
            self.current = prev  # the rollback: one reference swap back
            self.prev = None
            self.on_current(prev)
            cur.release()  # refcounting frees its interpreter and arena here
            self.on_rolled_back(cur)
            rollback_us = now_us() - t_fault
            self.counts["rollbacks"] += 1
            self.emit(
                npcrecords.rollback_record(
                    cause, cur.version, prev.version, self.t_switch, t_start, t_fault, rollback_us, detail
                )
            )
            return self._run(prev, x, False), prev

    def memory(self) -> dict:
        """Memory in use and peak (bytes, process resident set) and the current model's bytes."""
        return {
            "mem": rss_bytes(),
            "mem_peak": peak_rss_bytes(),
            "mem_limit": self.mem_limit,
            "model_bytes": len(self.current.data) if self.current else 0,
        }
