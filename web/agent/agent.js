// The NPC reference agent for the web target (docs/protocol.md), in a page of a browser: LiteRT.js on
// WebAssembly runs the model, requestAnimationFrame is the display clock, a WebSocket to the bench is the link.
// The JavaScript twin of host/npc_host_agent.py.
//
// The page is opened as index.html?link=ws://HOST:PORT/agent/NAME&store=/dev/NAME/ : `store` is the device's
// storage on its origin (agent.json, trusted.pub.pem, models/), `link` where the bench listens. The URL's
// fragment carries `token=...`: the page server takes the agent's writes (models/current.json,
// models/updates/*.tflite) only with it.

import * as wire from "./wire.js";
import * as npcsched from "./npcsched.js";
import { Features, N_FEATURES, numbers, whole } from "./npcfeat.js";
import { ModelManager, PROBATION_US, loadRuntime, nowUs } from "./models.js";
import { Refused, Verifier } from "./verify.js";
import { fetchUpdate } from "./update.js";
import * as npcmanifest from "./manifest.js";

const AGENT = "npc-web";
const VERSION = "0.1.0";
const CAPS = ["tflite", "int8", "float32", "rollback", "stats", "infer", "update-ws", "delta-bsdiff-zlib"];
const CURRENT = "current.json";
const SPIN_US = 1000; // sleep until this close to a deadline, then spin (timers are ~1 ms late)
const MAX_UNDELIVERED = 16;
const FRAME_SLACK_US = 4000; // an animation frame this close before a VSync tick waits for it by timer

const params = new URLSearchParams(location.search);
const STORE = new URL(params.get("store") || "./", location.href);
const LINK = params.get("link");
const TOKEN = new URLSearchParams(location.hash.slice(1)).get("token") || "";

const storeUrl = (path) => new URL(path, STORE).href;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const nextFrame = () => new Promise((r) => requestAnimationFrame(r));
// a hidden page gets no animation frames: then a timer stands in for the display (the stats say how many)
const frameOrTimer = (ms) =>
  Promise.race([nextFrame().then((ts) => ts), sleep(ms).then(() => null)]);

async function sleepUntil(tUs) {
  for (;;) {
    const rem = tUs - nowUs();
    if (rem <= 0) return;
    if (rem > SPIN_US) await sleep((rem - SPIN_US) / 1000);
    else {
      while (nowUs() < tUs);
      return;
    }
  }
}

class Agent {
  constructor(verifier, config, runtime) {
    this.config = config;
    this.runtime = runtime;
    this.link = null;
    this.undelivered = [];
    this.models = new ModelManager(verifier, (m) => this.broadcast(m), (config.mem_limit_mb || 0) * 1048576, (m) => this.remember(m));
    this.features = new Features();
    this.loop = null;
    this.stopping = false;
    this.loading = false;
    this.last = [null, null];
    this.errors = Object.fromEntries(wire.ERROR_CODES.map((c) => [c, 0]));
    this.counts = { frames: 0, inferences: 0, inputs: 0 };
    this.raf = { n: 0, sum: 0, sumSq: 0, prev: null }; // rAF intervals, for FPS and jitter under the browser's clock
    this.handlers = {
      hello: this.onHello, ping: this.onPing, load: this.onLoad, start: this.onStart, stop: this.onStop,
      in: this.onInput, stats: this.onStats, infer: this.onInfer, update: this.onUpdate, shutdown: this.onShutdown,
    };
    this.boot = [];
    this.writes = Promise.resolve();
    this.rx = ""; // the line being received: its first MAX_LINE + 1 characters at most
  }

  // -- link ------------------------------------------------------------------------------------------

  send(line) {
    if (this.link && this.link.readyState === WebSocket.OPEN) this.link.send(line);
  }

  broadcast(msg) {
    const line = wire.encodeReply(msg);
    if ((!this.link || this.link.readyState !== WebSocket.OPEN) && msg.t === "fault" && this.undelivered.length < MAX_UNDELIVERED) {
      this.undelivered.push(line);
    }
    this.send(line);
  }

