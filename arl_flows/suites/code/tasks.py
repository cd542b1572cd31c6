"""Code tasks: the bundled set (``arl_flows/suites/code/tasks/tasks.json``) and the tasks other sources registered.

Each task carries a prompt, a visible check for the execution tier (the
exact stdout its program must print, or visible calls of its function) and
hidden tests (the high-fidelity tier): calls of the task's function with
arguments and the JSON value it must return. The
expected values were produced by running the reference solution stored with
each task (hand-written arguments, plus arguments generated over the domain
each number task's prompt states: ``benchmarks/generate_code_tests.py``), and
``tests/arl_flows/suites/code`` checks that every reference still passes every tier. The file never enters a sandbox: the sandbox mounts an empty
directory over the checkout, and the hidden tests' expected values stay in
the verifier process (only their arguments are sent to the test runner).
Tasks converted from other formats (HumanEval, MBPP: ``arl_flows.suites.code.sources``)
are registered here with :func:`register_tasks`, so every tier finds them by id.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["GRANTABLE_NAMES", "TASKS_FILE", "CodeTask", "HiddenTest", "UnknownTask", "get_task", "load_tasks", "register_task_loader", "register_tasks"]

TASKS_FILE = Path(__file__).with_name("tasks") / "tasks.json"

# Builtins the static policy refuses that a task may declare its solutions need. Only names whose
# effect the sandbox contains: eval of an expression runs as the program would, inside the sandbox.
GRANTABLE_NAMES = ("eval",)

_registered: dict[str, CodeTask] = {}
_loaders: dict[str, Callable[[], object]] = {}


class UnknownTask(KeyError):
    """No task with that id."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


class HiddenTest(BaseModel):
    """One hidden call: ``function(*args)`` must return ``expected`` (compared exactly, see ``CodeTask``)."""

    model_config = ConfigDict(extra="forbid")

    args: list[Any]
    expected: Any


class CodeTask(BaseModel):
    """One code task."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="Stable id, e.g. 'first-primes'.")
    prompt: str = Field(description="What the policy sees.")
    function: str = Field(default="solve", description="Name of the function the hidden tests call.")
    expected_stdout: str | None = Field(
        default=None,
        description="Exact stdout of a correct program (compared whitespace-normalised); None: the execution tier "
        "runs visible_tests instead.",
    )
    visible_tests: list[HiddenTest] = Field(
        default_factory=list,
        description="Calls the execution tier checks, judged like the hidden tests: examples the prompt shows "
        "(HumanEval's docstring examples, MBPP's first test) when there is no expected_stdout; with one, the call of "
        "the print statement the prompt asks for, so that the program's function must return what it prints.",
    )
    tests: list[HiddenTest] = Field(min_length=1, description="Hidden tests; never shown to the policy.")
    reference: str = Field(description="A reference solution (program text).")
    float_tolerance: float | None = Field(
        default=None,
        ge=0.0,
        le=0.1,
        description="Relative and absolute tolerance for expected floats (math.isclose); None compares floats "
        "exactly. Integers, strings, booleans and containers are always compared exactly.",
    )
    int_for_float: bool = Field(
        default=False,
        description="Accept an int where a float is expected (2 for 2.0). A float where an int is expected is "
        "never a pass.",
    )
    allow: list[Literal["eval"]] = Field(
        default_factory=list,
        description="Builtins the static policy refuses that this task's solutions need (one of GRANTABLE_NAMES); "
        "granted for this task only.",
    )
    source: str = Field(default="bundled", description="Where the task came from: 'bundled', 'humaneval', a JSONL path.")
    source_spec: dict[str, str] = Field(
        default_factory=dict,
        description="The TaskSource fields that load this task again (empty for bundled tasks): a candidate carries "
        "them, so a verifier in another process can load the source it has not seen.",
    )

    def judged_digest(self) -> str:
        """A hash of everything a verdict on this task depends on: function, checks, tests and how they compare.

        Part of every candidate key, so a task changed under the same id (or a stricter file reusing another
        source's ids) never reuses a verdict given against the old content. The prompt and reference are left
        out: no tier reads them.
        """
        judged = self.model_dump(
            mode="json",
            include={"function", "expected_stdout", "visible_tests", "tests", "float_tolerance", "int_for_float", "allow"},
        )
        text = json.dumps(judged, ensure_ascii=True, separators=(",", ":"), sort_keys=True, allow_nan=False)
        return hashlib.sha256(text.encode("ascii")).hexdigest()[:16]

    @model_validator(mode="after")
    def _has_visible_check(self) -> CodeTask:
        if self.expected_stdout is None and not self.visible_tests:
            raise ValueError(f"task {self.id!r} needs expected_stdout or visible_tests for the execution tier")
        return self


@functools.cache
def _tasks_by_id() -> dict[str, CodeTask]:
    raw = json.loads(TASKS_FILE.read_text(encoding="utf-8"))
    tasks = [CodeTask.model_validate(t) for t in raw["tasks"]]
    by_id = {t.id: t for t in tasks}
    if len(by_id) != len(tasks):
        raise ValueError(f"{TASKS_FILE} has duplicate task ids")
    return by_id


def load_tasks() -> list[CodeTask]:
    """All bundled tasks, in file order."""
    return list(_tasks_by_id().values())


def register_tasks(tasks: list[CodeTask]) -> None:
    """Make tasks of another source findable by :func:`get_task`; an id may not name two different tasks."""
    for t in tasks:
        known = _tasks_by_id().get(t.id) or _registered.get(t.id)
        if known is not None and known != t:
            raise ValueError(f"code task id {t.id!r} already names a different task (from {known.source})")
    for t in tasks:
        _registered[t.id] = t


def register_task_loader(prefix: str, load: Callable[[], object]) -> None:
    """``load()`` registers the tasks whose ids start with ``prefix``; :func:`get_task` calls it on first use.

    For a source that ships with a dependency (HumanEval), so that any process converts it when it meets one of
    its ids (a verifier in a worker process included); other sources register their tasks where they are loaded.
    """
    _loaders[prefix] = load


def get_task(task_id: str) -> CodeTask:
    """The task with ``task_id`` (bundled or registered); :class:`UnknownTask` names a few valid ids otherwise."""
    if task_id not in _registered:
        for prefix, load in _loaders.items():
            if task_id.startswith(prefix):
                load()
                break
    try:
        return _tasks_by_id().get(task_id) or _registered[task_id]
    except KeyError:
        ids = sorted(_tasks_by_id())
        raise UnknownTask(
            f"unknown code task {task_id!r}; {len(ids)} tasks exist, e.g. {', '.join(ids[:5])} "
            "(run 'arl tasks list --suite code')"
        ) from None
