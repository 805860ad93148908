// The conformance suite's scheduler scenario (tests/conformance/test_scheduler_rules.py) for the web agent:
// the same display loop and accelerator, run on web/agent/npcsched.js under Node. Reads the `CONFIGS = [...]`
// line of the scenario file the suite writes; prints the slots as JSON.
import { readFileSync } from "node:fs";
import { Scheduler, VsyncClock } from "../agent/npcsched.js";

function run(fps, vsyncHz, keyEvery, inferUs, n) {
  const sched = new Scheduler(fps, vsyncHz, keyEvery);
  const clock = new VsyncClock(vsyncHz, 1000000);
  const slots = [];
  let running = null;
  let now = 1000000;
  while (slots.length < n || sched.pending.length) {
    const events = [];
    if (running !== null) events.push([running.t0 + inferUs, 0]);
    else if (sched.nextDue() !== null) events.push([Math.max(sched.nextDue().due, now), 1]);
    if (slots.length < n) events.push([clock.nextTick(), 2]);
    events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    const [when, what] = events[0];
    now = when;
    if (what === 0) {
      sched.finish(running, when);
      running = null;
    } else if (what === 1) {
      running = sched.nextDue();
      sched.begin(running, when);
    } else slots.push(sched.onVsync(clock.take()));
  }
  return slots.map((s) => [s.i, s.vsync, s.due, s.key, s.skip, s.q, s.late, s.t0, s.t1]);
}

const line = readFileSync(process.argv[2], "utf8").split("\n").find((l) => l.startsWith("CONFIGS = "));
const out = {};
for (const cfg of JSON.parse(line.slice("CONFIGS = ".length))) out[cfg.join("/")] = run(...cfg, 90);
console.log(JSON.stringify(out));
