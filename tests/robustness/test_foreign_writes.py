"""Another local user against every file the bench writes (issue 48): a link or a file of theirs planted at a
write site's name, or a folder of theirs on the way to it. Nothing is written through the link or into their
file, and a folder they could swap is a named refusal (exit 2). The tests run as root and act as "another
user" by chowning what they plant to a throwaway uid; they never rely on fs.protected_symlinks."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.ci.facts import CiReport, Figure
from bench.ci.files import CiFiles
from bench.ci.write import STEP_SUMMARY_ENV, write_ci_files
from bench.core import folders
from bench.core.errors import ExitCode
from bench.core.folders import UnsafeFolder
from tests.conftest import REPO, hilbench

OTHER = 4242  # a uid nobody on the host has: "another user"
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's files needs root")
pytestmark = needs_root
VICTIM = b"root's file, not the bench's to write\n"
SESSION = REPO / "fixtures/sessions/combat.mcap"


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.write_bytes(VICTIM)
    return victim


def _theirs(path: Path) -> Path:
    os.chown(path, OTHER, OTHER, follow_symlinks=False)
    return path


def _their_folder(path: Path, mode: int = 0o755) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, mode)
    return _theirs(path)


# -- the one home: every way of writing against every plant ------------------------------------------------

WRITERS: dict[str, Callable[[Path], None]] = {
    "write_file": lambda p: folders.write_file(p, "new\n"),
    "copy_file": lambda p: folders.copy_file(REPO / "README.md", p),
    "open_append": lambda p: folders.open_append(p).close(),
    "open_fresh": lambda p: folders.open_fresh(p).close(),
}
WHOLE = ("write_file", "copy_file", "open_fresh")  # a planted name is replaced, not written through


def _plant(tmp_path: Path, how: str) -> Path:
    """The write site's name, with `how` planted there or on the way to it; the victim file beside it."""
    victim = _victim(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    target = out / "file.log"
    if how == "link":
        target.symlink_to(victim)
    elif how == "their link":
        target.symlink_to(victim)
        _theirs(target)
    elif how == "hard link":
        os.link(victim, target)
    elif how == "their file":
        target.write_text("theirs\n")
        _theirs(target)
    elif how == "their folder":
        _their_folder(out)
    elif how == "their parent":
        _their_folder(tmp_path / "shared")
        target = tmp_path / "shared" / "mine" / "file.log"
    elif how == "open folder":
        os.chmod(out, 0o777)
    elif how == "their folder link":
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "via").symlink_to(tmp_path / "elsewhere")
        _theirs(tmp_path / "via")
        target = tmp_path / "via" / "file.log"
    return target


REFUSED_FOR_ALL = ("their folder", "their parent", "open folder", "their folder link")


@pytest.mark.parametrize("how", ["link", "their link", "hard link", "their file", *REFUSED_FOR_ALL])
@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_plant_is_never_written_through(tmp_path: Path, writer: str, how: str) -> None:
    """Whole writes replace a planted name with the bench's own file; appends refuse a link, a hard link or
    another user's file; and every writer refuses a folder another user owns, may write, or links to."""
    target = _plant(tmp_path, how)
    if how in REFUSED_FOR_ALL or writer not in WHOLE:
        with pytest.raises(UnsafeFolder) as info:
            WRITERS[writer](target)
        assert info.value.exit_code == ExitCode.USAGE and str(tmp_path) in str(info.value)
    else:
        WRITERS[writer](target)
        st = os.lstat(target)
        assert not os.path.islink(target) and st.st_uid == os.geteuid() and st.st_nlink == 1
    assert (tmp_path / "victim").read_bytes() == VICTIM


def test_a_sticky_shared_folder_is_fine_and_a_planted_name_in_it_is_replaced(tmp_path: Path) -> None:
    """A sticky folder others may write (as /tmp) is accepted: nobody there renames what the bench owns."""
    shared = tmp_path / "sticky"
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o1777)
    victim = _victim(tmp_path)
    (shared / "check.md").symlink_to(victim)
    _theirs(shared / "check.md")
    folders.write_file(shared / "check.md", "ok\n")
    assert (shared / "check.md").read_text() == "ok\n" and victim.read_bytes() == VICTIM


# -- the CI files: --summary-md, --junit, --metrics and $GITHUB_STEP_SUMMARY ------------------------------

