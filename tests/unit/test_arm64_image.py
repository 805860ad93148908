"""The switch-arm64 recipe, its digest, the cpio writer and the QEMU command line (no downloads, no boot)."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest

from bench.config.fleet import QemuLink
from bench.core.errors import ConfigError
from bench.devices.qemu_machine import QemuMachine
from bench.image.cpio import write_cpio
from bench.image.fetch import deb_filename
from bench.image.recipe import load_recipe, recipe_path


@pytest.fixture
def recipe_dir(tmp_path: Path) -> Path:
    src = recipe_path("switch-arm64").parent
    dest = tmp_path / "switch-arm64"
    shutil.copytree(src, dest)
    return dest


def test_recipe_pins_one_kernel_and_hashed_wheels() -> None:
    recipe = load_recipe(recipe_path("switch-arm64"))
    assert recipe.kernel_release.endswith("-arm64") and recipe.kernel_release in recipe.kernel_package
    assert all(len(w.sha256) == 64 for w in recipe.wheels)
    assert {"tflite-runtime", "aiocoap"} <= {w.name for w in recipe.wheels}
    assert "python3-numpy" in recipe.packages and "busybox-static" in recipe.packages


def test_digest_follows_every_input(recipe_dir: Path, tmp_path: Path) -> None:
    model = tmp_path / "m.tflite"
    model.write_bytes(b"one")
    base = load_recipe(recipe_dir / "recipe.toml", {"opt/npc/models/m.tflite": model}).digest()
    assert load_recipe(recipe_dir / "recipe.toml", {"opt/npc/models/m.tflite": model}).digest() == base
    model.write_bytes(b"two")
    changed_model = load_recipe(recipe_dir / "recipe.toml", {"opt/npc/models/m.tflite": model}).digest()
    (recipe_dir / "init.sh").write_text((recipe_dir / "init.sh").read_text() + "\n# changed\n")
    changed_init = load_recipe(recipe_dir / "recipe.toml", {"opt/npc/models/m.tflite": model}).digest()
    assert len({base, changed_model, changed_init}) == 3


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('compression = "lz4"', 'compression = "zip"', "'compression'"),
        ('"libffi8" = "3.4.4-1"', '"linux-image-6.1.0-1-arm64" = "1"\n"libffi8" = "1"', "exactly one linux-image"),
        ('init = "init.sh"', 'init = "nope.sh"', "nope.sh does not exist"),
        ("[kernel]", "[kernelx]", "missing table [kernel]"),
    ],
)
def test_bad_recipe_names_the_field(recipe_dir: Path, old: str, new: str, message: str) -> None:
    path = recipe_dir / "recipe.toml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        load_recipe(path)
    assert str(path) in str(info.value)


def test_bad_wheel_hash_is_refused(recipe_dir: Path) -> None:
    path = recipe_dir / "recipe.toml"
    text = path.read_text()
    path.write_text(text.replace('sha256 = "ce9f', 'sha256 = "xx9f', 1))
    with pytest.raises(ConfigError, match="sha256"):
        load_recipe(path)


def test_deb_filename_escapes_epoch() -> None:
    assert deb_filename("zlib1g", "1:1.2.13.dfsg-1", "arm64") == "zlib1g_1%3a1.2.13.dfsg-1_arm64.deb"
    assert deb_filename("libffi8", "3.4.4-1", "arm64") == "libffi8_3.4.4-1_arm64.deb"


def _entries(data: bytes) -> list[tuple[str, int, int]]:
    """(name, mode, mtime) of each newc entry."""
    out, pos = [], 0
    while True:
        head = data[pos : pos + 110]
        assert head[:6] == b"070701"
        fields = [int(head[6 + 8 * i : 14 + 8 * i], 16) for i in range(13)]
        mode, mtime, size, namesize = fields[1], fields[5], fields[6], fields[11]
        name = data[pos + 110 : pos + 110 + namesize - 1].decode()
        pos += 110 + namesize
        pos += -pos % 4
        pos += size + (-size % 4)
        if name == "TRAILER!!!":
            return out
        out.append((name, mode, mtime))


def test_cpio_is_sorted_stamped_and_repeatable(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "b" / "c").mkdir(parents=True)
    (root / "b" / "c" / "f.txt").write_text("hello")
    (root / "a").write_text("x")
    (root / "lnk").symlink_to("a")
    blobs = []
    for _ in range(2):
        buf = io.BytesIO()
        write_cpio(root, buf, 1735689600, {"dev/console": (5, 1)})
        blobs.append(buf.getvalue())
    assert blobs[0] == blobs[1]
    entries = _entries(blobs[0])
    names = [n for n, _, _ in entries]
    assert names == sorted(names) == ["a", "b", "b/c", "b/c/f.txt", "dev/console", "lnk"]
    assert {m for _, _, m in entries} == {1735689600}
    modes = {n: m for n, m, _ in entries}
    assert modes["dev/console"] & 0o170000 == 0o020000 and modes["lnk"] & 0o170000 == 0o120000


def test_qemu_argv_follows_the_link(tmp_path: Path) -> None:
    def argv(timing: str) -> list[str]:
        link = QemuLink(image=None, timing=timing)
        return QemuMachine("sw", link, tmp_path / "k", tmp_path / "i", "console=ttyAMA0", tmp_path / "log").argv()

    real, det = argv("realtime"), argv("icount")
    assert "-icount" not in real and det[det.index("-icount") + 1] == "shift=0"
    joined = " ".join(det)
    for piece in ("-M virt", "-cpu cortex-a57", "-smp 4", "-m 4096", "name=bench.ctl", "-no-reboot"):
        assert piece in joined
    net = det[det.index("-netdev") + 1]
    assert "hostfwd=tcp:127.0.0.1:" in net and "hostfwd=udp:127.0.0.1:" in net and "restrict" not in net


def test_console_lines_become_fault_sentences(tmp_path: Path) -> None:
    machine = QemuMachine("sw", QemuLink(image=None), tmp_path / "k", tmp_path / "i", "", tmp_path / "log")
    machine._parse("NPC-INIT agent-exit rc=137 oom_kill=1 mem_peak=9000000 limit_mb=8")
    assert "exceeded its memory limit of 8 MB" in (machine.fault() or "")
    machine = QemuMachine("sw", QemuLink(image=None), tmp_path / "k", tmp_path / "i", "", tmp_path / "log")
    machine._parse("[    9.1] Kernel panic - not syncing: sysrq triggered crash")
    assert machine.fault() == "sw: the guest kernel panicked: sysrq triggered crash"
    machine = QemuMachine("sw", QemuLink(image=None), tmp_path / "k", tmp_path / "i", "", tmp_path / "log")
    machine._parse("NPC-INIT agent-exit rc=2 oom_kill=0 mem_peak=1 limit_mb=256")
    assert "exited with code 2" in (machine.fault() or "")


def test_driver_resolves_images_and_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from bench.config.fleet import load_fleet
    from bench.core.errors import DeviceUnreachable
    from bench.devices.qemu_arm64 import QemuArm64Driver, resolve_image

    monkeypatch.setenv("HILBENCH_CACHE_DIR", str(tmp_path / "cache"))
    dev = load_fleet().get("switch-1")
    with pytest.raises(DeviceUnreachable, match="not built") as info:
        resolve_image(dev)
    assert "hilbench image build switch-arm64" in (info.value.hint or "")
    folder = tmp_path / "img"
    folder.mkdir()
    given = dataclasses.replace(dev, link=dataclasses.replace(dev.link, image=folder))
    with pytest.raises(ConfigError, match=re.escape("has no vmlinuz and initrd.img")):
        resolve_image(given)
    (folder / "vmlinuz").write_bytes(b"k")
    (folder / "initrd.img").write_bytes(b"i")
    assert resolve_image(given)[:2] == (folder / "vmlinuz", folder / "initrd.img")
    driver = QemuArm64Driver(given.with_settings(memory_limit_mb=64))
    args = driver.kernel_args()
    assert args["npc_mem_mb"] == "64" and args["npc_timing"] == "icount" and args["npc_mode"] == "agent"
    assert driver.timing == "icount" and driver.platform()["timing"] == "icount"
    assert driver.host_address == "10.0.2.2"  # QEMU user-mode networking, not the kind default


def test_prune_keeps_the_current_and_the_newest_other_builds(tmp_path: Path) -> None:
    import os

    from bench.image.build import prune

    for age, name in enumerate(["new", "mid", "old", "oldest"]):
        (tmp_path / name).mkdir()
        os.utime(tmp_path / name, (1000 - age, 1000 - age))
    (tmp_path / "current").mkdir()
    (tmp_path / ".build-x").mkdir()  # another build in progress
    removed = prune(tmp_path, keep=tmp_path / "current", others=2)
    assert sorted(p.name for p in removed) == ["old", "oldest"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".build-x", "current", "mid", "new"]


def test_waiting_in_vain_names_what_the_guest_reported(tmp_path: Path) -> None:
    import asyncio

    from bench.devices.qemu_machine import GuestFault

    async def run() -> str:
        machine = QemuMachine("sw", QemuLink(image=None), tmp_path / "k", tmp_path / "i", "", tmp_path / "log")
        machine._parse("NPC-INIT error network")
        machine.proc = type("Running", (), {"returncode": None})()  # a QEMU that is up but never says net-up
        with pytest.raises(GuestFault) as info:
            await machine.wait_for("net-up", 0.05)
        return str(info.value)

    message = asyncio.run(run())
    assert "no 'net-up' from the guest within 0.05 s; the guest reported: network" in message
