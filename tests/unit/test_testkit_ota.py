"""The pytest session's model store: each session publishes the fixtures' models into a store of its own, so a
second `pytest hil/` over the same log folder does not find its fault models already published."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bench.models.signing import DEV_PRIVATE_KEY
from bench.testkit.ota import TestOta


def test_two_sessions_in_one_folder_each_publish_the_fault_models(tmp_path: Path) -> None:
    for _ in range(2):
        ota = TestOta(tmp_path, ["127.0.0.1"], DEV_PRIVATE_KEY)
        names = {m["name"] for m in ota._store()[1].values() if "name" in m}
        assert {"npc-policy", "npc-fault-crash"} <= names  # the second session publishes them again
        asyncio.run(ota.close())
        assert not list(tmp_path.glob("ota-store-*"))  # removed when the session ends
