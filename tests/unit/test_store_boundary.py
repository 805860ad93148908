"""The store is a boundary and a name means one thing: no SQL statement is written outside bench/store/, and
no class name is defined twice in bench/."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

from tests.conftest import REPO

BENCH = REPO / "bench"
STORE = BENCH / "store"
# the start of a SQL statement in a string (f-strings' literal parts included): keyword, then what it acts on
SQL = re.compile(
    r"^\s*(SELECT\s.+\sFROM\s|INSERT\s+(OR\s+\w+\s+)?INTO\s|UPDATE\s+\w+\s+SET\s|DELETE\s+FROM\s|CREATE\s+(TABLE|INDEX)\s"
    r"|DROP\s+TABLE\s|ALTER\s+TABLE\s|VACUUM\b|PRAGMA\s)",
    re.DOTALL,
)


def sql_strings(source: str) -> list[int]:
    """Lines of `source` where a string holds a SQL statement."""
    tree = ast.parse(source)
    return sorted(
        {
            n.lineno
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and SQL.match(n.value)
        }
    )


def class_names(root: Path) -> dict[str, list[str]]:
    """Class name -> the files under `root` defining it."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                found[node.name].append(str(path.relative_to(root.parent)))
    return found


def test_a_planted_statement_is_found_and_prose_is_not() -> None:
    planted = 'x = "SELECT a FROM t"\ny = f"UPDATE runs SET {c} = ?"\nz = "select the run from the list"\n'
    assert sql_strings(planted) == [1, 2]
    assert sql_strings('db.execute("INSERT OR REPLACE INTO t VALUES (?)")\nw = "VACUUM"\n') == [1, 2]


def test_no_sql_outside_the_store() -> None:
    files = [p for p in sorted(BENCH.rglob("*.py")) if STORE not in p.parents]
    found = [f"{p.relative_to(REPO)}:{n}" for p in files for n in sql_strings(p.read_text(encoding="utf-8"))]
    assert len(files) > 250 and found == [], "SQL outside bench/store/ (ask a store for it by name):\n" + "\n".join(
        found
    )
    inside = [n for p in STORE.rglob("*.py") for n in sql_strings(p.read_text(encoding="utf-8"))]
    assert len(inside) > 50, "the test sees the store's statements"


def test_no_class_name_is_defined_twice_in_bench() -> None:
    twice = {name: files for name, files in class_names(BENCH).items() if len(files) > 1}
    assert twice == {}, "\n".join(f"{name}: {', '.join(files)}" for name, files in sorted(twice.items()))
