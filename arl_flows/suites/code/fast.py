"""Fast tier of the code suite: format, syntax, static policy, length.

Cheap enough to run on every trajectory. The static policy is *not* the
security boundary (the sandbox is; ``tests/arl_flows/suites/code`` runs the attacks
with this policy switched off too), and its ``ok`` says so. It exists because
a candidate that reaches for ``os``, ``eval`` or ``__subclasses__`` is trying
something the tasks never need, and saying so early is cheaper and clearer
feedback than letting the sandbox refuse it.

It is an allow-list, so what it does not know fails closed:

* imports: the modules of ``allowed_imports``; ``from m import n`` only for the
  public names of ``m`` (its ``__all__``) that are not modules;
* names: the computing builtins (``_SAFE_BUILTINS``), exception classes, and
  what the program binds itself;
* attributes: on a name bound to an allowed module, that module's public names;
  on anything else, the public attributes of the builtin value types and of the
  allowed modules' classes, or a name the program defines (its own classes'
  fields), never one the interpreter's own objects carry (``gi_frame``,
  ``f_globals``, ``tb_frame``), a module an allowed module re-exports
  (``typing.sys``) or a refused builtin. Class patterns (``case C(a=...)``)
  read attributes too and follow the same rule;
* ``.format`` only called at once on a string literal whose fields read no attribute (never read as a value);
  no metaclasses, no dunder definitions beyond a few data-model methods.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import re
import string
import types
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from storage.records import Status, Tier, Verdict
from verifiers.base import Candidate, CostModel, Verifier
from arl_flows.suites.code.format import FormatError, ParsedTrajectory, parse_answer
from arl_flows.suites.code.sources import TaskSource, load_source
from arl_flows.suites.code.tasks import GRANTABLE_NAMES, UnknownTask, get_task
from verifiers.registry import register_verifier

__all__ = [
    "DEFAULT_ALLOWED_IMPORTS",
    "CodeFormat",
    "CodeTier",
    "CodeFormatParams",
    "check_code",
    "check_trajectory",
    "gate_for_execution",
    "task_of",
    "verify_each",
]

P = TypeVar("P", bound=BaseModel)  # a code tier's params model

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
    "get_field", "get_value", "vformat",  # string.Formatter().get_field("0._os", (random,), {})
})  # fmt: skip
# Builtins a program may use by name (besides the exception classes): computation only.
_SAFE_BUILTINS = frozenset({
    "abs", "aiter", "all", "anext", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr",
    "classmethod", "complex", "dict", "divmod", "enumerate", "filter", "float", "format", "frozenset", "hash",
    "hex", "id", "int", "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next", "object",
    "oct", "ord", "pow", "print", "property", "range", "repr", "reversed", "round", "set", "slice", "sorted",
    "staticmethod", "str", "sum", "super", "tuple", "type", "zip", "NotImplemented", "Ellipsis",
})  # fmt: skip
_ALLOWED_DUNDER_NAMES = frozenset({"__name__", "__init__", "__repr__", "__str__", "__eq__", "__lt__", "__hash__", "__len__", "__iter__", "__next__"})
_DUNDER_IN_STRING = re.compile(r"__\w+__")
# A format-string field that reaches a private attribute or index: "{0._os}".format(random).
_PRIVATE_IN_FORMAT_FIELD = re.compile(r"\{[^{}]*[.\[]\s*_")
_VALUE_TYPES = (
    int, float, complex, bool, str, bytes, bytearray, list, tuple, dict, set, frozenset, range, slice,
    type({}.keys()), type({}.values()), type({}.items()), BaseException,
)  # fmt: skip
# The interpreter's own objects: a program may not reach these attributes even by defining them itself.
_MACHINERY_TYPES = (
    types.FrameType, types.CodeType, types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType,
    types.TracebackType, types.FunctionType, types.ModuleType, types.MethodType, types.BuiltinFunctionType,
    types.CellType, types.MappingProxyType, type,
)  # fmt: skip


def _public(obj: object) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_")}


@functools.cache
def _module_api(name: str) -> frozenset[str]:
    """What a program may reach on an allowed module: its public names (``__all__`` where it has one), no modules."""
    try:
        module = importlib.import_module(name)
    except ImportError:
        return frozenset()
    names = getattr(module, "__all__", None) or _public(module)
    api = {n for n in names if not n.startswith("_") and not isinstance(getattr(module, n, None), types.ModuleType)}
    refused = _GETATTR_EQUIVALENTS | (_FORBIDDEN_NAMES - {"compile"} if name == "re" else _FORBIDDEN_NAMES)
    return frozenset(api - refused)


@functools.cache
def _policy_tables(allowed_imports: tuple[str, ...]) -> tuple[frozenset[str], frozenset[str]]:
    """(attributes a program may reach on any value, attribute names it may not give its own objects).

    The first: the public attributes of the builtin value types and of the classes the allowed modules
    export. The second: the data attributes of the interpreter's own objects (``gi_frame``, ``f_globals``,
    ``tb_frame``, ``co_code``...) and every name under which an allowed module re-exports a module
    (``typing.sys``, ``random._os``), with the refused builtins.
    """
    values: set[str] = set()
    for kind in _VALUE_TYPES:
        values |= _public(kind)
    reserved: set[str] = set(_FORBIDDEN_NAMES) | set(_GETATTR_EQUIVALENTS) | {"builtins", "os", "sys", "modules", "subprocess"}
    for kind in _MACHINERY_TYPES:
        reserved |= {n for n in _public(kind) if not callable(getattr(kind, n, None))}
    for top in allowed_imports:
        try:
            module = importlib.import_module(top)
        except ImportError:
            continue
        reserved |= {n for n in dir(module) if isinstance(getattr(module, n, None), types.ModuleType)}
        for n in _module_api(top):
            obj = getattr(module, n, None)
            if isinstance(obj, type):
                values |= _public(obj)
    return frozenset(values - reserved), frozenset(reserved)


def _defined_names(tree: ast.AST) -> set[str]:
    """Names a program binds or gives its own objects: variables, defs, arguments, attributes it assigns, keyword
    arguments and identifiers in its strings (``namedtuple("P", "x y")`` fields)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            out.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            out.add(node.arg)
        elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
            out.add(node.attr)
        elif isinstance(node, ast.alias):
            out.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            out.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.update(re.findall(r"[A-Za-z_]\w*", node.value))
    return out


