"""The MicroPython agent's models: verified loading, atomic switch, and rollback during probation.

A load checks, in order: the file's sha256 and size against the manifest, the manifest's ECDSA-P256
signature with the trusted key, then parses the .npcm (MemoryError -> refused as `oom`). The previous
model stays in RAM for PROBATION_US after a switch; an exception or MemoryError in the new model's
inference during that time, or a live heap above the agent's memory limit after it, rolls back to it
and reports a `rollback` fault with the time it took.
"""

import gc
import os

import npcmanifest
import npcnn
import npcrecords
import npcsig

PROBATION_US = 3000000
N_FEATURES = 48
N_ACTIONS = 8
INFO_KEYS = ("name", "version", "sha256", "size", "format")


S_IFMT, S_IFREG = 0o170000, 0o100000


def regular_size(path):
    """The size of the regular file at `path`; Refused("parse") for anything else (a FIFO would block the read)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise Refused("parse", "cannot read %s: %s" % (path, exc))
    if st[0] & S_IFMT != S_IFREG:
        raise Refused("parse", "%s is not a regular file" % path)
    return st[6]


def _same_bytes(path, digest, size, manifest):
    """Refused("hash") unless the file's bytes are the manifest's. `digest` None (a parse that stopped early, whose
    reads did not take the whole file): the file is hashed again, only to name the refusal; nothing of it runs."""
    if digest is None:
        try:
            digest, size = npcsig.file_sha256(path)
        except OSError:
            return
    if digest != manifest.get("sha256") or size != manifest.get("size", size):
        raise Refused("hash", "%s: sha256 %s (%d B) does not match the manifest" % (path, digest, size))


class Refused(Exception):
    """A model load refused before the switch: `kind` is the fault kind (hash, signature, parse, oom)."""

    def __init__(self, kind, detail):
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


class Loaded:
    """One verified model and its manifest."""

    def __init__(self, net, manifest, path):
        self.net = net
        self.manifest = manifest
        self.path = path
        self.info = {}
        for k in INFO_KEYS:
            if k in manifest:
                self.info[k] = manifest[k]
        self.version = manifest.get("version")
        self.size = manifest.get("size")


class Models:
    """Current and previous model, the probation watchdog, and fault reports through `emit(msg)`."""

    def __init__(self, key, clock, emit, mem_limit=0, on_current=None, on_rolled_back=None):
        self.key = key
        self.on_current = on_current  # called with the model each time another one becomes current
        self.on_rolled_back = on_rolled_back  # called with the model a rollback left
        self.mem_limit = mem_limit
        self.clock = clock
        self.emit = emit
        self.current = None
        self.prev = None
        self.line = None  # the deployed model's name: a model of another name needs allow_downgrade
        self.spare = None  # npcnn.Buffers: arrays the next model of the running one's shapes is read into
        self.t_switch = 0
        self.counts = {"loads": 0, "refused": 0, "faults": 0, "rollbacks": 0}
        self.infer_us_last = 0
        self.infer_us_sum = 0
        self.infer_us_max = 0
        self.infer_n = 0

    def check_and_parse(self, path, manifest, signed=False, allow_downgrade=False):
        """Everything before a switch: the manifest's signature and version, then one read of the file that is
        both hashed and parsed, so the bytes that run are the bytes whose sha256 and size match the manifest (a
        file changed between a hash and a parse cannot run under another's manifest). Raises Refused. `signed`:
        this very manifest object passed `check_signature` already (an update checks it before the transfer;
        one ECDSA verify costs the C6 far more than the hash)."""
        if not isinstance(manifest, dict):
            raise Refused("parse", "manifest is not an object")
        if not signed:
            self.check_signature(manifest)
        self.check_forward(manifest, allow_downgrade)
        fmt = manifest.get("format", "npcm-int8")
        if not str(fmt).startswith("npcm"):
            raise Refused("parse", "format %r is not an .npcm model" % fmt)
        size = regular_size(path)
        if size != manifest.get("size", size):
            raise Refused("hash", "%s: %d B, the manifest says %s" % (path, size, manifest.get("size")))
        net = self._parse(path, size, manifest)
        if net.n_features != N_FEATURES or net.n_actions != N_ACTIONS:
            raise Refused(
                "parse",
                "expected %d features -> %d actions, found %d -> %d"
                % (N_FEATURES, N_ACTIONS, net.n_features, net.n_actions),
            )
        return Loaded(net, manifest, path)

    def check_forward(self, manifest, allow_downgrade=False):
        """Refused("version") for a model of another line, or older than the running one, unless allowed."""
        running = self.current.manifest if self.current is not None else None
        why = npcmanifest.forward(manifest, running, self.line, allow_downgrade)
        if why:
            raise Refused("version", why)

    def check_fits(self, manifest):
        """Refused("oom") for a model whose file is larger than the heap left after a collection: its weights are
        held in RAM once parsed, so it cannot load, and fetching it would only cost the link and the flash (as
        ESP-IDF's OTA checks an image's length against its partition before it writes)."""
        size = manifest.get("size") if isinstance(manifest, dict) else None
        if not isinstance(size, int):
            return  # the transfer checks the size it gets against the manifest's
        gc.collect()
        free = gc.mem_free()
        if size > free:
            raise Refused("oom", "model of %d B does not fit the %d B of free heap: not fetched" % (size, free))

    def check_signature(self, manifest):
        """Refused("signature") unless `manifest` is signed by the trusted key."""
        if self.key is None:
            raise Refused("signature", "no trusted key (trust.key) on this device")
        if not isinstance(manifest, dict) or not npcsig.verify_manifest(manifest, self.key):
            raise Refused("signature", "signature does not verify with the trusted key")

    def cold_check_and_parse(self, path, manifest, allow_downgrade=False):
        """`check_and_parse` as a cold start: the models in RAM are released first, so the load runs on a heap
        that holds no model, as at boot (back-to-back loads beside the running model and its rollback target
        fragmented a 300 KB heap into MemoryError). A refused cold load parses the released model again from
        its file, verified as any load, so the running model is kept (its probation is not restarted)."""
        self.check_signature(manifest)
        self.check_forward(manifest, allow_downgrade)  # against the running model, before it is released
        was = self.current
        kept = (was.path, was.manifest) if was is not None else None
        if was is not None and self.spare is None:
            self.spare = npcnn.Buffers.of(was.net)
        self.current = self.prev = was = None
        gc.collect()
        try:
            return self.check_and_parse(path, manifest, signed=True, allow_downgrade=True)
        except Refused:
            if kept is not None:
                self.current = self.check_and_parse(kept[0], kept[1], allow_downgrade=True)
            raise

    def _parse(self, path, size, manifest):
        """Parse the model file, hashing what the parser reads, into the spare arrays where their sizes match.
        On a MemoryError whatever does not run is let go (the rollback target of a model in probation: the switch
        that follows would drop it anyway; a spare of other shapes) and the parse is tried once more, into the
        rollback target's arrays when the spare's shapes were the new model's. A file whose bytes are not the
        manifest's is refused as `hash` whatever its parse did."""
        reuse, self.spare = self.spare, None
        for attempt in (0, 1):
            gc.collect()
            kept = reuse.count() if reuse is not None else 0
            try:
                with open(path, "rb") as f:
                    hashed = npcsig.Hashed(f)
                    model = npcnn.Model(hashed, True, reuse)
                try:
                    _same_bytes(path, hashed.hexdigest(), hashed.size, manifest)
                except Refused:
                    self._recycle(model)  # its arrays (the spare's, maybe) serve the next parse
                    raise
            except OSError as exc:
                raise Refused("parse", "cannot read %s: %s" % (path, exc))
            except MemoryError as exc:
                model = None
                gc.collect()
                _same_bytes(path, None, size, manifest)
                if attempt:
                    raise Refused("oom", "MemoryError while loading %s (%d B): %s" % (path, size, exc))
                same_shapes = reuse is None or reuse.count() != kept
                reuse = npcnn.Buffers.of(self.prev.net) if self.prev is not None and same_shapes else None
                self.prev = None
                continue
            except npcnn.ModelError as exc:
                _same_bytes(path, None, size, manifest)
                raise Refused("parse", "%s: %s" % (path, exc))
            if reuse is not None and reuse.count() == kept:  # another shape: nothing was taken, keep it
                self.spare = reuse
            return model

    def refuse(self, exc, manifest):
        """Report a refused load (the running model is untouched)."""
        self.counts["refused"] += 1
        self.counts["faults"] += 1
        running = self.current.version if self.current is not None else None
        self.emit(npcrecords.refused_record(exc.kind, exc.detail, self.clock.now(), manifest, running))

    def switch(self, model):
        """Make `model` current (one reference swap); keep the old one for rollback. Returns switch us."""
        t = self.clock.now()
        self.prev = self.current  # a model still in probation is dropped here
        self.current = model
        self.t_switch = self.clock.now()
        self.counts["loads"] += 1
        if self.spare is None and self.prev is None:  # the first model: its spare arrays, on a young heap
            try:
                self.spare = npcnn.Buffers.like(model.net)
            except MemoryError:  # a model this large leaves no room for a spare: the next load allocates anew
                self.spare = None
        gc.collect()
        switch_us = self.t_switch - t
        if self.on_current is not None:
            self.on_current(model)
        return switch_us

    def in_probation(self):
        """True within PROBATION_US of the last switch; afterwards the previous model is released."""
        if self.prev is None:
            return False
        if self.clock.now() - self.t_switch < PROBATION_US:
            return True
        self._recycle(self.prev.net)
        self.prev = None
        gc.collect()
        return False

    def _recycle(self, net):
        """Keep a released model's arrays for the next parse when it has the running model's shapes (the
        likely next model); drop a spare of other shapes."""
        running = npcnn.shapes(self.current.net) if self.current is not None else None
        if running and npcnn.shapes(net) == running:
            self.spare = npcnn.Buffers.of(net)
        elif self.spare is not None and self.spare.shapes != running:
            self.spare = None

    def _run(self, model, x):
        t0 = self.clock.now()
        result = model.net.infer(x)
        us = self.clock.now() - t0
        self.infer_us_last = us
        self.infer_us_sum += us
        self.infer_n += 1
        if us > self.infer_us_max:
            self.infer_us_max = us
        return result

    def infer(self, x):
        """((act, p, int8 probs), model that ran). In probation a crash or MemoryError rolls back and
        re-runs on the previous model; otherwise the fault is reported and the exception re-raised."""
        cur = self.current
        if cur is None:
            raise LookupError("no model loaded")
        watch = self.in_probation()
        t_start = self.clock.now()
        try:
            result = self._run(cur, x)
            if watch:
                self._check_memory()
            return result, cur
        except Exception as exc:  # MemoryError included: both are faults of the model
            t_fault = self.clock.now()
            cause = "oom" if isinstance(exc, MemoryError) else "crash"
            detail = "%s: %s" % (type(exc).__name__, exc)
            self.counts["faults"] += 1
            if not watch:
                self.emit(npcrecords.model_fault_record(cause, cur.version, detail, t_fault))
                raise
            prev = self.prev
            self.current = prev
            self.prev = None
            self._recycle(cur.net)
            if self.on_rolled_back is not None:
                self.on_rolled_back(cur)
            cur = cur.version
            gc.collect()
            rollback_us = self.clock.now() - t_fault
            self.counts["rollbacks"] += 1
            self.emit(
                npcrecords.rollback_record(
                    cause, cur, prev.version, self.t_switch, t_start, t_fault, rollback_us, detail
                )
            )
            if self.on_current is not None:
                self.on_current(prev)
            return self._run(prev, x), prev

    def _check_memory(self):
        """MemoryError when the live heap is above the memory limit (checked during probation)."""
        if self.mem_limit and hasattr(gc, "mem_alloc"):
            gc.collect()
            used = gc.mem_alloc() - (self.spare.nbytes if self.spare is not None else 0)  # the model's, not the reserve
            if used > self.mem_limit:
                raise MemoryError("heap in use %d B over the limit of %d B" % (used, self.mem_limit))

    def timing(self):
        """Per-inference time figures (us) for stats."""
        n = self.infer_n
        return {
            "infer_us_last": self.infer_us_last,
            "infer_us_mean": self.infer_us_sum // n if n else 0,
            "infer_us_max": self.infer_us_max,
            "infer_n": n,
        }