  connect() {
    const link = new URL(LINK);
    link.searchParams.set("token", TOKEN); // the bench takes the link only with the device's token
    const ws = new WebSocket(link.href);
    ws.onopen = () => {
      this.link = ws;
      this.rx = ""; // a line cut off with the previous link is not continued on this one
      for (const text of this.boot) ws.send(text + "\n");
      ws.send(wire.encodeReply(this.helloMsg()));
      for (const line of this.undelivered) ws.send(line);
      this.undelivered = [];
    };
    ws.onmessage = (ev) => this.receive(String(ev.data), nowUs());
    ws.onclose = () => {
      if (this.link === ws) this.link = null;
      if (!this.exited) setTimeout(() => this.connect(), 300); // the bench may come back
    };
  }

  helloMsg() {
    const cur = this.models.current;
    return {
      t: "hello", proto: wire.PROTO, agent: AGENT, version: VERSION,
      platform: `web-${navigator.userAgent.match(/(HeadlessChrome|Chrome|Chromium|Firefox)\/[\d.]+/)?.[0] ?? "browser"}`,
      runtime: this.models.runtimeName, verifier: this.models.verifier.name,
      model: cur ? cur.info : null, caps: CAPS,
    };
  }

  /** Bytes from the link, as a stream (a message may carry part of a line, or several): each line ends at a
   *  newline; of a line longer than a protocol line only its first MAX_LINE + 1 characters are kept (the decoder
   *  answers that with one `bad_frame`) and the rest is read away, so a huge line never has to fit in memory. */
  async receive(text, rxUs) {
    const lines = [];
    let start = 0;
    for (;;) {
      const nl = text.indexOf("\n", start);
      const end = nl < 0 ? text.length : nl;
      const room = wire.MAX_LINE + 1 - this.rx.length;
      if (room > 0) this.rx += text.slice(start, Math.min(end, start + room));
      if (nl < 0) break;
      lines.push(this.rx);
      this.rx = "";
      start = nl + 1;
    }
    for (const line of lines) {
      if (line) await this.handleOne(line, rxUs);
    }
  }

  async handleOne(line, rxUs) {
    if (!line.startsWith("~")) return;
    let msg;
    try {
      msg = wire.decode(line);
    } catch (exc) {
      const code = exc instanceof wire.WireError ? exc.code : "bad_frame";
      this.errors[code]++;
      this.send(wire.encodeReply(wire.error(code, String(exc.message), exc.id ?? null)));
      return;
    }
    const handler = this.handlers[msg.t];
    const id = msg.id ?? null;
    if (!handler) {
      this.errors.unknown_type++;
      this.send(wire.encodeReply(wire.error("unknown_type", `no message type '${msg.t}'`, id)));
      return;
    }
    let reply;
    try {
      reply = await handler.call(this, msg, rxUs);
    } catch (exc) {
      if (exc instanceof Refused) reply = wire.error("refused", `${exc.kind}: ${exc.detail}`, id);
      else if (exc instanceof TypeError || exc instanceof RangeError) {
        reply = wire.error("bad_field", `${exc.name}: ${exc.message}`, id);
      } else reply = wire.error("internal", `${exc.name}: ${exc.message}`, id);
    }
    if (reply) {
      if (reply.t === "error") this.errors[reply.code] = (this.errors[reply.code] || 0) + 1;
      this.send(wire.encodeReply(reply));
    }
  }

  // -- requests --------------------------------------------------------------------------------------

  async onHello(msg) {
    return wire.reply(msg, "hello", this.helloMsg());
  }

  async onPing(msg, rxUs) {
    return wire.reply(msg, "pong", { b0: wire.number(msg.b0, "b0"), d: rxUs });
  }

  /** The URL of the file `path` names inside the models folder; Refused (saying nothing of the file) otherwise.
   *  The storage server decodes %-escapes, so the decoded path must stay inside the folder too. */
  modelUrl(path) {
    const root = new URL(storeUrl("models/"));
    let url = null;
    try {
      const u = typeof path === "string" && path ? new URL(path.replaceAll("\\", "/"), root) : null;
      const plain = u ? decodeURIComponent(u.pathname) : "";
      const inside = plain.startsWith(root.pathname) && plain.length > root.pathname.length;
      const dots = plain.split(/[\\/]/).some((seg) => seg === "." || seg === "..");
      const record = plain.toLowerCase().endsWith(".json"); // the agent's current.json, manifests: no model
      if (u && u.origin === root.origin && !u.search && !u.hash && inside && !dots && !record) url = u.href;
    } catch {
      // a malformed %-escape: not a file name this agent reads
    }
    if (!url) {
      const shown = typeof path === "string" ? `'${path}'` : JSON.stringify(path ?? null);
      throw new Refused("parse", `path ${shown}: not a file in the models folder`);
    }
    return url;
  }

