"""Answers as sympy expressions, parsed without running arbitrary code, and what each task checks.

``sympy.sympify`` and ``parse_expr`` build Python source from the text and
``eval`` it, so on raw policy output they would run whatever the policy wrote
(``__import__('os').system(...)``), and Python's lexer reads the text its own
way (``0x10`` is 16, ``2E5`` a float, ``9E99999999`` a number that takes
minutes to build). :func:`parse_answer` therefore never hands the text to
Python: a closed token grammar (numbers of digits with at most one decimal
point, the variable ``x``, a fixed list of function and constant names, the
operators ``+ - * / **``, ``^`` read as ``**``, and parentheses) and a small
recursive-descent parser (:class:`_Parser`, its grammar in its docstring)
build the sympy tree node by node. Whatever the format tier admits is exactly
the tree the other tiers evaluate; anything else, including two operands side
by side (``2x``, ``0x10``), ``.`` outside a number, ``_``, quotes, commas and
any other name, is rejected with the reason.

The tree is built unevaluated: ``9**9**9`` is kept as a tree and never
computed. :func:`check_limits` bounds it (nodes, depth, exponent and literal
sizes) so that the evaluating tiers, which run in worker processes with a
timeout and a memory limit anyway, get expressions of a known size, and the
parse itself is linear in the text (at most ``max_chars``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import sympy as sp

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


# One token: a number, a name, ** or one operator/parenthesis character.
# ASCII only: Python's \d also matches other scripts' digits ('٢', '２'), which would give one answer several keys.
_TOKEN = re.compile(r"\d+(?:\.\d+)?|[A-Za-z]+|\*\*|[-+*/()]", re.ASCII)


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


def _tokens(text: str, limits: AnswerLimits) -> list[tuple[str, int]]:
    """The tokens of ``text`` with their offsets; InvalidAnswer at the first character outside the grammar."""
    if not text:
        raise InvalidAnswer("empty answer: write an expression in x, e.g. 2*x*cos(x)")
    if len(text) > limits.max_chars:
        raise InvalidAnswer(f"answer is {len(text)} characters; keep it under {limits.max_chars}")
    tokens, pos = [], 0
    for match in _TOKEN.finditer(text):
        if match.start() != pos:
            raise InvalidAnswer(f"unexpected {text[pos:match.start()][:10]!r} at character {pos + 1}")
        tokens.append((match.group(), pos))
        pos = match.end()
    if pos != len(text):
        raise InvalidAnswer(f"unexpected {text[pos:pos + 10]!r} at character {pos + 1}")
    for tok, _ in tokens:
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
    expr = _Parser(text, _tokens(text, limits), limits).parse()
    check_limits(expr, limits)
    if not evaluate:
        return expr
    # Rebuild from the checked tree with evaluation on: the same nodes, now simplified by sympy's constructors.
    return _evaluate(expr)


class _Parser:
    """Recursive descent over the grammar below; builds the unevaluated sympy tree itself (nothing is ``eval``-ed).

    ::

        sum     := product (("+" | "-") product)*
        product := unary (("*" | "/") unary)*
        unary   := ("+" | "-") unary | power
        power   := atom ("**" unary)?              right-associative, as in Python: 2**-x**2 = 2**(-(x**2))
        atom    := NUMBER | "x" | "pi" | "E" | FUNCTION "(" sum ")" | "(" sum ")"
        NUMBER  := digits ("." digits)?           its exact decimal value (0.1 is 1/10), never a float

    Two operands side by side (``2x``, ``0x10``, ``2E5``, ``x(x)``) are an error, not a product or a
    Python literal; nesting deeper than ``max_depth`` is an error before the recursion gets deep.
    """

    def __init__(self, text: str, tokens: list[tuple[str, int]], limits: AnswerLimits) -> None:
        self.text, self.tokens, self.limits, self.i, self.depth = text, tokens, limits, 0, 0

    def parse(self) -> sp.Expr:
        expr = self._sum()
        if self.i < len(self.tokens):
            tok, pos = self.tokens[self.i]
            before = self.tokens[self.i - 1][0] if self.i else ""
            if tok == ")":
                raise InvalidAnswer(f"not an expression: unmatched ')' at character {pos + 1}")
            raise InvalidAnswer(f"not an expression: {before[:12]!r} then {tok[:12]!r} at character {pos + 1}; "
                                f"write an operator between them (2*x, not 2x)")
        return expr

    def _peek(self) -> str | None:
        return self.tokens[self.i][0] if self.i < len(self.tokens) else None

    def _take(self) -> tuple[str, int]:
        if self.i >= len(self.tokens):
            raise InvalidAnswer(f"not an expression: {self.text[-20:]!r} ends before its last operand")
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def _nested(self) -> None:
        self.depth += 1
        if self.depth > self.limits.max_depth:
            raise InvalidAnswer(f"answer nests deeper than {self.limits.max_depth} levels")

    def _sum(self) -> sp.Expr:
        terms = [self._product()]
        while self._peek() in ("+", "-"):
            op, _ = self._take()
            term = self._product()
            terms.append(term if op == "+" else sp.Mul(sp.Integer(-1), term, evaluate=False))
        return terms[0] if len(terms) == 1 else sp.Add(*terms, evaluate=False)

    def _product(self) -> sp.Expr:
        factors = [self._unary()]
        while self._peek() in ("*", "/"):
            op, _ = self._take()
            factor = self._unary()
            factors.append(factor if op == "*" else sp.Pow(factor, sp.Integer(-1), evaluate=False))
        return factors[0] if len(factors) == 1 else sp.Mul(*factors, evaluate=False)

    def _unary(self) -> sp.Expr:
        if self._peek() in ("+", "-"):
            op, _ = self._take()
            self._nested()
            operand = self._unary()
            self.depth -= 1
            return operand if op == "+" else sp.Mul(sp.Integer(-1), operand, evaluate=False)
        return self._power()

    def _power(self) -> sp.Expr:
        base = self._atom()
        if self._peek() != "**":
            return base
        self._take()
        self._nested()
        exponent = self._unary()
        self.depth -= 1
        return sp.Pow(base, exponent, evaluate=False)

    def _atom(self) -> sp.Expr:
        tok, pos = self._take()
        if tok[0].isdigit():
            return sp.Rational(tok) if "." in tok else sp.Integer(tok)
        if tok == "(":
            return self._group(pos)
        if tok in FUNCTIONS:
            if self._peek() != "(":
                raise InvalidAnswer(f"not an expression: {tok} needs its argument in parentheses, e.g. {tok}(x)")
            _, open_pos = self._take()
            return FUNCTIONS[tok](self._group(open_pos), evaluate=False)  # type: ignore[operator]
        if tok in _NAMES:
            return _NAMES[tok]  # type: ignore[return-value]
        raise InvalidAnswer(f"not an expression: {tok!r} at character {pos + 1} where an operand should be")

    def _group(self, open_pos: int) -> sp.Expr:
        self._nested()
        inner = self._sum()
        if self._peek() != ")":
            raise InvalidAnswer(f"not an expression: '(' at character {open_pos + 1} is not closed")
        self._take()
        self.depth -= 1
        return inner


def _evaluate(expr: sp.Basic) -> sp.Expr:
    """The evaluated form of a checked, unevaluated tree (bottom-up: each node's constructor with evaluation on)."""
    if not expr.args:
        return expr
    return expr.func(*(_evaluate(a) for a in expr.args))


def sides(kind: str, expr: str, answer: str, limits: AnswerLimits = AnswerLimits()) -> tuple[sp.Expr, sp.Expr]:
    """The two expressions that must be equal for ``answer`` to solve the task (evaluated; worker side).

    - derivative of ``expr``: the answer and ``d/dx expr``;
    - antiderivative of ``expr``: ``d/dx answer`` and ``expr`` (any constant of integration is right).

    An answer that is undefined as a whole (``1/0``, ``log(0)`` anywhere in it) is :class:`InvalidAnswer`, checked
    on the answer itself: its derivative would hide it (``d/dx (x**2 + 1/0)`` is sympy's 0 + 2*x).
    """
    given = parse_answer(expr, AnswerLimits(max_chars=400, max_nodes=400), evaluate=True)
    got = parse_answer(answer, limits, evaluate=True)
    if got.has(sp.zoo, sp.nan, sp.oo, -sp.oo):
        raise InvalidAnswer("the answer is undefined (it divides by 0 or takes log(0)); write a function of x")
    if kind == "derivative":
        return got, sp.diff(given, X)
    if kind == "antiderivative":
        return sp.diff(got, X), given
    raise ValueError(f"unknown task kind {kind!r}; use one of {', '.join(KINDS)}")
