"""What gets deployed to a device: the agent's files (source path -> path relative to the agent folder)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.bundles import trust
from bench.config.fleet import Device
from bench.config.kinds import MICROPYTHON_AGENT, Esp32c6Settings, MemoryLimited
from bench.core.errors import ConfigError
from bench.core.folders import write_file
from bench.core.paths import HOST_DIR, MICROPYTHON_DIR, MODELS_DIR, PACKAGE_DIR, WIRE_MODULE
from bench.models import FORMAT_EXT, guess_name_and_format, kind_model, model_family, model_file, signing

HOST_AGENT_PORT = 7700

# the portable modules shared by both reference agents (deployed unchanged)
PORTABLE = [
    (WIRE_MODULE, "wire.py"),
    (MICROPYTHON_DIR / "npcsched.py", "npcsched.py"),
    (MICROPYTHON_DIR / "npcfeat.py", "npcfeat.py"),
    (MICROPYTHON_DIR / "npcrecords.py", "npcrecords.py"),
    (MICROPYTHON_DIR / "npcmanifest.py", "npcmanifest.py"),
]
HOST_FILES = [
    "npc_host_agent.py",
    "npc_models.py",
    "npc_verify.py",
    "npc_links.py",
    "npc_wake.py",
    "npc_update.py",
    "npc_bspatch.py",
    "npc_grpc.py",
]
GRPC_MESSAGES = (PACKAGE_DIR / "ota" / "npcota_pb.py", "npcota_pb.py")  # the gRPC update channel's messages
OPTIONAL = [(MICROPYTHON_DIR / "p256.py", "p256.py")]  # verifier for targets without `cryptography`


def host_agent_sources() -> dict[str, Path]:
    """The host agent's code files: name in its flat folder -> source in this checkout."""
    files = [(HOST_DIR / name, name) for name in HOST_FILES] + PORTABLE + OPTIONAL
    return {dest: src for src, dest in files if src.is_file()}


def reset_model(devices: list[Device]) -> list[Device]:
    """`devices` marked so that their next deploy resets the model an update installed (flash --reset-model;
    the nightly does it). Without it a flash keeps what the agent last switched to (docs/ota.md)."""
    return [replace(d, reset_model=True) for d in devices]


def resets_model(device: Device) -> bool:
    """Whether a deploy to `device` resets its model to the deployed one (see `reset_model`)."""
    return device.reset_model


def model_version(device: Device) -> int:
    """The version the bundled model is announced with (fleet setting `model_version`)."""
    return device.settings.model_version


def signed_manifest_file(model: Path, name: str, version: int, out_dir: Path, key_path: Path) -> Path:
    """Write `model`'s manifest, signed with the key at `key_path`, beside a copy name in `out_dir`."""
    fmt = guess_name_and_format(model)[1]
    manifest = signing.sign_manifest(
        signing.model_manifest(model, name, version, fmt), signing.load_private_key(key_path)
    )
    path = out_dir / (model.stem + ".json")
    write_file(path, json.dumps(manifest, indent=1) + "\n", what="bundle folder")
    return path


def host_bundle(
    device: Device,
    out_dir: Path,
    *,
    key_path: Path | None = None,
    pubkey_path: Path | None = None,
) -> list[tuple[Path, str]]:
    """The files of the host/ agent for `device`: agent modules, the portable modules, the trusted public
    key, the device's model (`settings.model`) and its signed manifest (written to `out_dir`). The keys
    default to the device's configured ones (bench.bundles.trust)."""
    key_path = key_path or trust.signing_key(device)
    pubkey_path = pubkey_path or trust.trusted_key(device)
    files = [(HOST_DIR / name, name) for name in HOST_FILES]
    files += PORTABLE
    files.append(GRPC_MESSAGES)
    files += [(src, dest) for src, dest in OPTIONAL if src.is_file()]
    files.append((Path(pubkey_path), "trusted.pub.pem"))
    try:
        model = model_file(device.settings.model, "tflite", MODELS_DIR)  # a fixture name, or a team's .tflite path
    except ConfigError as exc:
        raise ConfigError(
            f"device {device.name}: {str(exc).splitlines()[0]}",
            hint="set `model` in the fleet file to one of fixtures/models/*.tflite (without the extension) or a path",
        ) from None
    family = model_family(model)
    manifest = signed_manifest_file(model, family, model_version(device), out_dir, key_path)
    files.append((model, f"models/{model.name}"))
    files.append((manifest, f"models/{manifest.name}"))
    if resets_model(device):  # the agent's record of the model to run, pointed back at the deployed one
        record = out_dir / "current.json"
        text = json.dumps({"path": model.name, "manifest": json.loads(manifest.read_text())}) + "\n"
        write_file(record, text, what="bundle folder")
        files.append((record, "models/current.json"))
    missing = [str(src) for src, _ in files if not src.is_file()]
    if missing:
        raise ConfigError(f"host agent bundle for {device.name}: missing {', '.join(missing)}")
    return files


