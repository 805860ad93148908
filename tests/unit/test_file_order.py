"""The test run's file order: the longest files first, a file's tests kept together and in order; the list of
seconds is written from a run's JUnit report and read back."""

from __future__ import annotations

import tomllib
from pathlib import Path
from types import SimpleNamespace

from tests.file_order import file_seconds, longest_first, render, seconds_from_junit

JUNIT = """<testsuites><testsuite>
<testcase classname="tests.e2e.test_long" name="test_a" time="40.0"/>
<testcase classname="tests.e2e.test_long.TestGroup" name="test_b" time="20.5"/>
<testcase classname="tests.unit.test_short" name="test_c" time="1.0"/>
<testcase classname="tests.unit.test_mid" name="test_d" time="9.0"/>
</testsuite></testsuites>"""


def test_the_longest_files_go_first_and_a_files_tests_keep_their_order() -> None:
    ids = ["tests/a.py::t1", "tests/b.py::t1", "tests/c.py::t1", "tests/b.py::t2", "tests/d.py::t1", "tests/c.py::t2"]
    items = [SimpleNamespace(nodeid=i) for i in ids]
    longest_first(items, {"tests/c.py": 30.0, "tests/b.py": 50.0})
    assert [i.nodeid for i in items] == [
        "tests/b.py::t1", "tests/b.py::t2", "tests/c.py::t1", "tests/c.py::t2",  # listed: longest first
        "tests/a.py::t1", "tests/d.py::t1",  # not listed: after them, in collection order
    ]  # fmt: skip


def test_the_list_is_written_from_a_junit_report_and_read_back(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    seconds = seconds_from_junit(junit)
    assert seconds == {"tests/e2e/test_long.py": 60.5, "tests/unit/test_short.py": 1.0, "tests/unit/test_mid.py": 9.0}
    listed = tmp_path / "file_seconds.toml"
    listed.write_text(render(seconds))
    assert list(tomllib.loads(listed.read_text())["seconds"]) == ["tests/e2e/test_long.py", "tests/unit/test_mid.py"]
    assert file_seconds(listed) == {"tests/e2e/test_long.py": 60.0, "tests/unit/test_mid.py": 9.0}
    assert file_seconds(tmp_path / "none.toml") == {}


def test_every_listed_file_exists() -> None:
    """A renamed or removed test file is taken out of the list (refresh it: tests/file_order.py)."""
    root = Path(__file__).resolve().parents[2]
    assert [name for name in file_seconds() if not (root / name).is_file()] == []
