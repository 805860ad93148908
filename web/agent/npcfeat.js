// Windowed input features -> the policy model's 48 inputs: the JavaScript twin of micropython/npcfeat.py
// (the layout is in its docstring). Same inputs -> the same vector, to the last bit: the arithmetic is in
// the same order, in IEEE doubles as in Python.

export const N_FEATURES = 48;
export const WINDOW_MS = 250;
export const ACTIONS = ["attack", "defend", "move", "talk", "use", "other"];
const VOICE_HZ = 100;
const MOCAP_HZ = 90;
const PCM_RATE = 16000;
const MOCAP_SCALE_M = 2.0;
export const VALUE_BOUND = 1e6; // no input value or feature is anywhere near this; beyond it a value is a sender's bug
const TS_BOUND_MS = 1e12; // session time: about 31 years
const DECIMAL = /^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$/;

/** Python's %g, for messages the same as the other agents'. */
function fmtG(v) {
  if (v === 0) return "0";
  const exp = Math.floor(Math.log10(Math.abs(v)));
  if (exp < -4 || exp >= 6) {
    const [m, e] = v.toExponential(5).split("e");
    const mant = m.replace(/\.?0+$/, "");
    return `${mant}e${e[0]}${e.slice(1).padStart(2, "0")}`;
  }
  return String(+v.toPrecision(6));
}

/** Python's %r of a JSON value, for messages. */
function repr(v) {
  if (typeof v === "string") return `'${v}'`;
  if (typeof v === "number") return Number.isNaN(v) ? "nan" : v === Infinity ? "inf" : v === -Infinity ? "-inf" : String(v);
  if (typeof v === "boolean") return v ? "True" : "False";
  return v === null || v === undefined ? "None" : JSON.stringify(v);
}

/** `value` as a number in [low, high], as Python's float() takes it; RangeError naming `name` otherwise (NaN and
 *  the infinities too), which the agent answers with `bad_field`: a value like 1e308 must never reach a model. */
export function number(value, name, low = -VALUE_BOUND, high = VALUE_BOUND) {
  let v;
  if (typeof value === "number") v = value;
  else if (typeof value === "string" && DECIMAL.test(value)) v = Number(value.trim());
  else if (typeof value === "string" && /^\s*[+-]?(inf|infinity|nan)\s*$/i.test(value)) v = NaN;
  else throw new RangeError(`${name}: ${repr(value)} is not a number`);
  if (!(low <= v && v <= high)) throw new RangeError(`${name}: ${repr(value)} is out of range [${fmtG(low)}, ${fmtG(high)}]`);
  return v;
}

/** `value` as an integer in [low, high] (a number with a fraction is refused); RangeError otherwise. */
export function whole(value, name, low, high) {
  const v = number(value, name, low, high);
  if (!Number.isInteger(v)) throw new RangeError(`${name}: ${repr(value)} is not a whole number`);
  return v;
}

/** `count` numbers (see `number`) from the array `values`. */
export function numbers(values, name, count) {
  if (!Array.isArray(values) || values.length !== count) throw new RangeError(`${name} needs ${count} numbers`);
  return values.map((v) => number(v, name));
}

