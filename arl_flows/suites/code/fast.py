"""Fast tier of the code suite: format, syntax, static policy, length.

Cheap enough to run on every trajectory. The static policy is *not* the
security boundary (the sandbox is; ``tests/code_suite`` runs the attacks
with this policy switched off too). It exists because a candidate that
reaches for ``os``, ``eval`` or ``__subclasses__`` is trying something the
tasks never need, and saying so early is cheaper and clearer feedback than
letting the sandbox refuse it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from storage.records import Status, Tier, Verdict
from verifiers.base import Candidate, CostModel, Verifier
from arl_flows.suites.code.format import FormatError, ParsedTrajectory, parse_answer
from arl_flows.suites.code.tasks import GRANTABLE_NAMES
from verifiers.registry import register_verifier

__all__ = [
    "DEFAULT_ALLOWED_IMPORTS",
    "CodeFormat",
    "CodeFormatParams",
    "check_code",
    "check_trajectory",
    "gate_for_execution",
    "task_of",
    "verify_each",
]

DEFAULT_ALLOWED_IMPORTS = (
    "math", "cmath", "itertools", "functools", "operator", "collections", "string", "re", "heapq",
    "bisect", "statistics", "fractions", "decimal", "random", "typing", "copy", "array", "numbers",
    "hashlib",  # digests of bytes only: no file, process or network access (file_digest needs open)
)  # fmt: skip

# Builtins that reach the interpreter's machinery rather than compute
# something: code execution, attribute access by string, frames, files.
_FORBIDDEN_NAMES = frozenset({
    "__import__", "eval", "exec", "compile", "open", "globals", "locals", "vars", "getattr", "setattr",
    "delattr", "breakpoint", "input", "memoryview", "__builtins__", "__loader__", "__spec__", "exit", "quit",
    "help",
})  # fmt: skip
# Attribute access by string under another name: every one of these reaches what `getattr` would
# (operator.attrgetter("_os")(random)), or evaluates strings as code (typing.get_type_hints on string
# annotations). Refused as names, as attributes (operator.attrgetter) and as imported names.
_GETATTR_EQUIVALENTS = frozenset({
    "attrgetter", "methodcaller", "get_type_hints", "ForwardRef", "getattr_static", "__getattribute__",
    "get_field", "get_value",  # string.Formatter().get_field("0._os", (random,), {})
})  # fmt: skip
_ALLOWED_DUNDER_NAMES = frozenset({"__name__", "__init__", "__repr__", "__str__", "__eq__", "__lt__", "__hash__", "__len__", "__iter__", "__next__"})
_DUNDER_IN_STRING = re.compile(r"__\w+__")
# A format-string field that reaches a private attribute or index: "{0._os}".format(random).
_PRIVATE_IN_FORMAT_FIELD = re.compile(r"\{[^{}]*[.\[]\s*_")


class CodeFormatParams(BaseModel):
    """Limits of the fast tier."""

    model_config = ConfigDict(extra="forbid")

    max_code_chars: int = Field(default=4000, ge=1, description="Largest total code size over all turns, characters.")
    max_turns: int = Field(default=8, ge=1, description="Most code turns a trajectory may have.")
    allowed_imports: list[str] = Field(
        default_factory=lambda: list(DEFAULT_ALLOWED_IMPORTS),
        description="Top-level modules a program may import; anything else is a policy violation.",
    )


def check_code(
    code: str, allowed_imports: Sequence[str] = DEFAULT_ALLOWED_IMPORTS, allowed_names: Sequence[str] = ()
) -> str | None:
    """Syntax and static policy of one program; the problem in words, or None if it passes.

    ``allowed_names`` are builtins a task declared its solutions need (``CodeTask.allow``, at most
    ``GRANTABLE_NAMES``): used as plain names they pass; imported, or as attributes, they stay refused.
    """
    try:
        tree = ast.parse(code, filename="main.py")
    except SyntaxError as exc:
        return f"syntax error at line {exc.lineno}: {exc.msg}"
    except ValueError as exc:  # null bytes; lone surrogates (UnicodeEncodeError)
        return f"cannot parse: {exc}"
    except (RecursionError, MemoryError):  # e.g. "-" * 3900 + "1": within the length limit, too deep for ast
        return "code nests too deeply to parse"
    allowed = set(allowed_imports)
    granted = frozenset(allowed_names) & frozenset(GRANTABLE_NAMES)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", "?")
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top not in allowed:
                    return f"line {line}: import of {alias.name!r} is not allowed (allowed: {', '.join(sorted(allowed))})"
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                return f"line {line}: relative imports are not allowed"
            top = (node.module or "").split(".")[0]
            if top not in allowed:
                return f"line {line}: import from {node.module!r} is not allowed (allowed: {', '.join(sorted(allowed))})"
            for alias in node.names:
                # `from random import _os` is `random._os` by another spelling.
                if alias.name.startswith("_"):
                    return f"line {line}: import of the private name {alias.name!r} is not allowed"
                if alias.name in _FORBIDDEN_NAMES or alias.name in _GETATTR_EQUIVALENTS:
                    return f"line {line}: import of {alias.name!r} is not allowed"
        elif isinstance(node, ast.MatchClass):
            # `case object(__class__=c)` reads an attribute by name, as `.__class__` would.
            for attr in node.kwd_attrs:
                if attr.startswith("_"):
                    return f"line {line}: class pattern reaching the attribute {attr!r} is not allowed"
        elif isinstance(node, ast.Name):
            if node.id in granted:
                continue
            if node.id in _FORBIDDEN_NAMES or node.id in _GETATTR_EQUIVALENTS:
                return f"line {line}: use of {node.id!r} is not allowed"
            if node.id.startswith("__") and node.id not in _ALLOWED_DUNDER_NAMES:
                return f"line {line}: name {node.id!r} is not allowed"
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("__") and node.attr.endswith("__"):
                return f"line {line}: dunder attribute access '.{node.attr}' is not allowed"
            if node.attr.startswith("_"):
                # Modules keep their own imports as private names (random._os), a
                # way around the import allow-list.
                return f"line {line}: private attribute access '.{node.attr}' is not allowed"
            if node.attr in _GETATTR_EQUIVALENTS or node.attr in ("getattr", "vars"):
                return f"line {line}: use of '.{node.attr}' is not allowed"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            m = _DUNDER_IN_STRING.search(node.value)
            if m and m.group(0) != "__main__":
                return f"line {line}: the string {m.group(0)!r} looks like an attempt to reach interpreter internals"
            if _PRIVATE_IN_FORMAT_FIELD.search(node.value):
                return f"line {line}: a format field reaching a private attribute is not allowed"
        elif isinstance(node, (ast.Global, ast.Nonlocal)) and any(n.startswith("__") for n in node.names):
            return f"line {line}: dunder names are not allowed"
    return None


def check_trajectory(
    answer_text: str, params: CodeFormatParams | None = None, allowed_names: Sequence[str] = ()
) -> ParsedTrajectory | str:
    """Every fast check on a whole trajectory: the parsed trajectory, or the first problem in words.

    ``allowed_names``: builtins the candidate's task declared (``CodeTask.allow``).
    """
    params = params or CodeFormatParams()
    parsed = parse_answer(answer_text)
    if isinstance(parsed, FormatError):
        return f"format: {parsed}"
    if len(parsed.turns) > params.max_turns:
        return f"too many turns: {len(parsed.turns)} > {params.max_turns}"
    total = sum(len(c) for c in parsed.codes)
    if total > params.max_code_chars:
        return f"code too long: {total} characters > {params.max_code_chars}"
    for i, code in enumerate(parsed.codes, 1):
        problem = check_code(code, params.allowed_imports, allowed_names)
        if problem is not None:
            prefix = f"turn {i}: " if len(parsed.turns) > 1 else ""
            return f"{prefix}{problem}"
    return parsed


@register_verifier
class CodeFormat(Verifier[CodeFormatParams]):
    """Format, syntax, import allow-list and length of a code trajectory."""

    name = "code-format"
    tier = Tier.fast
    version = "2"
    suite = "code"
    Params = CodeFormatParams
    cost_model = CostModel(base=0.0005, per_unit=2e-7)

    def size(self, candidate: Candidate) -> float:
        return float(len(candidate.payload))

    def verify_batch(self, candidates: Sequence[Candidate]) -> list[Verdict]:
        return verify_each(self, candidates, self._verify_one)

    def _verify_one(self, cand: Candidate) -> Verdict:
        with self.timed() as t:
            result = check_trajectory(cand.payload, self.params, _task_allow(cand))
        if isinstance(result, str):
            return self.verdict(cand, Status.invalid, feedback=result, cost_s=t.cpu_s, wall_s=t.wall_s)
        return self.verdict(
            cand,
            Status.ok,
            value=1.0,
            score=1.0,
            values={"turns": len(result.turns), "code_chars": sum(len(c) for c in result.codes)},
            feedback="well-formed; syntax and policy ok",
            cost_s=t.cpu_s,
            wall_s=t.wall_s,
        )


def task_of(candidate: Candidate) -> Any:
    """The candidate's task: bundled or registered, else loaded from the source its candidate names.

    A run registers its source's tasks in its own process; a verifier in another process (a Dask worker)
    loads the source from ``candidate.meta["task_source"]`` (set by ``make_candidate``) on first use.
    Raises ``UnknownTask``.
    """
    from arl_flows.suites.code.tasks import UnknownTask, get_task

    task_id = candidate.task_id or ""
    try:
        return get_task(task_id)
    except UnknownTask:
        spec = candidate.meta.get("task_source")
        if not isinstance(spec, dict):
            raise
    from arl_flows.suites.code.sources import TaskSource, load_source

    try:
        load_source(TaskSource.model_validate(spec))
    except (OSError, ValueError, RuntimeError) as exc:
        raise UnknownTask(f"unknown code task {task_id!r}; its source {spec} could not be loaded: {exc}") from None
    return get_task(task_id)


def _task_allow(candidate: Candidate) -> list[str]:
    """The builtins the candidate's task declared its solutions need; none for an unknown task."""
    from arl_flows.suites.code.tasks import UnknownTask

    try:
        return list(task_of(candidate).allow)
    except UnknownTask:
        return []


