"""The bundled code tasks (``verifiers/code/tasks/tasks.json``).

Each task carries a prompt, the exact stdout its program must print (the
execution tier) and hidden tests (the high-fidelity tier): calls of the
task's function with arguments and the JSON value it must return. The
expected values were produced by running the reference solution stored with
each task, and ``tests/code_suite`` checks that every reference still passes
every tier. The file never enters a sandbox: the sandbox mounts an empty
directory over the checkout, and the hidden tests' expected values stay in
the verifier process (only their arguments are sent to the test runner).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["TASKS_FILE", "CodeTask", "HiddenTest", "UnknownTask", "get_task", "load_tasks"]

TASKS_FILE = Path(__file__).with_name("tasks") / "tasks.json"


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
    expected_stdout: str = Field(description="Exact stdout of a correct program (compared whitespace-normalised).")
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


def get_task(task_id: str) -> CodeTask:
    """The task with ``task_id``; :class:`UnknownTask` names a few valid ids otherwise."""
    try:
        return _tasks_by_id()[task_id]
    except KeyError:
        ids = sorted(_tasks_by_id())
        raise UnknownTask(
            f"unknown code task {task_id!r}; {len(ids)} tasks exist, e.g. {', '.join(ids[:5])} "
            "(run 'arl tasks list --suite code')"
        ) from None
