"""OS provisioning without a board: the fleet's [device.os] table, bmaptool writes checked against the bmap
(real bmaptool, a small sparse image), refusal of an image the fleet does not pin, fingerprints."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from bench.config.fleet import Device, SshLink, parse_fleet
from bench.config.os_spec import default_bmap, parse_os
from bench.core.errors import ConfigError
from bench.devices.linux import LinuxDriver
from bench.devices.linux_os import ImageRefused, provision_os
from bench.image.recipe import load_recipe, recipe_path
from bench.provision.bmap import BmapMismatch, read_bmap, verify_written, write_image
from bench.provision.controls import BoardControls
from bench.provision.fingerprint import Fingerprint, differences, parse_fingerprint
from tests.os_images import bad_checksum, lying_bmap, out_of_order, past_the_end, short_image, sparse_image

pytestmark = pytest.mark.programs("bmaptool")


@pytest.fixture
def image(tmp_path: Path) -> tuple[Path, Path]:
    """A 4 MiB sparse image with data in three places, and its bmap (bmaptool create)."""
    return sparse_image(tmp_path)


def test_bmaptool_write_is_read_back_and_checked(tmp_path: Path, image: tuple[Path, Path]) -> None:
    path, bmap_path = image
    target = tmp_path / "card.img"
    target.write_bytes(b"\xaa" * (4 << 20))  # an old card's content, overwritten only where the image maps
    asyncio.run(write_image(path, bmap_path, target, tmp_path / "log", "dev-1", 60))
    bmap = read_bmap(bmap_path)
    assert bmap.checksum == "sha256" and bmap.mapped_bytes < 4 << 20
    assert verify_written(bmap, target, "dev-1") == bmap.mapped_bytes
    first, _last, _ = bmap.ranges[-1]
    with target.open("r+b") as fh:  # the card garbles a block on its way
        fh.seek(first * bmap.block_size + 100)
        fh.write(b"\x00\x01\x02")
    with pytest.raises(BmapMismatch, match=f"blocks {first}-") as err:
        verify_written(bmap, target, "dev-1")
    assert "dev-1" in str(err.value) and "corrupted on its way" in str(err.value)


def test_bmaptool_refuses_an_image_that_does_not_match_its_bmap(tmp_path: Path, image: tuple[Path, Path]) -> None:
    path, bmap_path = image
    with path.open("r+b") as fh:  # damaged after its bmap was made
        fh.seek((1 << 20) + 10)
        fh.write(b"XYZ")
    with pytest.raises(BmapMismatch, match="does not match its bmap"):
        asyncio.run(write_image(path, bmap_path, tmp_path / "card.img", tmp_path / "log", "dev-1", 60))


class Recorder:
    """A board's power switch and storage that only record what provisioning asked of them."""

    def __init__(self, storage: Path) -> None:
        self.calls: list[str] = []
        self.storage = storage

    async def on(self) -> None:
        self.calls.append("on")

    async def off(self) -> None:
        self.calls.append("off")

    async def to_host(self) -> Path:
        self.calls.append("to_host")
        return self.storage

    async def settle(self) -> None:
        self.calls.append("settle")

    async def to_board(self) -> None:
        self.calls.append("to_board")


def _pi_with_os(tmp_path: Path, os_table: str) -> tuple[LinuxDriver, Recorder]:
    """A Pi 5 whose fleet entry's [device.os] table holds `os_table`, its driver, and a recorder standing in
    for its power and storage controls."""
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(f'[[device]]\nname = "pi-x"\nkind = "pi5"\nssh = "root@127.0.0.1:1"\n[device.os]\n{os_table}')
    (device,) = parse_fleet(tomllib.loads(fleet.read_text()), fleet).devices
    return LinuxDriver(device, tmp_path, os=True), Recorder(tmp_path / "card.img")


