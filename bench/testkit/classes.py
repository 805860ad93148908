"""pytest plugin part: failure classes (bench.core.outcomes) and quarantine.

- A test that fails because the bench's side failed (a device that stopped answering, a lost link, a lease not
  obtained, a device the recovery ladder could not bring back) is reported as an ERROR naming the class
  ("infrastructure failure: ..."), not as a test failure; a product failure stays a failure and says so.
- `--quarantine FILE` (TOML, `[[test]] id = "NODEID or glob"`, `reason = "..."`) lists known-flaky tests: they
  still run and are reported, but a failure does not fail the session (pytest's non-strict xfail, with the
  reason). Each quarantined test's pass/fail history (from pytest's cache, last 20 runs) is shown at the end.
"""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.core.errors import BenchError, ProductFailure
from bench.core.outcomes import FailureClass, class_of

CLASS_KEY = "failure_class"  # user property carrying a failed test's class (crosses pytest-xdist)
HISTORY_CACHE = "hilbench/quarantine-history"
HISTORY_RUNS = 20


@dataclass(frozen=True)
class Quarantined:
    """One entry of the quarantine file."""

    pattern: str  # a test node id, or a glob over node ids
    reason: str

    def matches(self, nodeid: str) -> bool:
        """True for the test `nodeid` (and its parametrized instances when the id names the function)."""
        return nodeid == self.pattern or nodeid.startswith(self.pattern + "[") or fnmatch.fnmatch(nodeid, self.pattern)


def load_quarantine(path: Path) -> list[Quarantined]:
    """The quarantine file's entries; pytest.UsageError naming the file and field when it is not valid."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise pytest.UsageError(f"--quarantine {path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise pytest.UsageError(f"--quarantine {path}: not valid TOML: {exc}") from None
    unknown = set(data) - {"test"}
    if unknown:
        raise pytest.UsageError(f"--quarantine {path}: unknown key(s) {', '.join(sorted(unknown))}; use [[test]]")
    entries = []
    for n, entry in enumerate(data.get("test", []), start=1):
        where = f"--quarantine {path}: [[test]] #{n}"
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or not entry["id"].strip():
            raise pytest.UsageError(f"{where}: field 'id' (a test node id or glob) is required")
        extra = set(entry) - {"id", "reason"}
        if extra:
            raise pytest.UsageError(f"{where}: unknown field(s) {', '.join(sorted(extra))}")
        entries.append(Quarantined(entry["id"].strip(), str(entry.get("reason", "known flaky"))))
    return entries


def pytest_addoption(parser: pytest.Parser) -> None:
    """--quarantine FILE."""
    group = parser.getgroup("hilbench", "npc-hil-bench devices")
    group.addoption(
        "--quarantine", metavar="FILE", default=None,
        help="TOML list of known-flaky tests ([[test]] id, reason): run and reported, never failing the session",
    )  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    """Read the quarantine file (a bad one is a usage error) and register what runs the quarantine."""
    path = config.getoption("--quarantine")
    if path:
        config.pluginmanager.register(Quarantine(config, load_quarantine(Path(path))), "hilbench-quarantine")


class Quarantine:
    """Quarantined tests run as non-strict xfail; their outcomes go into a pass/fail history in pytest's cache."""

    def __init__(self, config: pytest.Config, entries: list[Quarantined]) -> None:
        self.config = config
        self.entries = entries
        self.seen: dict[str, str] = {}  # node id -> this run's outcome, "P" or "F"

    def entry(self, nodeid: str) -> Quarantined | None:
        """The entry that quarantines test `nodeid`, if one does."""
        return next((q for q in self.entries if q.matches(nodeid)), None)

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """A failure of a quarantined test is reported, with the reason, and does not count."""
        for item in items:
            entry = self.entry(item.nodeid)
            if entry is not None:
                item.add_marker(pytest.mark.xfail(reason=f"quarantined: {entry.reason}", strict=False))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Note each quarantined test's outcome (on the controller under pytest-xdist too)."""
        if self.entry(report.nodeid) is None or not (report.when == "call" or report.failed):
            return
        failed = report.failed or (report.skipped and hasattr(report, "wasxfail"))
        if report.nodeid not in self.seen or failed:
            self.seen[report.nodeid] = "F" if failed else "P"

    def pytest_terminal_summary(self, terminalreporter) -> None:
        """This run's quarantined tests, each with its history (newest last)."""
        if not self.seen or hasattr(self.config, "workerinput"):
            return
        cache = getattr(self.config, "cache", None)
        history: dict[str, str] = (cache.get(HISTORY_CACHE, {}) if cache is not None else {}) or {}
        terminalreporter.section("quarantined tests (known flaky: reported, not failing the session)")
        for nodeid, now in sorted(self.seen.items()):
            runs = (history.get(nodeid, "") + now)[-HISTORY_RUNS:]
            history[nodeid] = runs
            entry = self.entry(nodeid)
            terminalreporter.write_line(
                f"{nodeid}: {'failed' if now == 'F' else 'passed'} this run; history {runs} ({runs.count('P')}"
                f" passed, {runs.count('F')} failed of {len(runs)}, newest last); {entry.reason if entry else ''}"
            )
        if cache is not None:
            cache.set(HISTORY_CACHE, history)


def infrastructure_exception(exc: BaseException) -> bool:
    """True when a test's exception is the bench's failure: a BenchError (or a dead link / timeout) that is not
    the product's (bench.core.outcomes.class_of). Assertions are the test's verdict, never infrastructure."""
    if isinstance(exc, AssertionError) or not isinstance(exc, BenchError | ConnectionError | TimeoutError):
        return False
    return class_of(exc) == FailureClass.INFRASTRUCTURE


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Name the failure class of a failed test in its report."""
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None or not (report.failed or hasattr(report, "wasxfail")):
        return
    exc = call.excinfo.value
    if infrastructure_exception(exc):
        cls = FailureClass.INFRASTRUCTURE
    elif isinstance(exc, ProductFailure):
        cls = FailureClass.PRODUCT
    else:
        return  # an assertion (the test's own verdict) or the test's own bug: a plain failure
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    report.user_properties.append((CLASS_KEY, str(cls)))
    report.sections.append(("failure class", f"{cls}: {first}"))


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):
    """An infrastructure failure shows as an ERROR naming the class, not as a failed test."""
    if report.failed and (CLASS_KEY, str(FailureClass.INFRASTRUCTURE)) in report.user_properties:
        return "error", "E", ("ERROR (infrastructure failure)", {"red": True})
    return None
