// Model verification in the browser: sha256 of the bytes and the ECDSA-P256 signature of the manifest's
// canonical bytes (docs/protocol.md), both with WebCrypto. The JavaScript twin of host/npc_verify.py.

export class Refused extends Error {
  /** A model failed a check; `kind` is the fault kind (hash, signature, parse, oom, transfer). */
  constructor(kind, detail) {
    super(detail);
    this.kind = kind;
    this.detail = detail;
  }
}

function sortedJson(value) {
  if (Array.isArray(value)) return "[" + value.map(sortedJson).join(",") + "]";
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value).sort();
    return "{" + keys.map((k) => JSON.stringify(k) + ":" + sortedJson(value[k])).join(",") + "}";
  }
  if (typeof value === "number" && !Number.isInteger(value)) {
    throw new Refused("signature", "manifest holds a non-integer number: no canonical form shared with the signer");
  }
  return JSON.stringify(value);
}

/** The bytes a signature covers: Python's json.dumps(m without sig, sort_keys, compact separators, ASCII). */
export function canonicalBytes(manifest) {
  const body = { ...manifest };
  delete body.sig;
  // ensure_ascii: every UTF-16 code unit past 0x7e as \uXXXX (surrogate pairs as two escapes, like Python)
  const text = sortedJson(body).replace(/[\u007f-\uffff]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  return new TextEncoder().encode(text);
}

export async function sha256hex(bytes) {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

function b64decode(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** DER ECDSA signature (SEQUENCE of two INTEGERs) -> the 64-byte r||s WebCrypto verifies. */
export function derToRaw(der) {
  let p = 0;
  const byte = () => {
    if (p >= der.length) throw new Error("truncated DER");
    return der[p++];
  };
  const length = () => {
    let n = byte();
    if (n & 0x80) {
      let k = n & 0x7f;
      n = 0;
      while (k--) n = (n << 8) | byte();
    }
    return n;
  };
  if (byte() !== 0x30) throw new Error("not a DER sequence");
  length();
  const out = new Uint8Array(64);
  for (let part = 0; part < 2; part++) {
    if (byte() !== 0x02) throw new Error("not a DER integer");
    let n = length();
    let v = der.subarray(p, p + n);
    p += n;
    while (v.length > 32 && v[0] === 0) v = v.subarray(1);
    if (v.length > 32) throw new Error("integer longer than 32 bytes");
    out.set(v, part * 32 + 32 - v.length);
  }
  if (p !== der.length) throw new Error("trailing bytes after the DER signature");
  return out;
}

export class Verifier {
  constructor(key) {
    this.key = key;
    this.name = "webcrypto";
  }

  /** A Verifier trusting the P-256 public key in `pem` (SubjectPublicKeyInfo). */
  static async fromPem(pem) {
    const body = pem.split(/\r?\n/).filter((l) => l && !l.startsWith("-----")).join("");
    const key = await crypto.subtle.importKey("spki", b64decode(body), { name: "ECDSA", namedCurve: "P-256" }, false, ["verify"]);
    return new Verifier(key);
  }

  /** True when manifest.sig is the trusted key's signature over the canonical bytes. */
  async signed(manifest) {
    let raw;
    try {
      raw = derToRaw(b64decode(String(manifest.sig ?? "")));
    } catch {
      return false;
    }
    return crypto.subtle.verify({ name: "ECDSA", hash: "SHA-256" }, this.key, raw, canonicalBytes(manifest));
  }

  /** Throw Refused (hash, signature) unless `data` matches the signed manifest. */
  async check(data, manifest) {
    if (manifest === null || typeof manifest !== "object") throw new Refused("parse", "manifest is not an object");
    const digest = await sha256hex(data);
    if (manifest.sha256 !== digest) throw new Refused("hash", `sha256 ${digest} does not match the manifest's ${manifest.sha256}`);
    if ("size" in manifest && manifest.size !== data.length) {
      throw new Refused("hash", `size ${data.length} does not match the manifest's ${manifest.size}`);
    }
    if (typeof manifest.sig !== "string") throw new Refused("signature", "manifest has no signature");
    if (!(await this.signed(manifest))) throw new Refused("signature", "signature does not verify with the trusted key");
  }
}
