// The web agent's models: LiteRT.js on WebAssembly, and the manager that switches atomically, watches a new
// model for 3 s and rolls it back on a crash or out of memory. The JavaScript twin of host/npc_models.py.
//
// Memory is the WebAssembly heap LiteRT.js runs in (its linear memory, which only grows); the limit is the
// device's memory_limit_mb. A model in probation is over it when it grew the heap past the limit.

import * as litert from "@litertjs/core";
import { ioQuantization } from "./tflite.js";
import { Refused } from "./verify.js";
import { forward } from "./manifest.js";

export const N_FEATURES = 48;
export const N_ACTIONS = 8;
export const PROBATION_US = 3000000;

/** The device clock: monotonic microseconds (performance.now(), never wraps). */
export const nowUs = () => Math.floor(performance.now() * 1000);

class OutOfMemory extends Error {}

let runtimeName = "litert.js (not loaded)";

/** Load LiteRT.js's WASM build from `wasmDir`; returns its name, which says whether the SIMD build ran. */
export async function loadRuntime(wasmDir, version) {
  const simd = await litert.supportsFeature("relaxedSimd");
  await litert.loadLiteRt(wasmDir);
  // LiteRT.js picks litert_wasm_internal (relaxed SIMD) when the browser has it, else litert_wasm_compat
  runtimeName = `litert.js ${version} wasm-${simd ? "relaxed-simd" : "compat (no SIMD)"}`;
  return runtimeName;
}

export function heapBytes() {
  const rt = litert.getGlobalLiteRt();
  return rt ? rt.liteRtWasm.HEAPU8.buffer.byteLength : 0;
}

// a failed WASM memory growth surfaces as a RangeError, or as LiteRT.js failing to create a tensor buffer
const isOom = (exc) =>
  exc instanceof OutOfMemory || exc instanceof RangeError || /memory|alloc|tensor_buffer/i.test(String(exc && exc.message));

export class Model {
  constructor(data, manifest, compiled, quant) {
    Object.assign(this, { data, manifest, compiled, quant });
    this.source = "";
    const inp = compiled.getInputDetails()[0];
    this.dtype = inp.dtype;
    this.shape = Array.from(inp.shape);
  }

  /** Parse and compile (before any switch): throws Refused("parse") when the runtime or shape says no. */
  static async parse(data, manifest) {
    const fmt = String(manifest.format ?? "tflite");
    if (!fmt.startsWith("tflite")) throw new Refused("parse", `format '${fmt}' is not a .tflite model`);
    let compiled;
    let quant;
    try {
      quant = ioQuantization(data);
      compiled = await litert.loadAndCompile(data, { accelerator: "wasm" });
    } catch (exc) {
      throw new Refused("parse", `the runtime refuses the model: ${String(exc.message || exc).split("\n")[0]}`);
    }
    const ins = compiled.getInputDetails();
    const outs = compiled.getOutputDetails();
    const fail = (detail) => {
      compiled.delete();
      throw new Refused("parse", detail);
    };
    if (ins.length !== 1 || outs.length !== 1) fail(`expected 1 input and 1 output, found ${ins.length} and ${outs.length}`);
    const inShape = Array.from(ins[0].shape);
    const outShape = Array.from(outs[0].shape);
    if (inShape[inShape.length - 1] !== N_FEATURES || outShape[outShape.length - 1] !== N_ACTIONS) {
      fail(`expected ${N_FEATURES} features -> ${N_ACTIONS} actions, found [${inShape}] -> [${outShape}]`);
    }
    if (!["int8", "float32"].includes(ins[0].dtype)) fail(`input type ${ins[0].dtype} is neither int8 nor float32`);
    return new Model(data, manifest, compiled, quant);
  }

  get info() {
    const out = {};
    for (const k of ["name", "version", "sha256", "size", "format"]) if (k in this.manifest) out[k] = this.manifest[k];
    return out;
  }

  get version() {
    return this.manifest.version;
  }

  /** Action probabilities (N_ACTIONS numbers) for one feature vector; `afterRun()` (the watchdog's memory
   *  check) runs right after the runtime, before its output is read. */
  async infer(x, afterRun = null) {
    const n = this.shape.reduce((a, b) => a * b, 1);
    let input;
    if (this.dtype === "int8") {
      const { scale, zeroPoint } = this.quant.input;
      input = new Int8Array(n);
      for (let k = 0; k < N_FEATURES; k++) {
        const v = x[k] / scale;
        const q = Math.trunc(v + (v < 0 || Object.is(v, -0) ? -0.5 : 0.5)) + zeroPoint;
        input[k] = q < -128 ? -128 : q > 127 ? 127 : q;
      }
    } else {
      input = new Float32Array(n);
      input.set(x);
    }
    const tensor = new litert.Tensor(input, this.shape);
    let outputs;
    try {
      outputs = await this.compiled.run(tensor);
    } finally {
      tensor.delete();
    }
    if (afterRun) {
      try {
        afterRun();
      } catch (exc) {
        for (const t of outputs) t.delete();
        throw exc;
      }
    }
    let raw;
    try {
      raw = outputs[0].toTypedArray();
    } finally {
      for (const t of outputs) t.delete();
    }
    const { scale, zeroPoint } = this.quant.output;
    const y = new Array(N_ACTIONS);
    for (let k = 0; k < N_ACTIONS; k++) y[k] = scale ? (raw[k] - zeroPoint) * scale : raw[k];
    // the output buffer must hold a probability distribution: LiteRT.js's release WASM build skips some
    // of the runtime's bounds checks (a GATHER out of range yields zeros), so the agent checks what it reads
    const sum = y.reduce((a, b) => a + b, 0);
    if (!y.every((v) => Number.isFinite(v) && v >= 0 && v <= 1) || Math.abs(sum - 1) > 0.1) {
      throw new Error(`runtime fault: the output is not a probability distribution (sum ${sum.toFixed(3)})`);
    }
    return y;
  }