def test_an_image_the_fleet_does_not_pin_is_refused_before_anything_is_touched(
    tmp_path: Path, image: tuple[Path, Path]
) -> None:
    path, _ = image
    driver, recorder = _pi_with_os(tmp_path, f'image = "{path}"\nsha256 = "{"0" * 64}"\n')
    with pytest.raises(ImageRefused, match="refused before writing") as err:
        asyncio.run(provision_os(driver, BoardControls(recorder, recorder), lambda *a: None, log=None))
    assert "pi-x" in str(err.value) and hashlib.sha256(path.read_bytes()).hexdigest() in str(err.value)
    assert recorder.calls == [] and not recorder.storage.exists()


def test_the_os_table_is_validated_with_the_device_named(tmp_path: Path) -> None:
    where = "fleet.toml: device 'pi-x'"
    with pytest.raises(ConfigError, match=r"'os\.sha256': is required for image"):
        parse_os({"image": "a.img.xz"}, where, tmp_path)
    with pytest.raises(ConfigError, match="method"):
        parse_os({"image": "build", "method": "dd"}, where, tmp_path)
    with pytest.raises(ConfigError, match="power_on and power_off"):
        parse_os({"image": "build", "power_on": ["x"]}, where, tmp_path)
    with pytest.raises(ConfigError, match=r"'os\.colour': not a field of"):
        parse_os({"image": "build", "colour": 1}, where, tmp_path)
    with pytest.raises(ConfigError, match="needs field 'command'"):
        parse_os({"image": "build", "method": "command"}, where, tmp_path)
    with pytest.raises(ConfigError, match=r"'os\.timeout_s': expected float, got str"):
        parse_os({"image": "build", "timeout_s": "1h"}, where, tmp_path)
    with pytest.raises(ConfigError, match=r"'os\.attach': expected an array of str"):
        parse_os({"image": "build", "attach": "rpiboot -d x"}, where, tmp_path)
    with pytest.raises(ConfigError, match=r"'os\.expect': unknown field 'kernel'"):
        parse_os({"image": "build", "expect": {"kernel": "6.1"}}, where, tmp_path)
    spec = parse_os({"image": "img/pi.img.xz", "sha256": "A" * 64, "storage": "/dev/sdz"}, where, tmp_path)
    assert spec.bmap == tmp_path / "img/pi.img.bmap" and spec.sha256 == "a" * 64 and spec.storage == Path("/dev/sdz")
    assert default_bmap(Path("x.wic.bz2")) == Path("x.wic.bmap") and default_bmap(Path("d.img")) == Path("d.img.bmap")


def test_fingerprint_parse_and_differences() -> None:
    text = (
        '@os-release\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n'
        "@kernel\n6.1.0-57-arm64\n@tegra\n# R36 (release), REVISION: 4.0, GCID: x\n@marker\n" + "ab" * 32 + "\n@end\n"
    )
    fp = parse_fingerprint(text)
    assert fp == Fingerprint({"PRETTY_NAME": "Debian GNU/Linux 12 (bookworm)", "ID": "debian", "VERSION_ID": "12"},
                             "6.1.0-57-arm64", "# R36 (release), REVISION: 4.0, GCID: x", "ab" * 32)  # fmt: skip
    expect = {"image_sha256": "ab" * 32, "kernel_release": "6.1.0-57-arm64", "os_release": {"ID": "debian"},
              "nv_tegra_release": "# R36 (release), REVISION: 4.0"}  # fmt: skip
    assert differences(expect, fp) == []
    drifted = parse_fingerprint(text.replace('VERSION_ID="12"', 'VERSION_ID="13"').replace("57", "58"))
    assert differences({**expect, "os_release": {"VERSION_ID": "12"}}, drifted) == [
        "kernel 6.1.0-58-arm64 != 6.1.0-57-arm64",
        "os-release VERSION_ID '13' != '12'",
    ]
    assert differences(expect, parse_fingerprint("@kernel\n6.1.0-57-arm64\n"))[0] == "image marker none != abababababab"


