"""`hilbench keys gen`, `model publish|list`, `ota serve` through the real CLI."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bench.models.signing import load_public_key, verify_manifest
from tests.requires import require_program

REPO = Path(__file__).resolve().parents[2]


def hilbench(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", *args], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_keys_publish_list_and_refusals(tmp_path: Path) -> None:
    keys = json.loads(hilbench("keys", "gen", "--out", str(tmp_path / "k"), "--name", "lab", "--json").stdout)
    assert len(bytes.fromhex(keys["public_raw"])) == 64
    assert (Path(keys["private"]).stat().st_mode & 0o777) == 0o600
    again = hilbench("keys", "gen", "--out", str(tmp_path / "k"), "--name", "lab", check=False)
    assert again.returncode == 2 and "exists" in again.stderr

    model = tmp_path / "npc-policy-int8.tflite"  # publish parses the model: a real one (v1, then v2)
    model.write_bytes((REPO / "fixtures/models/npc-policy-int8.tflite").read_bytes())
    store = str(tmp_path / "store")
    first = json.loads(
        hilbench("model", "publish", str(model), "--key", keys["private"], "--store", store, "--json").stdout
    )
    assert first["manifest"]["name"] == "npc-policy" and first["manifest"]["format"] == "tflite-int8"
    assert first["delta"] is None
    model.write_bytes((REPO / "fixtures/models/npc-policy-int8-v2.tflite").read_bytes())
    second = json.loads(
        hilbench("model", "publish", str(model), "--key", keys["private"], "--store", store, "--json").stdout
    )
    pub = load_public_key(Path(keys["public"]))
    assert second["manifest"]["version"] == 2 and verify_manifest(second["manifest"], pub)
    assert verify_manifest(second["delta"], pub) and second["delta"]["patch_size"] < second["manifest"]["size"]

    listed = json.loads(hilbench("model", "list", "--store", store, "--json").stdout)["models"]
    assert [(m["version"], sorted(d["algo"] for d in m["deltas"])) for m in listed] == [
        (1, []),
        (2, ["bsdiff4", "bsdiff4-zlib"]),
    ]

    same = hilbench("model", "publish", str(model), "--key", keys["private"], "--store", store, check=False)
    assert same.returncode == 2 and "identical" in same.stderr
    nokey = hilbench("model", "publish", str(model), "--key", str(tmp_path / "none.pem"), "--store", store, check=False)
    assert nokey.returncode == 2 and "none.pem" in nokey.stderr and "Traceback" not in nokey.stderr


@pytest.mark.e2e
def test_ota_serve_answers_libcoap_and_stops_cleanly(tmp_path: Path) -> None:
    client = require_program("coap-client")
    model = tmp_path / "npc-policy-int8.tflite"
    model.write_bytes((REPO / "fixtures/models/npc-policy-int8.tflite").read_bytes())
    store = str(tmp_path / "store")
    hilbench(
        "model", "publish", str(model), "--key", str(REPO / "fixtures/keys/dev-model-signing.key.pem"), "--store", store
    )
    serve = subprocess.Popen(
        [sys.executable, "-m", "bench", "ota", "serve", "--store", store, "--port", "0", "--json"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        info = json.loads(serve.stdout.readline())
        (entry,) = info["models"]
        assert entry["name"] == "npc-policy" and entry["url"].startswith(info["url"])
        fetched = tmp_path / "fetched"
        subprocess.run([client, "-b", "1024", "-o", str(fetched), entry["url"]], check=True, timeout=30)
        assert fetched.read_bytes() == model.read_bytes()
        manifest = tmp_path / "manifest.json"
        subprocess.run([client, "-o", str(manifest), entry["manifest_url"]], check=True, timeout=30)
        assert json.loads(manifest.read_text())["sha256"] == entry["sha256"]
    finally:
        serve.send_signal(signal.SIGINT)
        assert serve.wait(timeout=10) == 130  # 128 + SIGINT, as every command (README)
