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

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("bmaptool") is None, reason="bmap-tools not installed")


def _image(tmp_path: Path) -> tuple[Path, Path]:
    path = tmp_path / "small.img"
    with path.open("wb") as fh:
        fh.truncate(4 << 20)
        for offset in (0, 1 << 20, 3 << 20):
            fh.seek(offset)
            fh.write(hashlib.sha256(str(offset).encode()).digest() * 512)
    bmap = tmp_path / "small.img.bmap"
    subprocess.run(["bmaptool", "create", "-o", str(bmap), str(path)], check=True, capture_output=True)
    return path, bmap


@pytest.mark.parametrize("lie", ["checksum", "past-the-end"])
def test_flash_os_refuses_a_lying_bmap_with_exit_2_and_the_board_untouched(tmp_path: Path, lie: str) -> None:
    path, bmap = _image(tmp_path)
    text = bmap.read_text()
    if lie == "checksum":
        start = text.index('chksum="') + len('chksum="')
        text = text[:start] + "0" * 64 + text[start + 64 :]
    else:  # the last range reaches 16 blocks past the image's end
        blocks = (4 << 20) // 4096
        last = text.rindex("</Range>")
        dash = text.rindex("-", 0, last)
        text = f"{text[: dash + 1]}{blocks + 15} {text[last:]}"
    lying = tmp_path / "lying.bmap"
    lying.write_text(text)
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
