"""Reference checks of a code task source: reference solutions through every tier, mutants against the top tier.

    OMP_NUM_THREADS=1 python -m benchmarks.code_tasks [--source humaneval|bundled|jsonl] [--path FILE] [--limit N]

For every task of the source:

* the **reference** solution goes through ``code-format`` (the default static
  policy, with the task's declared grants), ``code-exec`` (the visible check)
  and ``code-tests`` (the hidden tests): all three must pass, so the rate is
  a count of false rejects;
* **mutants** of the reference go through ``code-exec`` and
  ``code-tests``; each must fail the top tier:
  ``return-none`` (the function's body becomes ``return None``),
  ``off-by-one`` (every integer the function returns is one more; only for
  tasks with an integer result) and ``constants-swapped`` (the first two
  distinct numbers, or else strings, of the function trade places; only where
  it has two);
* two **near-miss** mutants, right on small inputs and wrong past them:
  ``partial-loop`` (every loop of the function stops after six rounds: a
  primality test dividing only by 2..7) and ``float-shortcut`` (``a // b``
  becomes ``int(a / b)``, ``isqrt(x)`` becomes ``int(x ** 0.5)``, an integer
  power goes through a float: right until about 2^53).

A mutant that still passes the hidden tests *survived*;
  one that passes the visible check but fails the hidden tests is a
  *disagreement* between the tiers, the mark the run report counts.

Prints how many references the former static policy (no ``hashlib``, no
per-task grants) rejected, per-tier pass rates of the references, kill rates per mutant kind,
the disagreement rates, and the seconds spent; ``--json`` writes them.
"""

from __future__ import annotations

import argparse
import ast
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from arl_flows.suites.code import CodeExecution, CodeFormat, CodeTests, make_candidate
from arl_flows.suites.code.sources import TaskSource, load_source
from arl_flows.suites.code.tasks import CodeTask
from benchmarks.provenance import format_provenance, with_provenance

MUTANTS = ("return-none", "off-by-one", "constants-swapped", "partial-loop", "float-shortcut")
# The loops of a partial-loop mutant stop after this many rounds (a primality test dividing by 2..7 only).
PARTIAL_ROUNDS = 6
LIMITS = {"cpu_s": 4, "wall_s": 20}


