"""`hilbench completion bash|zsh`: the shell completion script (argcomplete's), to source or install."""

from __future__ import annotations

import argparse
import sys

from bench.core.errors import ExitCode

SHELLS = ("bash", "zsh")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `completion` command."""
    p = sub.add_parser(
        "completion",
        help="print the shell completion script",
        description='bash: eval "$(hilbench completion bash)" in ~/.bashrc; zsh: hilbench completion zsh > '
        "~/.zfunc/_hilbench (a folder on $fpath), or eval it in ~/.zshrc after compinit",
    )
    p.add_argument("shell", choices=SHELLS)
    p.set_defaults(func=cmd_completion)


def cmd_completion(args: argparse.Namespace) -> int:
    """Print the completion script of `args.shell` for `hilbench`."""
    import argcomplete

    sys.stdout.write(argcomplete.shellcode(["hilbench"], shell=args.shell))
    return ExitCode.OK