  async readStored(path) {
    const res = await fetch(this.modelUrl(path), { cache: "no-store" });
    if (!res.ok) throw new Refused("parse", `cannot read ${path}: HTTP ${res.status}`);
    return new Uint8Array(await res.arrayBuffer());
  }

  async onLoad(msg, rxUs) {
    wire.text(msg.path, "path");
    const manifest = npcmanifest.fields(msg.manifest);
    if ("sig" in msg && !("sig" in manifest)) manifest.sig = msg.sig;
    if (this.loading) return wire.error("busy", "a load is in progress", msg.id);
    this.loading = true;
    let model;
    let verifyUs;
    try {
      const t0 = nowUs();
      const data = await this.readStored(msg.path);
      model = await this.models.checkAndParse(data, manifest, !!msg.allow_downgrade);
      verifyUs = nowUs() - t0;
    } catch (exc) {
      if (exc instanceof Refused) this.models.refuse(exc, manifest);
      throw exc;
    } finally {
      this.loading = false;
    }
    model.source = msg.path;
    const switchUs = this.models.switch(model);
    setTimeout(() => this.warmUp(), 0);
    await this.writes;
    return wire.reply(msg, "loaded", { model: model.info, verify_us: verifyUs, switch_us: switchUs, rx: rxUs });
  }

  async onUpdate(msg) {
    wire.text(msg.url, "url");
    const manifest = npcmanifest.fields(msg.manifest);
    if (!/^wss?:/.test(msg.url)) {
      const exc = new Refused("transfer", `this agent updates over ws:// only, not ${msg.url}`);
      this.models.refuse(exc, manifest); // every refusal comes with its fault record
      throw exc;
    }
    if (this.loading) return wire.error("busy", "a load is in progress", msg.id);
    this.loading = true;
    let model;
    let figures;
    let verifyUs;
    try {
      const allow = !!msg.allow_downgrade;
      // an older or foreign model: nothing is fetched (a forged manifest is refused as `signature` by the fetch)
      if (await this.models.verifier.signed(manifest)) this.models.checkForward(manifest, allow);
      const current = this.models.current ? this.models.current.data : null;
      const got = await fetchUpdate(msg.url, manifest, this.models.verifier, { delta: !!msg.delta, current });
      figures = got.figures;
      const t0 = nowUs();
      model = await this.models.checkAndParse(got.data, manifest, allow);
      verifyUs = nowUs() - t0;
      await this.store(`updates/${manifest.name}-${manifest.version}.tflite`, got.data);
    } catch (exc) {
      if (exc instanceof Refused) this.models.refuse(exc, manifest);
      throw exc;
    } finally {
      this.loading = false;
    }
    model.source = `updates/${manifest.name}-${manifest.version}.tflite`;
    const switchUs = this.models.switch(model);
    setTimeout(() => this.warmUp(), 0);
    await this.writes;
    return wire.reply(msg, "updated", { model: model.info, ...figures, verify_us: verifyUs, switch_us: switchUs });
  }

  /** Write a file into the device's storage (the bench's page server accepts PUT under models/, with the
   *  device's token). */
  async store(path, body) {
    try {
      await fetch(storeUrl("models/" + path), { method: "PUT", body, headers: { "X-Device-Token": TOKEN } });
    } catch {
      // storage unavailable: the agent still runs, and starts as deployed
    }
  }

  /** Record the current model (after a switch or a rollback) for the next start; writes go in order, and
   *  replies to load/update and shutdown wait for them, as the host agent writes before it replies. */
  remember(model) {
    if (!model.source) return;
    const record = JSON.stringify({ path: model.source, manifest: model.manifest });
    this.writes = this.writes.then(() => this.store(CURRENT, record));
  }

  warmUp() {
    if (this.models.current) this.models.infer(this.features.vector()).catch(() => {});
  }

