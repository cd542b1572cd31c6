"""Answers as sympy expressions, parsed without running arbitrary code, and what each task checks.

``sympy.sympify`` and ``parse_expr`` build Python source from the text and
``eval`` it, so on raw policy output they would run whatever the policy wrote
(``__import__('os').system(...)``). :func:`parse_answer` therefore tokenizes
the text first with a closed grammar: numbers (digits, at most one decimal
point), the variable ``x``, a fixed list of function and constant names, the
operators ``+ - * / **`` (``^`` is read as ``**``) and parentheses. Anything
else, including ``.`` outside a number, ``_``, quotes, commas, brackets and
any other name, is rejected before ``parse_expr`` sees it, and ``parse_expr``
then evaluates with empty builtins and a namespace holding only those names:
no attribute access, no call of anything but the whitelisted functions.

It parses with ``evaluate=False``: ``9**9**9`` is kept as a tree and never
computed. :func:`check_limits` bounds the tree (nodes, depth, exponent and
literal sizes) so that the evaluating tiers, which run in worker processes
with a timeout and a memory limit anyway, get expressions of a known size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import sympy as sp
from sympy.parsing.sympy_parser import auto_number, parse_expr

__all__ = [
    "FUNCTIONS",
    "KINDS",
    "X",
    "AnswerLimits",
    "InvalidAnswer",
    "Kind",
    "check_limits",
    "normalize",
    "parse_answer",
    "sides",
    "tree_size",
]

Kind = Literal["derivative", "antiderivative"]
KINDS: tuple[Kind, ...] = ("derivative", "antiderivative")

X = sp.Symbol("x")

FUNCTIONS: dict[str, object] = {
    "sin": sp.sin, "cos": sp.cos, "tan": sp.tan, "cot": sp.cot,
    "asin": sp.asin, "acos": sp.acos, "atan": sp.atan, "acot": sp.acot,
    "sinh": sp.sinh, "cosh": sp.cosh, "tanh": sp.tanh,
    "asinh": sp.asinh, "acosh": sp.acosh, "atanh": sp.atanh,
    "exp": sp.exp, "log": sp.log, "sqrt": sp.sqrt,
}
_NAMES: dict[str, object] = {"x": X, "pi": sp.pi, "E": sp.E, **FUNCTIONS}


# parse_expr(evaluate=False) passes evaluate=False to every call too, so ``sqrt(9**9**9)`` is never computed here.
_PARSE_GLOBALS: dict[str, object] = {
    "__builtins__": {}, "Integer": sp.Integer, "Float": sp.Float, "Rational": sp.Rational,
    "Add": sp.Add, "Mul": sp.Mul, "Pow": sp.Pow,
}

# One token: a number, a name, ** or one operator/parenthesis character.
_TOKEN = re.compile(r"\d+(?:\.\d+)?|[A-Za-z]+|\*\*|[-+*/()]")


class InvalidAnswer(ValueError):
    """The text is not an answer this suite can check; the message says what to fix (the policy's feedback)."""


@dataclass(frozen=True)
class AnswerLimits:
    """Bounds on an answer, checked before anything evaluates it."""

    max_chars: int = 200
    max_nodes: int = 200
    max_depth: int = 24
    max_exponent: int = 64
    max_digits: int = 8


def normalize(text: str) -> str:
    """The answer as the suite stores and keys it: no whitespace, ``^`` written ``**``."""
    return "".join(text.split()).replace("^", "**")


def _tokens(text: str, limits: AnswerLimits) -> list[str]:
    if not text:
        raise InvalidAnswer("empty answer: write an expression in x, e.g. 2*x*cos(x)")
    if len(text) > limits.max_chars:
        raise InvalidAnswer(f"answer is {len(text)} characters; keep it under {limits.max_chars}")
    tokens, pos = [], 0
    for match in _TOKEN.finditer(text):
        if match.start() != pos:
            raise InvalidAnswer(f"unexpected {text[pos:match.start()][:10]!r} at character {pos + 1}")
        tokens.append(match.group())
        pos = match.end()
    if pos != len(text):
        raise InvalidAnswer(f"unexpected {text[pos:pos + 10]!r} at character {pos + 1}")
    for tok in tokens:
        if tok[0].isalpha() and tok not in _NAMES:
            raise InvalidAnswer(f"unknown name {tok[:20]!r}; use x, pi, E and {', '.join(FUNCTIONS)}")
        if tok[0].isdigit() and len(tok.replace(".", "")) > limits.max_digits:
            raise InvalidAnswer(f"number {tok[:12]}... has more than {limits.max_digits} digits")
    return tokens


def tree_size(expr: sp.Basic) -> int:
    """Nodes of the expression tree: the ``size`` the tiers' cost models use."""
    return sum(1 for _ in sp.preorder_traversal(expr))


def _literal(node: sp.Basic) -> Fraction | float | None:
    """The value of a tree of number literals joined by +, * and division (``Pow(n, -1)``); None for anything else."""
    if isinstance(node, sp.Integer):
        return Fraction(int(node))
    if isinstance(node, sp.Rational):
        return Fraction(int(node.p), int(node.q))
    if isinstance(node, sp.Float):
        return float(node)
    if isinstance(node, sp.Pow) and node.args[1] == -1:
        base = _literal(node.args[0])
        return None if base is None or base == 0 else 1 / base
    if isinstance(node, (sp.Add, sp.Mul)):
        values = [_literal(a) for a in node.args]
        if any(v is None for v in values):
            return None
        out: Fraction | float = Fraction(0) if isinstance(node, sp.Add) else Fraction(1)
        for v in values:
            out = out + v if isinstance(node, sp.Add) else out * v  # type: ignore[operator]
        return out
    return None


def check_limits(expr: sp.Basic, limits: AnswerLimits = AnswerLimits()) -> None:
    """Raise :class:`InvalidAnswer` if an unevaluated expression is too big to evaluate safely.

    Besides its size and depth: a power whose exponent is free of x must have a literal exponent
    (``2``, ``-1/2``, ``1.5``) of size at most ``max_exponent``, and inside a power of a number
    every power must be a root or a reciprocal, so no number grows past a few hundred digits.
    """
    stack: list[tuple[sp.Basic, int]] = [(expr, 1)]
    nodes = 0
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > limits.max_nodes:
            raise InvalidAnswer(f"answer has more than {limits.max_nodes} terms and operations; simplify it")
        if depth > limits.max_depth:
            raise InvalidAnswer(f"answer nests deeper than {limits.max_depth} levels")
        if isinstance(node, sp.Pow) and not node.args[1].has(X):
            base, exponent = node.args
            value = _literal(exponent)
            if value is None:
                raise InvalidAnswer(f"exponent {exponent} is not a plain number; write powers like x**2 or x**(1/2)")
            if abs(value) > limits.max_exponent:
                raise InvalidAnswer(f"exponent {float(value):g} is larger than {limits.max_exponent}")
            if not base.has(X) and abs(value) > 1:
                for inner in sp.preorder_traversal(base):
                    if isinstance(inner, sp.Pow) and not (_literal(inner.args[1]) is not None and abs(_literal(inner.args[1])) <= 1):
                        raise InvalidAnswer("a power of a power of numbers (like (2**8)**8) is not an answer; write its value")
        stack.extend((arg, depth + 1) for arg in node.args)


def parse_answer(text: str, limits: AnswerLimits = AnswerLimits(), *, evaluate: bool = False) -> sp.Expr:
    """A sympy expression in ``x`` from policy text, without running any of it (see the module docstring).

    ``evaluate=False`` (the default) keeps the tree as written and computes nothing; the
    tiers that need the value pass ``evaluate=True`` after the limits were checked on the
    unevaluated tree, inside a worker process.
    """
    text = normalize(text)
    _tokens(text, limits)
    try:
        expr = parse_expr(
            text,
            local_dict=dict(_NAMES),
            global_dict=dict(_PARSE_GLOBALS),
            transformations=(auto_number,),
            evaluate=False,
        )
    except (SyntaxError, TypeError, ValueError, AttributeError, IndexError, RecursionError, sp.SympifyError) as exc:
        raise InvalidAnswer(f"not an expression: {type(exc).__name__}: {' '.join(str(exc).split())[:120]}") from None
    except Exception as exc:  # noqa: BLE001 - tokenize errors and the like: still the answer's fault
        raise InvalidAnswer(f"not an expression: {type(exc).__name__}") from None
    if not isinstance(expr, sp.Expr):
        raise InvalidAnswer(f"{text[:40]!r} is not an expression in x (a function needs its argument: sin(x))")
    check_limits(expr, limits)
    if not evaluate:
        return expr
    # Rebuild from the checked tree with evaluation on: the same nodes, now simplified by sympy's constructors.
    return _evaluate(expr)


def _evaluate(expr: sp.Basic) -> sp.Expr:
    """The evaluated form of a checked, unevaluated tree (bottom-up: each node's constructor with evaluation on)."""
    if not expr.args:
        return expr
    return expr.func(*(_evaluate(a) for a in expr.args))


def sides(kind: str, expr: str, answer: str, limits: AnswerLimits = AnswerLimits()) -> tuple[sp.Expr, sp.Expr]:
    """The two expressions that must be equal for ``answer`` to solve the task (evaluated; worker side).

    - derivative of ``expr``: the answer and ``d/dx expr``;
    - antiderivative of ``expr``: ``d/dx answer`` and ``expr`` (any constant of integration is right).
    """
    given = parse_answer(expr, AnswerLimits(max_chars=400, max_nodes=400), evaluate=True)
    got = parse_answer(answer, limits, evaluate=True)
    if kind == "derivative":
        return got, sp.diff(given, X)
    if kind == "antiderivative":
        return sp.diff(got, X), given
    raise ValueError(f"unknown task kind {kind!r}; use one of {', '.join(KINDS)}")
