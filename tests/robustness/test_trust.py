"""Trust is configuration: a real board gets the fleet's key, the development key only on purpose (with a
warning), and a flash never puts the development key over a key the board already trusts."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bench.bundles.mpy_board import trusted_key_hex
from bench.core.errors import ExitCode
from tests.conftest import REPO, hilbench
from tests.esp32c6_support import FIRMWARE, preflash, virtual_c6

pytestmark = pytest.mark.e2e


def _fleet(tmp: Path, port: str, keys: str = "") -> Path:
    path = tmp / f"fleet{len(list(tmp.glob('fleet*.toml')))}.toml"
    path.write_text(f'{keys}\n[[device]]\nname = "bench-c6"\nkind = "esp32c6"\nport = "{port}"\n'
                    'mac = "60:55:f9:c6:30:03"\n')  # fmt: skip
    return path


def _env() -> dict[str, str]:
    """The environment without the test run's blanket --allow-dev-key (tests/conftest.py)."""
    return {k: v for k, v in os.environ.items() if k != "HILBENCH_ALLOW_DEV_KEY"}


def _flash(fleet: Path, tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = hilbench("flash", "--fleet", str(fleet), "--logs", str(tmp / "logs"), "--firmware", str(FIRMWARE), *extra)
    return subprocess.run(argv,
                          cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**_env(), "COLUMNS": "200"})  # fmt: skip


def test_a_real_board_trusts_the_fleets_key_and_never_gets_the_dev_key_over_it(tmp_path: Path) -> None:
    gen = subprocess.run(hilbench("keys", "gen", "--out", str(tmp_path), "--name", "prod"), cwd=REPO,
                         capture_output=True, text=True)  # fmt: skip
    assert gen.returncode == 0, gen.stderr
    prod_pub, prod_key = tmp_path / "prod.pub.pem", tmp_path / "prod.key.pem"
    with virtual_c6(preflash(tmp_path / "state", FIRMWARE.read_bytes()), name="bench-c6", mac="60:55:f9:c6:30:03") as b:
        port = b.urls["socket"]
        # a real board (not virtual in this fleet) with no key configured: refused before it is touched
        bare = _fleet(tmp_path, port)
        refused = _flash(bare, tmp_path)
        assert refused.returncode == ExitCode.USAGE, refused.stderr
        assert "device 'bench-c6': no trusted_key/signing_key configured" in " ".join(refused.stderr.split())
        assert not (b.fs_dir / "trust.key").exists()

        # configured: the board trusts the production key
        keyed = _fleet(tmp_path, port, f'[bench]\ntrusted_key = "{prod_pub}"\nsigning_key = "{prod_key}"\n')
        done = _flash(keyed, tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "development key" not in done.stderr
        assert (b.fs_dir / "trust.key").read_text().strip() == trusted_key_hex(prod_pub)

        # --allow-dev-key on the bare fleet: the dev key would replace the production key: refused
        downgrade = _flash(bare, tmp_path, "--allow-dev-key")
        assert "warning: device bench-c6: using the committed development key" in " ".join(downgrade.stderr.split())
        assert downgrade.returncode != 0
        assert "trusts another key than the development key" in " ".join((downgrade.stdout + downgrade.stderr).split())
        assert (b.fs_dir / "trust.key").read_text().strip() == trusted_key_hex(prod_pub)
