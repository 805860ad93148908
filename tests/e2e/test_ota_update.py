"""`hilbench update` and the rollout library against the real host agent on a virtual Pi 5 (over SSH):
full and delta updates, a forged model refused, a cut transfer resumed; the old model is never lost."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.core.errors import ExitCode
from bench.devices.linux import LinuxDriver
from bench.models.signing import DEV_PRIVATE_KEY, generate_key, load_private_key
from bench.ota.impair import Impairment
from bench.ota.rollout import update_devices
from bench.ota.store import ModelStore
from tests.conftest import REPO, hilbench
from tests.linux_support import RunningBoard, virtual_board

pytestmark = pytest.mark.e2e
MODELS = REPO / "fixtures" / "models"
V1, V2 = MODELS / "npc-policy-int8.tflite", MODELS / "npc-policy-int8-v2.tflite"


@pytest.fixture(scope="module")
def pi() -> Iterator[RunningBoard]:
    """A virtual Pi 5 with the host agent deployed, running npc-policy v1 (its kind's default model), updated
    over CoAP (this module's channel; the bundled fleet's pi5-1 uses gRPC)."""
    with virtual_board("pi5") as running:
        steps = running.loop.run(LinuxDriver(running.device).flash(), timeout_s=120)
        assert all(s.ok for s in steps), steps
        yield dataclasses.replace(running, device=running.device.with_settings(update_channel="coap"))


@pytest.fixture
def store(tmp_path: Path) -> ModelStore:
    """v1 (what the board runs) and v2, signed with the dev key the agent trusts."""
    store = ModelStore(tmp_path / "store")
    key = load_private_key(DEV_PRIVATE_KEY)
    store.publish(V1, key, name="npc-policy", fmt="tflite-int8")
    store.publish(V2, key, name="npc-policy", fmt="tflite-int8")
    return store


def fleet_file(tmp_path: Path, board: RunningBoard) -> Path:
    link = board.device.link
    path = tmp_path / "fleet.toml"
    path.write_text(
        "[[device]]\n"
        'name = "lab-pi"\nkind = "pi5"\n'
        f'ssh = "{link.user}@{link.host}:{link.port}"\nkey = "{link.key}"\nhost_key = "{link.host_key}"\n'
    )
    return path


def update_cli(tmp_path: Path, board: RunningBoard, store: ModelStore, *args: str) -> tuple[int, dict]:
    proc = subprocess.run(
        hilbench("update", "--fleet", str(fleet_file(tmp_path, board)), "--store", str(store.root), "--json", *args),
        cwd=REPO, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    (row,) = json.loads(proc.stdout)["devices"]
    return proc.returncode, row


def test_delta_then_forged_then_full_update_through_the_cli(pi: RunningBoard, store: ModelStore, tmp_path: Path):
    # the agent starts with what it ran last: back to v1, a downgrade when that was v2
    code, row = update_cli(tmp_path, pi, store, "--model", "npc-policy@1", "--allow-downgrade")
    assert code == ExitCode.OK and row["running"]["version"] == 1
    code, row = update_cli(tmp_path, pi, store, "--model", "npc-policy@2", "--delta")
    assert code == ExitCode.OK and row["ok"], row
    assert row["delta"] and row["previous"]["version"] == 1 and row["running"]["version"] == 2
    assert 0 < row["bytes"] < V2.stat().st_size and row["delta_saved"] == V2.stat().st_size - row["bytes"]
    assert row["switch_ms"] >= 0 and row["blocks"] >= 1

    (tmp_path / "v3.tflite").write_bytes(
        V1.read_bytes()
    )  # new content for v3, signed by a key the agent does not trust
    store.publish(tmp_path / "v3.tflite", generate_key(), name="npc-policy", fmt="tflite-int8", version=3)
    code, row = update_cli(tmp_path, pi, store, "--model", "npc-policy@3")
    assert code == ExitCode.FAILED and not row["ok"] and row["kept_previous"]
    assert "signature" in row["detail"] and row["running"]["version"] == 2

    code, row = update_cli(tmp_path, pi, store, "--model", "npc-policy@1")  # an older version: refused
    assert code == ExitCode.FAILED and row["kept_previous"] and "version" in row["detail"], row
    assert any("--allow-downgrade" in note for note in row["notes"]) and row["running"]["version"] == 2
    code, row = update_cli(tmp_path, pi, store, "--model", "npc-policy@1", "--allow-downgrade", "--loss", "5")
    assert code == ExitCode.OK and not row["delta"] and row["running"]["version"] == 1
    assert row["blocks"] == -(-V1.stat().st_size // 1024) and row["bytes"] == V1.stat().st_size


def test_cut_transfer_keeps_the_model_and_the_next_update_resumes(pi: RunningBoard, store: ModelStore):
    (first,) = pi.loop.run(update_devices([pi.device], store, "npc-policy@1", allow_downgrade=True), timeout_s=120)
    assert first.ok  # the board runs v1 whatever the previous test left
    target = store.manifest("npc-policy", 2)
    fast = pi.device.with_settings(ota_timing="loopback")  # quick give-up
    (cut,) = pi.loop.run(
        update_devices([fast], store, "npc-policy@2", impairment=Impairment(cut_at_block=5)), timeout_s=120
    )
    assert not cut.ok and cut.kept_previous and "transfer" in cut.detail, cut
    assert cut.running["version"] == 1
    (resumed,) = pi.loop.run(update_devices([pi.device], store, "npc-policy@2"), timeout_s=120)
    assert resumed.ok and resumed.running["version"] == 2
    total = -(-target["size"] // 1024)
    assert resumed.resumed_from == 5 and resumed.blocks == total - 5  # blocks 0-4 were kept on the device
