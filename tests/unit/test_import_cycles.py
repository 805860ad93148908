"""The bench's imports follow the layer table of docs/architecture.md, which lists folders: no module imports
from a layer above its own, and no two folders import each other (directly or round a cycle).

Counted: every import a module names, at module level, inside a function (lazy imports are edges too) or under
`if TYPE_CHECKING:` (a type-only import still ties the module to the layer it names)."""

from __future__ import annotations

import ast
import itertools
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO

BENCH = REPO / "bench"
ARCHITECTURE = REPO / "docs" / "architecture.md"


@dataclass(frozen=True)
class Edge:
    """`source` (a file) imports `target` (a file) at `line`."""

    source: Path
    line: int
    target: Path

    def named(self, root: Path) -> str:
        """Both files, relative to the folder holding `root`."""
        return f"{self.source.relative_to(root.parent)}:{self.line} imports {self.target.relative_to(root.parent)}"


def layer_table(text: str) -> list[tuple[str, list[str]]]:
    """(layer, entries) from the bottom, read from the markdown table under `## Layers`."""
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| layer")]
    return [(cells[0], re.findall(r"`([^`]+)`", cells[1])) for cells in (r.strip("|").split("|") for r in rows)]


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def entry_of(path: Path, root: Path, table: list[tuple[str, list[str]]]) -> tuple[int, str] | None:
    """(layer index, table entry) of a file: the folder holding it, or the top-level module it is."""
    rel = path.relative_to(root).as_posix()
    for index, (_, entries) in enumerate(table):
        for entry in entries:
            if rel.startswith(entry) if entry.endswith("/") else rel == f"{entry}.py":
                return index, entry
    return None