  async onStart(msg) {
    if (this.loop) return wire.error("busy", "the frame loop is already running", msg.id);
    if (!this.models.current) return wire.error("not_loaded", "no model loaded", msg.id);
    const fps = whole(msg.fps ?? 60, "fps", 1, npcsched.MAX_HZ);
    const vsyncHz = whole(msg.vsync_hz ?? fps, "vsync_hz", 1, npcsched.MAX_HZ);
    const keyEvery = whole(msg.key_every ?? 1, "key_every", 1, npcsched.MAX_HZ);
    const frames = whole(msg.frames ?? 0, "frames", 0, npcsched.MAX_FRAMES);
    const sched = new npcsched.Scheduler(fps, vsyncHz, keyEvery);
    this.stopping = false;
    this.loop = this.frameLoop(sched, frames).finally(() => (this.loop = null));
    return wire.reply(msg, "ack");
  }

  async onStop(msg) {
    this.stopping = true;
    if (this.loop) await this.loop;
    return wire.reply(msg, "ack");
  }

  async onInput(msg) {
    try {
      this.features.add(msg.ch, msg.ts, msg.d, Number.isInteger(msg.seq) ? msg.seq : -1);
    } catch (exc) {
      return wire.error("bad_field", `input: ${exc.message}`); // counted with every error reply
    }
    this.counts.inputs++;
    return null;
  }

  async onStats(msg) {
    this.models.inProbation();
    const r = this.raf;
    const mean = r.n ? r.sum / r.n : 0;
    const raf = r.n ? { raf_frames: r.n, raf_interval_us: Math.round(mean), raf_jitter_us: Math.round(Math.sqrt(Math.max(0, r.sumSq / r.n - mean * mean))) } : {};
    return wire.reply(msg, "stats", {
      ...this.counts, ...this.models.memory(), ...this.models.counts, ...raf, timer_frames: this.timerFrames || 0,
      errors: Object.fromEntries(Object.entries(this.errors).filter(([, v]) => v)),
    });
  }

  async onInfer(msg) {
    const x = numbers(msg.x, "x", N_FEATURES);
    if (!this.models.current) return wire.error("not_loaded", "no model loaded", msg.id);
    const t0 = nowUs();
    const [y, model] = await this.models.infer(x);
    const us = nowUs() - t0;
    const act = y.indexOf(Math.max(...y));
    return wire.reply(msg, "result", { y: y.map((v) => +v.toFixed(6)), act, p: +y[act].toFixed(6), us, model: model.version });
  }

  async onShutdown(msg) {
    this.stopping = true;
    if (this.loop) await this.loop;
    await this.writes;
    this.exited = true;
    setTimeout(() => this.link && this.link.close(), 50);
    return wire.reply(msg, "bye");
  }

  // -- the frame loop: rAF is the display clock ---------------------------------------------------------

  noteRaf(tsMs) {
    const r = this.raf;
    if (r.prev !== null) {
      const d = (tsMs - r.prev) * 1000;
      r.n++;
      r.sum += d;
      r.sumSq += d * d;
    }
    r.prev = tsMs;
  }

  async frameLoop(sched, frames) {
    // VSyncs on a grid at vsync_hz anchored to a rAF timestamp: at the browser's own rate they are its
    // frames; the grid keeps the VSync timestamps exact (docs/protocol.md), rAF paces when they are taken.
    this.raf.prev = null;
    const first = await frameOrTimer(100);
    const origin = Math.floor((first ?? performance.now()) * 1000) + sched.vsyncUs;
    const clock = new npcsched.VsyncClock(sched.vsyncHz, origin);
    let taken = 0;
    const waitFrame = async () => {
      const ts = await frameOrTimer(sched.vsyncUs / 1000 + 20);
      if (ts === null) this.timerFrames = (this.timerFrames || 0) + 1;
      else this.noteRaf(ts);
    };
    for (;;) {
      const more = !this.stopping && (frames === 0 || taken < frames);
      const nxt = sched.nextDue();
      if (nxt === null && !more) break;
      if (nxt !== null && (!more || nxt.due <= clock.nextTick())) {
        await sleepUntil(nxt.due);
        await this.runSlot(sched, nxt); // one inference at a time, as on the other agents
      } else {
        // the display clock: each VSync is taken in a browser animation frame at or after it (one that comes a
        // little early waits for the tick); ticks more than a period behind are caught up at once
        const tick = clock.nextTick();
        if (tick > nowUs() - sched.vsyncUs) await waitFrame();
        if (tick - nowUs() > FRAME_SLACK_US) continue; // a slower display than the browser's: a later frame
        await sleepUntil(tick);
        if (this.stopping) continue;
        const slot = sched.onVsync(clock.take());
        taken++;
        if (slot.skip) this.emitFrame(slot, null);
      }
    }
    this.broadcast({ t: "stopped", frames: taken, inferences: sched.inferences, skipped: sched.skipped, late: sched.late });
  }

