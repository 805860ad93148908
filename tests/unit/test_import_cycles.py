"""No import cycle between the bench's subpackages: shared types live below the layers that use them.

Counted: imports at module level (what runs when a module is imported). Imports inside functions are how
the kind registry loads drivers and stand-ins on first use, and are not layering edges."""

from __future__ import annotations

import ast
import itertools
from collections import defaultdict
from pathlib import Path

from tests.conftest import REPO

BENCH = REPO / "bench"


def unit_of(module: str) -> str:
    """The layer a module belongs to: `bench.X` (a subpackage or a top-level module)."""
    return ".".join(module.split(".")[:2])


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.Module) -> list[str]:
    """Modules named by the module-level imports of `tree` (inside `if`/`try` too, but not TYPE_CHECKING)."""
    names: list[str] = []
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
            stack += node.body + node.orelse
        elif isinstance(node, ast.Try):
            stack += node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body]
    return names


def layer_graph() -> dict[str, dict[str, str]]:
    """layer -> {imported layer: the first module that imports it}."""
    units = {unit_of(module_name(p)) for p in BENCH.rglob("*.py")}
    graph: dict[str, dict[str, str]] = defaultdict(dict)
    for path in sorted(BENCH.rglob("*.py")):
        mod = module_name(path)
        for name in imported(ast.parse(path.read_text(encoding="utf-8"))):
            target = unit_of(name)
            if name.startswith("bench.") and target in units and target != unit_of(mod):
                graph[unit_of(mod)].setdefault(target, mod)
    return graph


def find_cycle(graph: dict[str, dict[str, str]]) -> list[str] | None:
    """One cycle as a list of layers (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in graph.get(node, {}):
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


def test_no_import_cycle_between_bench_subpackages() -> None:
    graph = layer_graph()
    assert "bench.fleet" in graph and "bench.kinds" in graph["bench.fleet"], "the walk sees the imports"
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(f"{a} ({graph[a][b]})" for a, b in itertools.pairwise(cycle))


def test_the_walk_finds_a_cycle() -> None:
    graph = {"bench.a": {"bench.b": "bench.a.x"}, "bench.b": {"bench.c": "bench.b"}, "bench.c": {"bench.a": "bench.c"}}
    assert find_cycle(graph) == ["bench.a", "bench.b", "bench.c", "bench.a"]
    assert find_cycle({"bench.a": {"bench.b": "bench.a"}, "bench.b": {}}) is None
