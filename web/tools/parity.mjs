// Runs the web agent's pure modules under Node for tests/unit/test_web_agent_js.py, which compares them with
// their Python twins. Reads one JSON request on stdin, prints one JSON answer.
import { readFileSync } from "node:fs";
import { Features, number, whole } from "../agent/npcfeat.js";
import { canonicalBytes, derToRaw } from "../agent/verify.js";
import * as wire from "../agent/wire.js";
import { applyPatch } from "../agent/patch.js";
import { ioQuantization } from "../agent/tflite.js";

const req = JSON.parse(readFileSync(0, "utf8"));
const hex = (b) => Buffer.from(b).toString("hex");
let out;
if (req.op === "features") {
  out = req.sequences.map((seq) => {
    const f = new Features();
    seq.forEach(([ch, ts, d], k) => f.add(ch, ts, d, k));
    return f.vector();
  });
} else if (req.op === "checks") {
  const check = (f) => {
    try {
      f();
      return null;
    } catch (exc) {
      return exc.message;
    }
  };
  out = {
    inputs: req.inputs.map(([ch, ts, d]) => check(() => new Features().add(ch, ts, d))),
    numbers: req.numbers.map(([v, low, high]) => check(() => number(v, "v", low, high))),
    wholes: req.wholes.map(([v, low, high]) => check(() => whole(v, "v", low, high))),
  };
} else if (req.op === "canonical") {
  out = req.manifests.map((m) => new TextDecoder().decode(canonicalBytes(m)));
} else if (req.op === "encode") {
  out = req.messages.map((m) => wire.encode(m));
} else if (req.op === "decode") {
  out = req.lines.map((l) => {
    try {
      return { msg: wire.decode(l) };
    } catch (exc) {
      return { code: exc.code, id: exc.id };
    }
  });
} else if (req.op === "der") {
  out = req.sigs.map((s) => hex(derToRaw(Buffer.from(s, "base64"))));
} else if (req.op === "patch") {
  out = hex(await applyPatch(Buffer.from(req.old, "hex"), Buffer.from(req.patch, "hex")));
} else if (req.op === "quant") {
  out = ioQuantization(readFileSync(req.path));
}
console.log(JSON.stringify(out));
