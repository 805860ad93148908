"""Windowed input features: the replayed channels -> the policy model's 48-feature vector.

Runs under MicroPython and CPython. Each input is reduced to a few numbers when it arrives (so the
window holds small tuples, not raw samples); `vector()` aggregates the window that ends at the newest
input timestamp. Same inputs -> same vector, whatever the timing of their arrival.

Layout (N_FEATURES = 48), every value roughly in [-1, 1]:
  0-7   voice  : mean rms, max rms, mean zcr, mean pitch/500, voiced fraction, last rms,
                 last rms - mean rms, samples / expected (100 Hz)
  8-15  gaze   : mean x, mean y, std x, std y, mean confidence, last x, last y, mean speed (per 100 ms)
  16-35 mocap  : mean over the window of the per-sample summary (14: centroid xyz, joint spread xyz,
                 head height over hips, left wrist - hips xyz, right wrist - hips xyz, feet spread),
                 hips velocity xyz (per s), left / right wrist speed (path per s), samples / expected (90 Hz)
  36-47  events: one-hot of the last action (attack, defend, move, talk, use, other), last hp_ratio,
                 last aggro_level, mean aggro_level, recency (1 at the event, 0 after 1 s),
                 events / 10, target changed within the window
Mocap positions are in metres, divided by MOCAP_SCALE_M (2 m). Joint order (17): COCO keypoints
(0 nose, 9/10 wrists, 11/12 hips, 15/16 ankles).
"""

import math
from array import array

try:
    from binascii import a2b_base64
except ImportError:  # pragma: no cover
    from ubinascii import a2b_base64

try:
    from struct import unpack
except ImportError:  # pragma: no cover
    from ustruct import unpack

N_FEATURES = 48
WINDOW_MS = 250
ACTIONS = ("attack", "defend", "move", "talk", "use", "other")
VOICE_HZ = 100
MOCAP_HZ = 90
PCM_RATE = 16000
MOCAP_SCALE_M = 2.0  # mocap positions (m) are divided by this, so a standing body fits in [-1, 1]
VALUE_BOUND = 1e6  # no input value or feature is anywhere near this; beyond it a value is a sender's bug
TS_BOUND_MS = 1e12  # session time: about 31 years


def number(value, name, low=-VALUE_BOUND, high=VALUE_BOUND):
    """`value` as a float in [low, high]; ValueError naming `name` otherwise (NaN and the infinities too),
    which the agents answer with `bad_field`: a value like 1e308 must never reach a model."""
    if isinstance(value, bool):  # JSON true/false are not numbers, though float() takes them
        raise ValueError("%s: %r is not a number" % (name, value))
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError("%s: %r is not a number" % (name, value))
    if not low <= v <= high:  # NaN fails every comparison, so it lands here with the infinities
        raise ValueError("%s: %r is out of range [%g, %g]" % (name, value, low, high))
    return v


def whole(value, name, low, high):
    """`value` as an int in [low, high] (a float with a fraction is refused); ValueError otherwise."""
    v = number(value, name, low, high)
    if v != int(v):
        raise ValueError("%s: %r is not a whole number" % (name, value))
    return int(v)


def numbers(values, name, count):
    """`count` numbers (see `number`) from the list `values`."""
    if not isinstance(values, (list, tuple)) or len(values) != count:
        raise ValueError("%s needs %d numbers" % (name, count))
    return [number(v, name) for v in values]


def voice_features(pcm):
    """[rms, zcr, pitch_hz, voiced] of one chunk of int16 little-endian PCM at 16 kHz (bytes).

    rms is normalised to full scale (0..1); zcr is zero crossings per sample; pitch is estimated from
    the spacing of the zero crossings (cheap enough for a microcontroller); voiced when loud enough and tonal."""
    n = len(pcm) // 2
    if n == 0:
        return [0.0, 0.0, 0.0, 0]
    samples = unpack("<%dh" % n, pcm[: 2 * n])
    acc = 0
    crossings = 0
    first = -1
    last = -1
    prev = samples[0] >= 0
    for k, s in enumerate(samples):
        acc += s * s
        pos = s >= 0
        if pos != prev:
            crossings += 1
            if first < 0:
                first = k
            last = k
        prev = pos
    rms = math.sqrt(acc / n) / 32768.0
    zcr = crossings / n
    voiced = 1 if (rms > 0.02 and zcr < 0.25) else 0
    pitch = 0.0
    if voiced and crossings >= 2 and last > first:
        # half a period between consecutive crossings: (crossings - 1) half periods over last - first samples
        pitch = (crossings - 1) * PCM_RATE / (2.0 * (last - first))
    return [rms, zcr, pitch, voiced]