def _entry(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _own_returns(fn: ast.FunctionDef) -> list[ast.Return]:
    """Return statements of ``fn`` itself, not of functions or lambdas nested in it."""
    out: list[ast.Return] = []
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            out.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return out


def _body_without_docstring(fn: ast.FunctionDef) -> list[ast.stmt]:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
        return body[1:]
    return body


def _is_int(value: Any) -> bool:
    return type(value) is int or (isinstance(value, list) and any(_is_int(v) for v in value))


def mutant(task: CodeTask, kind: str) -> str | None:
    """The program text of one mutant of ``task``'s reference, or None where the kind does not apply."""
    tree = ast.parse(task.reference)
    fn = _entry(tree, task.function)
    if fn is None:
        return None
    if kind == "return-none":
        fn.body = [*fn.body[: len(fn.body) - len(_body_without_docstring(fn))], ast.Return(ast.Constant(None))]
    elif kind == "off-by-one":
        if not any(type(t.expected) is int for t in task.tests):
            return None
        bump = ast.parse("(lambda v: v + 1 if type(v) is int else v)", mode="eval").body
        returns = [r for r in _own_returns(fn) if r.value is not None]
        if not returns:
            return None
        for r in returns:
            r.value = ast.Call(func=bump, args=[r.value], keywords=[])
    elif kind == "constants-swapped":
        body = ast.Module(body=_body_without_docstring(fn), type_ignores=[])
        consts = [n for n in ast.walk(body) if isinstance(n, ast.Constant) and type(n.value) in (int, float, str)]
        pair = None
        for kinds in ((int, float), (str,)):
            pool = [c for c in consts if type(c.value) in kinds]
            for i, a in enumerate(pool):
                b = next((c for c in pool[i + 1 :] if c.value != a.value), None)
                if b is not None:
                    pair = (a, b)
                    break
            if pair:
                break
        if pair is None:
            return None
        pair[0].value, pair[1].value = pair[1].value, pair[0].value
    elif kind == "partial-loop":
        if not _cap_loops(fn):
            return None
    elif kind == "float-shortcut":
        if not _float_shortcuts(fn):
            return None
    else:
        raise ValueError(f"unknown mutant kind {kind!r}")
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _cap_loops(fn: ast.FunctionDef) -> bool:
    """Every ``for`` and ``while`` loop of ``fn`` stops after ``PARTIAL_ROUNDS`` rounds: a near-miss that is right
    on small inputs (a primality test dividing only by 2..7, a digit loop that stops early). False if it has none."""
    loops = [n for n in ast.walk(fn) if isinstance(n, (ast.For, ast.While))]
    for i, loop in enumerate(loops):
        counter = f"_rounds_{i}"
        guard = ast.parse(f"{counter} += 1\nif {counter} > {PARTIAL_ROUNDS}:\n    break").body
        loop.body = [*guard, *loop.body]
    if loops:
        fn.body = [*(ast.parse(f"_rounds_{i} = 0").body[0] for i in range(len(loops))), *fn.body]
    return bool(loops)


class _FloatShortcut(ast.NodeTransformer):
    """Integer arithmetic through floats: ``a // b`` -> ``int(a / b)``, ``isqrt(x)`` -> ``int(x ** 0.5)``,
    ``a ** b`` -> ``int(float(a) ** b)``: right until about 2^53."""

    def __init__(self) -> None:
        self.changed = 0

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.FloorDiv):
            self.changed += 1
            return ast.Call(ast.Name("int", ast.Load()), [ast.BinOp(node.left, ast.Div(), node.right)], [])
        if isinstance(node.op, ast.Pow) and not (isinstance(node.right, ast.Constant) and type(node.right.value) is float):
            self.changed += 1
            as_float = ast.Call(ast.Name("float", ast.Load()), [node.left], [])
            return ast.Call(ast.Name("int", ast.Load()), [ast.BinOp(as_float, ast.Pow(), node.right)], [])
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if name == "isqrt" and len(node.args) == 1:
            self.changed += 1
            root = ast.BinOp(node.args[0], ast.Pow(), ast.Constant(0.5))
            return ast.Call(ast.Name("int", ast.Load()), [root], [])
        return node


def _float_shortcuts(fn: ast.FunctionDef) -> bool:
    shortcut = _FloatShortcut()
    fn.body = [shortcut.visit(stmt) for stmt in fn.body]
    return shortcut.changed > 0


def _passes(verdict: Any) -> bool:
    return (verdict.status, verdict.value) == ("ok", 1.0)


def _answer(code: str) -> str:
    return f"<think>reference check</think>\n<code>\n{code}</code>"


