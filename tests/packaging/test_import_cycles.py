"""No import cycle hides behind a function-level import inside ARL's packages.

A function-level import is for something heavy or late (torch, rdkit, Prefect
after its environment is set, what ``arl --help`` need not load); one whose
module imports, at module level, the module it sits in only dodges a cycle.
This walks the source with ``ast`` (no import runs) and names each such import.
"""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("arl_flows", "verifiers", "policies", "storage")
SKIPPED: set[str] = set()  # modules not held to this (none)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _targets(node: ast.Import | ast.ImportFrom, module: str, modules: dict[str, Path]) -> set[str]:
    """The modules of ours an import statement runs (a package's ``__init__`` too, unless it encloses ``module``)."""
    if isinstance(node, ast.Import):
        named = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module if modules[module].name == "__init__.py" else module.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{base}" if base else package
        named = [base] + [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
    out = set()
    for name in named:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            encloses = module == prefix or module.startswith(prefix + ".")
            if prefix in modules and prefix != module and (prefix == name or not encloses):
                out.add(prefix)
    return out


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str, modules: dict[str, Path]) -> None:
        self.module, self.modules, self.depth = module, modules, 0
        self.top: set[str] = set()
        self.lazy: list[tuple[str, int]] = []

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        if "TYPE_CHECKING" in ast.unparse(node.test):  # annotations only: never runs
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def _import(self, node: ast.Import | ast.ImportFrom) -> None:
        for target in _targets(node, self.module, self.modules):
            if self.depth:
                self.lazy.append((target, node.lineno))
            else:
                self.top.add(target)

    visit_Import = visit_ImportFrom = _import


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    previous: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            path = []
            while node is not None:
                path.append(node)
                node = previous[node]
            return path[::-1]
        for nxt in sorted(graph.get(node, ())):
            if nxt not in previous:
                previous[nxt] = node
                queue.append(nxt)
    return None


def test_no_function_level_import_closes_a_cycle() -> None:
    modules = _modules()
    top, lazy = {}, []
    for module, path in modules.items():
        visitor = _Imports(module, modules)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        top[module] = visitor.top
        lazy += [(module, target, line) for target, line in visitor.lazy]
    every = {m: set(t) for m, t in top.items()}
    for module, target, _ in lazy:
        every[module].add(target)
    cycles = []
    for module, target, line in lazy:
        if module in SKIPPED or target in SKIPPED:
            continue
        back = _reaches(every, target, module)
        if back is not None:
            cycles.append(f"{modules[module].relative_to(ROOT)}:{line} imports {target}, which imports it back: {' -> '.join(back)}")
    assert not cycles, "\n".join(cycles)


def test_the_check_sees_a_cycle(tmp_path: Path) -> None:
    """The walk finds a function-level import whose module imports the importer at module level."""
    modules = {"pkg": tmp_path / "__init__.py", "pkg.a": tmp_path / "a.py", "pkg.b": tmp_path / "b.py"}
    tree_a = ast.parse("import pkg.b\n")
    tree_b = ast.parse("def f():\n    from pkg.a import x\n")
    va, vb = _Imports("pkg.a", modules), _Imports("pkg.b", modules)
    va.visit(tree_a)
    vb.visit(tree_b)
    assert va.top == {"pkg.b"} and vb.lazy == [("pkg.a", 2)]
    assert _reaches({"pkg.a": va.top, "pkg.b": set()}, "pkg.a", "pkg.b") == ["pkg.a", "pkg.b"]