  release() {
    if (this.compiled) this.compiled.delete();
    this.compiled = null;
  }
}

export class ModelManager {
  /** `emit(msg)` sends unsolicited messages (faults); `onCurrent(model)` hears of every switch and rollback. */
  constructor(verifier, emit, memLimit, onCurrent) {
    Object.assign(this, { verifier, emit, memLimit, onCurrent });
    this.current = null;
    this.prev = null;
    this.line = null; // the deployed model's name: a model of another name needs allow_downgrade
    this.tSwitch = 0;
    this.heapAtSwitch = 0;
    this.peak = 0;
    this.counts = { loads: 0, refused: 0, faults: 0, rollbacks: 0 };
  }

  get runtimeName() {
    return runtimeName;
  }

  /** Everything before a switch: hash, signature, version, parse. Throws Refused. */
  async checkAndParse(data, manifest, allowDowngrade = false) {
    await this.verifier.check(data, manifest);
    this.checkForward(manifest, allowDowngrade);
    return Model.parse(data, manifest);
  }

  /** Refused("version") for a model of another line, or older than the running one, unless allowed. */
  checkForward(manifest, allowDowngrade = false) {
    const why = forward(manifest, this.current ? this.current.manifest : null, this.line, allowDowngrade);
    if (why) throw new Refused("version", why);
  }

  refuse(exc, manifest) {
    this.counts.refused++;
    this.counts.faults++;
    const fault = { t: "fault", kind: exc.kind, detail: exc.detail, t_fault: nowUs() };
    if (manifest && typeof manifest === "object") {
      fault.model = {};
      for (const k of ["name", "version", "sha256"]) if (k in manifest) fault.model[k] = manifest[k];
    }
    if (this.current) fault.prev = { version: this.current.version };
    this.emit(fault);
  }

  switch(model) {
    const t = nowUs();
    if (this.prev) this.prev.release(); // a switch during probation drops the model in probation
    this.prev = this.current;
    this.current = model;
    this.tSwitch = nowUs();
    this.heapAtSwitch = heapBytes();
    this.counts.loads++;
    this.onCurrent(model);
    return this.tSwitch - t;
  }

  inProbation() {
    if (!this.prev) return false;
    if (nowUs() - this.tSwitch < PROBATION_US) return true;
    this.prev.release(); // probation passed: the previous model is no longer needed
    this.prev = null;
    return false;
  }

  checkMemory() {
    const heap = heapBytes();
    this.peak = Math.max(this.peak, heap);
    if (this.memLimit && heap > this.memLimit && heap > this.heapAtSwitch) {
      throw new OutOfMemory(`WASM heap grew to ${heap} B, over the limit of ${this.memLimit} B`);
    }
  }

  /** [probabilities, model]. A model in probation that faults is rolled back and the inference re-run on the
   *  previous one; outside probation the fault is reported and re-thrown (the model stays). */
  async infer(x) {
    const cur = this.current;
    if (!cur) throw new Error("no model loaded");
    const watch = this.inProbation();
    const tStart = nowUs();
    try {
      const y = await cur.infer(x, watch ? () => this.checkMemory() : null);
      if (!watch) this.peak = Math.max(this.peak, heapBytes());
      return [y, cur];
    } catch (exc) {
      if (watch && this.current !== cur) return [await this.current.infer(x), this.current]; // rolled back meanwhile
      const cause = isOom(exc) ? "oom" : "crash";
      const detail = `${exc.name || "Error"}: ${String(exc.message || exc).split("\n")[0]}`;
      const tFault = nowUs();
      this.counts.faults++;
      if (!watch) {
        this.emit({ t: "fault", kind: cause, model: { version: cur.version }, detail, t_fault: tFault });
        throw exc;
      }
      const prev = this.prev;
      this.current = prev; // the rollback: one reference swap back
      this.prev = null;
      this.onCurrent(prev);
      cur.release();
      const rollbackUs = nowUs() - tFault;
      this.counts.rollbacks++;
      this.emit({
        t: "fault",
        kind: "rollback",
        cause,
        model: { version: cur.version },
        prev: { version: prev.version },
        t_switch: this.tSwitch,
        t_start: tStart,
        t_fault: tFault,
        rollback_us: rollbackUs,
        detail,
      });
      return [await prev.infer(x), prev];
    }
  }

  memory() {
    const heap = heapBytes();
    this.peak = Math.max(this.peak, heap);
    return { mem: heap, mem_peak: this.peak, mem_limit: this.memLimit, model_bytes: this.current ? this.current.data.length : 0 };
  }
}
