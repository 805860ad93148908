// The agent wire protocol codec (docs/protocol.md): one message per line, `~{json}*crc32hex`.
// The JavaScript twin of bench/agent/wire.py; over a WebSocket one text message carries one line.

export const PROTO = 1;
export const MAX_LINE = 4096; // bytes of a line; a reply longer than this is never sent
export const MAX_DEPTH = 16; // arrays and objects nested in one message
export const MAX_TYPE = 32; // characters of `t`
export const MAX_ID = Number.MAX_SAFE_INTEGER; // largest `id` magnitude
export const MAX_TEXT = 256; // characters of a name, path or URL field the agent takes
export const MAX_DETAIL = 200; // characters of an error's `detail` (longer ones are cut)
export const ERROR_CODES = ["bad_frame", "bad_json", "unknown_type", "bad_field", "busy", "not_loaded", "refused", "internal"];

const TABLE = new Uint32Array(256);
for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  TABLE[n] = c >>> 0;
}

const utf8 = new TextEncoder();

/** CRC-32 (IEEE) of bytes, as 8 lowercase hex digits. */
export function crc32hex(bytes) {
  let crc = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) crc = TABLE[(crc ^ bytes[i]) & 0xff] ^ (crc >>> 8);
  return ((crc ^ 0xffffffff) >>> 0).toString(16).padStart(8, "0");
}

export class WireError extends Error {
  constructor(code, detail, id = null) {
    super(detail);
    this.code = code;
    this.detail = detail;
    this.id = id;
  }
}

/** One message as a protocol line (with its newline); throws over MAX_LINE. */
export function encode(msg) {
  const body = JSON.stringify(msg);
  const line = "~" + body + "*" + crc32hex(utf8.encode(body)) + "\n";
  const n = utf8.encode(line).length;
  if (n > MAX_LINE) throw new RangeError(`message of ${n} bytes exceeds the ${MAX_LINE}-byte line limit`);
  return line;
}

/** `encode(msg)`, but a message over the line limit becomes an `internal` error that says so (with its id). */
export function encodeReply(msg) {
  try {
    return encode(msg);
  } catch (exc) {
    return encode(error("internal", `reply '${String(msg.t).slice(0, MAX_TYPE)}' not sent: ${exc.message}`, msg.id ?? null));
  }
}

const validId = (v) => Number.isSafeInteger(v);

function readableId(body) {
  if (!shallow(body)) return null;
  try {
    const obj = JSON.parse(body);
    return obj && typeof obj === "object" && validId(obj.id) ? obj.id : null;
  } catch {
    return null;
  }
}

/** True when `body` nests at most MAX_DEPTH arrays and objects (strings skipped). */
function shallow(body) {
  let depth = 0;
  let inStr = false;
  let escaped = false;
  for (let i = 0; i < body.length; i++) {
    const c = body.charCodeAt(i);
    if (inStr) {
      if (escaped) escaped = false;
      else if (c === 92) escaped = true;
      else if (c === 34) inStr = false;
    } else if (c === 34) inStr = true;
    else if (c === 91 || c === 123) {
      if (++depth > MAX_DEPTH) return false;
    } else if (c === 93 || c === 125) depth--;
  }
  return true;
}

/** The message carried by a protocol line; throws WireError (bad_frame, bad_json, bad_field). */
export function decode(text) {
  const line = text.replace(/[\r\n]+$/, "");
  if (utf8.encode(line).length > MAX_LINE) throw new WireError("bad_frame", `line exceeds ${MAX_LINE} bytes`);
  if (!line.startsWith("~")) throw new WireError("bad_frame", "line does not start with '~'");
  const star = line.lastIndexOf("*");
  if (star < 0 || line.length - star !== 9) throw new WireError("bad_frame", "no '*crc32' trailer", readableId(line.slice(1)));
  const body = line.slice(1, star);
  if (line.slice(star + 1).toLowerCase() !== crc32hex(utf8.encode(body))) {
    throw new WireError("bad_frame", "CRC mismatch", readableId(body));
  }
  if (!shallow(body)) throw new WireError("bad_json", `payload nests arrays and objects deeper than ${MAX_DEPTH}`);
  let msg;
  try {
    msg = JSON.parse(body);
  } catch {
    throw new WireError("bad_json", "payload is not valid JSON");
  }
  if (msg === null || typeof msg !== "object" || Array.isArray(msg)) throw new WireError("bad_json", "payload is not a JSON object");
  const id = msg.id ?? null;
  if (id !== null && !validId(id)) throw new WireError("bad_field", `'id' is not an integer of at most ${MAX_ID}`);
  if (typeof msg.t !== "string") throw new WireError("bad_field", "message has no string 't' field", id);
  if (msg.t.length > MAX_TYPE) throw new WireError("unknown_type", `message type of ${msg.t.length} characters (at most ${MAX_TYPE})`, id);
  return msg;
}

/** `value` when it is a string of at most `limit` characters; a TypeError (answered `bad_field`) otherwise. */
export function text(value, name, limit = MAX_TEXT) {
  if (typeof value !== "string") throw new TypeError(`${name} must be a string`);
  if (value.length > limit) throw new TypeError(`${name} of ${value.length} characters (at most ${limit})`);
  return value;
}

/** `value` when it is a finite number of at most MAX_ID * 1e6 in magnitude, or null; a TypeError otherwise. */
export function number(value, name) {
  if (value === undefined || value === null) return null;
  if (typeof value !== "number" || !(Math.abs(value) <= MAX_ID * 1e6)) throw new TypeError(`${name} must be a number`);
  return value;
}

export function error(code, detail, id = null) {
  if (detail.length > MAX_DETAIL) detail = detail.slice(0, MAX_DETAIL - 3) + "...";
  const msg = { t: "error", code, detail };
  if (id !== null && id !== undefined) msg.id = id;
  return msg;
}

export function reply(request, t, fields = {}) {
  const msg = { t, ...fields };
  if (request && request.id !== null && request.id !== undefined) msg.id = request.id;
  return msg;
}