def _module_aliases(tree: ast.AST, allowed: set[str]) -> tuple[dict[str, str], set[str]]:
    """(program names bound to an imported module -> the module, every module the program imports)."""
    aliases: dict[str, str] = {}
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] not in allowed:
                    continue  # refused where the import itself is checked
                imported.update(".".join(parts[: i + 1]) for i in range(len(parts)))
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    aliases[parts[0]] = parts[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if _is_module(full, allowed):
                    aliases[alias.asname or alias.name] = full
                    imported.add(full)
    return aliases, imported


def _is_module(name: str, allowed: set[str]) -> bool:
    """Whether ``name`` is a public module under an allowed top-level module.

    Only names under ``allowed`` are ever imported here (in the verifier's process): importing a module a
    candidate names runs that module's code (``antigravity`` opens a browser).
    """
    if name.split(".")[0] not in allowed or any(part.startswith("_") for part in name.split(".")):
        return False
    try:
        return isinstance(importlib.import_module(name), types.ModuleType)
    except ImportError:
        return False


def _module_of(node: ast.expr, aliases: dict[str, str], imported: set[str]) -> str | None:
    """The module ``node`` names (``collections.abc`` for ``collections.abc`` once imported), else None."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _module_of(node.value, aliases, imported)
        if base is not None and f"{base}.{node.attr}" in imported:
            return f"{base}.{node.attr}"
    return None


def _format_problem(node: ast.Call, line: object) -> str | None:
    """A ``.format``/``.format_map`` call must be on a string literal whose fields read no attribute."""
    func = node.func
    assert isinstance(func, ast.Attribute)
    if not (isinstance(func.value, ast.Constant) and isinstance(func.value.value, str)):
        return f"line {line}: '.{func.attr}' is allowed only on a string literal (use an f-string)"
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(func.value.value) if f]
    except ValueError:
        return f"line {line}: the format string does not parse"
    for field in fields:
        if _PRIVATE_IN_FORMAT_FIELD.search("{" + field + "}"):
            return f"line {line}: a format field reaching a private attribute is not allowed"
        if "." in field:
            return f"line {line}: a format field reaching an attribute is not allowed (use an f-string)"
    return None


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
    value_attrs, reserved = _policy_tables(tuple(sorted(allowed)))
    defined = _defined_names(tree)
    own_attrs = defined - reserved
    aliases, imported = _module_aliases(tree, allowed)

    def attribute_problem(attr: str, line: object, owner: ast.expr | None) -> str | None:
        """Whether ``owner.attr`` (or a class pattern's ``attr=``) is on the allow-list."""
        module = _module_of(owner, aliases, imported) if owner is not None else None
        if module is not None and module.split(".")[0] in allowed:
            if attr in _module_api(module) or f"{module}.{attr}" in imported:
                return None
            return f"line {line}: '{module}.{attr}' is not part of what the policy allows on {module!r}"
        if attr in value_attrs or attr in own_attrs:
            return None
        return (
            f"line {line}: attribute '.{attr}' is not on the allow-list (attributes of builtin values and of the "
            "allowed modules' classes, and names the program defines)"
        )

    # `.format` is checked where it is called (on a string literal, no attribute fields); read without a call it is
    # a bound method the program can call later on any string (`fmt = formatter.format`), past that check.
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        line = getattr(node, "lineno", "?")
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top not in allowed:
                    return f"line {line}: import of {alias.name!r} is not allowed (allowed: {', '.join(sorted(allowed))})"
                if alias.name != top and not _is_module(alias.name, allowed):
                    return f"line {line}: import of {alias.name!r} is not allowed (not a public module)"
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                return f"line {line}: relative imports are not allowed"
            top = (node.module or "").split(".")[0]
            if top not in allowed:
                return f"line {line}: import from {node.module!r} is not allowed (allowed: {', '.join(sorted(allowed))})"
            if node.module != top and not _is_module(node.module or "", allowed):
                return f"line {line}: import from {node.module!r} is not allowed (not a public module)"
            for alias in node.names:
                # `from random import _os` is `random._os` by another spelling.
                if alias.name.startswith("_"):
                    return f"line {line}: import of the private name {alias.name!r} is not allowed"
                if alias.name in _FORBIDDEN_NAMES or alias.name in _GETATTR_EQUIVALENTS:
                    return f"line {line}: import of {alias.name!r} is not allowed"
                if alias.name == "*":
                    return f"line {line}: 'from {node.module} import *' is not allowed; import the names you use"
                if alias.name not in _module_api(node.module or "") and not _is_module(f"{node.module}.{alias.name}", allowed):
                    return f"line {line}: {node.module}.{alias.name} is not part of what the policy allows on {node.module!r}"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if isinstance(node, ast.ClassDef) and any(k.arg == "metaclass" for k in node.keywords):
                return f"line {line}: a metaclass is not allowed"
            if node.name.startswith("__") and node.name not in _ALLOWED_DUNDER_NAMES:
                # `def __instancecheck__`, `__getattr__`, `__init_subclass__`: hooks into the interpreter's machinery.
                return f"line {line}: defining {node.name!r} is not allowed"
        elif isinstance(node, ast.MatchClass):
            # `case object(__class__=c)` reads an attribute by name, as `.__class__` would.
            for attr in node.kwd_attrs:
                if attr.startswith("_"):
                    return f"line {line}: class pattern reaching the attribute {attr!r} is not allowed"
                problem = attribute_problem(attr, line, None)
                if problem:
                    return problem.replace("attribute '.", "class pattern attribute '", 1)  # same rule, named for the pattern
        elif isinstance(node, ast.Name):
            if node.id in granted:
                continue
            if node.id in _FORBIDDEN_NAMES or node.id in _GETATTR_EQUIVALENTS:
                return f"line {line}: use of {node.id!r} is not allowed"
            if node.id.startswith("__") and node.id not in _ALLOWED_DUNDER_NAMES:
                return f"line {line}: name {node.id!r} is not allowed"
            if (
                isinstance(node.ctx, ast.Load)
                and hasattr(builtins, node.id)
                and node.id not in _SAFE_BUILTINS
                and node.id not in _ALLOWED_DUNDER_NAMES
                and node.id not in defined
                and not (isinstance(getattr(builtins, node.id), type) and issubclass(getattr(builtins, node.id), BaseException))
            ):
                return f"line {line}: use of the builtin {node.id!r} is not allowed"
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("__") and node.attr.endswith("__"):
                return f"line {line}: dunder attribute access '.{node.attr}' is not allowed"
            if node.attr.startswith("_"):
                # Modules keep their own imports as private names (random._os), a
                # way around the import allow-list.
                return f"line {line}: private attribute access '.{node.attr}' is not allowed"
            if node.attr in _GETATTR_EQUIVALENTS or node.attr in ("getattr", "vars"):
                return f"line {line}: use of '.{node.attr}' is not allowed"
            if node.attr in ("format", "format_map") and id(node) not in called:
                return f"line {line}: '.{node.attr}' is allowed only called at once on a string literal (use an f-string)"
            problem = attribute_problem(node.attr, line, node.value)
            if problem:
                return problem
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("format", "format_map"):
            if _module_of(node.func.value, aliases, imported) is None:
                problem = _format_problem(node, line)
                if problem:
                    return problem
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            for m in _DUNDER_IN_STRING.finditer(node.value):
                if m.group(0) != "__main__":
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


class CodeTier(Verifier[P]):
    """A code-suite tier: sized by the answer's length, judging each candidate alone (``verify_each``).

    A subclass declares its metadata and ``_verify_one``; the batch, the size and the suite are the same for all.
    """

    suite = "code"

    def verify_batch(self, candidates: Sequence[Candidate]) -> list[Verdict]:
        return verify_each(self, candidates, self._verify_one)

    @abstractmethod
    def _verify_one(self, cand: Candidate) -> Verdict:
        """The verdict on one candidate; an exception becomes its ``failed`` verdict."""


@register_verifier
class CodeFormat(CodeTier[CodeFormatParams]):
    """Format, syntax, import allow-list and length of a code trajectory."""

    name = "code-format"
    tier = Tier.fast
    version = "2"
    Params = CodeFormatParams
    cost_model = CostModel(base=0.0005, per_unit=2e-7)

    def _verify_one(self, cand: Candidate) -> Verdict:
        with self.timed() as t:
            result = check_trajectory(cand.payload, self.params, _task_allow(cand))
        if isinstance(result, str):
            return self.verdict(cand, Status.invalid, feedback=result, cost_s=t.cpu_s, wall_s=t.wall_s)
        return self.verdict(
            cand,
            Status.ok,
            value=1.0,
            values={"turns": len(result.turns), "code_chars": sum(len(c) for c in result.codes)},
            feedback="well-formed; syntax and static policy ok (not a security verdict: the sandbox is the boundary)",
            cost_s=t.cpu_s,
            wall_s=t.wall_s,
        )


def task_of(candidate: Candidate) -> Any:
    """The candidate's task: bundled or registered, else loaded from the source its candidate names.

    A run registers its source's tasks in its own process; a verifier in another process (a Dask worker)
    loads the source from ``candidate.meta["task_source"]`` (set by ``make_candidate``) on first use.
    Raises ``UnknownTask``.
    """
    task_id = candidate.task_id or ""
    try:
        return get_task(task_id)
    except UnknownTask:
        spec = candidate.meta.get("task_source")
        if not isinstance(spec, dict):
            raise
    try:
        load_source(TaskSource.model_validate(spec))
    except (OSError, ValueError, RuntimeError) as exc:
        raise UnknownTask(f"unknown code task {task_id!r}; its source {spec} could not be loaded: {exc}") from None
    return get_task(task_id)


def _task_allow(candidate: Candidate) -> list[str]:
    """The builtins the candidate's task declared its solutions need; none for an unknown task."""
    try:
        return list(task_of(candidate).allow)
    except UnknownTask:
        return []


def gate_for_execution(candidate: Candidate, enforce_policy: bool, policy: Any) -> tuple[Any, ParsedTrajectory] | str:
    """What every executing tier checks first: a known task, the strict format, and the static policy unless it is off.

    Returns (task, parsed trajectory), or the reason (feedback) the candidate must not run.
    """
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