def lsum(values):
    """The sum of `values` added left to right, one rounding per addition.

    CPython 3.12 made the built-in sum() of floats compensated (Neumaier), while CPython 3.11, MicroPython
    and JavaScript add plainly; this loop is the one order every agent uses, so features and softmax agree
    to the last bit on every supported interpreter."""
    total = 0
    for v in values:
        total += v
    return total


def lsum2(parts):
    """lsum over the views of `parts` one after the other: one sum, the same additions in the same order."""
    total = 0
    for values in parts:
        for v in values:
            total += v
    return total


def _std2(parts, n):
    """_std of the `n` values in the views of `parts` (n >= 2), the same operations in the same order."""
    m = lsum2(parts) / n
    total = 0
    for values in parts:
        for v in values:
            total += (v - m) * (v - m)
    return math.sqrt(total / n)


def _strided_mean(d, off):
    """The mean of d[off::3] (17 values of 51), summed left to right as lsum does."""
    total = 0
    for k in range(off, 51, 3):
        total += d[k]
    return total / 17


def _strided_std(d, off):
    """_std of d[off::3], the same operations in the same order."""
    m = _strided_mean(d, off)
    total = 0
    for k in range(off, 51, 3):
        total += (d[k] - m) * (d[k] - m)
    return math.sqrt(total / 17)


def _mocap_summary(d, out):
    """The 17 numbers of one mocap sample `d` (51 scaled coordinates) into `out`: centroid xyz, joint spread
    xyz, head height over hips, left wrist - hips xyz, right wrist - hips xyz, feet spread, hips xyz."""
    hx = (d[33] + d[36]) / 2.0
    hy = (d[34] + d[37]) / 2.0
    hz = (d[35] + d[38]) / 2.0
    out[0] = _strided_mean(d, 0)
    out[1] = _strided_mean(d, 1)
    out[2] = _strided_mean(d, 2)
    out[3] = _strided_std(d, 0)
    out[4] = _strided_std(d, 1)
    out[5] = _strided_std(d, 2)
    out[6] = d[1] - hy
    out[7] = d[27] - hx
    out[8] = d[28] - hy
    out[9] = d[29] - hz
    out[10] = d[30] - hx
    out[11] = d[31] - hy
    out[12] = d[32] - hz
    out[13] = math.sqrt((d[45] - d[48]) ** 2 + (d[46] - d[49]) ** 2 + (d[47] - d[50]) ** 2)
    out[14] = hx
    out[15] = hy
    out[16] = hz


class Ring:
    """The newest `cap` inputs of one channel, held in columns of one float64 array shared by all the rings of a
    `Features` (column 0: the session time). Adding an input allocates nothing that outlives it, so a long run does
    not scatter small blocks over the heap. A column of the window (oldest first) is up to two views, before and
    after the ring wraps: `col(c)`."""

    def __init__(self, store, base, ncols, cap):
        self.store = store
        self.view = memoryview(store)
        self.cap = cap
        self.bases = [base + cap * c for c in range(ncols)]
        self.start = 0
        self.n = 0

    @staticmethod
    def size(ncols, cap):
        """The floats a ring of `ncols` columns and `cap` inputs takes in the shared array."""
        return cap * ncols

    def push(self):
        """Room for one more input (the oldest goes when full); returns the index to `put` its values at."""
        if self.n == self.cap:
            self.start = (self.start + 1) % self.cap
            self.n -= 1
        i = (self.start + self.n) % self.cap
        self.n += 1
        return i

    def put(self, i, c, v):
        self.store[self.bases[c] + i] = v

    def get(self, k, c):
        """Column `c` of the k-th oldest input (k = n - 1: the newest)."""
        return self.store[self.bases[c] + (self.start + k) % self.cap]

    def col(self, c, skip=0):
        """Column `c` of the window, oldest first, without its first `skip` inputs: two views (no copy), the
        second empty unless the window wraps."""
        base = self.bases[c]
        cap = self.cap
        first = self.start + skip
        end = self.start + self.n
        view = self.view
        if first >= cap:
            return (view[base + first - cap : base + end - cap], view[base:base])
        if end <= cap:
            return (view[base + first : base + end], view[base:base])
        return (view[base + first : base + cap], view[base : base + end - cap])

    def drop_through(self, ts):
        """Forget the inputs at or before session time `ts`."""
        store = self.store
        base = self.bases[0]
        while self.n and store[base + self.start] <= ts:
            self.start = (self.start + 1) % self.cap
            self.n -= 1


