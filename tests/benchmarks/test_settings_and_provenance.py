"""The benchmarks' own settings and the provenance record every benchmark report carries."""

from __future__ import annotations

import ast
import json
import os
import subprocess
from pathlib import Path

import pytest

from benchmarks.provenance import PACKAGES, format_provenance, provenance, with_provenance
from benchmarks.settings import bench_settings

ROOT = Path(__file__).resolve().parents[2]


def test_torch_threads_follow_the_environment_and_a_bad_value_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARL_BENCH_TORCH_THREADS", raising=False)
    assert bench_settings().torch_threads == 1
    monkeypatch.setenv("ARL_BENCH_TORCH_THREADS", "3")
    assert bench_settings().torch_threads == 3
    for bad in ("many", "0"):
        monkeypatch.setenv("ARL_BENCH_TORCH_THREADS", bad)
        with pytest.raises(ValueError) as err:
            bench_settings()
        message = str(err.value)
        assert message.startswith("ARL_BENCH_TORCH_THREADS:") and "\n" not in message and repr(bad) in message


def test_provenance_names_the_commit_the_packages_and_the_machine() -> None:
    record = provenance()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode == 0:  # a git checkout (a source tree without .git records None)
        assert record["commit"] == head.stdout.strip() and isinstance(record["dirty"], bool)
    assert tuple(record["packages"]) == PACKAGES == ("arl", "torch", "rdkit", "pyscf", "tblite", "prefect")
    import torch

    assert record["packages"]["torch"] == torch.__version__
    assert record["packages"]["arl"] is not None
    assert record["machine"]["cpu_count"] == os.cpu_count() and record["machine"]["cpu_model"]
    assert record["machine"]["platform"]
    json.dumps(record)  # a report is JSON


def test_a_report_gets_one_record_and_keeps_the_one_it_has() -> None:
    report = {"pool": 10}
    stamped = with_provenance(report)
    assert stamped["pool"] == 10 and "provenance" not in report  # a copy
    assert with_provenance({"provenance": {"commit": "abc"}}) == {"provenance": {"commit": "abc"}}
    line = format_provenance(stamped["provenance"])
    assert "\n" not in line and "torch " in line and f"{os.cpu_count()} CPUs" in line



# The harnesses are read, not run: which of them write or print a report, and whether that report carries the record,
# is decided from their source, so every module of benchmarks/ is checked in well under a second.
BENCHMARKS = ROOT / "benchmarks"
STAMPS = {"with_provenance", "provenance"}  # the calls that put the record into a JSON report
# Modules that write or print something other than a benchmark report, and what they write instead.
NOT_REPORTS = {
    "generate_code_tests": "regenerates the code tasks' test cases, a data file of the suite, not a report",
}


def _name(call: ast.Call) -> str | None:
    return call.func.id if isinstance(call.func, ast.Name) else call.func.attr if isinstance(call.func, ast.Attribute) else None


def _calls(node: ast.AST, *names: str) -> list[ast.Call]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Call) and _name(n) in names]


def _is_json_dump(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Attribute) and call.func.attr in ("dumps", "dump") and isinstance(call.func.value, ast.Name) and call.func.value.id == "json"


def _scopes(tree: ast.Module) -> list[ast.AST]:
    """The module and each function in it: a call belongs to the innermost one that holds it."""
    return [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))]


def _own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of ``scope`` outside the functions nested in it."""
    out, todo = [], list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        out.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
    return out


def _stamped(value: ast.expr, scope: ast.AST) -> bool:
    """``value`` is ``with_provenance(...)`` or a name the same function binds to it."""
    if isinstance(value, ast.Call):
        return _name(value) == "with_provenance"
    if isinstance(value, ast.Name):
        return any(isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and _name(n.value) == "with_provenance"
                   and any(isinstance(t, ast.Name) and t.id == value.id for t in n.targets) for n in _own_nodes(scope))
    return False


def _report_outputs(tree: ast.Module) -> tuple[list[tuple[int, bool]], list[tuple[int, bool]]]:
    """(JSON written to a file, JSON printed): each as (line, whether it carries the record)."""
    written, printed = [], []
    for scope in _scopes(tree):
        calls = [n for n in _own_nodes(scope) if isinstance(n, ast.Call)]
        builds_record = any(_name(c) in STAMPS for c in calls)  # the function builds its report from the record
        for call in calls:
            name = _name(call)
            if name in ("write_text", "write", "print"):
                dumps = [d for a in call.args for d in _calls(a, "dumps") if _is_json_dump(d)]
            elif _is_json_dump(call) and call.func.attr == "dump":
                dumps = [call]
            else:
                continue
            for d in dumps:
                value = d.args[0] if d.args else None
                if name == "print":
                    printed.append((call.lineno, value is not None and _stamped(value, scope)))
                else:
                    written.append((call.lineno, builds_record or (value is not None and _stamped(value, scope))))
    return written, printed


def _harnesses() -> dict[str, ast.Module]:
    return {p.stem: ast.parse(p.read_text(), str(p)) for p in sorted(BENCHMARKS.glob("*.py")) if p.stem not in NOT_REPORTS}


def test_every_report_a_harness_writes_or_prints_carries_its_provenance() -> None:
    harnesses = _harnesses()
    reporting, missing = set(), []
    for module, tree in harnesses.items():
        written, printed = _report_outputs(tree)
        missing += [f"benchmarks/{module}.py:{line}: a JSON report without with_provenance()" for line, ok in written if not ok]
        # A harness is a module with a main(); one that prints anything prints a summary.
        prints = any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body) and bool(_calls(tree, "print"))
        if written:
            reporting.add(module)
        if prints:
            reporting.add(module)
            if not _calls(tree, "format_provenance") and not any(ok for _, ok in printed):
                missing.append(f"benchmarks/{module}.py: prints a summary without a `provenance: ` line (format_provenance())")
    assert not missing, "\n".join(missing)
    # The discovery finds the harnesses (a check that found none would pass for nothing).
    assert {"first_run_eval", "novel_retrieval", "moses_labels", "novelty_index", "prior_metrics", "learning", "tiers"} <= reporting


def test_the_discovery_flags_a_report_without_provenance() -> None:
    bare = ast.parse("import json\ndef main():\n    out = {'a': 1}\n    print(json.dumps(out))\n    path.write_text(json.dumps(out))\n")
    stamped = ast.parse("import json\ndef main():\n    out = with_provenance({'a': 1})\n    print(json.dumps(out))\n    path.write_text(json.dumps(out))\n")
    assert _report_outputs(bare) == ([(5, False)], [(4, False)])
    assert _report_outputs(stamped) == ([(5, True)], [(4, True)])
    assert set(NOT_REPORTS) <= {p.stem for p in BENCHMARKS.glob("*.py")}  # an exemption names a module that exists


def test_a_novelty_index_record_carries_its_provenance(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import novelty_index

    data = tmp_path / "train.csv"
    data.write_text("SMILES\nCCO\nc1ccccc1\nnot-a-molecule\n")
    novelty_index.main(["--data", str(data), "--out", str(tmp_path / "index.npy")])
    record = json.loads((tmp_path / "index.json").read_text())
    assert record["rows"] == 3 and record["unparsed"] == 1 and set(record["provenance"]) >= {"commit", "packages", "machine"}
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["provenance"] == record["provenance"]

