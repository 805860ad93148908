"""npcnn, p256 and npcsig inside the real MicroPython unix VM, against tflite-micro and `cryptography`."""

import json
import os
import subprocess

import numpy as np
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from bench.bundles.mpy_board import ESP32C6_HEAP, micropython_exe
from bench.core.paths import MICROPYTHON_DIR
from bench.models import model_file
from bench.models.policy import calibration_inputs
from bench.models.signing import public_key_raw
from bench.models.tflite_read import read_int8_policy
from bench.testkit import reference as R
from tests.e2e.test_models_runtimes import tflite_micro_outputs

pytestmark = pytest.mark.e2e

INFER = """
import sys, json, npcnn
model = npcnn.load(sys.argv[1], sys.argv[2] == "native")
out = []
for line in sys.stdin:
    out.append(model.infer(json.loads(line))[2])
print(json.dumps({"native": model._native is not None, "probs": out}))
"""
VERIFY = """
import sys, json, hashlib, binascii, p256
cases = json.loads(sys.stdin.read())
out = []
for c in cases:
    key = p256.public_key(binascii.unhexlify(c["key"]))
    out.append(p256.verify(key, hashlib.sha256(binascii.unhexlify(c["msg"])).digest(), binascii.unhexlify(c["sig"])))
print(json.dumps(out))
"""
LOAD = """
import sys, gc, npcnn
gc.collect()
try:
    model = npcnn.load(sys.argv[1])
    print("loaded", model.weight_bytes)
except MemoryError:
    print("MemoryError")
"""


def run_mpy(script: str, args: list[str], stdin: str, tmp_path, heap: str = ESP32C6_HEAP) -> str:
    path = tmp_path / "script.py"
    path.write_text(script)
    env = {**os.environ, "MICROPYPATH": str(MICROPYTHON_DIR)}
    proc = subprocess.run(
        [str(micropython_exe()), "-X", f"heapsize={heap}", str(path), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return proc.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("kernel", ["native", "python"])
@pytest.mark.parametrize("name", ["npc-policy-int8", "npc-policy-int8-v2"])
def test_mpy_inference_matches_tflite_micro_within_one_step(name, kernel, tmp_path):
    inputs = calibration_inputs(48, 100, f"mpy-{name}")
    lines = "".join(json.dumps(row) + "\n" for row in inputs.tolist())
    out = run_mpy(INFER, [str(model_file(name, "npcm")), kernel], lines, tmp_path)
    result = json.loads(out)
    assert result["native"] == (kernel == "native")  # the unix VM has the viper emitter
    got = np.array(result["probs"])
    p = read_int8_policy(model_file(name))
    x_q = R.quantize_input(inputs, p.mlp.in_scale, p.mlp.in_zp)
    assert np.abs(got - tflite_micro_outputs(name, x_q)).max() <= 1
    assert np.abs(got - R.int8_infer(p.mlp, x_q)).max() <= 1  # float32 softmax on the board


def test_mpy_p256_verifies_cryptography_signatures_and_refuses_another_key(tmp_path):
    key, other = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    cases, expected = [], []
    for i in range(3):
        msg = b"manifest %d" % i
        sig = key.sign(msg, ec.ECDSA(hashes.SHA256()))
        for signer_pub, ok in ((key.public_key(), True), (other.public_key(), False)):
            cases.append({"key": public_key_raw(signer_pub).hex(), "msg": msg.hex(), "sig": sig.hex()})
            expected.append(ok)
    cases.append({"key": public_key_raw(key.public_key()).hex(), "msg": b"tampered".hex(), "sig": sig.hex()})
    expected.append(False)
    assert json.loads(run_mpy(VERIFY, [], json.dumps(cases), tmp_path)) == expected


def test_default_model_fits_and_oversize_model_does_not_on_an_esp32c6_heap(tmp_path):
    assert run_mpy(LOAD, [str(model_file("npc-policy-int8", "npcm"))], "", tmp_path).startswith("loaded")
    assert run_mpy(LOAD, [str(model_file("npc-fault-oversize-int8", "npcm"))], "", tmp_path) == "MemoryError"
