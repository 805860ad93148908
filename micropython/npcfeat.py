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


def _mean(values):
    return lsum(values) / len(values) if values else 0.0


def _std(values):
    if len(values) < 2:
        return 0.0
    m = _mean(values)
    return math.sqrt(lsum([(v - m) * (v - m) for v in values]) / len(values))


def _mocap_summary(d):
    xs = d[0::3]
    ys = d[1::3]
    zs = d[2::3]
    hx = (d[33] + d[36]) / 2.0
    hy = (d[34] + d[37]) / 2.0
    hz = (d[35] + d[38]) / 2.0
    feet = math.sqrt((d[45] - d[48]) ** 2 + (d[46] - d[49]) ** 2 + (d[47] - d[50]) ** 2)
    return (
        _mean(xs),
        _mean(ys),
        _mean(zs),
        _std(xs),
        _std(ys),
        _std(zs),
        d[1] - hy,
        d[27] - hx,
        d[28] - hy,
        d[29] - hz,
        d[30] - hx,
        d[31] - hy,
        d[32] - hz,
        feet,
        hx,
        hy,
        hz,
    )


class Features:
    """The per-channel windows and the feature vector they give."""

    def __init__(self, window_ms=WINDOW_MS, max_per_channel=64):
        self.window_ms = window_ms
        self.max_per_channel = max_per_channel
        self.voice = []  # (ts, rms, zcr, pitch, voiced)
        self.gaze = []  # (ts, x, y, conf, step from the previous gaze sample)
        self.mocap = []  # (ts, summary tuple, left wrist step, right wrist step from the previous sample)
        self.events = []  # (ts, action index, hp, aggro, target)
        self.last_event = None
        self.now_ms = None
        self.seq = -1
        self.count = 0

    def _push(self, window, item):
        window.append(item)
        if len(window) > self.max_per_channel:
            window.pop(0)

    def add(self, ch, ts, d, seq=-1):
        """Add one input (`ch`, session time `ts` in ms, data `d` as in docs/protocol.md).

        Raises ValueError (with a message naming the problem) on malformed data."""
        ts = number(ts, "ts", -TS_BOUND_MS, TS_BOUND_MS)
        if ch == "voice":
            f = voice_features(a2b_base64(d))
            self._push(self.voice, (ts, f[0], f[1], f[2], f[3]))
        elif ch == "voicef":
            v = numbers(d, "voicef [rms, zcr, pitch_hz, voiced]", 4)
            self._push(self.voice, (ts, v[0], v[1], v[2], v[3]))
        elif ch == "gaze":
            g = numbers(d, "gaze [x, y, confidence]", 3)
            x = g[0]
            y = g[1]
            step = 0.0
            if self.gaze:  # the path length is summed over the window in vector(); each step is known now
                prev = self.gaze[-1]
                step = math.sqrt((x - prev[1]) ** 2 + (y - prev[2]) ** 2)
            self._push(self.gaze, (ts, x, y, g[2], step))
        elif ch == "mocap":
            v = numbers(d, "mocap (17 joints x [x, y, z])", 51)
            b = _mocap_summary([x / MOCAP_SCALE_M for x in v])
            lw = 0.0
            rw = 0.0
            if self.mocap:
                a = self.mocap[-1][1]
                lw = math.sqrt((b[7] - a[7]) ** 2 + (b[8] - a[8]) ** 2 + (b[9] - a[9]) ** 2)
                rw = math.sqrt((b[10] - a[10]) ** 2 + (b[11] - a[11]) ** 2 + (b[12] - a[12]) ** 2)
            self._push(self.mocap, (ts, b, lw, rw))
        elif ch == "action" or ch == "event":
            if not isinstance(d, dict):
                raise ValueError("an event is an object {action, target_id, context: {hp_ratio, aggro_level}}")
            action = d.get("action")
            idx = ACTIONS.index(action) if action in ACTIONS else len(ACTIONS) - 1
            ctx = d.get("context") or {}
            if not isinstance(ctx, dict):
                raise ValueError("an event's context is an object {hp_ratio, aggro_level}")
            hp = number(ctx.get("hp_ratio", 1.0), "hp_ratio")
            item = (ts, idx, hp, number(ctx.get("aggro_level", 0.0), "aggro_level"), d.get("target_id"))
            self._push(self.events, item)
            self.last_event = item
        else:
            raise ValueError("unknown channel '%s'" % ch)
        if self.now_ms is None or ts > self.now_ms:
            self.now_ms = ts
        if seq > self.seq:
            self.seq = seq
        self.count += 1

    def _recent(self, window):
        start = self.now_ms - self.window_ms
        while window and window[0][0] <= start:
            window.pop(0)
        return window

    def vector(self):
        """The 48 features of the window ending at the newest input (all zero before any input).

        Each mean is a plain left-to-right sum divided by the count, whichever way the columns are
        gathered, so every value is the same to the last bit on CPython and MicroPython."""
        out = [0.0] * N_FEATURES
        if self.now_ms is None:
            return out
        secs = self.window_ms / 1000.0
        v = self._recent(self.voice)
        if v:
            n = len(v)
            _, rms, zcr, pitch, voiced = zip(*v)  # noqa: B905 (MicroPython has no strict=)
            m = lsum(rms) / n
            out[0] = m
            out[1] = max(rms)
            out[2] = lsum(zcr) / n
            out[3] = lsum(pitch) / n / 500.0
            out[4] = lsum(voiced) / n
            out[5] = rms[-1]
            out[6] = rms[-1] - m
            out[7] = n / (VOICE_HZ * secs)
        g = self._recent(self.gaze)
        if g:
            n = len(g)
            _, xs, ys, conf, steps = zip(*g)  # noqa: B905
            out[8] = lsum(xs) / n
            out[9] = lsum(ys) / n
            out[10] = _std(xs)
            out[11] = _std(ys)
            out[12] = lsum(conf) / n
            out[13] = xs[-1]
            out[14] = ys[-1]
            if n > 1:
                dist = lsum(steps[1:])  # left to right, as the steps were walked
                span = max(g[-1][0] - g[0][0], 1.0)
                out[15] = dist / span * 100.0
        mo = self._recent(self.mocap)
        if mo:
            n = len(mo)
            _, rows, lws, rws = zip(*mo)  # noqa: B905
            cols = list(zip(*rows))  # noqa: B905
            for j in range(14):
                out[16 + j] = lsum(cols[j]) / n
            if n > 1:
                first = rows[0]
                last = rows[-1]
                span = max(mo[-1][0] - mo[0][0], 1.0) / 1000.0
                out[30] = (last[14] - first[14]) / span
                out[31] = (last[15] - first[15]) / span
                out[32] = (last[16] - first[16]) / span
                out[33] = lsum(lws[1:]) / span
                out[34] = lsum(rws[1:]) / span
            out[35] = n / (MOCAP_HZ * secs)
        last = self.last_event
        if last is not None:
            out[36 + last[1]] = 1.0
            out[42] = last[2]
            out[43] = last[3]
            age = self.now_ms - last[0]
            out[45] = 1.0 - age / 1000.0 if age < 1000.0 else 0.0
        ev = self._recent(self.events)
        if ev:
            n = len(ev)
            _, _, _, aggro, targets = zip(*ev)  # noqa: B905
            out[44] = lsum(aggro) / n
            out[46] = n / 10.0
            t0 = targets[0]
            out[47] = 1.0 if any(t != t0 for t in targets) else 0.0
        return [-1.0 if x < -1.0 else (1.0 if x > 1.0 else x) for x in out]
