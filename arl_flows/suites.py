"""What differs between task suites, as seen by a training run.

A suite says which prompts to ask, how a completion becomes a verifiable
candidate, where the policy comes from, how verdicts become rewards when the
scheduler's window estimate is not the reward (code), and what hindsight
distillation learns from a failure:

- ``molecules``: goal-conditioned SMILES; the reward is the scheduler's
  estimate of the window score of the top-tier gap; hindsight relabels a
  failed molecule with the gap it achieved.
- ``code``: Python tasks; the reward is the composed code reward (format,
  execution, hidden tests, length, repeats, process rewards); hindsight
  distils from the same policy given the verifier's feedback as a hint.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from policies import HintedExample, Policy, PolicyConfig, feedback_hint, goal_prompt_ids, hint_prompt, load_or_pretrain, relabel
from policies.hindsight import RelabeledExample, achieved_value, top_scale_value
from storage.records import Prompt, RewardEstimate, Status, Tier, Trajectory, Turn, Verdict, tier_rank
from verifiers import Candidate

if TYPE_CHECKING:
    from arl_flows.config import RunConfig
    from verifiers.scheduler import Scheduler

__all__ = ["CodeSuite", "MoleculeSuite", "Suite", "suite_for"]


class Suite:
    """Default behaviour; subclasses fill in the suite-specific parts."""

    name = ""

    def __init__(self, config: RunConfig) -> None:
        self.config = config

    def load_policy(self, policy_config: PolicyConfig) -> Policy:
        if self.config.policy_path:
            return Policy.load(self.config.policy_path, policy_config)
        raise ValueError(f"suite {self.name!r} needs policy_path (a local transformers model directory)")

    def prompts(self, step: int) -> list[Prompt]:
        raise NotImplementedError

    def prompt_ids(self, policy: Policy, prompt: Prompt) -> list[int]:
        return policy.encode(prompt.text)

    def completion(self, prompt: Prompt, text: str) -> tuple[Candidate, str, list[Turn]]:
        raise NotImplementedError

    def featurize(self, candidate: Candidate) -> np.ndarray:
        from verifiers.scheduler import size_features

        return size_features(candidate)

    def history_candidate(self, key: str) -> Candidate | None:
        """A candidate rebuilt from a cache key, to teach the surrogate from the ledger (None: cannot)."""
        return None

    def rewards(
        self,
        trajectories: Sequence[Trajectory],
        candidates: Sequence[Candidate],
        verdicts: dict[str, list[Verdict]],
        estimates: list[RewardEstimate],
    ) -> list[RewardEstimate]:
        """The rewards GRPO uses; by default the scheduler's estimates."""
        return estimates

    def hindsight(
        self,
        policy: Policy,
        failures: list[tuple[Trajectory, Prompt, list[int], list[Verdict], RewardEstimate]],
    ) -> tuple[list[RelabeledExample], list[HintedExample]]:
        """Supervision from failed trajectories: each comes with its verdicts and the scheduler's estimate."""
        return [], []

    def disagreements(
        self,
        scheduler: Scheduler,
        candidates: Sequence[Candidate],
        verdicts: dict[str, list[Verdict]],
        estimates: list[RewardEstimate],
    ) -> list[RewardEstimate]:
        """The estimates, with ``disagreement`` set where two tiers that should agree about the candidate do not.

        ``estimates`` are one per candidate, in order. By default two pass/fail tiers: the highest-ranked
        simulation verdict and the high-fidelity verdict (see ``verifiers.disagreement``).
        """
        from verifiers.disagreement import pass_fail_disagreement

        out = []
        for cand, est in zip(candidates, estimates, strict=True):
            by_tier = {v.tier: v for v in verdicts.get(cand.key, [])}
            flag = pass_fail_disagreement(by_tier.get(Tier.simulation), by_tier.get(Tier.high_fidelity))
            out.append(est.model_copy(update={"disagreement": flag}) if flag else est)
        return out


