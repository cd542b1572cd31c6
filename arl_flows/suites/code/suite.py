"""The ``code`` suite: Python tasks, verified in a sandbox by a ladder that resists reward hacking.

- Prompts: the bundled tasks (``tasks/tasks.json``), HumanEval or a JSONL file
  of HumanEval/MBPP records (``sources.py``); the policy is a local model
  (``policy_path``): no code policy ships.
- Ladder: format and static policy (``fast.py``) -> run against visible
  examples (``execution.py``) -> hidden tests in a fresh sandbox, judged
  outside it (``tests_tier.py``); all on ``verifiers.sandbox``.
- Reward: the composed code reward (``reward.py``: format, execution, hidden
  tests, length, repeats, process rewards) replaces the scheduler's estimate.
- Hindsight: the same policy, given the verifier's feedback as a hint, is the
  teacher (on-policy distillation).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from arl_flows.suites import Failure, Suite
from arl_flows.suites.code.reward import RewardWeights
from arl_flows.suites.code.sources import CodeTaskChoice
from storage.records import Prompt, Status, Turn
from verifiers import Candidate

if TYPE_CHECKING:
    import typer

    from policies import Policy

# The suite class is loaded to list suites and to build `arl --help`; its methods import the
# sandbox tiers, the task sources and the hint helpers when they are first called.
__all__ = ["CodeOptions", "CodeSuite"]


class CodeOptions(BaseModel):
    """``[options]`` of a code run."""

    model_config = ConfigDict(extra="forbid")

    tasks: CodeTaskChoice = Field(
        default_factory=list,
        description="Tasks to prompt with: bundled task ids (empty: all bundled), or a source, "
        "{source = 'humaneval'} or {source = 'jsonl', path = 'FILE'} (HumanEval or MBPP records).",
    )
    reward: RewardWeights = Field(default_factory=RewardWeights, description="Weights of the code reward.")


class CodeSuite(Suite):
    name = "code"
    description = "Write Python programs for tasks; sandboxed format, execution and hidden-test tiers."
    Options = CodeOptions
    defaults: ClassVar[dict[str, Any]] = {
        "name": "code",
        "tiers": [{"verifier": "code-format"}, {"verifier": "code-exec"}, {"verifier": "code-tests"}],
        "scheduler": {"policy": "all", "target_low": 0.5, "target_high": 1.0, "budget_per_step": 600.0},
        "hindsight": {"relabel": False, "hint_teacher": True},
        "tier_concurrency": {},
    }
    legacy_fields: ClassVar[dict[str, str]] = {"code_tasks": "tasks", "code_reward": "reward"}
    needs_policy_path = True
    INSTRUCTION = (
        "Solve the task in Python. Answer as <think>your reasoning</think> followed by "
        "<code>a complete program</code>.\n\nTask: "
    )

    @classmethod
    def prompts_source(cls, options: BaseModel) -> str:
        from arl_flows.suites.code.sources import TaskSource

        chosen = getattr(options, "tasks", [])
        if isinstance(chosen, TaskSource):
            return f"code tasks from {chosen.source}" + (f" ({chosen.path})" if chosen.path else "")
        return f"bundled code tasks: {', '.join(chosen)}" if chosen else "all bundled code tasks (`arl tasks list`)"

    @classmethod
    def commands(cls) -> list[tuple[str, typer.Typer]]:
        # Imported when called: the command modules load typer and rich, which a worker importing the suite never needs.
        from arl_flows.suites.code.cli import tasks_app

        return [("tasks", tasks_app)]

    def prompts(self, step: int) -> list[Prompt]:
        ids = self.task_ids()
        n = self.config.rollout.prompts_per_step
        return [self.task_prompt(ids[(step * n + i) % len(ids)]) for i in range(n)]

    def task_prompt(self, task_id: str, text: str | None = None) -> Prompt:
        """The prompt of one task (``text``: a trainer's own wording of it); an unknown id raises UnknownTask."""
        from arl_flows.suites.code import get_task

        task = get_task(task_id)
        return Prompt(id=f"code:{task_id}", suite=self.name, text=text if text is not None else self.INSTRUCTION + task.prompt + "\n", goal={"task_id": task_id})

    goal_columns: ClassVar[tuple[str, ...]] = ("task_id",)

    @classmethod
    def goal(cls, given: Mapping[str, Any]) -> dict[str, Any]:
        """``{"task_id": ID}``: the task the answer solves (``arl tasks list --suite code``); an unknown id is an error."""
        from arl_flows.suites.code import get_task

        unknown = sorted(set(given) - {"task_id"})
        if unknown:
            raise ValueError(f"{unknown[0][:40]}: not a code goal; give task_id")
        if not given.get("task_id"):
            raise ValueError("the code suite needs a task_id: the task the answer solves (`arl tasks list --suite code`)")
        task_id = str(given["task_id"])
        try:
            get_task(task_id)
        except LookupError as exc:
            raise ValueError(str(exc.args[0] if exc.args else exc)) from None
        return {"task_id": task_id}

    @classmethod
    def goal_from_ground_truth(cls, ground_truth: Any) -> dict[str, Any]:
        """verl's ground truth: the task id."""
        return cls.goal(ground_truth if isinstance(ground_truth, Mapping) else {"task_id": str(ground_truth)})

    def external_prompt(self, text: str, goal: dict[str, Any]) -> Prompt:
        if "task_id" not in goal:
            raise ValueError("the code suite needs task_id: one task id per completion (a dataset column in TRL)")
        return self.task_prompt(str(goal["task_id"]), text)

    def task_ids(self) -> list[str]:
        """The run's task ids: the ids listed, all bundled tasks, or a source's tasks (converted and registered)."""
        from arl_flows.suites.code import TaskSource, load_source, load_tasks

        chosen = self.options.tasks
        if isinstance(chosen, TaskSource):
            tasks = load_source(chosen).tasks
            if not tasks:
                raise ValueError(f"options.tasks: the source {chosen.source!r} has no usable task")
            return [t.id for t in tasks]
        return list(chosen) or [t.id for t in load_tasks()]

    def check(self) -> str | None:
        """Load the run's tasks (a task file is converted and registered; listed ids must exist): their count."""
        from arl_flows.suites.code import TaskSource, get_task, load_source

        chosen = self.options.tasks
        if isinstance(chosen, TaskSource):
            try:
                loaded = load_source(chosen)
            except (OSError, RuntimeError, ValueError) as exc:
                raise ValueError(f"options.tasks: {' '.join(str(exc).split())[:300]}") from None
            skipped = "; ".join(f"{k}: {v[:80]}" for k, v in list(loaded.skipped.items())[:3])
            if not loaded.tasks:
                raise ValueError(f"options.tasks: the {chosen.source} source has no usable task"
                                 + (f" ({len(loaded.skipped)} records skipped: {skipped})" if skipped else ""))
            return (f"{len(loaded.tasks)} task{'s' if len(loaded.tasks) != 1 else ''}"
                    + (f"; {len(loaded.skipped)} records skipped ({skipped})" if loaded.skipped else ""))
        for task_id in chosen:
            try:
                get_task(task_id)
            except LookupError as exc:
                raise ValueError(f"options.tasks: {exc.args[0] if exc.args else exc}") from None
            except (OSError, RuntimeError, ValueError) as exc:  # a source loaded on demand (HumanEval) that fails
                raise ValueError(f"options.tasks: {task_id!r}: {' '.join(str(exc).split())[:300]}") from None
        return None

    def completion(self, prompt: Prompt, text: str) -> tuple[Candidate, str, list[Turn]]:
        from arl_flows.suites.code import make_candidate

        return make_candidate(prompt.goal["task_id"], text), text, [Turn(role="user", content=prompt.text), Turn(role="assistant", content=text)]

    def candidate(self, text: str, goal: dict[str, Any] | None = None) -> Candidate:
        from arl_flows.suites.code import get_task, make_candidate

        task_id = (goal or {}).get("task_id")
        if not task_id:
            raise ValueError("a code candidate needs its task: give the task id")
        get_task(task_id)  # an unknown task id is the caller's mistake: say so before verifying
        return make_candidate(task_id, text)

    def featurize(self, candidate: Candidate) -> np.ndarray:
        """No features: a program's length (its ``size``, what the cost models scale with) says nothing of its tests."""
        return np.zeros(0)

    def rewards(self, trajectories, candidates, verdicts, estimates):  # noqa: ANN001, ANN201 - see Suite.rewards
        """The composed code reward replaces the window estimate; its std is that of the hidden tests not yet run."""
        from arl_flows.suites.code import code_reward

        out = []
        for traj, cand, est in zip(trajectories, candidates, estimates, strict=True):
            got = verdicts.get(cand.key, [])
            reward = code_reward(traj.final_answer, got, completion_tokens=traj.completion_tokens, weights=self.options.reward)
            out.append(
                est.model_copy(
                    update={
                        "mean": reward.total,
                        "std": reward.std if reward.complete else max(est.std, reward.std),
                        "fidelity": reward.fidelity or est.fidelity,
                        "components": reward.components | {f"turn_{i}": r for i, r in enumerate(reward.per_turn)},
                    }
                )
            )
        return out

    def hindsight(self, policy: Policy, failures: list[Failure]):  # noqa: ANN201 - see capabilities.Hindsight
        """On-policy distillation: the teacher is the policy that also reads the verifier's feedback."""
        from policies import HintedExample, feedback_hint, hint_prompt

        if not self.config.hindsight.hint_teacher:
            return [], []
        hinted = []
        for failure in failures:
            problems = [v.feedback for v in failure.verdicts if v.status != Status.ok or (v.value is not None and v.value < 1.0)]
            if not problems:
                continue
            hint = feedback_hint(error=problems[0][:300])
            teacher_text = hint_prompt(failure.prompt.text, hint)
            hinted.append(HintedExample(policy.encode(failure.prompt.text), policy.encode(teacher_text), failure.completion_ids))
        return [], hinted
