"""Another local user against the bench's folders: nothing the bench trusts (the model conversion cache, the
lease folder, state and cache folders, a private key) can be planted, swapped or written through a link."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from bench.core.errors import ExitCode
from bench.core.folders import UnsafeFolder, own_folder
from bench.core.leases import LeaseSet
from bench.models import model_file
from bench.models.npcm import convert_bytes
from bench.models.signing import generate_key, save_key_pair
from tests.conftest import REPO, hilbench

MODELS = REPO / "fixtures" / "models"
OTHER_UID = 65534  # nobody
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
FLEET = '[[device]]\nname = "c6-a"\nkind = "esp32c6"\nport = "socket://127.0.0.1:9"\n'


@pytest.fixture
def team_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A team's own .tflite, with the bench's temp folder moved into the test's folder."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    model = tmp_path / "team-policy.tflite"
    shutil.copy(MODELS / "npc-policy-int8.tflite", model)
    return model


def test_planted_conversion_is_never_used(team_model: Path) -> None:
    """A .npcm planted (or altered) where the conversion cache keeps the team model's conversion is replaced by
    the model's own conversion before anything uses it."""
    expected = convert_bytes(team_model.read_bytes(), str(team_model))
    out = model_file(str(team_model), "npcm")
    assert out.read_bytes() == expected
    crash = (MODELS / "npc-fault-crash-int8.npcm").read_bytes()
    out.write_bytes(crash)
    assert model_file(str(team_model), "npcm").read_bytes() == expected


def test_conversion_is_not_written_through_a_link(team_model: Path, tmp_path: Path) -> None:
    """A symbolic link planted at the conversion's name is replaced, its target left alone."""
    out = model_file(str(team_model), "npcm")
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    out.unlink()
    out.symlink_to(victim)
    again = model_file(str(team_model), "npcm")
    assert victim.read_bytes() == b"keep me"
    assert not again.is_symlink() and again.read_bytes() == convert_bytes(team_model.read_bytes(), "m")


