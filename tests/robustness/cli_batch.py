"""`python -m tests.robustness.cli_batch`: run many `hilbench` command lines in one process (JSON list of argv
on stdin, one JSON result per case on stdout), so the bad-input suite pays Python's start-up once. Each case
goes through bench.cli.main as `hilbench` would; an exception escaping it is reported as a traceback."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback

from bench.cli import main as cli_main


def run(argv: list[str]) -> dict:
    """One command line: exit code, stdout, stderr (with the traceback when one escaped)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli_main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # what `hilbench` would have died with
            err.write(traceback.format_exc())
            code = 1
    return {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


def main() -> int:
    """Read the cases, print the results."""
    for argv in json.load(sys.stdin):
        sys.stdout.write(json.dumps(run(argv)) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
