"""The agents' arithmetic gives the same bits on every supported CPython (3.11 to 3.13).

CPython 3.12 made sum() of floats compensated; the feature code and the int8 softmax add left to right
(`npcfeat.lsum`) so a Jetson on Python 3.12 computes what the MicroPython and web agents compute. Each
interpreter found runs the golden feature streams and the fixture model's softmax in a subprocess and must
print the digests this interpreter prints (and the features' golden digest)."""

import inspect
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_npcfeat import GOLDEN_VECTORS_SHA256, random_stream, vectors_digest

REPO = Path(__file__).resolve().parents[2]
SUPPORTED = ("3.11", "3.12", "3.13")

SCRIPT = """
import hashlib, random, struct, sys
import npcfeat, npcnn
{random_stream}
{vectors_digest}
model = npcnn.load(sys.argv[1], False)
rng = random.Random(7)
probs = hashlib.sha256()
for _ in range(200):
    probs.update(bytes(p & 0xFF for p in model.infer([rng.uniform(-1, 1) for _ in range(48)])[2]))
print(vectors_digest(), probs.hexdigest())
"""


def interpreters() -> dict[str, str]:
    """Each supported CPython found: `pythonX.Y` on PATH, else under pyenv's versions folder, plus any named
    in HILBENCH_PYTHONS (paths separated by os.pathsep)."""
    found: dict[str, str] = {}
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for version in SUPPORTED:
        candidates = [shutil.which(f"python{version}"), *sorted(str(p) for p in pyenv.glob(f"{version}.*/bin/python"))]
        for path in filter(None, candidates):
            if _version_of(path) == version:
                found[version] = path
                break
    for path in filter(None, os.environ.get("HILBENCH_PYTHONS", "").split(os.pathsep)):
        found[_version_of(path) or path] = path
    return found


def _version_of(path: str) -> str | None:
    try:
        out = subprocess.run(
            [path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def digests(python: str) -> list[str]:
    script = SCRIPT.format(
        random_stream=inspect.getsource(random_stream), vectors_digest=inspect.getsource(vectors_digest)
    )
    model = REPO / "fixtures/models/npc-policy-int8.npcm"
    out = subprocess.run(
        [python, "-c", script, str(model)],
        env={**os.environ, "PYTHONPATH": str(REPO / "micropython")},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out.stdout.split()


def test_features_and_softmax_are_bit_identical_on_every_interpreter():
    found = interpreters()
    others = {v: p for v, p in found.items() if p != sys.executable}
    if not others:
        pytest.skip(f"no other CPython of {', '.join(SUPPORTED)} found (set HILBENCH_PYTHONS)")
    here = digests(sys.executable)
    assert here[0] == GOLDEN_VECTORS_SHA256
    for version, python in sorted(found.items()):
        assert digests(python) == here, f"Python {version} ({python}) computes other bits"
