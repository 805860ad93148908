"""The model an ARM64 console runs: the one its device configures (a fleet's `model`, the nightly's `--model`, a
check's candidate), not only the factory model its image was built with.

The console keeps nothing between boots (its root is the initramfs), so what the bench deploys travels in the
initramfs: a small archive with the device's model, its signed manifest and the trusted key under
/opt/npc/device/, in front of the image's own archive (the kernel unpacks the two in turn, as it does early
microcode before a compressed initrd). The image's /init copies them over the factory files and starts the agent
on that model. A device that runs the factory model with the development key boots the image as built."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tempfile
from pathlib import Path

from bench.bundles import model_version, signed_manifest_file, trust
from bench.config.fleet import Device
from bench.core.errors import ConfigError
from bench.core.paths import MODELS_DIR, cache_root
from bench.image.cpio import write_cpio
from bench.image.guest_files import factory_model
from bench.models import model_family, model_file
from bench.models.signing import DEV_PUBLIC_KEY

DEVICE_DIR = "opt/npc/device"  # /init copies models/ into /opt/npc/models and trusted.pub.pem into the agent's
KEEP = 4  # initramfs files with a device's model kept in the cache, newest first
PAD = 512  # the device's archive is padded with zeros (which the kernel skips) before the image's


def device_model(device: Device) -> Path:
    """The .tflite file `device` is configured to run (a fixture name or a path); ConfigError naming the device."""
    try:
        return model_file(device.settings.model, "tflite", MODELS_DIR)
    except ConfigError as exc:
        raise ConfigError(
            f"device {device.name}: {str(exc).splitlines()[0]}",
            hint="set `model` in the fleet file to one of fixtures/models/*.tflite (without the extension) or a path",
        ) from None


def device_archive(device: Device) -> bytes | None:
    """The cpio archive of `device`'s model, manifest and trusted key, or None when the image's own files are
    those (the factory model, the development key)."""
    model, key = device_model(device), trust.trusted_key(device)
    factory = factory_model(device.kind)
    if model.read_bytes() == factory.read_bytes() and Path(key).read_bytes() == DEV_PUBLIC_KEY.read_bytes():
        return None
    with tempfile.TemporaryDirectory(prefix="hilbench-console-") as tmp:
        root = Path(tmp) / "root"
        models = root / DEVICE_DIR / "models"
        models.mkdir(parents=True)
        shutil.copyfile(model, models / model.name)
        signed_manifest_file(model, model_family(model), model_version(device), models, trust.signing_key(device))
        shutil.copyfile(key, root / DEVICE_DIR / "trusted.pub.pem")
        for path in [*root.rglob("*"), root]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        out = io.BytesIO()
        write_cpio(root, out, 0, {})
    data = out.getvalue()
    return data + b"\0" * (-len(data) % PAD)


def initrd_for(device: Device, image_initrd: Path, root: Path | None = None) -> Path:
    """The initramfs `device` boots: the image's, or (when it runs another model or key) that one behind the
    device's archive, made once per archive and image (in `root`, default the bench cache)."""
    archive = device_archive(device)
    if archive is None:
        return image_initrd
    st = image_initrd.stat()
    digest = hashlib.sha256(archive)
    digest.update(f"{image_initrd.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode())
    folder = root or cache_root() / "console-models"
    path = folder / f"{digest.hexdigest()[:16]}.img"
    if path.is_file():
        os.utime(path)  # the newest are kept
        return path
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    with tmp.open("wb") as out, image_initrd.open("rb") as image:
        out.write(archive)
        shutil.copyfileobj(image, out, 1 << 20)
    tmp.replace(path)
    for old in sorted(folder.glob("*.img"), key=lambda p: p.stat().st_mtime_ns, reverse=True)[KEEP:]:
        old.unlink(missing_ok=True)
    return path
