"""Best-of-N at inference: `arl rerank` vs verifying everything at the top tier vs the fast tier alone.

For each prompt the N candidates are fixed, so every method chooses among
the same ones; the metric is the precision of the chosen top-1 at the top
tier (the share of prompts whose choice is a true hit) against the
CPU-seconds charged per prompt. Methods:

- ``rerank@B``: :func:`arl_flows.integrations.rerank`, the scheduler's
  ``voi`` policy with the ``discovery`` objective under B CPU-seconds per
  prompt;
- ``all-top``: every candidate through every tier to the top one (the
  ``all`` policy, no budget): the choice is exact, the cost is N top calls;
- ``fast-only``: the fast tier alone. For molecules, the window score of the
  fast tier's own gap (face value) and, as a stronger baseline, the
  scheduler's posterior from the fast tier (``fast-only+surrogate``); for
  code, the composed reward from the format check alone.

Molecules: a held-out pool of QM9 molecules (never in the surrogate's
history), goal window 4-5 eV (15% of QM9). The top tier is
``reference-table``: it answers from the shipped QM9 table and is charged
what one DFT call costs (12 CPU-seconds by default), so this runs in
minutes; no DFT runs. Every method starts from the same ledger holding the
same calibration history (setup, charged to none).

Code: for each task, N candidate programs: the reference solution, a
program that prints the expected output but computes nothing (it passes
the execution check and fails the hidden tests), a wrong function, a
syntax error and an answer without the tags; the order is shuffled per task.

    python -m benchmarks.rerank --prompts 16 --n 12 --budgets 12,24,48 --code-prompts 20
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

from arl_flows.integrations import TieredReward, rerank  # noqa: E402
from verifiers.scheduler import window_score  # noqa: E402
from benchmarks.provenance import format_provenance, with_provenance  # noqa: E402


def molecule_ladder(top_cost: float) -> list[Any]:
    return ["rdkit-eht", ("gfn2-xtb", {"threads": 1, "workers": 1}), ("reference-table", {"cost_per_call": top_cost})]


def molecules(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from arl_flows.suites.molecules.datasets import load_qm9_gaps
    from arl_flows.suites.molecules.chemistry import make_candidate

    low, high = args.window
    ladder = molecule_ladder(args.top_cost)
    base = work / "base.db"
    with TieredReward("molecules", objective=(low, high), ledger_url=f"sqlite:///{base}", tiers=ladder, history=False) as setup:
        setup.warm_start(args.history, seed=12345)
        history = set(setup.ledger.ok_values("reference-table"))
    table: dict[str, float] = {}
    pool = []
    for smiles, gap in load_qm9_gaps():
        c = make_candidate(smiles)
        if c.valid and c.key not in history and c.key not in table:
            table[c.key] = gap
            pool.append(c.payload)
    rng = random.Random(args.seed)
    picks = rng.sample(pool, args.prompts * args.n)
    items = [{"prompt": f"p{i}", "window": [low, high], "candidates": picks[i * args.n : (i + 1) * args.n]}
             for i in range(args.prompts)]

    def truth_hit(smiles: str) -> bool:
        return low <= table[make_candidate(smiles).key] <= high

    ceiling = sum(any(truth_hit(s) for s in it["candidates"]) for it in items) / len(items)
    rows = []

    def run(name: str, **kw: Any) -> None:
        db = work / f"{name}.db"
        shutil.copy(base, db)
        t0 = time.perf_counter()
        results = rerank(items, suite="molecules", n=args.n, tiers=ladder, ledger_url=f"sqlite:///{db}", **kw)
        rows.append(_row(name, results, [truth_hit(r.top[0].completion) for r in results], "reference-table", t0))
        print(f"  molecules {name}: precision {rows[-1]['precision']:.3f}, {rows[-1]['cpu_s_per_prompt']:.2f} CPU-s/prompt")

    run("all-top", budget=1e12, policy="all")
    for b in args.budgets:
        run(f"rerank@{b:g}", budget=b)
    run("fast-only+surrogate", budget=1e12, policy="fast-only")
    # Face value: the window score of the fast tier's own gap, no surrogate.
    from verifiers import registry

    fast = registry.create("rdkit-eht")
    t0 = time.perf_counter()
    hits, spend = 0, 0.0
    for it in items:
        cands = [make_candidate(s) for s in it["candidates"]]
        verdicts = fast.verify_batch(cands)
        spend += sum(v.cost_s for v in verdicts)
        scores = [float(window_score(v.value, low, high, 0.5)) if v.value is not None else -1.0 for v in verdicts]
        hits += truth_hit(it["candidates"][max(range(len(scores)), key=lambda i: (scores[i], -i))])
    rows.append({"method": "fast-only (face value)", "precision": hits / len(items), "cpu_s_per_prompt": spend / len(items),
                 "top_calls_per_prompt": 0.0, "wall_s": time.perf_counter() - t0})
    return {"ceiling": ceiling, "rows": rows, "prompts": args.prompts, "n": args.n, "window": [low, high],
            "top_cost": args.top_cost, "history": args.history}


def _row(method: str, results: Sequence[Any], hits: Sequence[bool], top_tier: str, t0: float) -> dict[str, Any]:
    """One method's table row: share of prompts whose pick is a hit, CPU-seconds and top-tier calls per prompt, wall seconds."""
    n = len(results)
    return {
        "method": method,
        "precision": sum(hits) / n,
        "cpu_s_per_prompt": sum(r.spend_s for r in results) / n,
        "top_calls_per_prompt": sum(r.calls.get(top_tier, 0) for r in results) / n,
        "wall_s": time.perf_counter() - t0,
    }


