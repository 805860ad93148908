// The VSync-aligned frame scheduler: the JavaScript twin of micropython/npcsched.py (same rules, same
// integer microsecond arithmetic; tests/conformance runs the same scenarios through both).

export const DEBOUNCE_US = 8000;
export const PUSH_US = 16000;
export const MAX_QUEUE = 2;
export const MAX_HZ = 1000; // frame and vsync rates above this are a sender's bug (a frame period under 1 ms)
export const MAX_FRAMES = 1000000000;

export class Slot {
  constructor(i, vsync, due, key, skip, q) {
    Object.assign(this, { i, vsync, due, key, skip, q, late: false, t0: null, t1: null });
  }
}

export class Scheduler {
  constructor(fps, vsyncHz, keyEvery = 1, debounceUs = DEBOUNCE_US, pushUs = PUSH_US, maxQueue = MAX_QUEUE) {
    if (!(fps > 0 && fps <= MAX_HZ && vsyncHz > 0 && vsyncHz <= MAX_HZ) || !(keyEvery >= 1) || !(maxQueue >= 1)) {
      throw new RangeError(`fps and vsync_hz must be in 1..${MAX_HZ}, key_every and max_queue >= 1`);
    }
    Object.assign(this, { fps, vsyncHz, keyEvery, debounceUs, pushUs, maxQueue });
    this.frameUs = Math.floor(1000000 / fps);
    this.vsyncUs = Math.floor(1000000 / vsyncHz);
    this.pending = [];
    this.prevDue = null;
    this.frames = 0;
    this.skipped = 0;
    this.late = 0;
    this.inferences = 0;
  }

  onVsync(vsync) {
    const i = this.frames++;
    const key = i % this.keyEvery === 0;
    if (!key || this.pending.length >= this.maxQueue) {
      this.skipped++;
      return new Slot(i, vsync, null, key, true, this.pending.length);
    }
    let due = vsync + this.frameUs;
    if (this.prevDue !== null && due < this.prevDue + this.debounceUs) due = this.prevDue + this.pushUs;
    this.prevDue = due;
    const slot = new Slot(i, vsync, due, key, false, this.pending.length + 1);
    this.pending.push(slot);
    return slot;
  }

  nextDue() {
    return this.pending.find((s) => s.t0 === null) ?? null;
  }

  begin(slot, t0) {
    slot.t0 = t0;
    const afterDue = slot.vsync + (Math.floor((slot.due - slot.vsync) / this.vsyncUs) + 1) * this.vsyncUs;
    slot.late = t0 >= afterDue;
    if (slot.late) this.late++;
  }

  finish(slot, t1) {
    slot.t1 = t1;
    this.inferences++;
    const k = this.pending.indexOf(slot);
    if (k >= 0) this.pending.splice(k, 1);
  }
}

export class VsyncClock {
  constructor(vsyncHz, origin) {
    Object.assign(this, { vsyncHz, origin, n: 0 });
  }
  tickAt(n) {
    return this.origin + Math.floor((n * 1000000) / this.vsyncHz);
  }
  nextTick() {
    return this.tickAt(this.n);
  }
  take() {
    return this.tickAt(this.n++);
  }
}
