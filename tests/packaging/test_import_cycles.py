"""No import cycle hides behind a function-level import inside ARL's packages.

A function-level import is for something heavy or late (torch, rdkit, Prefect
after its environment is set, what ``arl --help`` need not load); one whose
module imports, at module level, the module it sits in only dodges a cycle.
This walks the source with ``ast`` (no import runs) and names each such import.
A cycle between module-level imports shows only when the import runs, and only
for the module imported first: the last test imports each CLI and suite module
first in an interpreter of its own.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
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


# Run by one interpreter that has imported none of ARL's modules: a forked child per module imports that module first,
# so each import starts with none of ours loaded, without paying for an interpreter start. Before forking, the parent
# runs once the third-party imports that ARL's modules make at module level (numpy, pydantic, rdkit, torch...): a
# cycle among ARL's modules does not go through them, and each child would otherwise spend a second or more on them.
# Two children at a time; each failure is one JSON line (module, the error's last line).
_IMPORT_EACH_FIRST = """
import importlib, json, os, sys, traceback
job = json.load(sys.stdin)
sys.path.insert(0, job["root"])
for statement in job["preload"]:
    try:
        exec(statement, {})
    except Exception:  # an optional dependency that is not installed: the module that needs it fails below
        pass
loaded = sorted(m for m in sys.modules if m.partition(".")[0] in job["ours"])
assert not loaded, f"the third-party imports loaded ARL's {loaded}"
running, failures = {}, []
def reap():
    pid, status = os.wait()
    read_end, name = running.pop(pid)
    with os.fdopen(read_end) as pipe:
        error = pipe.read()
    if status:
        failures.append({"module": name, "error": error or f"exit status {status}"})
for name in job["modules"]:
    while len(running) >= 2:
        reap()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            importlib.import_module(name)
        except BaseException:
            os.write(write_end, traceback.format_exc().strip().splitlines()[-1].encode())
            os._exit(1)
        os._exit(0)
    os.close(write_end)
    running[pid] = (read_end, name)
while running:
    reap()
for failure in failures:
    print(json.dumps(failure))
"""


def _module_names(package: str) -> list[str]:
    """``package`` and every module under it, found on disk (``pkgutil``, without importing anything)."""
    names = [package]
    for info in pkgutil.iter_modules([str(ROOT.joinpath(*package.split(".")))], f"{package}."):
        names += _module_names(info.name) if info.ispkg else [info.name]
    return names


def _third_party_imports(paths: list[Path], ours: set[str]) -> list[str]:
    """The module-level import statements of ``paths`` that name no package of ``ours``, as source lines."""
    found: dict[str, None] = {}
    for path in paths:
        for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:  # module level only
            if isinstance(node, ast.Import):
                tops = {alias.name.partition(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module != "__future__":
                tops = {(node.module or "").partition(".")[0]}
            else:
                continue
            if not tops & ours:
                found[ast.unparse(node)] = None
    return list(found)


def test_every_cli_and_suite_module_imports_first_in_a_fresh_interpreter() -> None:
    """Each module of ``arl_flows.cli`` and ``arl_flows.suites`` imports when it is the first one of ours imported.

    A suite's command module imports the CLI's shared objects; if the CLI package assembled the app (and so looked
    the suites up) on import, the suite module would be imported back while half-initialised.
    """
    names = _module_names("arl_flows.cli") + _module_names("arl_flows.suites")
    assert {"arl_flows.cli.entry", "arl_flows.suites.code.cli", "arl_flows.suites.molecules.bench"} <= set(names)
    modules = _modules()
    top = {}
    for module, path in modules.items():
        visitor = _Imports(module, modules)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        top[module] = visitor.top
    imported, queue = set(names), deque(names)  # what the children import at module level: their third-party imports
    while queue:
        for nxt in top.get(queue.popleft(), ()):
            if nxt not in imported:
                imported.add(nxt)
                queue.append(nxt)
    ours = {p.name.removesuffix(".py") for p in ROOT.iterdir() if (p / "__init__.py").exists() or p.suffix == ".py"}
    preload = _third_party_imports([modules[name] for name in sorted(imported) if name in modules], ours)
    job = {"root": str(ROOT), "ours": sorted(ours), "preload": preload, "modules": names}
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_EACH_FIRST], input=json.dumps(job),
        capture_output=True, text=True, timeout=300, check=False, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    failures = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert not failures, "\n".join(f"{f['module']}: {f['error']}" for f in failures)
