// Read the input/output quantization of a .tflite file (a flatbuffer): LiteRT.js reports tensor shapes
// and types but not their scales and zero points, which int8 models need to take features and give
// probabilities. Reads only; any inconsistency throws (the caller refuses the model as `parse`).

class Table {
  constructor(view, pos) {
    if (pos < 0 || pos + 4 > view.byteLength) throw new RangeError("flatbuffer offset out of range");
    this.view = view;
    this.pos = pos;
    this.vtable = pos - view.getInt32(pos, true);
  }
  field(i) {
    const v = this.view;
    if (4 + 2 * i >= v.getUint16(this.vtable, true)) return 0;
    return v.getUint16(this.vtable + 4 + 2 * i, true);
  }
  ref(i) {
    const o = this.field(i);
    if (!o) return null;
    const at = this.pos + o;
    return at + this.view.getUint32(at, true);
  }
  table(i) {
    const at = this.ref(i);
    return at === null ? null : new Table(this.view, at);
  }
  vector(i) {
    const at = this.ref(i);
    if (at === null) return null;
    return { at: at + 4, length: this.view.getUint32(at, true) };
  }
  tableAt(vec, k) {
    const at = vec.at + 4 * k;
    return new Table(this.view, at + this.view.getUint32(at, true));
  }
}

function quantization(view, sub, tensors, index) {
  if (index < 0 || index >= tensors.length) throw new RangeError("tensor index out of range");
  const q = sub.tableAt(tensors, index).table(4);
  const scale = q && q.vector(2);
  const zp = q && q.vector(3);
  if (!scale || !scale.length) return { scale: 0, zeroPoint: 0 };
  return {
    scale: view.getFloat32(scale.at, true),
    zeroPoint: zp && zp.length ? Number(view.getBigInt64(zp.at, true)) : 0,
  };
}

/** {input: {scale, zeroPoint}, output: {...}} of the first subgraph's first input and output. */
export function ioQuantization(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const model = new Table(view, view.getUint32(0, true));
  const subs = model.vector(2);
  if (!subs || !subs.length) throw new RangeError("no subgraph");
  const sub = model.tableAt(subs, 0);
  const tensors = sub.vector(0);
  const inputs = sub.vector(1);
  const outputs = sub.vector(2);
  if (!tensors || !inputs || !outputs || !inputs.length || !outputs.length) throw new RangeError("no inputs or outputs");
  return {
    input: quantization(view, sub, tensors, view.getInt32(inputs.at, true)),
    output: quantization(view, sub, tensors, view.getInt32(outputs.at, true)),
  };
}
