// The agent wire protocol codec (docs/protocol.md): one message per line, `~{json}*crc32hex`.
// The JavaScript twin of bench/agent/wire.py; over a WebSocket one text message carries one line.

export const PROTO = 1;
export const MAX_LINE = 4096;
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

/** One message as a protocol line (with its newline). */
export function encode(msg) {
  const body = JSON.stringify(msg);
  const line = "~" + body + "*" + crc32hex(utf8.encode(body)) + "\n";
  if (utf8.encode(line).length > MAX_LINE) throw new Error(`message exceeds the ${MAX_LINE}-byte line limit`);
  return line;
}

function readableId(body) {
  try {
    const obj = JSON.parse(body);
    return obj && typeof obj === "object" && Number.isInteger(obj.id) ? obj.id : null;
  } catch {
    return null;
  }
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
  let msg;
  try {
    msg = JSON.parse(body);
  } catch {
    throw new WireError("bad_json", "payload is not valid JSON");
  }
  if (msg === null || typeof msg !== "object" || Array.isArray(msg)) throw new WireError("bad_json", "payload is not a JSON object");
  if (typeof msg.t !== "string") throw new WireError("bad_field", "message has no string 't' field", Number.isInteger(msg.id) ? msg.id : null);
  return msg;
}

export function error(code, detail, id = null) {
  const msg = { t: "error", code, detail };
  if (id !== null && id !== undefined) msg.id = id;
  return msg;
}

export function reply(request, t, fields = {}) {
  const msg = { t, ...fields };
  if (request && request.id !== null && request.id !== undefined) msg.id = request.id;
  return msg;
}