def test_model_cache_is_private(team_model: Path) -> None:
    """The cache folder the bench makes is 0700, and so is each conversion's folder."""
    out = model_file(str(team_model), "npcm")
    for folder in (out.parent, out.parent.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


def _nightly_with_model(tmp_path: Path, model: Path) -> subprocess.CompletedProcess[str]:
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(FLEET)
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    return subprocess.run(hilbench("nightly", "--fleet", str(fleet), "--model", str(model), "--output",
                                   str(tmp_path / "out")),
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip


@needs_root
def test_model_cache_of_another_user_is_refused(team_model: Path, tmp_path: Path) -> None:
    """A model cache folder made by another user (mode 0777, as an attacker would) is a named error, exit 2."""
    cache = tmp_path / "tmp" / f"hilbench-models-{os.getuid()}"
    cache.mkdir()
    os.chmod(cache, 0o777)
    os.chown(cache, OTHER_UID, OTHER_UID)
    run = _nightly_with_model(tmp_path, team_model)
    assert run.returncode == ExitCode.USAGE, run.stderr
    assert f"model cache {cache} is owned by uid {OTHER_UID}" in run.stderr
    assert "Traceback" not in run.stderr


def test_own_model_cache_others_can_write_is_refused(team_model: Path, tmp_path: Path) -> None:
    """This user's own cache folder, but writable by everyone: refused, exit 2, naming the mode."""
    cache = tmp_path / "tmp" / f"hilbench-models-{os.getuid()}"
    cache.mkdir()
    os.chmod(cache, 0o777)
    run = _nightly_with_model(tmp_path, team_model)
    assert run.returncode == ExitCode.USAGE, run.stderr
    assert "mode 0777: others can write to it" in run.stderr


def test_folder_that_is_a_link_is_refused(tmp_path: Path) -> None:
    """A trusted folder that is a symbolic link (to a folder someone else controls) is refused."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / "cache").symlink_to(elsewhere)
    with pytest.raises(UnsafeFolder, match="is a symbolic link"):
        own_folder(tmp_path / "cache", "cache folder")


def test_own_folder_made_private(tmp_path: Path) -> None:
    """A missing folder is made 0700; one of this user's that others could only read is closed to 0700."""
    made = own_folder(tmp_path / "a" / "b", "state folder", private=True)
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    open_one = tmp_path / "c"
    open_one.mkdir()
    os.chmod(open_one, 0o755)
    own_folder(open_one, "state folder", private=True)
    assert stat.S_IMODE(open_one.stat().st_mode) == 0o700


def _leases_env(folder: Path) -> dict[str, str]:
    return {**os.environ, "HILBENCH_LEASE_DIR": str(folder)}


@needs_root
def test_lease_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    """A lease folder owned by another user: `fleet leases` is exit 2 naming the folder and its owner."""
    folder = tmp_path / "leases"
    folder.mkdir(mode=0o700)
    os.chown(folder, OTHER_UID, OTHER_UID)
    run = subprocess.run(hilbench("fleet", "leases"), env=_leases_env(folder), capture_output=True, text=True)
    assert run.returncode == ExitCode.USAGE, run.stderr
    assert f"lease folder ($HILBENCH_LEASE_DIR) {folder} is owned by uid {OTHER_UID}" in run.stderr


def test_lease_folder_others_can_write_is_refused(tmp_path: Path) -> None:
    """A lease folder anyone can write to is refused at the first lease (also when it was swapped meanwhile)."""
    folder = tmp_path / "leases"
    folder.mkdir(mode=0o700)
    leases = LeaseSet(holder="test", folder=folder)
    leases.acquire("c6-a")
    leases.release_all()
    os.chmod(folder, 0o777)
    with pytest.raises(UnsafeFolder, match="others can write"):
        LeaseSet(holder="test", folder=folder).acquire("c6-a")


@pytest.mark.parametrize("planted", ["c6-a.tmp", "c6-a.lease"])
def test_lease_is_not_written_through_a_link(tmp_path: Path, planted: str) -> None:
    """A symbolic link planted at a lease's name or at its old temp name is never written through: `fleet
    check` takes and gives back the lease and the link's target keeps its bytes."""
    folder = tmp_path / "leases"
    folder.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (folder / planted).symlink_to(victim)
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(FLEET)
    subprocess.run(hilbench("fleet", "check", "--fleet", str(fleet), "--device", "c6-a"), env=_leases_env(folder),
                   capture_output=True, text=True, timeout=120)  # fmt: skip
    assert victim.read_bytes() == b"precious"


def test_lease_mutex_link_is_refused(tmp_path: Path) -> None:
    """A symbolic link planted as the lease folder's mutex is a named error, its target untouched."""
    folder = tmp_path / "leases"
    folder.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (folder / ".mutex").symlink_to(victim)
    with pytest.raises(UnsafeFolder, match=r"\.mutex"):
        LeaseSet(holder="test", folder=folder).acquire("c6-a")
    assert victim.read_bytes() == b"precious"


def test_private_key_is_created_0600(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The private key is 0600 from its creation, not chmodded after a 0644 write (no later chmod is needed)."""
    monkeypatch.setattr(Path, "chmod", lambda *a, **k: None)
    os.umask(0o022)
    save_key_pair(generate_key(), tmp_path / "k.key.pem", tmp_path / "k.pub.pem")
    assert stat.S_IMODE((tmp_path / "k.key.pem").stat().st_mode) == 0o600


def test_keys_gen_force_replaces_a_link(tmp_path: Path) -> None:
    """`keys gen --force` over a symbolic link replaces the link; its target is not written."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (tmp_path / "k.key.pem").symlink_to(victim)
    run = subprocess.run(hilbench("keys", "gen", "--out", str(tmp_path), "--name", "k", "--force"),
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert victim.read_bytes() == b"precious"
    key = tmp_path / "k.key.pem"
    assert not key.is_symlink() and stat.S_IMODE(key.stat().st_mode) == 0o600
    assert b"PRIVATE KEY" in key.read_bytes()


def test_keys_gen_refuses_a_dangling_link(tmp_path: Path) -> None:
    """Without --force, a dangling symbolic link at the key's name counts as an existing file (exit 2)."""
    (tmp_path / "k.key.pem").symlink_to(tmp_path / "nowhere")
    run = subprocess.run(hilbench("keys", "gen", "--out", str(tmp_path), "--name", "k"), capture_output=True,
                         text=True)  # fmt: skip
    assert run.returncode == ExitCode.USAGE and "exists" in run.stderr
    assert not (tmp_path / "nowhere").exists()
