"""A math candidate: the answer text, keyed with its task, sized by its expression trees."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from arl_math.expressions import KINDS, AnswerLimits, InvalidAnswer, normalize, parse_answer, tree_size
from verifiers import Candidate

__all__ = ["SUITE", "make_candidate", "task_of"]

SUITE = "math"


def task_of(goal: dict[str, Any] | None) -> tuple[str, str]:
    """(kind, expr) of a goal; ValueError naming what is missing."""
    goal = goal or {}
    kind, expr = goal.get("kind"), goal.get("expr")
    if kind not in KINDS:
        raise ValueError(f"a math candidate needs its task: kind one of {', '.join(KINDS)} (got {str(kind)[:40]!r})")
    if not isinstance(expr, str) or not expr.strip():
        raise ValueError("a math candidate needs its task: expr, the function to differentiate or integrate, e.g. x**2*sin(x)")
    try:
        parse_answer(expr, AnswerLimits(max_chars=400, max_nodes=400))
    except InvalidAnswer as exc:
        raise ValueError(f"the task's expr {expr[:60]!r} is not an expression: {exc}") from None
    return kind, normalize(expr)


def make_candidate(answer: str, goal: dict[str, Any] | None) -> Candidate:
    """The candidate for ``answer`` to the task in ``goal`` (``{"kind": ..., "expr": ...}``).

    The key hashes the task and the normalized answer (a canonical JSON encoding, not a string
    join), so the same answer to the same task is verified once. ``size`` is the number of
    nodes of the answer's and the task's expression trees (what the tiers' cost models scale with);
    an answer that does not parse is sized by its length and marked ``valid=False``.
    """
    kind, expr = task_of(goal)
    text = normalize(answer)
    digest = hashlib.sha256(json.dumps([kind, expr, text], ensure_ascii=False).encode("utf-8", "surrogatepass")).hexdigest()
    task_size = tree_size(parse_answer(expr, AnswerLimits(max_chars=400, max_nodes=400)))
    try:
        size, valid = tree_size(parse_answer(text)) + task_size, True
    except InvalidAnswer:
        size, valid = min(len(text), 200) + task_size, False
    return Candidate(
        key=f"{SUITE}:{digest[:32]}",
        suite=SUITE,
        payload=text,
        task_id=f"{kind}:{expr}",
        goal={"kind": kind, "expr": expr},
        valid=valid,
        size=float(size),
    )