def check_tasks(
    tasks: list[CodeTask],
    *,
    mutants: bool = True,
    kinds: tuple[str, ...] = MUTANTS,
    visible: bool = True,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the references (all three tiers) and the mutants of ``kinds`` (the hidden tests, and the visible
    check unless ``visible`` is False); counts and failures."""
    fast, execution, tests = CodeFormat(), CodeExecution({"limits": LIMITS}), CodeTests({"limits": LIMITS})
    out: dict[str, Any] = {
        "tasks": len(tasks),
        "reference": {"fast": 0, "exec": 0, "tests": 0, "all": 0},
        "reference_failures": [],
        "mutants": {k: {"applicable": 0, "killed": 0, "passed_visible_failed_hidden": 0, "survivors": []} for k in MUTANTS},
    }
    for n, task in enumerate(tasks, 1):
        cand = make_candidate(task.id, _answer(task.reference))
        f, e, h = fast.verify_batch([cand])[0], execution.verify_batch([cand])[0], tests.verify_batch([cand])[0]
        passed = {"fast": f.status == "ok", "exec": (e.status, e.value) == ("ok", 1.0), "tests": (h.status, h.value) == ("ok", 1.0)}
        for tier, ok in passed.items():
            out["reference"][tier] += ok
        out["reference"]["all"] += all(passed.values())
        if not all(passed.values()):
            out["reference_failures"].append({"task": task.id, "fast": f.feedback, "exec": e.feedback, "tests": h.feedback})
        if mutants:
            for kind in kinds:
                code = mutant(task, kind)
                if code is None:
                    continue
                row = out["mutants"][kind]
                row["applicable"] += 1
                m = make_candidate(task.id, _answer(code))
                mh = tests.verify_batch([m])[0]
                killed = not (mh.status == "ok" and mh.value == 1.0)
                row["killed"] += killed
                if visible and killed and _passes(execution.verify_batch([m])[0]):
                    row["passed_visible_failed_hidden"] += 1
                if not killed:
                    row["survivors"].append(task.id)
        if progress and n % 10 == 0:
            progress(f"{n}/{len(tasks)} tasks")
    return out


def former_policy_rejects(tasks: list[CodeTask]) -> list[str]:
    """Tasks whose reference the static policy refused before hashlib was allowed and grants existed."""
    from arl_flows.suites.code.fast import DEFAULT_ALLOWED_IMPORTS, check_code
    from arl_flows.suites.code.format import FormatError, parse_answer

    former = [m for m in DEFAULT_ALLOWED_IMPORTS if m != "hashlib"]
    out = []
    for task in tasks:
        parsed = parse_answer(_answer(task.reference))
        if isinstance(parsed, FormatError) or any(check_code(c, former) for c in parsed.codes):
            out.append(task.id)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", choices=["humaneval", "bundled", "jsonl"], default="humaneval")
    parser.add_argument("--path", help="the JSONL file for --source jsonl")
    parser.add_argument("--limit", type=int, default=0, help="only the first N tasks (0: all)")
    parser.add_argument("--no-mutants", action="store_true", help="references only")
    parser.add_argument("--json", type=Path, help="write the counts here")
    args = parser.parse_args()

    start = time.perf_counter()
    loaded = load_source(TaskSource(source=args.source, path=args.path))
    convert_s = time.perf_counter() - start
    tasks = loaded.tasks[: args.limit] if args.limit else loaded.tasks
    print(f"{args.source}: {len(loaded.tasks)} tasks converted in {convert_s:.1f} s; skipped {len(loaded.skipped)}, "
          f"test calls dropped {loaded.dropped_cases}")
    start = time.perf_counter()
    former = former_policy_rejects(tasks)
    print(f"fast tier under the former policy (no hashlib, no per-task grants): {len(tasks) - len(former)}/{len(tasks)} "
          f"references pass; rejected: {', '.join(former) or 'none'}")
    res = check_tasks(tasks, mutants=not args.no_mutants, progress=print)
    res["former_policy_rejects"] = former
    res["seconds"] = round(time.perf_counter() - start, 1)
    res["convert_seconds"] = round(convert_s, 1)
    n = res["tasks"]
    print(f"\nreferences ({n} tasks): " + ", ".join(f"{k} {v}/{n} ({v / n:.1%})" for k, v in res["reference"].items()))
    for f in res["reference_failures"]:
        print("  reference failed:", f)
    if not args.no_mutants:
        print("\n| mutant | applicable | killed by the hidden tests | passed visible, failed hidden |")
        print("|---|---|---|---|")
        for kind, row in res["mutants"].items():
            a = row["applicable"] or 1
            print(f"| {kind} | {row['applicable']} | {row['killed']} ({row['killed'] / a:.1%}) | "
                  f"{row['passed_visible_failed_hidden']} ({row['passed_visible_failed_hidden'] / a:.1%}) |")
            if row["survivors"]:
                print(f"  survivors: {', '.join(row['survivors'])}")
    print(f"\n{res['seconds']} s for the checks")
    print(f"provenance: {format_provenance()}")
    if args.json:
        args.json.write_text(json.dumps(with_provenance(res), indent=2))


if __name__ == "__main__":
    main()
