"""The default run's file order: the longest files first, from a past run's seconds."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tests.file_order import file_seconds, longest_first, seconds_from_junit


def _items(*nodeids: str) -> list[SimpleNamespace]:
    return [SimpleNamespace(nodeid=n) for n in nodeids]


def test_longest_files_go_first_and_each_file_keeps_its_order() -> None:
    items = _items("tests/a.py::t1", "tests/a.py::t2", "tests/b.py::t1", "tests/c.py::t1", "tests/c.py::t2")
    ordered = longest_first(items, {"tests/c.py": 90.0, "tests/a.py": 5.0})
    assert [i.nodeid for i in ordered] == [
        "tests/c.py::t1", "tests/c.py::t2", "tests/a.py::t1", "tests/a.py::t2", "tests/b.py::t1",
    ]  # fmt: skip


def test_seconds_are_summed_per_file_from_a_junit_file(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.unit.test_file_order" name="a" time="1.5"/>'
        '<testcase classname="tests.unit.test_file_order" name="b" time="2.0"/>'
        '<testcase classname="tests.e2e.test_nightly" name="c" time="40"/>'
        "</testsuite></testsuites>"
    )
    assert seconds_from_junit(junit) == {"tests/unit/test_file_order.py": 3.5, "tests/e2e/test_nightly.py": 40.0}


def test_the_committed_seconds_name_test_files_that_exist() -> None:
    seconds = file_seconds()
    root = Path(__file__).resolve().parents[2]
    assert seconds and all((root / name).is_file() for name in seconds)
