"""Shared test setup: each test run gets its own lease and virtual-device state folders."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", help="also run tests marked slow (many QEMU guest boots)")
    parser.addoption(
        "--update-expected",
        action="store_true",
        help="rewrite the checked-in expected files (tests/expected/) from this run instead of comparing with them",
    )


WORKERS_PER_CORE = 2  # the run waits more than it computes: guest boots, serial links, recovery timeouts


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: WORKERS_PER_CORE workers a core. With one a core the default run kept the cores ~60% busy (it
    waits on emulated boards, links and timeouts). Tests that time a board wait for what they count, or judge
    the board's own clock, so a busy host does not fail them. PYTEST_XDIST_AUTO_NUM_WORKERS sets the number."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    return max(1, int(len(os.sched_getaffinity(0)) * WORKERS_PER_CORE))


def pytest_configure(config: pytest.Config) -> None:
    """Compile the bench's and the host agent's sources once, before any worker starts: the run starts hundreds
    of Python processes (each `hilbench` command, virtual board and loopback agent), and where the environment
    says not to write bytecode (PYTHONDONTWRITEBYTECODE) each compiled them again, a fifth of a command's CPU.
    Only out-of-date files are compiled (into the git-ignored __pycache__ folders, where Python itself writes).
    For the same reason pytest keeps its rewritten test modules there: collecting them took each worker 9 s of
    CPU, 2.7 s from that cache."""
    sys.dont_write_bytecode = False
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    import compileall

    for folder in ("bench", "host"):
        compileall.compile_dir(REPO / folder, quiet=2)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest test files first (tests/file_order.py; the workers take files in this order:
    --no-loadscope-reorder). Tests marked `slow` are opt-in (`--run-slow`), so the default run stays short."""
    from tests.file_order import file_seconds, longest_first

    longest_first(items, file_seconds())
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """`@pytest.mark.programs("bmaptool", ...)`: the manifest programs the test needs (tests/requires.py)."""
    from tests.requires import require_program

    for mark in item.iter_markers("programs"):
        for name in mark.args:
            require_program(name)


@pytest.fixture(autouse=True, scope="session")
def _isolated_state(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep leases, virtual-device state and the default model store of the test run away from the user's.
    Each pytest-xdist worker has its own (its own basetemp), even when the caller set the variables: the
    workers start the same virtual devices, which must not share leases or state folders. The bench cache (the
    firmware and images `.ci/setup` built) is named too, so that it stays this user's in a child with another HOME:
    pytester's runs set HOME to their own folder, where a virtual C6 found no firmware and built it again (a
    minute and more of each such test in the full run)."""
    from bench.core.paths import cache_root

    base = tmp_path_factory.mktemp("hilbench-state")
    put = os.environ.__setitem__ if os.environ.get("PYTEST_XDIST_WORKER") else os.environ.setdefault
    put("HILBENCH_LEASE_DIR", str(base / "leases"))
    put("HILBENCH_STATE_DIR", str(base / "virtual"))
    put("HILBENCH_OTA_STORE", str(base / "ota-store"))  # `hilbench model publish` numbers versions in its store
    os.environ.setdefault("HILBENCH_CACHE_DIR", str(cache_root()))
    # the "real" boards of the tests are stand-ins too: they may trust the development key (bench.bundles.trust);
    # tests/robustness/test_trust.py runs without this
    os.environ.setdefault("HILBENCH_ALLOW_DEV_KEY", "1")


@pytest.fixture
def update_expected(request: pytest.FixtureRequest) -> bool:
    """True when the run rewrites the expected files (--update-expected) instead of comparing with them."""
    return bool(request.config.getoption("--update-expected"))


def alive(pid: int) -> bool:
    """True while process `pid` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def hilbench(*args: str) -> list[str]:
    """The command line that runs `hilbench ARGS` from this checkout."""
    return [sys.executable, "-m", "bench", *args]


def fleet_refusal(path: Path) -> str:
    """The message `load_fleet` refuses the fleet file at `path` with: a usage error (exit 2) naming the file."""
    from bench.config.fleet import load_fleet
    from bench.core.errors import ConfigError, ExitCode

    with pytest.raises(ConfigError) as info:
        load_fleet(path)
    assert str(path) in str(info.value) and info.value.exit_code == ExitCode.USAGE, info.value
    return str(info.value)


def nightly_summary(result: object) -> str:
    """What `hilbench nightly` prints at the end of the night `result`, on an 80-column terminal."""
    from bench.commands.nightly import _print
    from bench.core.console import out

    width = out.width
    out.width = 80
    try:
        with out.capture() as captured:
            _print(result)
    finally:
        out.width = width
    return captured.get()


@pytest.fixture(scope="session")
def pg_server():
    """URL of a PostgreSQL server for this test run ($HILBENCH_TEST_PG_URL, else a throwaway one)."""
    from tests.postgres_support import postgres_server
    from tests.requires import require_program

    if not os.environ.get("HILBENCH_TEST_PG_URL"):
        require_program("initdb")
        require_program("pg_ctl")
    with postgres_server() as url:
        yield url


@pytest.fixture
def pg_url(pg_server: str) -> str:
    """URL of a fresh, empty database on the test run's PostgreSQL server."""
    from tests.postgres_support import fresh_database

    return fresh_database(pg_server)
