"""The portable modules give the same results under the real MicroPython unix VM as under CPython."""

import inspect
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

import npcfeat  # noqa: E402
import npcrecords  # noqa: E402
import npcsched  # noqa: E402

from bench.agent import wire  # noqa: E402

MICROPYTHON = shutil.which("micropython") or str(Path(sys.executable).with_name("micropython"))

# MicroPython's side: the modules as top-level imports, then `portable_results` (its source, below) run on them
SCRIPT = r"""
import sys, json
import wire, npcsched, npcfeat, npcrecords
"""

INPUTS = [
    ("voice", 0, "AAAQABAAIAAw"),
    ("voicef", 10, [0.1, 0.05, 180.0, 1]),
    ("gaze", 4, [0.25, 0.5, 0.75]),
    ("gaze", 12, [0.5, 0.25, 0.5]),
    ("mocap", 11, [0.01 * k for k in range(51)]),
    ("mocap", 22, [0.012 * k for k in range(51)]),
    ("event", 20, {"action": "talk", "target_id": 3, "context": {"hp_ratio": 0.5, "aggro_level": 0.25}}),
]


def portable_results(line, inputs):
    """What the portable modules give for a wire `line` and feature `inputs`; the same source runs under both
    VMs (MicroPython gets it through inspect.getsource, so keep it to what MicroPython parses)."""
    out = {"line": wire.encode({"t": "x", "id": 4}).decode(), "decoded": wire.decode(line)}
    try:
        wire.decode(line[:-4] + "0000")
    except wire.WireError as e:
        out["err"] = [e.code, e.id]
    out["soft"] = wire._crc32_soft(b"hello world")
    f = npcfeat.Features()
    for ch, ts, d in inputs:
        f.add(ch, ts, d)
    out["vec"] = f.vector()
    s = npcsched.Scheduler(60, 144, key_every=2)
    c = npcsched.VsyncClock(144, 5)
    slots = []
    for k in range(12):
        sl = s.on_vsync(c.take())
        if sl.due is not None and k % 3 == 0:
            s.begin(sl, sl.due + 100)
            s.finish(sl, sl.due + 200)
        slots.append([sl.i, sl.vsync, sl.due, sl.skip, sl.q, sl.late])
    out["slots"] = slots
    held, taken = npcsched.Held(3), npcfeat.Features()
    held.start(1000)
    for seq, ts in enumerate((2, 1, 5, 9)):
        held.add(("gaze", ts, [0.5, 0.25, 0.5] if seq != 1 else "x", seq), 4000)
    refused = held.release(7000, taken)
    out["held"] = [len(held), held.late, held.late_max_us, len(refused), taken.seq, taken.vector()]
    out["hello"] = wire.hello("npc-x", "1.0", "p", {"caps": ["int8"]})
    out["records"] = [
        npcrecords.frame_record(sl, 3, 0.25, 17, 2),
        npcrecords.refused_record("signature", "bad", 99, {"name": "m", "version": 4, "x": 1}, 2),
        npcrecords.model_fault_record("oom", 3, "MemoryError: x", 120),
        npcrecords.rollback_record("crash", 3, 2, 100, 110, 120, 7, "boom"),
    ]
    return out


@pytest.mark.programs("micropython")
def test_same_results_under_micropython():
    line = wire.encode({"t": "frame", "i": 3, "p": 0.5, "ran": True, "d": [1, -2, 3.25]}).decode().rstrip("\n")
    prelude = f"ROOT = {str(ROOT)!r}\nLINE = {line!r}\nINPUTS = {json.dumps(INPUTS)}\n"
    run = "print(json.dumps(portable_results(LINE, INPUTS)))\n"
    script = prelude + SCRIPT + inspect.getsource(portable_results) + run
    path = f"{ROOT / 'bench' / 'agent'}:{ROOT / 'micropython'}:.frozen"  # the modules as deployed, flat
    proc = subprocess.run(
        [MICROPYTHON, "-c", script], capture_output=True, text=True, timeout=60, check=False, env={"MICROPYPATH": path}
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    mpy = json.loads(proc.stdout)
    cpy = portable_results(line, INPUTS)
    # key order may differ between the VMs; each side decodes the other's line
    assert wire.decode(mpy["line"]) == wire.decode(cpy["line"]) == {"t": "x", "id": 4}
    assert mpy["decoded"] == cpy["decoded"] and mpy["err"] == cpy["err"] == ["bad_frame", None]
    assert mpy["soft"] == cpy["soft"]
    assert mpy["slots"] == cpy["slots"]
    # the 4th input is over the limit of 3; 2 came after their due time; the one with bad data is refused
    assert mpy["held"] == cpy["held"] and cpy["held"][:5] == [0, 2, 2000, 1, 2]
    assert mpy["hello"] == cpy["hello"] and cpy["hello"]["proto"] == wire.PROTO
    assert mpy["vec"] == pytest.approx(cpy["vec"], abs=1e-9)
    assert any(v != 0 for v in cpy["vec"][:8])
