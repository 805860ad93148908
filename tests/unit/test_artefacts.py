"""Artefacts the bench deployed, kept content-addressed next to the results store."""

from __future__ import annotations

import hashlib
from pathlib import Path

from bench.bundles.artefacts import ArtefactStore, keep_deployed
from bench.bundles.fingerprint import agent_bundle_hash, configured_model_sha256, firmware_sha256
from bench.config.fleet import load_fleet
from bench.store.results import open_store


def test_what_a_c6_runs_is_kept_under_the_sha256_its_fingerprint_names(tmp_path: Path) -> None:
    device = load_fleet(None).get("c6-a")
    store = open_store(tmp_path / "r.sqlite")
    artefacts = ArtefactStore.of(store)
    kept = keep_deployed(artefacts, device)
    assert kept["model"] == configured_model_sha256(device)  # the .npcm the board runs
    assert artefacts.path(kept["model"]).suffix == ".npcm"
    source = artefacts.source(kept["model"])
    assert source is not None and source.suffix == ".tflite" and source != artefacts.path(kept["model"])
    assert kept["firmware"] == firmware_sha256(device)
    assert hashlib.sha256(artefacts.path(kept["firmware"]).read_bytes()).hexdigest() == kept["firmware"]
    assert kept["agent"] == agent_bundle_hash(device) and artefacts.path(kept["agent"]).suffix == ".tar"
    assert artefacts.root == tmp_path / "artefacts"
    again = keep_deployed(artefacts, device)  # kept once
    assert again == kept and len(list(artefacts.root.glob("*/*"))) == 4
