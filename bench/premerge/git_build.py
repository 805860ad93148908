"""Builds of a git commit for `check --git` and `bisect --git`: the commit checked out in a worktree of its
own, the user's --build command run there, its one artefact taken.

- Values from the command line reach git only as values: a ref, range or repository that starts with `-` is
  refused (exit 2, naming the option), and refs follow `--end-of-options`.
- The build runs in a process group of its own, tied to the bench (bench.core.procs: PR_SET_PDEATHSIG), with
  a `bench.core.reaper` watchdog on its worktree, so nothing it started outlives the bench, even on SIGKILL.
- The worktree is locked with the bench's pid while it builds and removed on every exit; one left by a bench
  that was SIGKILLed is found by its lock (its pid gone) and removed at the next start."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from bench.core.errors import BenchError, ConfigError
from bench.core.fields import not_option
from bench.core.folders import open_fresh, safe_folder
from bench.core.leases import process_start
from bench.core.procs import tied

MODEL_SUFFIXES = (".tflite",)
FIRMWARE_SUFFIXES = (".bin",)
BUILD_OUT_ENV = "HILBENCH_BUILD_OUT"  # --build CMD writes its one artefact into this folder
LOCK_REASON = "hilbench build"  # a worktree locked with this reason, then "pid PID start TICKS", is the bench's


def _git(repo: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, stdin=subprocess.DEVNULL)


def _last_line(proc: subprocess.CompletedProcess[str], default: str) -> str:
    return ((proc.stderr or proc.stdout).strip().splitlines() or [default])[-1]


def resolve_commit(repo: str, ref: str, option: str = "--git") -> str:
    """The commit `ref` names in `repo` (ConfigError naming `option` when it is option-shaped or unknown)."""
    not_option(repo, "--repo")
    not_option(ref, option)
    found = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if found.returncode:
        raise ConfigError(f"{option} {ref} in {repo}: {_last_line(found, 'not a commit')}",
                          hint="give a branch, tag or commit of --repo")  # fmt: skip
    return found.stdout.strip()


def git_commits(repo: str, span: str) -> list[str]:
    """GOOD, then every commit of GOOD..BAD oldest first (ConfigError naming the range when git refuses it)."""
    if ".." not in span:
        raise ConfigError(f"--git {span}: give a range GOOD..BAD", hint="e.g. --git v1.2..main")
    good, bad = span.split("..", 1)
    not_option(span, "--git")
    not_option(bad, "--git (its BAD end)")
    first = resolve_commit(repo, good, "--git")
    last = resolve_commit(repo, bad, "--git")
    listed = _git(repo, "rev-list", "--reverse", "--end-of-options", f"{first}..{last}")
    if listed.returncode:
        raise ConfigError(f"--git {span} in {repo}: {_last_line(listed, 'git rev-list failed')}")
    commits = [first, *listed.stdout.split()]
    if len(commits) < 2:
        raise ConfigError(f"--git {span}: no commit after {good}")
    return commits


def prune_stale(repo: str) -> list[str]:
    """Remove the bench's build worktrees of `repo` whose bench is gone (SIGKILLed mid-build); their paths."""
    listed = _git(repo, "worktree", "list", "--porcelain")
    removed = []
    for block in listed.stdout.split("\n\n"):
        fields = dict(line.partition(" ")[::2] for line in block.splitlines())
        reason = fields.get("locked", "")
        if not reason.startswith(LOCK_REASON) or _alive(reason):
            continue
        path = fields["worktree"]
        _git(repo, "worktree", "unlock", path)
        _git(repo, "worktree", "remove", "--force", "--force", path)
        removed.append(path)
    _git(repo, "worktree", "prune")
    return removed


def _alive(reason: str) -> bool:
    """True when the bench named in a lock reason ("hilbench build pid P start T") still runs."""
    words = reason.split()
    try:
        pid, start = int(words[words.index("pid") + 1]), float(words[words.index("start") + 1])
    except (ValueError, IndexError):
        return False
    return process_start(pid) == start


@contextlib.contextmanager
def _worktree(repo: str, commit: str, tree: Path) -> Iterator[None]:
    """`commit` checked out at `tree`, locked with this bench's pid; removed however the block ends."""
    prune_stale(repo)
    lock = f"{LOCK_REASON} pid {os.getpid()} start {process_start(os.getpid())}"
    add = _git(repo, "worktree", "add", "--detach", "--lock", "--reason", lock, str(tree), commit)
    if add.returncode:
        raise BenchError(f"{commit[:12]}: checkout failed: {add.stderr.strip()}")
    try:
        yield
    finally:
        _git(repo, "worktree", "unlock", str(tree))
        _git(repo, "worktree", "remove", "--force", "--force", str(tree))


def _run_build(command: str, tree: Path, outdir: Path, log: Path) -> int:
    """`command` (a shell line) in `tree`, its output into `log`, in a process group of its own that dies with
    the bench; whatever it left running is killed when it returns or the bench stops. Its exit status."""
    # not tied: the watchdog outlives the bench by a moment, to kill what the build left in its worktree
    reaper = subprocess.Popen([sys.executable, "-m", "bench.core.reaper", str(tree)], stdin=subprocess.PIPE)
    with open_fresh(log, what="build folder", binary=True) as out:
        proc = subprocess.Popen(tied(["sh", "-c", command]), cwd=tree, env={**os.environ, BUILD_OUT_ENV: str(outdir)},
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
    try:
        return proc.wait()  # not till its output closes: a job it left in the background keeps that open
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the build's group: what it left behind, or all of it on a stop
        proc.wait()
        assert reaper.stdin is not None
        reaper.stdin.close()  # the watchdog kills what still runs in the worktree, then exits
        reaper.wait()


def build_commit(repo: str, commit: str, command: str, work: Path) -> Path:
    """Check `commit` out in a worktree of its own and run the build command there (as `git bisect run` runs
    it); the one file it wrote into $HILBENCH_BUILD_OUT. BenchError (the step is skipped) when it fails."""
    not_option(repo, "--repo")
    tree, outdir = work / f"src-{commit[:12]}", work / f"out-{commit[:12]}"
    safe_folder(outdir, "build folder")
    log = work / f"build-{commit[:12]}.log"
    with _worktree(repo, commit, tree):
        status = _run_build(command, tree, outdir, log)
    if status:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
        raise BenchError(f"{commit[:12]}: failed to build (exit {status}): {tail[0]} (log: {log})")
    made = [p for p in outdir.iterdir() if p.suffix in MODEL_SUFFIXES + FIRMWARE_SUFFIXES]
    if len(made) != 1:
        raise BenchError(f"{commit[:12]}: the build wrote {len(made)} artefacts (*.tflite/*.bin) into ${BUILD_OUT_ENV}")
    return made[0]
