"""The one place a benchmark script (`python tests/bench/bench_X.py`) finds the checkout and the agents' flat
modules: the folders of pyproject's `[tool.pytest.ini_options] pythonpath`, the same the tests get. A script
imports this module first (its own folder is on `sys.path` when run as a script)."""

import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = [
    ROOT / p
    for p in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["pythonpath"]
]
sys.path[:0] = [str(f) for f in FOLDERS if str(f) not in sys.path]
