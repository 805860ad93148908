"""Find the external programs Python source starts, by reading its syntax tree (no import, no run).

What counts as "starting a program":
- the first argv element given to `subprocess.run/Popen/call/check_call/check_output`,
  `asyncio.create_subprocess_exec`, `os.exec*` or the bench's own runners (`run_command`, `run_tool`,
  `_run`, `ProcessTransport.spawn`): a string literal, a list/tuple literal's first element (a starred prefix such as
  `*DIE_WITH_BENCH` counts as its first element), or a name bound to one of those in the function or module;
- `tied(argv)` adds its `setpriv` prefix (bench/core/procs.py);
- the argument of `shutil.which`, including each name of a `for name in ("a", "b")` loop;
- a field or constant named `binary`, `*_BINARY` or `SSHD` holding a string (a configurable program's default).
Paths count by their last component (`/usr/sbin/sshd` is `sshd`); `sys.executable` and other computed values
are not programs of the manifest.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

SUBPROCESS = {"run", "Popen", "call", "check_call", "check_output"}  # as subprocess.NAME
OS_EXEC = {"execv", "execvp", "execvpe", "execl", "execlp", "execlpe"}  # as os.NAME
BENCH_RUNNERS = {"run_command", "run_tool", "_run"}  # bench's own, called by bare name
TIED_PREFIX = "setpriv"  # bench.core.procs.tied() puts `setpriv --pdeathsig KILL --` in front of argv
PROGRAM_NAMES = ("binary", "_BINARY", "SSHD")


@dataclass(frozen=True)
class Use:
    """One place a program is started or looked up."""

    program: str
    path: Path
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.program}"


def _call_name(node: ast.Call) -> str:
    """`NAME` for `NAME(...)`, `OWNER.NAME` for `OWNER.NAME(...)`, "" otherwise."""
    func = node.func
    if isinstance(func, ast.Attribute):
        owner = func.value.id if isinstance(func.value, ast.Name) else ""
        return f"{owner}.{func.attr}" if owner else f".{func.attr}"
    return func.id if isinstance(func, ast.Name) else ""


def _starts_program(node: ast.Call) -> bool:
    """Whether `node` starts a program (or looks one up) given as its first argument."""
    name = _call_name(node)
    owner, _, attr = name.rpartition(".")
    return (
        name == "shutil.which"
        or attr == "create_subprocess_exec"
        or (owner == "subprocess" and attr in SUBPROCESS)
        or (owner == "os" and attr in OS_EXEC)
        or name in BENCH_RUNNERS
        or name == "ProcessTransport.spawn"
    )


def _bound(node: ast.AST, name: str) -> list[ast.expr]:
    """What `node` binds to `name`: an assignment's value, or each element of a `for` loop's literal."""
    if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
        return [node.value]
    if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == name and node.value:
        return [node.value]
    if (
        isinstance(node, ast.For)
        and getattr(node.target, "id", None) == name
        and isinstance(node.iter, ast.Tuple | ast.List)
    ):
        return list(node.iter.elts)
    return []


class _Module:
    """One file's tree with the bindings needed to resolve a name to the literal behind it."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.parents: dict[ast.AST, ast.AST] = {}
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent

    def _scope(self, node: ast.AST) -> list[ast.AST]:
        """Enclosing functions (innermost first), then the module."""
        scopes: list[ast.AST] = []
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                scopes.append(node)
        return [*scopes, self.tree]

    def bindings(self, name: str, at: ast.AST) -> list[ast.expr]:
        """Values assigned to `name` (or iterated into it) in the scopes around `at`, nearest scope first."""
        for scope in self._scope(at):
            found: list[ast.expr] = []
            for node in ast.walk(scope):
                found.extend(_bound(node, name))
            if found:
                return found
        return []

    def programs(self, expr: ast.expr, depth: int = 0) -> list[str]:
        """The program names `expr`, an argv or one argv element, starts (empty when computed at run time)."""
        if depth > 8:  # a name bound to a name bound to ...: deep enough for real code, stops cycles
            return []
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return [Path(expr.value).name] if expr.value else []
        if isinstance(expr, ast.List | ast.Tuple):
            if not expr.elts:
                return []
            first = expr.elts[0]
            return self.programs(first.value if isinstance(first, ast.Starred) else first, depth + 1)
        if isinstance(expr, ast.Starred):
            return self.programs(expr.value, depth + 1)
        if isinstance(expr, ast.Name):
            return [p for value in self.bindings(expr.id, expr) for p in self.programs(value, depth + 1)]
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):  # argv = [prog] + rest
            return self.programs(expr.left, depth + 1)
        if isinstance(expr, ast.BoolOp):  # shutil.which("a") or shutil.which("b")
            return [p for value in expr.values for p in self.programs(value, depth + 1)]
        if isinstance(expr, ast.Call) and expr.args and _call_name(expr) in ("tied", "shutil.which"):
            inner = self.programs(expr.args[0], depth + 1)
            return [TIED_PREFIX, *inner] if _call_name(expr) == "tied" else inner
        return []


def _named_program(node: ast.AST) -> str | None:
    """`binary: str = "qemu-system-aarch64"`, `SSH_BINARY = "ssh"`, `SSHD = "/usr/sbin/sshd"`."""
    if isinstance(node, ast.AnnAssign):
        targets, value = [node.target], node.value
    elif isinstance(node, ast.Assign):
        targets, value = node.targets, node.value
    else:
        return None
    names = [t.id for t in targets if isinstance(t, ast.Name)]
    if not any(n == "binary" or n.endswith(PROGRAM_NAMES[1:]) for n in names):
        return None
    if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value:
        return Path(value.value).name
    return None


def scan_source(source: str, path: Path) -> Iterator[Use]:
    """Every program `source` (the text of `path`) starts or looks up."""
    tree = ast.parse(source, filename=str(path))
    module = _Module(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            if _starts_program(node):
                for program in module.programs(node.args[0]):
                    yield Use(program, path, node.lineno)
        elif (program := _named_program(node)) is not None:
            yield Use(program, path, node.lineno)


def scan(paths: Iterable[Path]) -> list[Use]:
    """Every program the Python files under `paths` start, sorted by place."""
    uses: list[Use] = []
    for root in paths:
        for file in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
            uses.extend(scan_source(file.read_text(encoding="utf-8"), file))
    return uses
