"""Option injection and `check --build` (issue 48): a value that starts with `-` never reaches a program as an
option (exit 2 naming the option), and a candidate's build dies with the bench and leaves no worktree behind,
also after a SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.core.errors import ConfigError, ExitCode
from bench.core.reaper import processes_in
from bench.premerge.git_build import LOCK_REASON, build_commit, git_commits, prune_stale, resolve_commit
from tests.conftest import REPO, fleet_refusal, hilbench

SESSION = REPO / "fixtures/sessions/combat.mcap"
VICTIM = b"keep me\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with three commits."""
    path = tmp_path / "repo"
    path.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x"}  # fmt: skip
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    for n in range(3):
        (path / "f").write_text(str(n))
        subprocess.run(["git", "-C", str(path), "add", "f"], check=True)
        subprocess.run(["git", "-C", str(path), "commit", "-qm", f"c{n}"], check=True, env=env)
    return path


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.write_bytes(VICTIM)
    return victim


# -- refs, ranges and repositories that look like options ----------------------------------------------------


@pytest.mark.parametrize("span", ["--output={d}/../victim", "-p..HEAD", "HEAD~2..--output={d}/../victim",
                                  "--all..HEAD"])  # fmt: skip
def test_bisect_git_range_that_looks_like_an_option_is_refused(repo: Path, tmp_path: Path, span: str) -> None:
    """bisect --git='--output=DIR/../victim' once truncated the victim: now exit 2 naming --git."""
    victim = _victim(tmp_path)
    (tmp_path / "d").mkdir()
    run = subprocess.run(hilbench("bisect", "--device", "c6-a", "--session", str(SESSION),
                                  f"--git={span.format(d=tmp_path / 'd')}", "--build", "true", "--repo", str(repo),
                                  "--output-dir", str(tmp_path / "o")),
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == ExitCode.USAGE, run.stderr
    assert "--git" in run.stderr and "Traceback" not in run.stderr
    assert victim.read_bytes() == VICTIM


@pytest.mark.parametrize(("option", "value"), [("--git", "--output={v}"), ("--git", "-h"), ("--repo", "-C/")])
def test_check_refuses_option_shaped_git_values(repo: Path, tmp_path: Path, option: str, value: str) -> None:
    """check --git / --repo starting with '-': exit 2 naming the option, before any build or device."""
    victim = _victim(tmp_path)
    args = {"--git": "HEAD", "--repo": str(repo), option: value.format(v=victim)}
    run = subprocess.run(hilbench("check", "--device", "pi5-1", "--session", str(SESSION), "--build", "true",
                                  *[f"{k}={v}" for k, v in args.items()], "--output-dir", str(tmp_path / "o")),
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == ExitCode.USAGE, run.stderr
    assert option in run.stderr and "Traceback" not in run.stderr
    assert victim.read_bytes() == VICTIM


def test_refs_after_end_of_options_still_resolve(repo: Path) -> None:
    """Plain refs and ranges still work: HEAD~2..HEAD is three commits, oldest first."""
    commits = git_commits(str(repo), "HEAD~2..HEAD")
    assert len(commits) == 3 and commits[-1] == resolve_commit(str(repo), "HEAD")


@pytest.mark.parametrize("ssh", ['"-oProxyCommand=touch${IFS}/tmp/x@host:22"', '"u@-oProxyCommand=x"'])
def test_an_ssh_link_that_looks_like_an_option_is_refused(tmp_path: Path, ssh: str) -> None:
    """An ssh user or host that starts with '-' (ssh would read `-oProxyCommand=...@host` as an option) is a
    fleet error naming the field."""
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(f'[[device]]\nname = "p1"\nkind = "pi5"\nssh = {ssh}\n')
    assert "field 'ssh'" in fleet_refusal(fleet)


@pytest.mark.parametrize(("coordinator", "host", "address"), [("-x", "h", None), ("c:1", "--help", None),
                                                              ("c:1", "h", "-a")])  # fmt: skip
def test_the_lab_exporter_gets_no_option_shaped_value(coordinator: str, host: str, address: str | None) -> None:
    from bench.lab.serve import exporter_argv

    with pytest.raises(ConfigError, match="may not start with"):
        exporter_argv(coordinator, host, Path("x.yaml"), address)


# -- check --build: its own process group, dies with the bench, no worktree left -----------------------------


def _worktrees(repo: Path) -> list[str]:
    listed = subprocess.run(["git", "-C", str(repo), "worktree", "list", "--porcelain"], capture_output=True,
                            text=True, check=True)  # fmt: skip
    return [line.split(" ", 1)[1] for line in listed.stdout.splitlines() if line.startswith("worktree ")][1:]


def test_a_build_leaves_nothing_running_and_no_worktree(repo: Path, tmp_path: Path) -> None:
    """A build that starts a background job and fails: the job is killed, the worktree removed."""
    pidfile = tmp_path / "bg.pid"
    with pytest.raises(Exception, match="failed to build"):
        build_commit(str(repo), resolve_commit(str(repo), "HEAD"), f"sleep 300 & echo $! > {pidfile}; exit 1",
                     tmp_path / "work")  # fmt: skip
    pid = int(pidfile.read_text())
    assert not _alive(pid), "the build's background job outlived it"
    assert _worktrees(repo) == []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_for(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_check_build_dies_with_the_bench(repo: Path, tmp_path: Path, sig: signal.Signals) -> None:
    """`check --git HEAD --build CMD` stopped mid-build (SIGTERM, or SIGKILL: no cleanup code runs) leaves no
    process of the build; SIGTERM removes the worktree at once, SIGKILL at the next start (a stale lock)."""
    pidfile = tmp_path / "build.pid"
    build = f"sh -c 'sleep 300' & echo $! > {pidfile}; wait"
    bench = subprocess.Popen(hilbench("check", "--device", "pi5-1", "--session", str(SESSION), "--git", "HEAD",
                                      "--build", build, "--repo", str(repo), "--output-dir", str(tmp_path / "o")),
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert _wait_for(lambda: pidfile.is_file() and pidfile.read_text().strip()), "the build never started"
        pid = int(pidfile.read_text())
        bench.send_signal(sig)
        bench.communicate(timeout=60)
        assert _wait_for(lambda: not _alive(pid)), "the build outlived the bench"
        trees = _worktrees(repo)
        if sig == signal.SIGTERM:
            assert trees == [] and bench.returncode == 128 + sig
        else:
            assert len(trees) == 1 and not processes_in(Path(trees[0]))
            assert prune_stale(str(repo)) == trees and _worktrees(repo) == []
    finally:
        bench.kill()
        bench.wait()


def test_a_live_benchs_worktree_is_not_pruned(repo: Path, tmp_path: Path) -> None:
    """A worktree locked by a bench that still runs (this process) is left alone."""
    from bench.core.leases import process_start

    tree = tmp_path / "tree"
    reason = f"{LOCK_REASON} pid {os.getpid()} start {process_start(os.getpid())}"
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", "--lock", "--reason", reason, str(tree),
                    "HEAD"], check=True, capture_output=True)  # fmt: skip
    assert prune_stale(str(repo)) == [] and _worktrees(repo) == [str(tree)]
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    subprocess.run(["git", "-C", str(repo), "worktree", "unlock", str(tree)], check=True)
    subprocess.run(["git", "-C", str(repo), "worktree", "lock", "--reason", f"{LOCK_REASON} pid {dead.pid} start 1",
                    str(tree)], check=True)  # fmt: skip
    assert prune_stale(str(repo)) == [str(tree)] and _worktrees(repo) == []


def test_the_watchdog_kills_what_runs_in_a_worktree_already_removed(tmp_path: Path) -> None:
    """A stop that lands while the build is being started (before the bench knows its process) leaves the build
    to the watchdog, after the worktree is gone: what runs in the removed folder is still killed."""
    from bench.core.reaper import kill_in

    tree = tmp_path / "tree"
    tree.mkdir()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], cwd=tree)
    try:
        tree.rmdir()  # its working folder now reads "TREE (deleted)"
        assert kill_in(tree) >= 1
        assert sleeper.wait(timeout=10) == -signal.SIGKILL
    finally:
        sleeper.kill()
        sleeper.wait()
