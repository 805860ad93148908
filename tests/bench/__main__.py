"""Run one benchmark script the way the tests run: `python -m tests.bench bench_NAME [options]` from the checkout.

The script runs as itself (its own folder first on the path, so it imports its siblings) in a fresh interpreter
whose PYTHONPATH holds the folders of pyproject's `[tool.pytest.ini_options] pythonpath`: the checkout and the
agents' flat modules (host/, micropython/, bench/agent/), the same the tests get. That setting is the one
place either finds them; nothing edits `sys.path`. Without a name: the list of scripts."""

import os
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def pythonpath() -> str:
    """The PYTHONPATH a benchmark runs with: the tests' folders, then whatever the caller had."""
    folders = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["pythonpath"]
    return os.pathsep.join([str(ROOT / f) for f in folders] + [p for p in [os.environ.get("PYTHONPATH")] if p])


def main(argv: list[str]) -> int:
    scripts = sorted(p.stem for p in HERE.glob("bench_*.py"))
    name = argv[0].removesuffix(".py").rsplit("/", 1)[-1] if argv else ""
    if name not in scripts:
        usage = f"usage: python -m tests.bench NAME [options]; NAME one of: {', '.join(scripts)}"
        print(usage, file=sys.stderr if argv else sys.stdout)
        return 2 if argv else 0
    script = str(HERE / f"{name}.py")
    os.execve(sys.executable, [sys.executable, script, *argv[1:]], {**os.environ, "PYTHONPATH": pythonpath()})
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
