"""`hilbench flash --os` with a bmap that lies about its (pinned) image (issue 31, case 6), through the real
CLI: exit 2 naming the bmap, and the board's power and storage never touched (the fleet's power_off command
would leave a file behind; the storage file is never created)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.os_images import bad_checksum, lying_bmap, past_the_end, sparse_image

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("bmaptool") is None, reason="bmap-tools not installed")


@pytest.mark.parametrize("lie", ["checksum", "past-the-end"])
def test_flash_os_refuses_a_lying_bmap_with_exit_2_and_the_board_untouched(tmp_path: Path, lie: str) -> None:
    path, bmap = sparse_image(tmp_path)
    lying = lying_bmap(bmap, tmp_path / "lying.bmap", {"checksum": bad_checksum, "past-the-end": past_the_end}[lie])
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(
        f'[[device]]\nname = "pi-x"\nkind = "pi5"\nssh = "root@127.0.0.1:1"\n[device.os]\nimage = "{path}"\n'
        f'sha256 = "{sha}"\nbmap = "{lying}"\nstorage = "{tmp_path / "card.img"}"\n'
        f'power_on = ["touch", "{tmp_path / "powered-on"}"]\npower_off = ["touch", "{tmp_path / "powered-off"}"]\n'
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HILBENCH_LEASE_DIR": str(tmp_path / "leases")}
    argv = [sys.executable, "-m", "bench", "flash", "--os", "--fleet", str(fleet), "--device", "pi-x",
            "--attempts", "1", "--allow-dev-key", "--json", "--logs", str(tmp_path / "logs")]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    (result,) = json.loads(proc.stdout)["devices"]
    assert result["refused"] and str(lying) in result["reason"]
    assert ("checksum of blocks" if lie == "checksum" else "past the end") in result["reason"]
    assert not (tmp_path / "powered-off").exists() and not (tmp_path / "card.img").exists()
