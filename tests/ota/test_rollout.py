"""Rollout decisions that need no device: delta or full, where the server binds, bad CLI input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.models.signing import DEV_PRIVATE_KEY, load_private_key
from bench.ota.rollout import bind_address, plan
from bench.ota.store import ModelStore

REPO = Path(__file__).resolve().parents[2]


def test_plan_uses_a_delta_only_when_the_agent_and_the_store_allow(two_versions) -> None:
    store, _, _ = two_versions
    target = store.manifest("blob", 2)
    v1 = store.manifest("blob", 1)
    both = {"caps": ["delta-bsdiff", "delta-bsdiff-zlib"], "model": v1}
    assert plan(store, target, both, want_delta=True) == (1, "bsdiff4", "")
    assert plan(store, target, {**both, "caps": ["delta-bsdiff-zlib"]}, want_delta=True) == (1, "bsdiff4-zlib", "")
    assert plan(store, target, both, want_delta=False) == (None, "", "")
    base, _, note = plan(store, target, {"caps": [], "model": v1}, want_delta=True)
    assert base is None and "delta-bsdiff" in note
    base, _, note = plan(store, target, {**both, "model": target}, want_delta=True)
    assert base is None and "no delta from the running model" in note
    base, _, _ = plan(store, target, {**both, "model": None}, want_delta=True)
    assert base is None


def test_bind_address_stays_on_loopback_unless_a_device_is_remote() -> None:
    assert bind_address(["127.0.0.1", "10.0.2.2", "::1"]) == "127.0.0.1"
    assert bind_address(["127.0.0.1", "192.168.1.20"]) == "0.0.0.0"
    assert bind_address(["bench.local"]) == "0.0.0.0"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """`hilbench update ARGS`, with stderr's line wrapping undone."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "update", *args], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    proc.stderr = " ".join(proc.stderr.split())
    return proc


def test_update_refuses_bad_input_before_touching_devices(tmp_path: Path) -> None:
    (tmp_path / "m.tflite").write_bytes(b"model bytes")
    store = ModelStore(tmp_path / "store")
    store.publish(tmp_path / "m.tflite", load_private_key(DEV_PRIVATE_KEY), name="npc-policy", fmt="tflite-int8")
    missing = run("--store", str(store.root), "--model", "nope", "--device", "pi5-1")
    assert missing.returncode == 2 and "no model 'nope'" in missing.stderr and "Traceback" not in missing.stderr
    version = run("--store", str(store.root), "--model", "npc-policy@9", "--device", "pi5-1")
    assert version.returncode == 2 and "no npc-policy@9" in version.stderr and "pi5-1" in version.stderr
    other_format = run("--store", str(store.root), "--model", "npc-policy", "--device", "c6-a")
    assert other_format.returncode == 2 and "c6-a" in other_format.stderr and "npcm-int8" in other_format.stderr
    loss = run("--store", str(store.root), "--model", "npc-policy", "--device", "pi5-1", "--loss", "80")
    assert loss.returncode == 2 and "loss" in loss.stderr
