"""Calculus tasks that sympy generates: differentiate f, or find an antiderivative of g.

A task is ``(kind, expr)``: ``expr`` is the function to differentiate, or the
integrand. Functions are drawn from a small grammar (polynomial terms,
``sin``/``cos``/``exp`` of a multiple of x, ``log``, ``sqrt``, their sums,
products and compositions), so every task has a closed-form answer: an
integrand is always ``d/dx F`` of a drawn ``F``, and ``F`` is the reference
answer. Every function is real on the positive half-line, where the numeric
tier samples its points.

The same generator makes the prior's training pairs (``prior.py``) and a
run's prompts, from different seeds.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import sympy as sp

from arl_math.expressions import KINDS, X, Kind, normalize

__all__ = ["MathTask", "draw_function", "draw_task", "task_set"]

_MAX_CHARS = 48


@dataclass(frozen=True)
class MathTask:
    """One task: its kind, the function it is about, and one correct answer (the reference)."""

    kind: Kind
    expr: str
    reference: str

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.expr}"

    @property
    def text(self) -> str:
        if self.kind == "derivative":
            return f"Differentiate {self.expr} with respect to x."
        return f"Find an antiderivative of {self.expr} with respect to x (no constant)."


def _atom(rng: random.Random) -> sp.Expr:
    a = rng.randint(1, 5)
    choice = rng.randrange(7)
    if choice == 0:
        return rng.randint(1, 9) * X ** rng.randint(1, 5)
    if choice == 1:
        return sp.sin(a * X)
    if choice == 2:
        return sp.cos(a * X)
    if choice == 3:
        return sp.exp(a * X)
    if choice == 4:
        return sp.log(X)
    if choice == 5:
        return sp.sqrt(a * X)
    return a * X


def draw_function(rng: random.Random) -> sp.Expr:
    """A random function of x: one atom, or a sum, product or composition of two."""
    shape = rng.randrange(4)
    if shape == 0:
        return _atom(rng)
    if shape == 1:
        return _atom(rng) + _atom(rng)
    if shape == 2:
        return _atom(rng) * _atom(rng)
    outer = rng.choice([sp.sin, sp.cos, sp.exp])
    return outer(rng.randint(1, 5) * X ** rng.randint(1, 3))


def _text(expr: sp.Expr) -> str:
    return normalize(str(expr))


def draw_task(rng: random.Random, kinds: tuple[Kind, ...] = KINDS) -> MathTask:
    """One task whose function and reference answer are at most 48 characters."""
    while True:
        kind = rng.choice(kinds)
        f = draw_function(rng)
        if f.is_number or not f.has(X):
            continue
        if kind == "derivative":
            expr, reference = f, sp.diff(f, X)
        else:
            expr, reference = sp.diff(f, X), f
        if expr.is_number:
            continue
        e, r = _text(expr), _text(reference)
        if len(e) <= _MAX_CHARS and len(r) <= _MAX_CHARS:
            return MathTask(kind, e, r)


def task_set(n: int, seed: int, kinds: tuple[Kind, ...] = KINDS) -> list[MathTask]:
    """``n`` distinct tasks drawn with ``seed`` (the same list on every machine)."""
    rng = random.Random(seed)
    seen: dict[str, MathTask] = {}
    attempts = 0
    while len(seen) < n and attempts < 20 * n:
        task = draw_task(rng, kinds)
        seen.setdefault(task.id, task)
        attempts += 1
    return list(seen.values())