FIGURE = Figure("c6-a", "esp32c6", "combat", "latency_p50", "bench", "ms", 1.0, "check")
REPORT = CiReport(job="check", title="t", exit_code=0, headline="h", figures=[FIGURE])
OPTIONS = ("summary_md", "junit", "metrics")


@pytest.mark.parametrize("plant", ["link at the name", "link at the old temp", "their file", "their temp"])
@pytest.mark.parametrize("option", OPTIONS)
def test_ci_files_are_never_written_through_a_plant(tmp_path: Path, option: str, plant: str) -> None:
    """Another user's link at a CI file's name or at the fixed `.NAME.tmp` the bench once used makes the bench
    write nothing through it, and a file of theirs there leaves the result the bench's own, not theirs."""
    victim = _victim(tmp_path)
    out = tmp_path / "ci"
    out.mkdir()
    path = out / f"{option}.out"
    planted = path if "name" in plant or plant == "their file" else out / f".{path.name}.tmp"
    if "link" in plant:
        planted.symlink_to(victim)
    else:
        planted.write_text("their verdict\n")
    _theirs(planted)
    write_ci_files(REPORT, CiFiles(**{option: path}), env={})
    assert victim.read_bytes() == VICTIM
    st = os.lstat(path)
    assert not os.path.islink(path) and st.st_uid == os.geteuid() and "their verdict" not in path.read_text()


@pytest.mark.parametrize("plant", ["link", "their file", "hard link"])
def test_the_step_summary_is_not_appended_through_a_plant(tmp_path: Path, plant: str) -> None:
    """$GITHUB_STEP_SUMMARY is opened to append: a link, a hard link or another user's file there is refused."""
    victim = _victim(tmp_path)
    step = tmp_path / "step.md"
    if plant == "link":
        step.symlink_to(victim)
    elif plant == "hard link":
        os.link(victim, step)
    else:
        step.write_text("")
        _theirs(step)
    with pytest.raises(UnsafeFolder):
        write_ci_files(REPORT, CiFiles(), env={STEP_SUMMARY_ENV: str(step)})
    assert victim.read_bytes() == VICTIM


