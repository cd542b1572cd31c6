"""The ``math`` suite: differentiate and integrate functions of x; answers checked by sympy and mpmath.

- Prompts: a fixed set of tasks drawn by :mod:`arl_math.tasks` (``[options]``
  ``tasks``, ``kinds``, ``task_seed``), cycled over steps.
- Policy: a character-level GPT-2 pretrained on sympy's (task, answer) pairs
  on first use and cached under ``$ARL_HOME/priors`` (``prior.py``), or
  ``policy_path``.
- Ladder: the answer parses (``fast.py``) -> sympy proves it
  (``symbolic.py``, worker process) -> it agrees with the reference at 20
  points spread over the tasks' domain, to the evaluation's own rounding
  error (``numeric.py``, worker process). The reward is the
  window [0.99, 1] on the numeric tier's share of agreeing points: 1 for a
  right answer, 0 otherwise.
- Disagreements: the default pass/fail rule on the symbolic and numeric
  verdicts flags what one tier passes and the other fails (identities simplify
  cannot prove, cancellation past the working precision).
- Hindsight: a wrong antiderivative ``A`` is a right antiderivative of
  ``d/dx A``, so it is relabelled as the answer to that task.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from arl_flows.suites import Failure, Suite
from arl_math.candidates import make_candidate, task_of
from arl_math.expressions import KINDS
from arl_math.options import MathOptions
from storage.records import Prompt, Status, Turn
from verifiers import Candidate

if TYPE_CHECKING:  # torch and transformers load when a run makes a policy, not when `arl suites list` lists the suite
    from policies import Policy, PolicyConfig, RelabeledExample

__all__ = ["MathSuite"]


class MathSuite(Suite):
    name = "math"
    description = "Differentiate or integrate functions of x; a closed grammar parses, simplify proves, mpmath checks at 20 points."
    Options = MathOptions
    defaults: ClassVar[dict[str, Any]] = {
        "name": "math-calculus",
        "tiers": [
            {"verifier": "math-format"},
            {"verifier": "sympy-simplify", "params": {"timeout_s": 10.0}},
            {"verifier": "mpmath-points"},
        ],
        "scheduler": {
            "policy": "voi", "voi_target": "advantage", "target_low": 0.99, "target_high": 1.0,
            "window_softness": 0.0, "budget_per_step": 10.0, "budget_per_run": 60.0,
        },
        "trainer": {"group_size": 8, "lr": 5e-5, "max_new_tokens": 48},
        "hindsight": {"relabel": True, "hint_teacher": False},
        "tier_concurrency": {},
    }

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self._tasks: list[Any] | None = None

    @classmethod
    def prompts_source(cls, options: BaseModel) -> str:
        return (f"{getattr(options, 'tasks', 64)} calculus tasks ({', '.join(getattr(options, 'kinds', KINDS))}) "
                f"drawn by sympy with seed {getattr(options, 'task_seed', 2024)}")

    # -- policy and prompts ------------------------------------------------------
    def load_policy(self, policy_config: PolicyConfig, on_pretrain: Callable[[str], None] | None = None) -> Policy:
        from arl_math.prior import load_or_pretrain, prior_dir
        from policies import Policy

        if self.config.policy_path:
            return Policy.load(self.config.policy_path, policy_config)
        directory = prior_dir(self.options.prior)
        if on_pretrain is not None and not (directory / "pretrain_report.json").is_file():
            on_pretrain(str(directory))
        return load_or_pretrain(self.options.prior, policy_config)[0]

    def prepare_policy(self) -> dict[str, Any]:
        from arl_math.prior import load_or_pretrain

        if self.config.policy_path:
            return super().prepare_policy()
        return load_or_pretrain(self.options.prior)[1].model_dump(mode="json")

    def tasks(self) -> list[Any]:
        from arl_math.tasks import task_set

        if self._tasks is None:
            self._tasks = task_set(self.options.tasks, self.options.task_seed, tuple(self.options.kinds))
        return self._tasks

    def prompts(self, step: int) -> list[Prompt]:
        tasks = self.tasks()
        n = self.config.rollout.prompts_per_step
        return [self._prompt(tasks[(step * n + i) % len(tasks)]) for i in range(n)]

    def _prompt(self, task: Any) -> Prompt:
        return Prompt(id=f"{self.name}:{task.id}", suite=self.name, text=task.text, goal={"kind": task.kind, "expr": task.expr})

    def prompt_ids(self, policy: Policy, prompt: Prompt) -> list[int]:
        from arl_math.prior import prompt_ids

        if self.config.policy_path:
            return policy.encode(prompt.text)
        return prompt_ids(policy.tokenizer, prompt.goal["kind"], prompt.goal["expr"])

    def completion(self, prompt: Prompt, text: str) -> tuple[Candidate, str, list[Turn]]:
        answer = "".join(text.split())
        return make_candidate(answer, prompt.goal), answer, [Turn(role="user", content=prompt.text), Turn(role="assistant", content=answer)]

    def candidate(self, text: str, goal: dict[str, Any] | None = None) -> Candidate:
        return make_candidate(text, goal)

    def external_prompt(self, text: str, goal: dict[str, Any]) -> Prompt:
        kind, expr = task_of(goal)
        return Prompt(id=f"{self.name}:{kind}:{expr}", suite=self.name, text=text, goal={"kind": kind, "expr": expr})

    @classmethod
    def goal(cls, given: Any) -> dict[str, Any]:
        """``{"kind": "derivative" | "antiderivative", "expr": "x**2*sin(x)"}``."""
        unknown = sorted(set(given) - {"kind", "expr"})
        if unknown:
            raise ValueError(f"{unknown[0][:40]}: not a math goal; give kind and expr")
        kind, expr = task_of(dict(given))
        return {"kind": kind, "expr": expr}

    @classmethod
    def goal_from_ground_truth(cls, ground_truth: Any) -> dict[str, Any]:
        """verl's ground truth: ``{"kind": .., "expr": ..}`` or ``"kind:expr"``."""
        if isinstance(ground_truth, str):
            kind, _, expr = ground_truth.partition(":")
            return cls.goal({"kind": kind, "expr": expr})
        return cls.goal(ground_truth)

    def sampler(self, policy_path: str | None = None):  # noqa: ANN201 - see capabilities.Rerank
        """The suite's prior (or a local model) prompted with the goal's task."""
        from arl_math.prior import load_or_pretrain, prompt_ids
        from policies import Policy

        policy = Policy.load(policy_path) if policy_path else load_or_pretrain(self.options.prior)[0]

        def sample(goal: dict[str, Any], n: int, seed: int) -> list[str]:
            kind, expr = task_of(goal)
            ids = prompt_ids(policy.tokenizer, kind, expr) if not policy_path else policy.encode(f"{kind} of {expr}")
            rollout = policy.sample([ids], group_size=n, max_new_tokens=48, seed=seed)
            return ["".join(t.split()) for t in rollout.texts]

        return sample

    def calibration_candidates(self) -> list[Candidate]:
        """Each task's reference answer and a wrong one (the reference plus x): both outcomes, on every tier."""
        out = []
        for task in self.tasks():
            goal = {"kind": task.kind, "expr": task.expr}
            out += [make_candidate(task.reference, goal), make_candidate(f"{task.reference}+x", goal)]
        return out

    # -- hindsight -----------------------------------------------------------------
    def hindsight(self, policy: Policy, failures: list[Failure]) -> tuple[list[RelabeledExample], list[Any]]:
        """A wrong antiderivative ``A`` that parses is the right answer to "find an antiderivative of d/dx A"."""
        import sympy as sp

        from arl_math.expressions import X, InvalidAnswer, normalize, parse_answer
        from arl_math.prior import prompt_ids
        from policies import RelabeledExample

        if not self.config.hindsight.relabel or self.config.policy_path:
            return [], []
        out = []
        context = int(getattr(policy.model.config, "n_positions", None) or policy.model.config.max_position_embeddings)
        for failure in failures:
            completion_ids = failure.completion_ids
            if failure.prompt.goal.get("kind") != "antiderivative" or any(v.status == Status.invalid for v in failure.verdicts):
                continue
            try:
                answer = parse_answer(policy.tokenizer.decode(completion_ids, skip_special_tokens=True), evaluate=True)
            except InvalidAnswer:
                continue
            integrand = normalize(str(sp.diff(answer, X)))
            relabeled = prompt_ids(policy.tokenizer, "antiderivative", integrand)
            # The new task must fit the model's context with the answer (the integrand can be longer than the answer).
            if not answer.has(X) or len(relabeled) + len(completion_ids) > context:
                continue
            out.append(RelabeledExample(relabeled, list(completion_ids)))
        return out, []
