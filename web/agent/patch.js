// Apply a bsdiff4-zlib patch (bench/ota/delta.py: magic BSDIFFZ1, control raw, diff zlib, extra raw) in
// memory: the browser's DecompressionStream inflates the diff block. Throws on a damaged patch.

function int64(view, at) {
  const lo = view.getUint32(at, true);
  const hi = view.getUint32(at + 4, true);
  const value = (hi & 0x7fffffff) * 2 ** 32 + lo;
  return hi & 0x80000000 ? -value : value;
}

async function inflate(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** `new` from `old` and a bsdiff4-zlib patch. */
export async function applyPatch(old, patch) {
  const view = new DataView(patch.buffer, patch.byteOffset, patch.byteLength);
  if (patch.length < 32 || new TextDecoder().decode(patch.subarray(0, 8)) !== "BSDIFFZ1") {
    throw new Error("not a bsdiff4-zlib patch");
  }
  const ctrlLen = int64(view, 8);
  const diffLen = int64(view, 16);
  const newSize = int64(view, 24);
  if (ctrlLen < 0 || diffLen < 0 || newSize < 0 || ctrlLen % 24 || 32 + ctrlLen + diffLen > patch.length) {
    throw new Error("header lengths are out of range");
  }
  const diff = await inflate(patch.subarray(32 + ctrlLen, 32 + ctrlLen + diffLen));
  const extra = patch.subarray(32 + ctrlLen + diffLen);
  const out = new Uint8Array(newSize);
  let written = 0;
  let oldPos = 0;
  let diffPos = 0;
  let extraPos = 0;
  for (let c = 32; c < 32 + ctrlLen; c += 24) {
    const add = int64(view, c);
    const copy = int64(view, c + 8);
    const seek = int64(view, c + 16);
    if (add < 0 || copy < 0 || written + add + copy > newSize || diffPos + add > diff.length || extraPos + copy > extra.length) {
      throw new Error("control block is inconsistent");
    }
    for (let k = 0; k < add; k++) {
      const o = oldPos + k;
      out[written + k] = (diff[diffPos + k] + (o >= 0 && o < old.length ? old[o] : 0)) & 0xff;
    }
    out.set(extra.subarray(extraPos, extraPos + copy), written + add);
    written += add + copy;
    diffPos += add;
    extraPos += copy;
    oldPos += add + seek;
  }
  if (written !== newSize) throw new Error(`produced ${written} bytes, the header says ${newSize}`);
  return out;
}