@pytest.mark.parametrize("option", ["--summary-md", "--junit", "--metrics"])
def test_a_ci_file_in_another_users_folder_is_refused_before_the_run(tmp_path: Path, option: str) -> None:
    """A CI file in a folder another user owns is exit 2 naming the option, before any device is touched."""
    theirs = _their_folder(tmp_path / "theirs")
    run = subprocess.run(hilbench("check", "--device", "pi5-1", "--session", str(SESSION), option,
                                  str(theirs / "out.txt"), "--output-dir", str(tmp_path / "o")),
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == ExitCode.USAGE, run.stderr
    assert option in run.stderr and str(theirs) in run.stderr and "Traceback" not in run.stderr


# -- output folders, flash logs, state, lease and cache folders ----------------------------------------------


@pytest.mark.parametrize("argv", [["flash", "--device", "c6-a"], ["replay", "--session", str(SESSION)],
                                  ["nightly", "--session", str(SESSION)], ["doctor"]])  # fmt: skip
def test_an_output_dir_under_another_users_folder_is_refused_first(tmp_path: Path, argv: list[str]) -> None:
    """--output-dir inside a folder another user owns: exit 2 naming it, before anything runs or is written."""
    theirs = _their_folder(tmp_path / "shared")
    run = subprocess.run(hilbench(*argv, "--output-dir", str(theirs / "out")), cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert run.returncode == ExitCode.USAGE, run.stderr
    assert "--output-dir" in run.stderr and str(theirs) in run.stderr and "Traceback" not in run.stderr
    assert not (theirs / "out").exists()


def test_a_flash_log_link_is_refused(tmp_path: Path) -> None:
    """A link planted at the predictable flash-STAMP/DEVICE.log makes the bench refuse, not append through it."""
    from bench.config.fleet import load_fleet
    from bench.nightly.flashing import _log

    victim = _victim(tmp_path)
    logs = tmp_path / "flash-20261207-030000"
    logs.mkdir()
    (logs / "c6-a.log").symlink_to(victim)
    device = next(d for d in load_fleet(REPO / "fixtures/fleets/virtual.toml").devices if d.name == "c6-a")
    with pytest.raises(UnsafeFolder, match=r"c6-a\.log"):
        _log(logs, device, "flashing")
    assert victim.read_bytes() == VICTIM


@pytest.mark.parametrize("variable", ["HILBENCH_STATE_DIR", "HILBENCH_LEASE_DIR", "HILBENCH_CACHE_DIR"])
def test_a_bench_folder_under_another_users_folder_is_refused(
    tmp_path: Path, variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A state, lease or cache folder of the bench user's own, but inside a folder another user owns (who could
    swap it for theirs), is exit 2 naming that folder."""
    from bench.core.leases import lease_dir
    from bench.core.paths import cache_root, state_dir

    theirs = _their_folder(tmp_path / "shared")
    mine = theirs / "bench"
    mine.mkdir(mode=0o700)
    monkeypatch.setenv(variable, str(mine))
    find = {"HILBENCH_STATE_DIR": state_dir, "HILBENCH_LEASE_DIR": lease_dir, "HILBENCH_CACHE_DIR": cache_root}
    with pytest.raises(UnsafeFolder) as info:
        find[variable]()
    assert info.value.exit_code == ExitCode.USAGE and str(theirs) in str(info.value)


def test_fleet_leases_refuses_a_lease_folder_another_user_could_swap(tmp_path: Path) -> None:
    """The same through the CLI: exit 2 naming the folder, no traceback."""
    theirs = _their_folder(tmp_path / "shared")
    (theirs / "leases").mkdir(mode=0o700)
    env = {**os.environ, "HILBENCH_LEASE_DIR": str(theirs / "leases")}
    run = subprocess.run(hilbench("fleet", "leases"), env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert run.returncode == ExitCode.USAGE, (run.stdout, run.stderr)
    assert str(theirs) in run.stderr and "Traceback" not in run.stderr


def test_a_lease_link_is_replaced_not_followed(tmp_path: Path) -> None:
    """A link planted at a device's lease file is replaced by the lease; its target is left alone."""
    from bench.core.leases import LeaseSet

    victim = _victim(tmp_path)
    leases = tmp_path / "leases"
    leases.mkdir(mode=0o700)
    (leases / "c6-a.lease").symlink_to(victim)
    held = LeaseSet("test", folder=leases)
    held.acquire("c6-a")
    assert not (leases / "c6-a.lease").is_symlink()
    held.release_all()
    assert victim.read_bytes() == VICTIM


def test_a_key_pair_is_not_written_through_links(tmp_path: Path) -> None:
    """`keys gen` into a folder with links planted at both key names writes new files; the targets stay."""
    victim = _victim(tmp_path)
    out = tmp_path / "keys"
    out.mkdir()
    for name in ("team.key.pem", "team.pub.pem"):
        (out / name).symlink_to(victim)
    run = subprocess.run(hilbench("keys", "gen", "--name", "team", "--out", str(out), "--force"), cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert victim.read_bytes() == VICTIM, run.stderr
    assert not any(p.is_symlink() for p in out.iterdir())


def test_a_session_file_is_not_written_through_a_link(tmp_path: Path) -> None:
    """`write_session` over a planted link replaces the link."""
    from bench.replay.recording import read_session, write_session

    victim = _victim(tmp_path)
    (tmp_path / "s.mcap").symlink_to(victim)
    write_session(tmp_path / "s.mcap", read_session(SESSION))
    assert victim.read_bytes() == VICTIM and not (tmp_path / "s.mcap").is_symlink()


def test_a_report_folder_under_another_users_folder_is_refused(tmp_path: Path) -> None:
    """The report's runs/ folder inside a folder another user owns is refused."""
    theirs = _their_folder(tmp_path / "reports")
    with pytest.raises(UnsafeFolder, match="report folder"):
        folders.real_folder(theirs / "runs", "report folder")


@pytest.mark.parametrize("plant", ["their parent", "their link"])
def test_a_results_store_another_user_could_steer_is_refused(tmp_path: Path, plant: str) -> None:
    """A results store in a folder another user owns, or their link at its name: exit 2 naming it, the link's
    target untouched."""
    victim = _victim(tmp_path)
    if plant == "their parent":
        store = _their_folder(tmp_path / "shared") / "results.sqlite"
    else:
        store = tmp_path / "results.sqlite"
        store.symlink_to(victim)
        _theirs(store)
    run = subprocess.run(hilbench("alerts", "list", "--results", str(store)), cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert run.returncode == ExitCode.USAGE, run.stderr
    assert "results store" in run.stderr and "Traceback" not in run.stderr
    assert victim.read_bytes() == VICTIM