def gate_for_execution(candidate: Candidate, enforce_policy: bool, policy: Any) -> tuple[Any, ParsedTrajectory] | str:
    """What every executing tier checks first: a known task, the strict format, and the static policy unless it is off.

    Returns (task, parsed trajectory), or the reason (feedback) the candidate must not run.
    """
    from arl_flows.suites.code.tasks import UnknownTask

    try:
        task = task_of(candidate)
    except UnknownTask as exc:
        return str(exc)
    if enforce_policy:
        parsed = check_trajectory(candidate.payload, policy, task.allow)
    else:
        parsed_or_error = parse_answer(candidate.payload)
        parsed = f"format: {parsed_or_error}" if isinstance(parsed_or_error, FormatError) else parsed_or_error
    return parsed if isinstance(parsed, str) else (task, parsed)


def verify_each(verifier: Verifier[Any], candidates: Sequence[Candidate], verify_one: Callable[[Candidate], Verdict]) -> list[Verdict]:
    """One verdict per candidate, in order; an unexpected error while judging one is that candidate's ``failed``.

    Every code tier judges its batch through this, so one candidate that trips the judge (whatever it returned)
    never costs the others their verdicts, and a resumed run records a verdict instead of failing the batch again.
    """
    out: list[Verdict] = []
    for cand in candidates:
        try:
            out.append(verify_one(cand))
        except Exception as exc:  # one candidate's problem must not cost the batch
            out.append(verifier.verdict(cand, Status.failed, feedback=f"verifier error: {type(exc).__name__}: {str(exc)[:200]}"))
    return out