class MoleculeSuite(Suite):
    name = "molecules"

    def load_policy(self, policy_config: PolicyConfig) -> Policy:
        if self.config.policy_path:
            return Policy.load(self.config.policy_path, policy_config)
        policy, _report = load_or_pretrain(self.config.prior, policy_config=policy_config)
        return policy

    def prompts(self, step: int) -> list[Prompt]:
        cfg = self.config
        windows = cfg.goal_windows()
        out = []
        for i in range(cfg.rollout.prompts_per_step):
            low, high = windows[(step * cfg.rollout.prompts_per_step + i) % len(windows)]
            out.append(
                Prompt(
                    id=f"molecules:gap:{low:.2f}-{high:.2f}",
                    suite="molecules",
                    text=f"Propose a molecule (C, N, O, F; at most 9 heavy atoms) with a HOMO-LUMO gap between {low:g} and {high:g} eV.",
                    goal={"property": "gap_ev", "low": low, "high": high, "softness": cfg.scheduler.window_softness},
                )
            )
        return out

    def prompt_ids(self, policy: Policy, prompt: Prompt) -> list[int]:
        return goal_prompt_ids(policy.tokenizer, prompt.goal["low"], prompt.goal["high"])

    def disagreements(self, scheduler, candidates, verdicts, estimates):  # noqa: ANN001, ANN201 - see Suite.disagreements
        """A top-tier value far outside the surrogate's interval predicted from the lower tiers alone.

        The lower tiers are every ``ok`` value below the top tier; the flag names the highest of them
        (xTB in the default ladder). Candidates without an ``ok`` top-tier value are not judged.
        """
        from verifiers.disagreement import interval_disagreement
        from verifiers.scheduler.surrogate import Observation

        names = [v.name for v in scheduler.ladder]
        top, lower_names = names[-1], names[:-1]
        queries, index = [], []
        for i, cand in enumerate(candidates):
            mine = {v.verifier: v for v in verdicts.get(cand.key, []) if v.status == Status.ok and v.value is not None}
            lowers = [mine[n] for n in lower_names if n in mine]
            if top not in mine or not lowers:
                continue
            values = {v.verifier: float(v.value) for v in lowers}
            queries.append(Observation(cand.key, self.featurize(cand), values, payload=cand.payload))
            index.append((i, lowers[-1], mine[top]))
        if not queries:
            return estimates
        mean, std = scheduler.surrogate.predict(queries)
        out = list(estimates)
        for (i, lower, upper), m, s in zip(index, mean, std, strict=True):
            flag = interval_disagreement(lower, upper, float(m), float(s))
            if flag:
                out[i] = out[i].model_copy(update={"disagreement": flag})
        return out

    def completion(self, prompt: Prompt, text: str) -> tuple[Candidate, str, list[Turn]]:
        from verifiers.chem.molecules import make_candidate

        smiles = "".join(text.split())  # the SMILES tokenizer decodes with spaces between tokens
        return make_candidate(smiles, prompt.goal), smiles, [Turn(role="user", content=prompt.text), Turn(role="assistant", content=smiles)]

    def featurize(self, candidate: Candidate) -> np.ndarray:
        from verifiers.scheduler import molecule_features

        return molecule_features(candidate)

    def history_candidate(self, key: str) -> Candidate | None:
        from verifiers.chem.molecules import make_candidate

        if not key.startswith("molecules:") or key.startswith("molecules:invalid:"):
            return None
        return make_candidate(key.split(":", 1)[1])

    def hindsight(self, policy, failures):  # noqa: ANN001, ANN201 - see Suite.hindsight
        """Relabel each failed molecule with the bin of the gap it achieved (hindsight experience replay).

        The achieved gap is on the top tier's scale, where the goals are: the
        top tier's own value, or the scheduler's calibrated posterior mean when
        a tier at least ``min_fidelity`` answered and the posterior std is at
        most ``max_value_std`` (a raw xTB gap is about 2 eV off the DFT scale).
        """
        hcfg = self.config.hindsight
        min_rank = tier_rank(hcfg.min_fidelity)
        relabeled = []
        for _traj, _prompt, completion_ids, verdicts, estimate in failures:
            if achieved_value([v for v in verdicts if tier_rank(v.tier) >= min_rank]) is None:
                continue
            achieved = top_scale_value(estimate, hcfg.max_value_std)
            if achieved is not None:
                relabeled.append(relabel(completion_ids, achieved, policy.tokenizer))
        return (relabeled if self.config.hindsight.relabel else []), []