def test_board_recipes_extend_the_linux_base_and_the_console_image() -> None:
    recipe = load_recipe(recipe_path("jetson-orin-nx"))
    assert [p.parent.name for p in recipe.chain] == ["switch-arm64", "linux-arm64", "jetson-orin-nx"]
    assert recipe.format == "disk" and recipe.name == "jetson-orin-nx" and recipe.disk_mb > 0
    assert {"openssh-server", "python3.11-minimal", "python3-numpy"} <= set(recipe.packages)
    assert recipe.modules[0] == "drivers/virtio/virtio_pci_legacy_dev.ko" and "fs/ext4/ext4.ko" in recipe.modules
    assert (
        "etc/nv_tegra_release" in recipe.files and "etc/nv_tegra_release" not in load_recipe(recipe_path("pi5")).files
    )
    assert load_recipe(recipe_path("switch-arm64")).format == "initramfs"


def test_virtual_boards_with_an_os_image_are_aarch64_guests() -> None:
    from bench.config.fleet import load_fleet
    from bench.virtual import make_virtual
    from bench.virtual.arm64_board import VirtualArm64Board
    from bench.virtual.linux import VirtualLinuxDevice

    pi = load_fleet().get("pi5-1")
    assert pi.os is not None and pi.os.built
    board = make_virtual(pi)
    assert isinstance(board, VirtualArm64Board) and board.qemu.cpu == "cortex-a76"
    assert isinstance(make_virtual(Device("p", "pi5", SshLink("u", "h", 22), virtual=True)), VirtualLinuxDevice)


def test_the_bmap_is_checked_against_the_image_before_anything(tmp_path: Path, image: tuple[Path, Path]) -> None:
    """Issue 31 case 6: bmaps made by `bmaptool create`, then made to lie, are refused by the validator
    naming the bmap; the honest one passes, also for the image compressed as bmaptool reads it."""
    from bench.provision.bmap import BmapRefused, check_against_image

    path, bmap_path = image
    honest = read_bmap(bmap_path)
    assert check_against_image(honest, path, "pi-x") == honest.mapped_bytes
    for compress in (["xz", "-k", "-T1"], ["gzip", "-k"], ["zstd", "-q", "-k"]):
        if shutil.which(compress[0]):
            subprocess.run([*compress, str(path)], check=True)
            packed = next(p for p in tmp_path.iterdir() if p.name.startswith("small.img.") and p.suffix != ".bmap"
                          and p != bmap_path)  # fmt: skip
            assert check_against_image(honest, packed, "pi-x") == honest.mapped_bytes
            packed.unlink()
    for edit, words in ((bad_checksum, "checksum of blocks"), (past_the_end, "past the end"),
                        (short_image, "past the end"), (out_of_order, "out of order")):  # fmt: skip
        lying = lying_bmap(bmap_path, tmp_path / f"{edit.__name__}.bmap", edit)
        with pytest.raises(BmapRefused, match=words) as err:
            check_against_image(read_bmap(lying), path, "pi-x")
        assert str(lying) in str(err.value) and "pi-x" in str(err.value)
    with path.open("r+b") as fh:  # an image longer than its bmap says
        fh.seek(0, 2)
        fh.write(b"\0" * 4096)
    with pytest.raises(BmapRefused, match="has more"):
        check_against_image(honest, path, "pi-x")


def test_a_lying_bmap_is_refused_with_the_board_left_on(tmp_path: Path, image: tuple[Path, Path]) -> None:
    """The lying bmap never reaches bmaptool: provisioning stops before the power is switched off or the
    storage taken from the board (bmaptool alone wrote 1 MiB and failed, the board left off)."""
    from bench.provision.bmap import BmapRefused

    path, bmap_path = image
    lying = lying_bmap(bmap_path, tmp_path / "lying.bmap", bad_checksum)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    driver, recorder = _pi_with_os(
        tmp_path, f'image = "{path}"\nsha256 = "{sha}"\nbmap = "{lying}"\nstorage = "{tmp_path / "card.img"}"\n'
    )
    with pytest.raises(BmapRefused, match=r"lying\.bmap"):
        asyncio.run(provision_os(driver, BoardControls(recorder, recorder), lambda *a: None, log=None))
    assert recorder.calls == [] and not recorder.storage.exists()
