"""Measure the math ladder: CPU cost per tier and call, a cost-model fit, and how often the tiers disagree.

    python measure.py --tasks 100 --seed 7

Answers per task: the reference (right), a rewrite of it (right, written
differently: expanded, factored or trig-expanded), and two wrong ones (the
reference plus x; twice the reference). Every answer goes through all three
tiers (the tiers' own worker processes, default params); the script prints
each tier's CPU-seconds per call (median, mean, max), the least-squares fit
``base + per_unit * size`` (size: expression-tree nodes of answer and task),
and the symbolic-vs-numeric confusion table.
"""

from __future__ import annotations

import argparse
import statistics

import sympy as sp

from arl_math.candidates import make_candidate
from arl_math.expressions import parse_answer
from arl_math.fast import MathFormat
from arl_math.numeric import NumericAgreement
from arl_math.symbolic import SymbolicEquivalence
from arl_math.tasks import task_set
from verifiers import CostModel


def answers(task) -> list[tuple[str, bool]]:  # noqa: ANN001
    ref = parse_answer(task.reference, evaluate=True)
    rewrites = [sp.expand(ref), sp.factor(ref), sp.expand_trig(ref), sp.expand_log(ref, force=True)]
    rewrite = next((r for r in rewrites if str(r) != str(ref)), ref)
    out = [(task.reference, True), (str(rewrite), True), (str(ref + sp.Symbol("x")), False), (str(2 * ref), False)]
    return [("".join(a.split()), right) for a, right in out]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rows = [(t, a, right) for t in task_set(args.tasks, args.seed) for a, right in answers(t)]
    candidates = [make_candidate(a, {"kind": t.kind, "expr": t.expr}) for t, a, _ in rows]
    verdicts = {}
    for cls in (MathFormat, SymbolicEquivalence, NumericAgreement):
        verifier = cls()
        try:
            verifier.verify_batch(candidates[:1])  # warm the worker (start-up is not a candidate's cost)
            got = verifier.verify_batch(candidates)
        finally:
            getattr(verifier, "close", lambda: None)()
        verdicts[cls.name] = got
        costs = [v.cost_s for v in got]
        fit = CostModel(base=0.001, per_unit=0.0001).refine([c.size for c in candidates], costs)
        print(f"{cls.name:15s} calls {len(got)}  CPU-s per call: median {statistics.median(costs):.4f} "
              f"mean {statistics.mean(costs):.4f} max {max(costs):.3f}  fit {fit.base:.4f} + {fit.per_unit:.5f} * size  "
              f"statuses {dict((s, sum(v.status.value == s for v in got)) for s in ('ok', 'invalid', 'failed', 'timeout'))}")
    table: dict[tuple[str, str, bool], int] = {}
    for (_, answer, right), sym, num in zip(rows, verdicts["sympy-simplify"], verdicts["mpmath-points"]):
        s = "proved" if sym.status.value == "ok" and sym.value == 1.0 else ("not proved" if sym.status.value == "ok" else sym.status.value)
        n = "agrees" if num.status.value == "ok" and num.value == 1.0 else ("differs" if num.status.value == "ok" else num.status.value)
        table[(s, n, right)] = table.get((s, n, right), 0) + 1
    print("symbolic x numeric (answer right?): count")
    for key in sorted(table):
        print(f"  {key[0]:10s} x {key[1]:8s} right={key[2]!s:5s}: {table[key]}")
    undecided = [(a, v.feedback) for (_, a, _), v, n in zip(rows, verdicts["sympy-simplify"], verdicts["mpmath-points"])
                 if v.status.value == "ok" and v.value == 0.0 and n.status.value == "ok" and n.value == 1.0]
    for answer, feedback in undecided[:10]:
        print(f"  numeric passes, simplify does not: {answer}  ({feedback[:100]})")


if __name__ == "__main__":
    main()