def host_agent_command(
    device: Device,
    root: str,
    *,
    python: str = "python3",
    listen: str | None = None,
    stdio: bool = False,
    isolated: bool = False,
) -> list[str]:
    """The command line that starts the deployed host agent in folder `root` on the device. `isolated`: with
    nothing from the caller's environment (no PYTHONPATH, no user site), so the folder must stand alone, as on a
    board; the agent imports its flat modules from its own folder, the one thing `-I` would also take away."""
    model_name = Path(device.settings.model).name.removesuffix(".tflite")  # as host_bundle deploys it
    argv = [python, *(["-E", "-s"] if isolated else []), f"{root}/npc_host_agent.py"]
    argv += ["--stdio"] if stdio else ["--listen", listen or f"0.0.0.0:{HOST_AGENT_PORT}"]
    argv += ["--pubkey", f"{root}/trusted.pub.pem", "--models-dir", f"{root}/models"]
    argv += ["--model", f"{root}/models/{model_name}.tflite", "--manifest", f"{root}/models/{model_name}.json"]
    if isinstance(device.settings, MemoryLimited) and device.settings.memory_limit_mb:
        argv += ["--mem-limit-mb", str(device.settings.memory_limit_mb)]
    return argv


def loaded_model(device: Device, key_path: Path | None = None) -> tuple[str, dict[str, Any]]:
    """(path on the device, signed manifest) of the model the bench deploys to `device`, as the agent's `load`
    takes them: a cold start loads it again (MicroPython agent: path from its root; host agent: from its models
    folder). Signed with `key_path`, by default the device's configured signing key (bench.bundles.trust)."""
    key_path = key_path or trust.signing_key(device)
    model, fmt = kind_model(device.kind, device.settings, MODELS_DIR)
    on_board = device.kind_info.runtime == MICROPYTHON_AGENT  # the MicroPython agent keeps models under models/
    fmt = fmt if on_board else guess_name_and_format(model)[1]  # as micropython_bundle / host_bundle sign it
    family = model_family(model)
    manifest = signing.sign_manifest(
        signing.model_manifest(model, family, model_version(device), fmt), signing.load_private_key(key_path)
    )
    return (f"models/{model.name}" if on_board else model.name), manifest


def micropython_bundle(
    device: Device,
    out_dir: Path,
    *,
    key_path: Path | None = None,
    pubkey_path: Path | None = None,
) -> list[tuple[Path, str]]:
    """The board folder of the micropython/ agent for `device`: its modules and the portable ones at the
    top level, `trust.key`, `agent.json` (memory limit from `memory_limit_kb`, the inference marker's pin from
    `marker_gpio`), the device's model as .npcm in `models/`, and `models/deployed.json` (path + signed manifest)
    so the agent boots with it.
    Generated files are written to `out_dir`. The keys default to the device's configured ones (bench.bundles.trust)."""
    key_path = key_path or trust.signing_key(device)
    pubkey_path = pubkey_path or trust.trusted_key(device)
    from bench.bundles.mpy_board import agent_files, trusted_key_hex

    if FORMAT_EXT.get(device.settings.model_format) != "npcm":
        raise ConfigError(
            f"device {device.name}: model_format {device.settings.model_format!r} cannot run on MicroPython",
            hint='use model_format = "npcm-int8"',
        )
    model, fmt = kind_model(device.kind, device.settings, MODELS_DIR)
    family = model_family(model)
    manifest = signing.sign_manifest(
        signing.model_manifest(model, family, model_version(device), fmt), signing.load_private_key(key_path)
    )
    deployed = out_dir / "deployed.json"
    write_file(
        deployed, json.dumps({"path": f"models/{model.name}", "manifest": manifest}) + "\n", what="bundle folder"
    )
    trust_file = out_dir / "trust.key"
    write_file(trust_file, trusted_key_hex(Path(pubkey_path)) + "\n", what="bundle folder")
    config = out_dir / "agent.json"
    settings = {"mem_limit": int(device.settings.memory_limit_kb) * 1024}
    if isinstance(device.settings, Esp32c6Settings) and device.settings.marker_gpio is not None:
        settings["marker_pin"] = device.settings.marker_gpio
    write_file(config, json.dumps(settings) + "\n", what="bundle folder")
    files = [(src, src.name) for src in agent_files()]
    files += [(model, f"models/{model.name}"), (deployed, "models/deployed.json"), (trust_file, "trust.key")]
    files.append((config, "agent.json"))
    if resets_model(device):  # the record of the model to run, pointed back at the deployed one
        current = out_dir / "current.json"
        write_file(current, deployed.read_bytes(), what="bundle folder")
        files.append((current, "models/current.json"))
    return files
