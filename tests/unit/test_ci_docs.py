"""The CI files under docs/ci/ are valid YAML whose every `hilbench` command parses with the bench's own argument
parser (a renamed command or flag fails here, not in a team's pipeline)."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bench.cli import build_parser
from bench.core.errors import ConfigError

CI_DIR = Path(__file__).resolve().parents[2] / "docs" / "ci"
SHELL_OPERATORS = {"&&", "||", ";", "|", "&"}


def scripts(doc: object) -> Iterator[str]:
    """Every shell script of a CI file: GitHub Actions steps' `run`, GitLab jobs' `script` lines."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key == "run" and isinstance(value, str):
                yield value
            elif key in ("script", "before_script", "after_script"):
                yield from ([value] if isinstance(value, str) else value)
            else:
                yield from scripts(value)
    elif isinstance(doc, list):
        for item in doc:
            yield from scripts(item)


def hilbench_commands(script: str) -> Iterator[list[str]]:
    """The arguments of each `hilbench` (or `.../bin/hilbench`) command in a shell script."""
    words = shlex.split(script.replace("\\\n", " "), comments=True)
    for i, word in enumerate(words):
        if Path(word).name == "hilbench":
            argv = []
            for arg in words[i + 1 :]:
                if arg in SHELL_OPERATORS:
                    break
                argv.append(arg)
            yield argv


@pytest.mark.parametrize("path", sorted(CI_DIR.glob("*.yml")), ids=lambda p: p.name)
def test_every_hilbench_command_of_a_ci_file_is_real(path: Path) -> None:
    commands = [argv for script in scripts(yaml.safe_load(path.read_text())) for argv in hilbench_commands(script)]
    assert any(argv[:1] == ["check"] for argv in commands), f"{path.name} runs no `hilbench check`"
    for argv in commands:
        parser = build_parser(argv[0])
        try:
            args = parser.parse_args(argv)
        except ConfigError as exc:
            pytest.fail(f"{path.name}: `hilbench {shlex.join(argv)}`: {exc}")
        help_text = parser._subparsers._group_actions[0].choices[argv[0]].format_help()
        flags = [a.split("=", 1)[0] for a in argv if a.startswith("--")]
        assert all(flag in help_text for flag in flags), f"{path.name}: a flag not in `hilbench {argv[0]} --help`"
        assert args.func is not None


def test_a_wrong_flag_is_caught() -> None:
    script = "hilbench check --device pi5-1 --session s.mcap --candidate m.tflite"
    (argv,) = hilbench_commands(script)
    with pytest.raises(ConfigError, match="--candidate"):
        build_parser("check").parse_args(argv)


def _option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_the_files_the_jobs_publish_are_the_ones_the_check_writes() -> None:
    github = yaml.safe_load((CI_DIR / "github-actions.yml").read_text())
    steps = github["jobs"]["check"]["steps"]
    (check,) = [a for s in scripts(steps) for a in hilbench_commands(s) if a[:1] == ["check"]]
    comment = next(s["run"] for s in steps if "gh pr comment" in s.get("run", ""))
    assert _option(shlex.split(comment), "--body-file") == _option(check, "--summary-md")
    gitlab = yaml.safe_load((CI_DIR / "gitlab-ci.yml").read_text())["hilbench-check"]
    (check,) = [a for s in scripts(gitlab) for a in hilbench_commands(s) if a[:1] == ["check"]]
    assert gitlab["artifacts"]["reports"]["junit"] == _option(check, "--junit")