def code_candidates(task: Any, rng: random.Random) -> list[str]:
    fn = task.function or "solve"
    expected = task.expected_stdout.strip()
    wrap = "<think>{}</think><code>{}</code>".format
    cands = [
        wrap("the reference", task.reference),
        wrap("print the answer", f"def {fn}(*args):\n    return None\nprint({expected!r})\n"),
        wrap("a guess", f"def {fn}(*args):\n    return 0\nprint({fn}())\n"),
        wrap("broken", task.reference.rstrip()[:-3] + "((\n"),
        task.reference,
    ]
    rng.shuffle(cands)
    return cands


def code(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from verifiers import registry
    from arl_flows.suites.code import load_tasks, make_candidate

    rng = random.Random(args.seed)
    tasks = rng.sample(load_tasks(), min(args.code_prompts, len(load_tasks())))
    items = [{"task_id": t.id, "prompt": t.id, "candidates": code_candidates(t, rng)} for t in tasks]
    top = registry.create("code-tests")
    truth: dict[tuple[str, str], bool] = {}
    for t, it in zip(tasks, items):
        verdicts = top.verify_batch([make_candidate(t.id, c) for c in it["candidates"]])
        for c, v in zip(it["candidates"], verdicts):
            truth[(t.id, c)] = v.status.value == "ok" and (v.value or 0.0) >= 1.0
    ceiling = sum(any(truth[(it["task_id"], c)] for c in it["candidates"]) for it in items) / len(items)
    rows = []

    def run(name: str, **kw: Any) -> None:
        db = work / f"code-{name}.db"
        t0 = time.perf_counter()
        results = rerank(items, suite="code", n=len(items[0]["candidates"]), ledger_url=f"sqlite:///{db}", **kw)
        rows.append(_row(name, results, [truth[(it["task_id"], r.top[0].completion)] for it, r in zip(items, results)], "code-tests", t0))
        print(f"  code {name}: precision {rows[-1]['precision']:.3f}, {rows[-1]['cpu_s_per_prompt']:.3f} CPU-s/prompt")

    run("all-top", budget=1e12, policy="all")
    for b in args.code_budgets:
        run(f"rerank@{b:g}", budget=b)
    run("fast-only", budget=1e12, policy="fast-only")
    return {"ceiling": ceiling, "rows": rows, "prompts": len(items), "n": len(items[0]["candidates"])}


def _print(title: str, report: dict[str, Any]) -> None:
    rows = report["rows"]
    ref = next(r for r in rows if r["method"] == "all-top")
    print(f"\n{title}: {report['prompts']} prompts x {report['n']} candidates; ceiling (a hit among the N) {report['ceiling']:.3f}")
    print(f"{'method':<24}{'precision':>10}{'CPU-s/prompt':>14}{'top calls':>11}{'cost vs all-top':>17}{'precision vs all-top':>22}")
    for r in rows:
        cost = r["cpu_s_per_prompt"] / ref["cpu_s_per_prompt"] if ref["cpu_s_per_prompt"] else math.nan
        prec = r["precision"] / ref["precision"] if ref["precision"] else math.nan
        print(f"{r['method']:<24}{r['precision']:>10.3f}{r['cpu_s_per_prompt']:>14.3f}{r['top_calls_per_prompt']:>11.2f}"
              f"{cost:>17.3f}{prec:>22.3f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prompts", type=int, default=16, help="Molecule prompts (each with --n held-out QM9 molecules).")
    p.add_argument("--n", type=int, default=12)
    p.add_argument("--window", type=float, nargs=2, default=(4.0, 5.0))
    p.add_argument("--budgets", default="12,24,48", help="Rerank budgets per molecule prompt (CPU-s).")
    p.add_argument("--top-cost", type=float, default=12.0, help="CPU-s charged per reference-table answer (a DFT call).")
    p.add_argument("--history", type=int, default=200, help="QM9 molecules of calibration history (setup, charged to none).")
    p.add_argument("--code-prompts", type=int, default=20)
    p.add_argument("--code-budgets", default="0.5,1,2", help="Rerank budgets per code prompt (CPU-s).")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--skip-code", action="store_true")
    p.add_argument("--skip-molecules", action="store_true", help="Only the code comparison.")
    p.add_argument("--json", default=None, help="Write the results here.")
    args = p.parse_args()
    args.budgets = [float(b) for b in args.budgets.split(",")]
    args.code_budgets = [float(b) for b in args.code_budgets.split(",")]
    work = Path(tempfile.mkdtemp(prefix="arl-rerank-bench-"))
    os.environ["ARL_HOME"] = str(work / "home")
    try:
        report = {} if args.skip_molecules else {"molecules": molecules(args, work)}
        if not args.skip_code:
            report["code"] = code(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"provenance: {format_provenance()}")
    if "molecules" in report:
        _print("molecules (top tier: QM9 table, charged as DFT)", report["molecules"])
    if "code" in report:
        _print("code (top tier: hidden tests in a fresh sandbox)", report["code"])
    if args.json:
        Path(args.json).write_text(json.dumps(with_provenance(report), indent=2))


if __name__ == "__main__":
    main()