  async runSlot(sched, slot) {
    sched.begin(slot, nowUs());
    let version = null;
    try {
      const [y, model] = await this.models.infer(this.features.vector());
      const act = y.indexOf(Math.max(...y));
      this.last = [act, +y[act].toFixed(4)];
      version = model.version;
    } catch {
      this.last = [null, null]; // reported as a fault by the model manager
    }
    sched.finish(slot, nowUs());
    this.counts.inferences++;
    this.emitFrame(slot, version);
  }

  emitFrame(slot, version) {
    this.counts.frames++;
    const rec = {
      t: "frame", i: slot.i, vsync: slot.vsync, due: slot.due, ran: slot.t0 !== null,
      act: this.last[0], p: this.last[1], seq: this.features.seq, skip: slot.skip, late: slot.late, q: slot.q,
    };
    if (slot.t0 !== null) Object.assign(rec, { t0: slot.t0, t1: slot.t1, model: version });
    this.broadcast(rec);
  }
}

async function readJson(path) {
  const res = await fetch(storeUrl(path), { cache: "no-store" });
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
  return res.json();
}

async function main() {
  const config = await readJson("agent.json");
  const pem = await (await fetch(storeUrl("trusted.pub.pem"), { cache: "no-store" })).text();
  const verifier = await Verifier.fromPem(pem);
  const runtime = await loadRuntime(new URL(config.wasm_dir, location.href).href, config.litert_version);
  const agent = new Agent(verifier, config, runtime);
  window.npcAgent = agent;
  agent.boot.push(`${AGENT} ${VERSION} (${navigator.userAgent}, ${runtime}, verifier webcrypto)`);
  let saved = null;
  try {
    saved = await readJson("models/" + CURRENT);
  } catch {}
  try {
    const data = await agent.readStored(config.model);
    const model = await agent.models.checkAndParse(data, config.manifest, true);
    model.source = config.model;
    agent.models.switch(model);
    agent.models.line = config.manifest.name;
    agent.boot.push(`model ${config.manifest.name} v${config.manifest.version} loaded`);
  } catch (exc) {
    agent.boot.push(`model ${config.model} not loaded: ${exc.kind || exc.name}: ${exc.detail || exc.message}`);
  }
  if (saved && saved.manifest && typeof saved.path === "string") {
    const cur = agent.models.current;
    if (!cur || cur.manifest.sha256 !== saved.manifest.sha256) {
      try {
        const stored = await agent.readStored(saved.path.split("/models/").pop());
        const model = await agent.models.checkAndParse(stored, saved.manifest, true); // accepted when switched to
        model.source = saved.path.split("/models/").pop();
        agent.models.switch(model);
        await agent.models.infer(agent.features.vector()).catch(() => {});
        agent.boot.push(
          agent.models.current === model
            ? `remembered model ${saved.manifest.name} v${saved.manifest.version} loaded`
            : `remembered model v${saved.manifest.version} rolled back at start (see the fault)`,
        );
      } catch (exc) {
        agent.boot.push(`remembered model not loaded: ${exc.kind || exc.name}: ${exc.detail || exc.message}`);
      }
    }
  }
  agent.boot.forEach((line) => console.log(line));
  agent.connect();
  setInterval(() => agent.models.inProbation(), PROBATION_US / 3000); // release a previous model once probation ends
}

main().catch((exc) => {
  console.error(`npc-web: cannot start: ${exc.message}`);
  document.title = "npc-web failed";
});