class CodeSuite(Suite):
    name = "code"
    INSTRUCTION = (
        "Solve the task in Python. Answer as <think>your reasoning</think> followed by "
        "<code>a complete program</code>.\n\nTask: "
    )

    def prompts(self, step: int) -> list[Prompt]:
        from verifiers.code import get_task

        ids = self.task_ids()
        n = self.config.rollout.prompts_per_step
        chosen = [ids[(step * n + i) % len(ids)] for i in range(n)]
        return [
            Prompt(id=f"code:{tid}", suite="code", text=self.INSTRUCTION + get_task(tid).prompt + "\n", goal={"task_id": tid})
            for tid in chosen
        ]

    def task_ids(self) -> list[str]:
        """The run's task ids: the ids listed, all bundled tasks, or a source's tasks (converted and registered)."""
        from verifiers.code import TaskSource, load_source, load_tasks

        chosen = self.config.code_tasks
        if isinstance(chosen, TaskSource):
            tasks = load_source(chosen).tasks
            if not tasks:
                raise ValueError(f"code_tasks: the source {chosen.source!r} has no usable task")
            return [t.id for t in tasks]
        return list(chosen) or [t.id for t in load_tasks()]

    def completion(self, prompt: Prompt, text: str) -> tuple[Candidate, str, list[Turn]]:
        from verifiers.code import make_candidate

        return make_candidate(prompt.goal["task_id"], text), text, [Turn(role="user", content=prompt.text), Turn(role="assistant", content=text)]

    def rewards(self, trajectories, candidates, verdicts, estimates):  # noqa: ANN001, ANN201 - see Suite.rewards
        """The composed code reward (issue 7's weights) replaces the window estimate; it is exact given the verdicts."""
        from verifiers.code import code_reward

        out = []
        for traj, cand, est in zip(trajectories, candidates, estimates, strict=True):
            got = verdicts.get(cand.key, [])
            reward = code_reward(traj.final_answer, got, completion_tokens=traj.completion_tokens, weights=self.config.code_reward)
            out.append(
                est.model_copy(
                    update={
                        "mean": reward.total,
                        "std": 0.0 if reward.complete else est.std,
                        "fidelity": reward.fidelity or est.fidelity,
                        "components": reward.components | {f"turn_{i}": r for i, r in enumerate(reward.per_turn)},
                    }
                )
            )
        return out

    def hindsight(self, policy, failures):  # noqa: ANN001, ANN201 - see Suite.hindsight
        """On-policy distillation: the teacher is the policy that also reads the verifier's feedback."""
        if not self.config.hindsight.hint_teacher:
            return [], []
        hinted = []
        for _traj, prompt, completion_ids, verdicts, _estimate in failures:
            problems = [v.feedback for v in verdicts if v.status != Status.ok or (v.value is not None and v.value < 1.0)]
            if not problems:
                continue
            hint = feedback_hint(error=problems[0][:300])
            teacher_text = hint_prompt(prompt.text, hint)
            hinted.append(HintedExample(policy.encode(prompt.text), policy.encode(teacher_text), completion_ids))
        return [], hinted


def suite_for(config: RunConfig) -> Suite:
    return {"molecules": MoleculeSuite, "code": CodeSuite}[config.suite](config)
