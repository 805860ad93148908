"""The web agent's pure JavaScript modules against their Python twins, under Node: features, the wire codec,
the canonical manifest bytes a signature covers, DER signatures, bsdiff4-zlib patches, tflite quantization."""

from __future__ import annotations

import base64
import json
import random
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from bench.agent import wire
from bench.models.signing import DEV_PRIVATE_KEY, canonical_bytes, load_private_key, model_manifest, sign_manifest
from bench.ota.delta import make_patch

ROOT = Path(__file__).resolve().parents[2]
import npcfeat  # noqa: E402

NODE = shutil.which("node") or "node"  # Debian's nodejs, installed by .ci/setup


def node(request: dict) -> object:
    proc = subprocess.run(
        [NODE, str(ROOT / "web" / "tools" / "parity.mjs")],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(proc.stdout)


def random_session(rng: random.Random) -> list[list]:
    out = []
    for k in range(rng.randint(1, 60)):
        ts = k * rng.uniform(2, 30)
        ch = rng.choice(["voice", "voicef", "gaze", "mocap", "event"])
        if ch == "voice":
            pcm = np.asarray([rng.randint(-20000, 20000) for _ in range(160)], dtype="<i2").tobytes()
            d: object = base64.b64encode(pcm).decode()
        elif ch == "voicef":
            d = [rng.random(), rng.random() * 0.5, rng.uniform(0, 400), rng.randint(0, 1)]
        elif ch == "gaze":
            d = [rng.random(), rng.random(), rng.random()]
        elif ch == "mocap":
            d = [rng.uniform(-1, 2) for _ in range(51)]
        else:
            d = {
                "action": rng.choice(["attack", "defend", "move", "talk", "use", "dance"]),
                "target_id": rng.randint(1, 3),
                "context": {"hp_ratio": rng.random(), "aggro_level": rng.random()},
            }
        out.append([ch, ts, d])
    return out


def test_features_are_bit_identical_to_npcfeat():
    rng = random.Random(7)
    sessions = [random_session(rng) for _ in range(40)]
    got = node({"op": "features", "sequences": sessions})
    for seq, vec in zip(sessions, got, strict=True):
        f = npcfeat.Features()
        for k, (ch, ts, d) in enumerate(seq):
            f.add(ch, ts, d, k)
        assert vec == f.vector()


def _check(f) -> str | None:
    try:
        f()
    except ValueError as exc:
        return str(exc)
    return None


def test_out_of_range_values_are_refused_as_by_npcfeat():
    """The same inputs and values are refused (with the same messages, but for how a float is printed)."""
    x48 = [0.1] * 51
    inputs = [
        ["gaze", 1, [1e308, 0, 1]],
        ["gaze", 1, [0.5, -0.2, 1]],
        ["gaze", 1e13, [0, 0, 1]],
        ["gaze", 1, [0, 0]],
        ["voicef", 1, [0, 0, "x", 1]],
        ["voicef", 1, [0, 0, "1.5", True]],
        ["mocap", 1, [-2e6, *x48[1:]]],
        ["mocap", 1, x48],
        ["event", 1, {"context": {"hp_ratio": 1e99}}],
        ["event", 1, {"context": [1]}],
        ["event", 1, {"action": "talk", "context": {"hp_ratio": 0.5, "aggro_level": 1}}],
        ["smell", 1, [1]],
    ]
    nums = [[1e308, -1e6, 1e6], ["a", 0, 1], [" 2.5 ", 0, 3], ["inf", 0, 3], [None, 0, 1], [-1e12, -1e12, 1e12]]
    wholes = [[59.5, 1, 1000], [60, 1, 1000], [0, 1, 1000], [1e9, 0, 1e9], [1000.0, 1, 1000], [1001, 1, 1000]]
    got = node({"op": "checks", "inputs": inputs, "numbers": nums, "wholes": wholes})
    want_inputs = [_check(lambda c=c: npcfeat.Features().add(*c)) for c in inputs]
    want_numbers = [_check(lambda n=n: npcfeat.number(n[0], "v", n[1], n[2])) for n in nums]
    want_wholes = [_check(lambda n=n: npcfeat.whole(n[0], "v", n[1], n[2])) for n in wholes]
    assert [g is None for g in got["inputs"]] == [w is None for w in want_inputs], (got, want_inputs)
    assert [g is None for g in got["numbers"] + got["wholes"]] == [w is None for w in want_numbers + want_wholes]
    for g, w in zip(
        got["inputs"] + got["numbers"] + got["wholes"], want_inputs + want_numbers + want_wholes, strict=True
    ):
        if w is not None:
            assert g.split(":")[0] == w.split(":")[0] and g.split(" ")[-1] == w.split(" ")[-1], (g, w)


def test_canonical_bytes_match_the_signer():
    manifests = [
        {"name": "npc-policy", "version": 3, "sha256": "ab" * 32, "size": 9824, "format": "tflite-int8", "sig": "x"},
        {"name": "npc-pölicy ☃", "b": [1, "z", {"y": 2, "a": None}], "flag": True},
        {"algo": "bsdiff4-zlib", "layers": ["all"], "base_version": 1, "note": 'tab\there "quoted" \u007f 😀'},
    ]
    got = node({"op": "canonical", "manifests": manifests})
    assert got == [canonical_bytes(m).decode() for m in manifests]


def test_wire_lines_cross_between_the_codecs():
    msgs = [{"t": "hello", "id": 1}, {"t": "frame", "i": 3, "p": 0.71, "act": None, "d": "é"}]
    lines = node({"op": "encode", "messages": msgs})
    assert [wire.decode(line) for line in lines] == msgs
    assert lines[0] == wire.encode(msgs[0]).decode()  # the same bytes (non-ASCII: JS sends UTF-8, Python escapes)
    good = wire.encode({"t": "ping", "id": 5, "b0": 1}).decode()
    bad_crc = good[:-3] + ("0" if good[-3] != "0" else "1") + good[-2:]
    got = node({"op": "decode", "lines": [good, bad_crc, "~[1]*" + wire.crc32hex(b"[1]").decode(), "hello"]})
    assert got[0] == {"msg": {"t": "ping", "id": 5, "b0": 1}}
    assert got[1] == {"code": "bad_frame", "id": 5}
    assert got[2]["code"] == "bad_json" and got[3]["code"] == "bad_frame"


def test_der_signatures_become_raw_r_s():
    key = load_private_key(DEV_PRIVATE_KEY)
    sigs = [sign_manifest({"name": "m", "version": v}, key)["sig"] for v in range(20)]
    got = node({"op": "der", "sigs": sigs})
    for sig, raw in zip(sigs, got, strict=True):
        r, s = decode_dss_signature(base64.b64decode(sig))
        assert raw == (r.to_bytes(32, "big") + s.to_bytes(32, "big")).hex()


def test_bsdiff4_zlib_patches_apply_in_the_page_code():
    models = ROOT / "fixtures" / "models"
    old = (models / "npc-policy-int8.tflite").read_bytes()
    new = (models / "npc-policy-int8-v2.tflite").read_bytes()
    got = node({"op": "patch", "old": old.hex(), "patch": make_patch(old, new, "bsdiff4-zlib").hex()})
    assert bytes.fromhex(got) == new


def test_tflite_io_quantization_is_read_from_the_flatbuffer():
    from bench.models.tflite_read import parse_int8_policy

    path = ROOT / "fixtures" / "models" / "npc-policy-int8.tflite"
    got = node({"op": "quant", "path": str(path)})
    policy = parse_int8_policy(path.read_bytes(), "x")
    assert got["input"]["scale"] == pytest.approx(policy.mlp.in_scale, rel=1e-7)
    assert got["input"]["zeroPoint"] == policy.mlp.in_zp
    assert got["output"] == {"scale": 1 / 256, "zeroPoint": -128}
    assert model_manifest(path, "npc-policy", 1, "tflite-int8")["size"] == path.stat().st_size
