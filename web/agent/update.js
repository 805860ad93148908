// `update` for the web agent: the signed model (or a bsdiff4-zlib delta) comes over a WebSocket from the
// bench's update server (bench/ota/ws_server.py, the same store as CoAP and gRPC), is verified with WebCrypto
// and only then switched to. An interrupted transfer keeps what arrived and resumes from that byte offset.
//
// Server protocol: connect to the resource's ws:// URL, send {"offset": N}; it answers {"size", "etag"},
// then binary chunks from N to the end, then {"done": true} (or {"error": ...}).
// Bounds: nothing past the signed size is kept (a delta manifest: MAX_MANIFEST bytes); a server that sends more,
// announces more, or changes its ETag mid-transfer is refused and what came is dropped (not kept to resume).

import { applyPatch } from "./patch.js";
import { Refused, sha256hex } from "./verify.js";
import { nowUs } from "./models.js";
import { fields } from "./manifest.js";

const MAX_MANIFEST = 4096; // bytes of a delta manifest (one is ~500)
const MAX_DEPTH = 16; // its nesting, as the wire protocol's

const partials = new Map(); // url -> {etag, chunks: [Uint8Array], bytes}: what an interrupted fetch kept

function concat(chunks, size) {
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/** Fetch one resource of at most `limit` bytes; resolves {data, blocks, bytes, resumedFrom} or throws
 *  Refused("transfer"). */
export function fetchResource(url, limit, timeoutMs = 10000) {
  const kept = partials.get(url);
  const offset = kept ? kept.bytes : 0;
  return new Promise((resolve, reject) => {
    let ws;
    try {
      ws = new WebSocket(url);
    } catch (exc) {
      reject(new Refused("transfer", `cannot open ${url}: ${exc.message}`));
      return;
    }
    ws.binaryType = "arraybuffer";
    let state = kept || { etag: null, chunks: [], bytes: 0 };
    let size = -1;
    let blocks = 0;
    let bytes = 0;
    let finished = false;
    let timer = null;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => fail(`no data for ${timeoutMs} ms`), timeoutMs);
    };
    const fail = (why, keep = true, kind = "transfer") => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      if (!keep) partials.delete(url);
      else if (state.bytes > 0 && state.etag) partials.set(url, state); // resume from here next time
      try {
        ws.close();
      } catch {}
      reject(new Refused(kind, `${url}: ${why}` + (keep ? ` (kept ${state.bytes} B to resume)` : "; nothing kept")));
    };
    if (!Number.isSafeInteger(limit) || limit < 0) {
      fail("no size to bound the transfer", false);
      return;
    }
    arm();
    ws.onopen = () => ws.send(JSON.stringify({ offset }));
    ws.onerror = () => fail("the connection failed");
    ws.onclose = () => fail("the server closed the connection");
    ws.onmessage = (ev) => {
      arm();
      if (typeof ev.data !== "string") {
        const chunk = new Uint8Array(ev.data);
        if (state.bytes + chunk.length > limit) {
          fail(`the server sends ${state.bytes + chunk.length} B or more, at most ${limit}`, false, "hash");
          return;
        }
        state.chunks.push(chunk);
        state.bytes += chunk.length;
        blocks++;
        bytes += chunk.length;
        return;
      }
      let msg;
      try {
        msg = JSON.parse(ev.data);
      } catch {
        fail("a text message that is not JSON");
        return;
      }
      if (msg.error) {
        partials.delete(url);
        state = { etag: null, chunks: [], bytes: 0 };
        fail(`server error: ${msg.error}`);
      } else if ("size" in msg) {
        size = msg.size;
        if (!Number.isSafeInteger(size) || size < 0 || size > limit || typeof msg.etag !== "string" || msg.etag.length > 64) {
          fail(`the server announces ${JSON.stringify(size).slice(0, 40)} B (at most ${limit}) or a bad ETag`, false, "hash");
          return;
        }
        if (state.etag !== null && state.etag !== msg.etag) {
          fail("the resource changed since the partial transfer", false);
          return;
        }
        state.etag = msg.etag;
      } else if (msg.done) {
        finished = true;
        clearTimeout(timer);
        partials.delete(url);
        ws.onclose = null;
        ws.close();
        if (state.bytes !== size) {
          reject(new Refused("transfer", `${url}: got ${state.bytes} B of ${size}`));
          return;
        }
        resolve({ data: concat(state.chunks, size), blocks, bytes, resumedFrom: offset });
      }
    };
  });
}

/** A fetched delta manifest: a JSON object nested at most MAX_DEPTH deep whose fields have their types;
 *  Refused("parse") naming what is wrong otherwise. */
function deltaManifest(bytes) {
  try {
    const text = new TextDecoder().decode(bytes);
    let depth = 0;
    let max = 0;
    for (const c of text.replace(/"(?:[^"\\]|\\.)*"/g, "")) {
      if (c === "[" || c === "{") max = Math.max(max, ++depth);
      else if (c === "]" || c === "}") depth--;
    }
    if (max > MAX_DEPTH) throw new TypeError(`nested deeper than ${MAX_DEPTH}`);
    return fields(JSON.parse(text), "delta manifest");
  } catch (exc) {
    throw new Refused("parse", `not a delta manifest: ${exc.message}`);
  }
}

/** The whole `update`: returns {data, figures} of the verified-to-download model (the caller parses it). */
export async function fetchUpdate(url, manifest, verifier, { delta = false, current = null } = {}) {
  const t0 = nowUs();
  if (!(await verifier.signed(manifest))) throw new Refused("signature", "manifest signature does not verify");
  let data;
  let blocks = 0;
  let bytes = 0;
  let resumedFrom = 0;
  let verifyUs = 0;
  if (delta) {
    const dm = deltaManifest((await fetchResource(url + "/manifest", MAX_MANIFEST)).data);
    const tv = nowUs();
    if (!(await verifier.signed(dm))) throw new Refused("signature", "delta manifest signature does not verify");
    if (dm.target !== manifest.sha256) throw new Refused("hash", "the delta is for another target model");
    if (!current || dm.base !== (await sha256hex(current))) throw new Refused("hash", "the delta is for another base model");
    verifyUs += nowUs() - tv;
    const got = await fetchResource(url, dm.patch_size);
    if ((await sha256hex(got.data)) !== dm.patch_sha256) throw new Refused("hash", "patch sha256 differs from its manifest");
    try {
      data = await applyPatch(current, got.data);
    } catch (exc) {
      throw new Refused("parse", `the patch does not apply: ${exc.message}`);
    }
    blocks = got.blocks + 1;
    bytes = got.bytes;
    resumedFrom = got.resumedFrom;
  } else {
    const got = await fetchResource(url, manifest.size);
    data = got.data;
    blocks = got.blocks;
    bytes = got.bytes;
    resumedFrom = got.resumedFrom;
  }
  const transferUs = nowUs() - t0 - verifyUs;
  return {
    data,
    figures: {
      blocks,
      bytes,
      retransmits: 0,
      resumed_from: resumedFrom,
      restarts: 0,
      delta_saved: delta ? Math.max(0, manifest.size - bytes) : 0,
      transfer_us: transferUs,
    },
  };
}