def imports(tree: ast.Module) -> list[tuple[str, int]]:
    """(module named, line) of every import in `tree`, nested and type-only ones included."""
    out: list[tuple[str, int]] = []

    def walk(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            out.extend((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, node.lineno))
            out.extend((f"{node.module}.{a.name}", node.lineno) for a in node.names)
        for child in ast.iter_child_nodes(node):
            walk(child)

    walk(tree)
    return out


def edges(root: Path) -> list[Edge]:
    """Every import from one file of the package at `root` to another."""
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    out = []
    for name, path in files.items():
        seen = set()
        named = imports(ast.parse(path.read_text(encoding="utf-8")))
        modules = {target for target, _ in named}
        for target, line in named:
            if any(m.startswith(f"{target}.") and m in files for m in modules) and files[target].name == "__init__.py":
                continue  # `from pkg import mod`: the edge is to mod (pkg's __init__ runs for every module of pkg)
            if target in files and target != name and target not in seen:
                seen.add(target)
                out.append(Edge(path, line, files[target]))
    return out


def violations(root: Path, table: list[tuple[str, list[str]]]) -> list[str]:
    """Files no entry places, upward imports, and cycles between entries, each naming the files."""
    found = [
        f"{p.relative_to(root)} is in no layer" for p in sorted(root.rglob("*.py")) if not entry_of(p, root, table)
    ]
    graph: dict[str, dict[str, Edge]] = defaultdict(dict)
    for edge in edges(root):
        placed = entry_of(edge.source, root, table), entry_of(edge.target, root, table)
        if None in placed:
            continue  # reported above
        (src_layer, src), (dst_layer, dst) = placed
        if dst_layer > src_layer:
            found.append(f"upward: {edge.named(root)} ({table[src_layer][0]} -> {table[dst_layer][0]})")
        elif src != dst:
            graph[src].setdefault(dst, edge)
    cycle = find_cycle({k: set(v) for k, v in graph.items()})
    if cycle:
        found.append("cycle: " + "; ".join(graph[a][b].named(root) for a, b in itertools.pairwise(cycle)))
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a list of nodes (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_bench_follows_the_documented_layers() -> None:
    table = layer_table(ARCHITECTURE.read_text(encoding="utf-8"))
    assert len(table) >= 10 and any("config/" in entries for _, entries in table), "the table is read"
    assert len(edges(BENCH)) > 500, "the walk sees the imports"
    problems = violations(BENCH, table)
    assert problems == [], "\n".join(problems)


ENTRY_POINTS = {"__init__", "__main__", "cli", "pytest_plugin"}  # `hilbench`, `python -m bench`, pytest11


def test_the_layer_table_lists_folders_and_bench_holds_only_entry_points() -> None:
    table = layer_table(ARCHITECTURE.read_text(encoding="utf-8"))
    modules = [e for _, entries in table for e in entries if not e.endswith("/")]
    assert set(modules) <= ENTRY_POINTS, f"not a folder: {sorted(set(modules) - ENTRY_POINTS)}"
    loose = sorted(p.stem for p in BENCH.glob("*.py"))
    assert set(loose) <= ENTRY_POINTS, f"bench/ modules outside a layer folder: {sorted(set(loose) - ENTRY_POINTS)}"


TABLE = """## Layers
| layer | modules | job |
|---|---|---|
| low | `base`, `low/` | below |
| high | `top`, `pkg/` | above |
"""


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"base.py": "", "top.py": "from app import base\n"}, []),
        ({"base.py": "def f():\n    from app import top\n", "top.py": ""},
         ["upward: app/base.py:2 imports app/top.py"]),
        ({"base.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from app import top\n", "top.py": ""},
         ["upward: app/base.py:3 imports app/top.py"]),
        ({"top.py": "from app.pkg import mod\n", "pkg/__init__.py": "", "pkg/mod.py": "import app.top\n"},
         ["cycle: app/pkg/mod.py:1 imports app/top.py; app/top.py:1 imports app/pkg/mod.py"]),
        ({"low/__init__.py": "", "low/leaf.py": "def f():\n    from app.pkg import mod\n", "pkg/__init__.py": "",
          "pkg/mod.py": ""}, ["upward: app/low/leaf.py:2 imports app/pkg/mod.py"]),
        ({"low/__init__.py": "", "low/a.py": "from app.low import b\n", "low/b.py": "from app.low import a\n"},
         []),
        ({"stray.py": ""}, ["stray.py is in no layer"]),
    ],
)  # fmt: skip
def test_a_planted_upward_or_cyclic_import_fails_naming_both_files(
    tmp_path: Path, files: dict[str, str], expected: list[str]
) -> None:
    root = tmp_path / "app"
    for name, text in {"__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    table = [*layer_table(TABLE)]
    table[0][1].append("__init__")
    got = [p.split(" (")[0] for p in violations(root, table)]
    assert got == expected


def path_edits(source: str) -> list[int]:
    """Lines of `source` that change `sys.path` (a call on it, an assignment to it or to a slice of it, or
    `site.addsitedir`, which appends to it)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "addsitedir":
                lines.append(node.lineno)
                continue
            target = node.func.value  # sys.path.insert(...), .append, .extend, .remove
        elif isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            target = next((t.value if isinstance(t, ast.Subscript) else t for t in targets), None)
        else:
            continue
        if isinstance(target, ast.Attribute) and target.attr == "path" and ast.unparse(target.value) == "sys":
            lines.append(node.lineno)
    return sorted(lines)


def test_the_agents_and_tests_import_without_sys_path_edits() -> None:
    """host/, tests/ and hil/ find the agents' flat modules through pyproject's pytest `pythonpath` (and
    `python -m tests.bench` through the same list): no file edits `sys.path`."""
    planted = "import site\nsys.path.insert(0, 'x')\nsys.path[:0] = ['y']\nsys.path += ['z']\nsite.addsitedir('w')\n"
    assert path_edits(planted) == [2, 3, 4, 5]
    files = [p for folder in ("host", "tests", "hil") for p in sorted((REPO / folder).rglob("*.py"))]
    found = [f"{p.relative_to(REPO)}:{n}" for p in files for n in path_edits(p.read_text(encoding="utf-8"))]
    assert len(files) > 100 and found == [], found
