"""The host agent's deploy bundle and start command."""

from __future__ import annotations

import json
import re

import pytest

from bench import bundles
from bench.config.fleet import Device
from bench.core.errors import ConfigError
from bench.models import signing


def device(**settings):
    return Device(name="pi", kind="pi5", link=None, settings={"model": "npc-policy-int8", **settings})


def test_host_bundle_is_a_flat_folder_with_a_signed_manifest(tmp_path):
    files = bundles.host_bundle(device(model_version=4), tmp_path)
    dests = [d for _, d in files]
    for name in ("npc_host_agent.py", "wire.py", "npcsched.py", "npcfeat.py", "npcrecords.py", "trusted.pub.pem"):
        assert name in dests
    assert "models/npc-policy-int8.tflite" in dests and "models/npc-policy-int8.json" in dests
    assert "models/current.json" not in dests  # a flash keeps what an update installed (docs/ota.md) ...
    (reset,) = bundles.reset_model([device(model_version=4)])  # ... unless asked to reset it
    dests = [d for _, d in bundles.host_bundle(reset, tmp_path)]
    record = json.loads((tmp_path / "current.json").read_text())
    assert "models/current.json" in dests and record["path"] == "npc-policy-int8.tflite"
    assert len(set(dests)) == len(dests)
    manifest = json.loads((tmp_path / "npc-policy-int8.json").read_text())
    assert manifest["version"] == 4 and manifest["format"] == "tflite-int8"
    assert signing.verify_manifest(manifest, signing.load_public_key(signing.DEV_PUBLIC_KEY))
    for src, dest in files:  # nothing deployed needs the bench package
        if dest.endswith(".py"):
            assert not re.search(r"^\s*(from|import) bench\b", src.read_text(), re.M), dest


def test_unknown_model_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="device pi: model 'nope'"):
        bundles.host_bundle(device(model="nope"), tmp_path)


def test_agent_command_carries_the_kind_settings():
    argv = bundles.host_agent_command(device(memory_limit_mb=256), "/opt/npc")
    assert argv[:2] == ["python3", "/opt/npc/npc_host_agent.py"]
    assert argv[argv.index("--listen") + 1] == "0.0.0.0:7700"
    assert argv[argv.index("--mem-limit-mb") + 1] == "256"
    assert "--stdio" in bundles.host_agent_command(device(), "/opt/npc", stdio=True)