# ring columns
V_RMS, V_ZCR, V_PITCH, V_VOICED = 1, 2, 3, 4
G_X, G_Y, G_CONF, G_STEP = 1, 2, 3, 4
M_ROW, M_LW, M_RW = 1, 18, 19  # M_ROW + j: the sample's summary value j (17)
E_AGGRO, E_RETARGET = 1, 2  # E_RETARGET: 1.0 when its target differs from the previous event's


class Features:
    """The per-channel windows and the feature vector they give."""

    def __init__(self, window_ms=WINDOW_MS, max_per_channel=64):
        self.window_ms = window_ms
        self.max_per_channel = max_per_channel
        cap = max_per_channel
        shapes = (5, 5, 20, 3)  # voice, gaze, mocap, events
        rings = 0
        for ncols in shapes:
            rings += Ring.size(ncols, cap)
        # one allocation for every window and buffer (its temporary initializer leaves one free block beside it,
        # not a hole after each array)
        store = array("d", bytes(8 * (rings + 51 + 17)))
        base = 0
        made = []
        for ncols in shapes:
            made.append(Ring(store, base, ncols, cap))
            base += Ring.size(ncols, cap)
        self.voice = made[0]  # ts, rms, zcr, pitch, voiced
        self.gaze = made[1]  # ts, x, y, conf, step from the previous gaze sample
        self.mocap = made[2]  # ts, summary (17), left / right wrist step from the previous sample
        self.events = made[3]  # ts, aggro, retarget
        self.last_target = None  # the previous event's target id (the only one kept: no string per event)
        view = memoryview(store)
        self.scratch = view[rings : rings + 51]  # one input's numbers, checked, before they are stored
        self.row = view[rings + 51 :]  # one mocap sample's summary (17)
        self.last_event = None  # [ts, action index, hp, aggro] of the newest event (one list, reused)
        self.now_ms = None
        self.seq = -1
        self.count = 0

    def _numbers(self, values, name, count):
        """`count` checked numbers (see `number`) from `values` into self.scratch."""
        if not isinstance(values, (list, tuple)) or len(values) != count:
            raise ValueError("%s needs %d numbers" % (name, count))
        buf = self.scratch
        for k, v in enumerate(values):
            t = type(v)  # a JSON number within the bound is taken as it is (bool is neither type); `number` checks
            # the rest and refuses them (a call per value was an eighth of a mocap input's cost on the RV32 core)
            buf[k] = v if (t is float or t is int) and -VALUE_BOUND <= v <= VALUE_BOUND else number(v, name)
        return buf

    def add(self, ch, ts, d, seq=-1):
        """Add one input (`ch`, session time `ts` in ms, data `d` as in docs/protocol.md).

        Raises ValueError (with a message naming the problem) on malformed data."""
        ts = number(ts, "ts", -TS_BOUND_MS, TS_BOUND_MS)
        if ch == "voice" or ch == "voicef":
            if ch == "voice":
                v = voice_features(a2b_base64(d))
            else:
                v = self._numbers(d, "voicef [rms, zcr, pitch_hz, voiced]", 4)
            r = self.voice
            i = r.push()
            r.put(i, 0, ts)
            for c in range(4):
                r.put(i, V_RMS + c, v[c])
        elif ch == "gaze":
            g = self._numbers(d, "gaze [x, y, confidence]", 3)
            r = self.gaze
            x = g[0]
            y = g[1]
            step = 0.0
            if r.n:  # the path length is summed over the window in vector(); each step is known now
                px = r.get(r.n - 1, G_X)
                py = r.get(r.n - 1, G_Y)
                step = math.sqrt((x - px) ** 2 + (y - py) ** 2)
            i = r.push()
            r.put(i, 0, ts)
            r.put(i, G_X, x)
            r.put(i, G_Y, y)
            r.put(i, G_CONF, g[2])
            r.put(i, G_STEP, step)
        elif ch == "mocap":
            v = self._numbers(d, "mocap (17 joints x [x, y, z])", 51)
            for k in range(51):
                v[k] = v[k] / MOCAP_SCALE_M
            b = self.row
            _mocap_summary(v, b)
            r = self.mocap
            lw = 0.0
            rw = 0.0
            if r.n:
                k = r.n - 1
                lw = math.sqrt(
                    (b[7] - r.get(k, M_ROW + 7)) ** 2
                    + (b[8] - r.get(k, M_ROW + 8)) ** 2
                    + (b[9] - r.get(k, M_ROW + 9)) ** 2
                )
                rw = math.sqrt(
                    (b[10] - r.get(k, M_ROW + 10)) ** 2
                    + (b[11] - r.get(k, M_ROW + 11)) ** 2
                    + (b[12] - r.get(k, M_ROW + 12)) ** 2
                )
            i = r.push()
            r.put(i, 0, ts)
            for j in range(17):
                r.put(i, M_ROW + j, b[j])
            r.put(i, M_LW, lw)
            r.put(i, M_RW, rw)
        elif ch == "action" or ch == "event":
            if not isinstance(d, dict):
                raise ValueError("an event is an object {action, target_id, context: {hp_ratio, aggro_level}}")
            action = d.get("action")
            idx = ACTIONS.index(action) if action in ACTIONS else len(ACTIONS) - 1
            ctx = d.get("context") or {}
            if not isinstance(ctx, dict):
                raise ValueError("an event's context is an object {hp_ratio, aggro_level}")
            hp = number(ctx.get("hp_ratio", 1.0), "hp_ratio")
            aggro = number(ctx.get("aggro_level", 0.0), "aggro_level")
            r = self.events
            i = r.push()
            r.put(i, 0, ts)
            r.put(i, E_AGGRO, aggro)
            target = d.get("target_id")
            r.put(i, E_RETARGET, 1.0 if target != self.last_target else 0.0)
            self.last_target = target
            last = self.last_event
            if last is None:
                last = self.last_event = [0.0, 0, 0.0, 0.0]
            last[0] = ts
            last[1] = idx
            last[2] = hp
            last[3] = aggro
        else:
            raise ValueError("unknown channel '%s'" % ch)
        if self.now_ms is None or ts > self.now_ms:
            self.now_ms = ts
        if seq > self.seq:
            self.seq = seq
        self.count += 1

    def _recent(self, ring):
        ring.drop_through(self.now_ms - self.window_ms)
        return ring.n

    def vector(self):
        """The 48 features of the window ending at the newest input (all zero before any input).

        Each mean is a plain left-to-right sum divided by the count, over the window's columns in input order,
        so every value is the same to the last bit on CPython and MicroPython."""
        out = [0.0] * N_FEATURES
        if self.now_ms is None:
            return out
        secs = self.window_ms / 1000.0
        v = self.voice
        n = self._recent(v)
        if n:
            rms = v.col(V_RMS)
            m = lsum2(rms) / n
            last = v.get(n - 1, V_RMS)
            out[0] = m
            out[1] = max(max(part) for part in rms if len(part))
            out[2] = lsum2(v.col(V_ZCR)) / n
            out[3] = lsum2(v.col(V_PITCH)) / n / 500.0
            out[4] = lsum2(v.col(V_VOICED)) / n
            out[5] = last
            out[6] = last - m
            out[7] = n / (VOICE_HZ * secs)
        g = self.gaze
        n = self._recent(g)
        if n:
            xs = g.col(G_X)
            ys = g.col(G_Y)
            out[8] = lsum2(xs) / n
            out[9] = lsum2(ys) / n
            out[10] = _std2(xs, n)
            out[11] = _std2(ys, n)
            out[12] = lsum2(g.col(G_CONF)) / n
            out[13] = g.get(n - 1, G_X)
            out[14] = g.get(n - 1, G_Y)
            if n > 1:
                dist = lsum2(g.col(G_STEP, 1))  # left to right, as the steps were walked
                span = max(g.get(n - 1, 0) - g.get(0, 0), 1.0)
                out[15] = dist / span * 100.0
        mo = self.mocap
        n = self._recent(mo)
        if n:
            for j in range(14):
                out[16 + j] = lsum2(mo.col(M_ROW + j)) / n
            if n > 1:
                span = max(mo.get(n - 1, 0) - mo.get(0, 0), 1.0) / 1000.0
                out[30] = (mo.get(n - 1, M_ROW + 14) - mo.get(0, M_ROW + 14)) / span
                out[31] = (mo.get(n - 1, M_ROW + 15) - mo.get(0, M_ROW + 15)) / span
                out[32] = (mo.get(n - 1, M_ROW + 16) - mo.get(0, M_ROW + 16)) / span
                out[33] = lsum2(mo.col(M_LW, 1)) / span
                out[34] = lsum2(mo.col(M_RW, 1)) / span
            out[35] = n / (MOCAP_HZ * secs)
        last = self.last_event
        if last is not None:
            out[36 + last[1]] = 1.0
            out[42] = last[2]
            out[43] = last[3]
            age = self.now_ms - last[0]
            out[45] = 1.0 - age / 1000.0 if age < 1000.0 else 0.0
        ev = self.events
        n = self._recent(ev)
        if n:
            out[44] = lsum2(ev.col(E_AGGRO)) / n
            out[46] = n / 10.0
            # some target differs from the window's first one <=> some event after the first changed target
            out[47] = 1.0 if n > 1 and lsum2(ev.col(E_RETARGET, 1)) > 0.0 else 0.0
        return [-1.0 if x < -1.0 else (1.0 if x > 1.0 else x) for x in out]