function b64bytes(s) {
  if (typeof s !== "string") throw new TypeError("voice needs base64 PCM");
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** [rms, zcr, pitch_hz, voiced] of one chunk of int16 little-endian PCM at 16 kHz. */
export function voiceFeatures(pcm) {
  const n = pcm.length >> 1;
  if (n === 0) return [0.0, 0.0, 0.0, 0];
  const view = new DataView(pcm.buffer, pcm.byteOffset, 2 * n);
  let acc = 0;
  let crossings = 0;
  let first = -1;
  let last = -1;
  let prev = view.getInt16(0, true) >= 0;
  for (let k = 0; k < n; k++) {
    const s = view.getInt16(2 * k, true);
    acc += s * s;
    const pos = s >= 0;
    if (pos !== prev) {
      crossings++;
      if (first < 0) first = k;
      last = k;
    }
    prev = pos;
  }
  const rms = Math.sqrt(acc / n) / 32768.0;
  const zcr = crossings / n;
  const voiced = rms > 0.02 && zcr < 0.25 ? 1 : 0;
  let pitch = 0.0;
  if (voiced && crossings >= 2 && last > first) pitch = ((crossings - 1) * PCM_RATE) / (2.0 * (last - first));
  return [rms, zcr, pitch, voiced];
}

function mean(values) {
  if (!values.length) return 0.0;
  let s = 0;
  for (const v of values) s += v;
  return s / values.length;
}

function std(values) {
  if (values.length < 2) return 0.0;
  const m = mean(values);
  let s = 0;
  for (const v of values) s += (v - m) * (v - m);
  return Math.sqrt(s / values.length);
}

const clip = (v) => (v < -1.0 ? -1.0 : v > 1.0 ? 1.0 : v);
const every = (d, start) => d.filter((_, k) => k % 3 === start);

function mocapSummary(d) {
  const hx = (d[33] + d[36]) / 2.0;
  const hy = (d[34] + d[37]) / 2.0;
  const hz = (d[35] + d[38]) / 2.0;
  const feet = Math.sqrt((d[45] - d[48]) ** 2 + (d[46] - d[49]) ** 2 + (d[47] - d[50]) ** 2);
  const xs = every(d, 0);
  const ys = every(d, 1);
  const zs = every(d, 2);
  return [
    mean(xs), mean(ys), mean(zs), std(xs), std(ys), std(zs),
    d[1] - hy, d[27] - hx, d[28] - hy, d[29] - hz, d[30] - hx, d[31] - hy, d[32] - hz,
    feet, hx, hy, hz,
  ];
}

export class Features {
  constructor(windowMs = WINDOW_MS, maxPerChannel = 64) {
    Object.assign(this, { windowMs, maxPerChannel });
    this.voice = [];
    this.gaze = [];
    this.mocap = [];
    this.events = [];
    this.lastEvent = null;
    this.nowMs = null;
    this.seq = -1;
    this.count = 0;
  }

  push(window, item) {
    window.push(item);
    if (window.length > this.maxPerChannel) window.shift();
  }

  /** Add one input; throws (TypeError/RangeError naming the problem) on malformed data. */
  add(ch, ts, d, seq = -1) {
    ts = number(ts, "ts", -TS_BOUND_MS, TS_BOUND_MS);
    if (ch === "voice") {
      const f = voiceFeatures(b64bytes(d));
      this.push(this.voice, [ts, f[0], f[1], f[2], f[3]]);
    } else if (ch === "voicef") {
      const v = numbers(d, "voicef [rms, zcr, pitch_hz, voiced]", 4);
      this.push(this.voice, [ts, v[0], v[1], v[2], v[3]]);
    } else if (ch === "gaze") {
      const g = numbers(d, "gaze [x, y, confidence]", 3);
      this.push(this.gaze, [ts, g[0], g[1], g[2]]);
    } else if (ch === "mocap") {
      const v = numbers(d, "mocap (17 joints x [x, y, z])", 51);
      this.push(this.mocap, [ts, mocapSummary(v.map((x) => x / MOCAP_SCALE_M))]);
    } else if (ch === "action" || ch === "event") {
      if (d === null || typeof d !== "object" || Array.isArray(d)) {
        throw new TypeError("an event is an object {action, target_id, context: {hp_ratio, aggro_level}}");
      }
      const idx = ACTIONS.includes(d.action) ? ACTIONS.indexOf(d.action) : ACTIONS.length - 1;
      const ctx = d.context || {};
      if (ctx === null || typeof ctx !== "object" || Array.isArray(ctx)) {
        throw new TypeError("an event's context is an object {hp_ratio, aggro_level}");
      }
      const hp = number(ctx.hp_ratio ?? 1.0, "hp_ratio");
      const item = [ts, idx, hp, number(ctx.aggro_level ?? 0.0, "aggro_level"), d.target_id ?? null];
      this.push(this.events, item);
      this.lastEvent = item;
    } else {
      throw new RangeError(`unknown channel '${ch}'`);
    }
    if (this.nowMs === null || ts > this.nowMs) this.nowMs = ts;
    if (seq > this.seq) this.seq = seq;
    this.count++;
  }

  recent(window) {
    const start = this.nowMs - this.windowMs;
    while (window.length && window[0][0] <= start) window.shift();
    return window;
  }

  /** The 48 features of the window ending at the newest input (all zero before any input). */
  vector() {
    const out = new Array(N_FEATURES).fill(0.0);
    if (this.nowMs === null) return out;
    const secs = this.windowMs / 1000.0;
    const v = this.recent(this.voice);
    if (v.length) {
      const rms = v.map((s) => s[1]);
      const m = mean(rms);
      out[0] = m;
      out[1] = Math.max(...rms);
      out[2] = mean(v.map((s) => s[2]));
      out[3] = mean(v.map((s) => s[3])) / 500.0;
      out[4] = mean(v.map((s) => s[4]));
      out[5] = rms[rms.length - 1];
      out[6] = rms[rms.length - 1] - m;
      out[7] = v.length / (VOICE_HZ * secs);
    }
    const g = this.recent(this.gaze);
    if (g.length) {
      const xs = g.map((s) => s[1]);
      const ys = g.map((s) => s[2]);
      out[8] = mean(xs);
      out[9] = mean(ys);
      out[10] = std(xs);
      out[11] = std(ys);
      out[12] = mean(g.map((s) => s[3]));
      out[13] = xs[xs.length - 1];
      out[14] = ys[ys.length - 1];
      if (g.length > 1) {
        let dist = 0.0;
        for (let k = 1; k < g.length; k++) dist += Math.sqrt((xs[k] - xs[k - 1]) ** 2 + (ys[k] - ys[k - 1]) ** 2);
        const span = Math.max(g[g.length - 1][0] - g[0][0], 1.0);
        out[15] = (dist / span) * 100.0;
      }
    }
    const mo = this.recent(this.mocap);
    if (mo.length) {
      for (let j = 0; j < 14; j++) out[16 + j] = mean(mo.map((s) => s[1][j]));
      if (mo.length > 1) {
        const first = mo[0][1];
        const last = mo[mo.length - 1][1];
        const span = Math.max(mo[mo.length - 1][0] - mo[0][0], 1.0) / 1000.0;
        out[30] = (last[14] - first[14]) / span;
        out[31] = (last[15] - first[15]) / span;
        out[32] = (last[16] - first[16]) / span;
        let lw = 0.0;
        let rw = 0.0;
        for (let k = 1; k < mo.length; k++) {
          const a = mo[k - 1][1];
          const b = mo[k][1];
          lw += Math.sqrt((b[7] - a[7]) ** 2 + (b[8] - a[8]) ** 2 + (b[9] - a[9]) ** 2);
          rw += Math.sqrt((b[10] - a[10]) ** 2 + (b[11] - a[11]) ** 2 + (b[12] - a[12]) ** 2);
        }
        out[33] = lw / span;
        out[34] = rw / span;
      }
      out[35] = mo.length / (MOCAP_HZ * secs);
    }
    const last = this.lastEvent;
    if (last !== null) {
      out[36 + last[1]] = 1.0;
      out[42] = last[2];
      out[43] = last[3];
      const age = this.nowMs - last[0];
      out[45] = age < 1000.0 ? 1.0 - age / 1000.0 : 0.0;
    }
    const ev = this.recent(this.events);
    if (ev.length) {
      out[44] = mean(ev.map((s) => s[3]));
      out[46] = ev.length / 10.0;
      const targets = ev.map((s) => s[4]);
      out[47] = targets.some((t) => t !== targets[0]) ? 1.0 : 0.0;
    }
    for (let k = 0; k < N_FEATURES; k++) out[k] = clip(out[k]);
    return out;
  }
}
