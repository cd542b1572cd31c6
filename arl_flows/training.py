"""One training run as plain functions: rollout, verify, GRPO, hindsight, checkpoint.

These are the stages; :func:`arl_flows.step.run_step` strings them into a
step, once, for the CLI, the Prefect flows and the benchmarks (the verify
stage, a loop over the scheduler's tier batches, lives there too). A
:class:`RunSession` holds what must stay in memory between the stages of a
step (the policy, its optimizer, the step's rollout tensors); everything that
must survive a crash goes through the ledger, one transaction per arrow of
the data flow in ARCHITECTURE.md:

- trajectories are written right after sampling;
- verdicts are written as soon as each tier batch returns (before the next
  round is planned), so a verdict that was paid for is never paid for again;
- a step counts as done only once its checkpoint is on disk (written to a
  temporary directory, then renamed) and registered together with its
  metrics.

Resuming re-opens the run at ``steps_done``: the unfinished step's
trajectories are dropped and the step is redone from the last checkpoint with
the same sampling seed, so the same molecules come back and their verdicts
are cache hits.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from arl_flows.config import RunConfig
from arl_flows.ladder import build_ladder, ladder_verdicts
from arl_flows.recording import Completion, has_behaviour, record_batch, rollout_from_tokens, teach_from_ledger
from arl_flows.suites import Failure, Hindsight, Prior, Suite, suite_for
from arl_flows.suites.capabilities import decoding_constraint
from policies import Policy, PolicyConfig, PolicyTrainer, Rollout
from storage.ledger import Ledger, LedgerError
from storage.settings import settings
from storage.records import (
    CheckpointRecord,
    Prompt,
    RewardEstimate,
    RunRecord,
    RunStatus,
    Status,
    TrainingStepRecord,
    Trajectory,
    Verdict,
)
from verifiers import Candidate, Closable, Verifier
from verifiers.scheduler import Scheduler, StepResult

__all__ = [
    "LateTrajectory",
    "RunSession",
    "StepState",
    "StepSummary",
]


@dataclass
class StepSummary:
    """What the progress display and the run report show for one step."""

    step: int
    reward_mean: float = math.nan
    reward_max: float = math.nan
    validity: float = math.nan
    spend: dict[str, float] = field(default_factory=dict)
    budget_left: float = math.inf
    calls: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass(frozen=True)
class LateTrajectory:
    """A trajectory of a group learned earlier whose verdict came in late: hindsight data with its new estimate."""

    trajectory: Trajectory
    prompt: Prompt
    estimate: RewardEstimate


@dataclass
class StepState:
    """What one step holds in memory between its stages (the ledger holds the durable part)."""

    rollout: Rollout | None = None
    trajectories: list[Trajectory] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    estimates: list[RewardEstimate] = field(default_factory=list)
    prompts: list[Prompt] = field(default_factory=list)
    result: StepResult | None = None
    # The asynchronous pipeline's: per trajectory, policy versions between its sampler and the learner (None: on-policy).
    staleness: list[int] | None = None
    # Trajectories of groups learned earlier whose verdict came in late, with their prompt and new estimate: hindsight data.
    late: list[LateTrajectory] = field(default_factory=list)
    # The asynchronous learner's: ids of the settled groups the step learns from (recorded with the step).
    group_ids: list[str] = field(default_factory=list)


def valid_share(ledger: Ledger, ladder: list[Verifier], candidates: list[Candidate]) -> float:
    """The share of candidates that are well formed and that no tier of the ladder judged ``invalid``.

    A completion can parse and still break a rule a tier checks (a molecule outside the run's chemistry
    space): it counts as invalid here, as it does in the verdicts a user reads.
    """
    if not candidates:
        return 0.0
    judged = ladder_verdicts(ledger, {c.key for c in candidates if c.valid}, ladder)
    invalid = {v.candidate_key for v in judged if v.status == Status.invalid}
    return sum(1 for c in candidates if c.valid and c.key not in invalid) / len(candidates)


class RunSession:
    """A run's in-memory state between stages; the ledger holds everything durable."""

    def __init__(self, config: RunConfig, ledger: Ledger, run: RunRecord, policy: Policy, ladder: list[Verifier]):
        self.config = config
        self.suite: Suite = suite_for(config)
        self.ledger = ledger
        self.run = run
        self.policy = policy
        self.ladder = ladder
        # The suite's grammar (if any) is the policy: sampling and every GRPO log-prob go through it.
        self.constraint = decoding_constraint(self.suite, policy.tokenizer)
        self.trainer = PolicyTrainer(policy, config.trainer, constraint=self.constraint)
        self.scheduler = Scheduler(
            ladder, config.scheduler, featurize=self.suite.featurize,
            learner=self.suite.surrogate_learner if isinstance(self.suite, Prior) else None,
            run_spent=sum(ledger.spend_by_tier(run.id).values()),
        )
        self.steps: dict[int, StepState] = {}
        self.lab_seen: set[str] = {r.id for r in ledger.lab_requests(Status.ok, run_id=run.id)}
        self._teach_surrogate_from_ledger()

    # ------------------------------------------------------------------ open / resume
    @classmethod
    def open(
        cls,
        config: RunConfig,
        ledger: Ledger,
        *,
        resume: str | None = None,
        run_id: str | None = None,
        on_pretrain: Callable[[str], None] | None = None,
    ) -> RunSession:
        """Start a new run (recorded in the ledger) or resume one at its last completed step."""
        ladder = build_ladder(config)
        ledger.record_tiers([v.spec() for v in ladder])
        policy_config = PolicyConfig(device=config.device, dtype=config.dtype)
        if resume:
            run = ledger.get_run(resume)
            if run.status == RunStatus.completed:
                raise LedgerError(f"run {run.id} already completed all {run.steps_done} steps; nothing to resume")
            # The checkpoint of the last *completed* step (a ledger written before checkpoint and
            # step were recorded together may also hold one of the unfinished step).
            done = [c for c in ledger.checkpoints(run.id) if c.step == run.steps_done - 1]
            checkpoint = done[-1] if done else None
            if checkpoint is not None:
                policy = Policy.load(checkpoint.path, policy_config)
            else:
                policy = _initial_policy(config, policy_config, on_pretrain)
            run = ledger.set_run_status(run.id, RunStatus.running)
            session = cls(config, ledger, run, policy, ladder)
            session._restore_optimizer(checkpoint)
            return session
        policy = _initial_policy(config, policy_config, on_pretrain)
        run = ledger.create_run(config.name, config.model_dump(mode="json") | {"steps": config.steps}, run_id=run_id)
        return cls(config, ledger, run, policy, ladder)

    def _restore_optimizer(self, checkpoint: CheckpointRecord | None) -> None:
        if checkpoint is None:
            return
        state = Path(checkpoint.path) / "optimizer.pt"
        if state.exists():
            self.trainer.optimizer.load_state_dict(torch.load(state, weights_only=True))

    def _teach_surrogate_from_ledger(self) -> None:
        teach_from_ledger(self.scheduler, self.ledger, self.suite)

    @property
    def start_step(self) -> int:
        return self.run.steps_done

    def prepare_step(self, step: int) -> None:
        """Drop what an interrupted attempt at ``step`` left (trajectories, rewards, spend) before redoing it."""
        self.ledger.delete_step_trajectories(self.run.id, step)
        self.steps.pop(step, None)

    # ------------------------------------------------------------------ rollout
    def rollout(self, step: int) -> list[str]:
        """Sample G completions for each prompt; write prompts and trajectories; return trajectory ids."""
        self.steps[step] = state = self.sample_batch(step, policy_version=step)
        return [t.id for t in state.trajectories]

    def sample_batch(self, step: int, policy_version: int) -> StepState:
        """Sample batch ``step`` (its prompts and seed) and write its prompts and trajectories to the ledger.

        Each trajectory records the policy that sampled it: ``policy_version``
        (the learner updates behind these weights), its completion tokens and
        their behaviour log-probs. The state is returned, not kept: the
        asynchronous pipeline samples on its own thread.
        """
        cfg = self.config
        prompts = self.suite.prompts(step)
        prompt_ids = [self.suite.prompt_ids(self.policy, p) for p in prompts]
        rollout = self.policy.sample(
            prompt_ids,
            group_size=cfg.trainer.group_size,
            temperature=cfg.trainer.temperature,
            top_p=cfg.trainer.top_p,
            max_new_tokens=cfg.trainer.max_new_tokens,
            seed=cfg.seed * 1_000_003 + step,
            constraint=self.constraint,
        )
        lengths = [int(n) for n in rollout.completion_mask.sum(1).tolist()]
        completions = []
        for row, text in enumerate(rollout.texts):
            p_index, n = int(rollout.prompt_index[row]), lengths[row]
            completions.append(
                Completion(
                    prompt=prompts[p_index],
                    group=p_index,
                    text=text,
                    completion_tokens=n,
                    prompt_tokens=len(prompt_ids[p_index]),
                    truncated=bool(rollout.truncated[row]),
                    policy_version=policy_version,
                    completion_ids=rollout.completion_ids[row, :n].tolist(),
                    behaviour_logprobs=rollout.logps[row, :n].tolist(),
                )
            )
        trajectories, candidates = record_batch(self.ledger, self.suite, self.run.id, step, completions)
        return StepState(rollout=rollout, trajectories=trajectories, candidates=candidates, prompts=prompts)

    def restore_step(self, step: int) -> None:
        """Rebuild a step's in-memory state from the ledger (for the single-stage flows run on their own).

        The completions are re-tokenized and their old log-probs recomputed under
        the current policy, which is exactly what GRPO needs on-policy.
        """
        if step in self.steps and self.steps[step].rollout is not None:
            return
        rows = self.ledger.step_trajectories(self.run.id, step)
        if not rows:
            raise RuntimeError(f"run {self.run.id} has no trajectories at step {step}: run the rollout flow first")
        self.steps[step] = self.rebuild_state([t for t, _ in rows], [e for _, e in rows if e is not None])

    def rebuild_state(
        self,
        trajectories: list[Trajectory],
        estimates: list[RewardEstimate],
        candidates: list[Candidate] | None = None,
        *,
        behaviour: bool = False,
    ) -> StepState:
        """A step's state from ledger records: the trajectories' rows as one rollout, in order, with no sampling.

        With ``behaviour`` and every row's tokens and behaviour log-probs
        recorded (:func:`has_behaviour`), the rollout holds them as sampled
        (the decoupled loss weighs them against the proximal policy).
        Otherwise each final answer is re-encoded (with an EOS unless it was
        truncated) and its old log-probs are computed under the current
        policy, which is exactly what GRPO needs on-policy. ``candidates``
        default to the suite's parse of each final answer.
        """
        prompts = self.ledger.get_prompts({t.prompt_id for t in trajectories})
        order = list(dict.fromkeys(t.prompt_id for t in trajectories))
        recorded = behaviour and has_behaviour(trajectories)
        eos = self.policy.tokenizer.eos_token_id
        if recorded:
            completions = [list(t.completion_ids or []) for t in trajectories]
        else:
            completions = [self.policy.encode(t.final_answer) + ([] if t.truncated else [eos]) for t in trajectories]
        rollout = rollout_from_tokens(
            self.policy,
            [self.suite.prompt_ids(self.policy, prompts[p]) for p in order],
            [order.index(t.prompt_id) for t in trajectories],
            completions,
            [t.truncated for t in trajectories],
            [t.final_answer for t in trajectories],
            self.config.trainer.temperature,
            group_size=self.config.trainer.group_size,
            logps=[list(t.behaviour_logprobs or []) for t in trajectories] if recorded else None,
            constraint=self.constraint,
        )
        if candidates is None:
            candidates = [self.suite.completion(prompts[t.prompt_id], t.final_answer)[0] for t in trajectories]
        return StepState(
            rollout=rollout,
            trajectories=list(trajectories),
            candidates=list(candidates),
            estimates=list(estimates),
            prompts=[prompts[p] for p in order],
        )

    # ------------------------------------------------------------------ GRPO
    def grpo(self, step: int) -> dict[str, float]:
        state = self.steps[step]
        if state.rollout is None or not state.estimates:
            raise RuntimeError(f"step {step} has no verified rollout yet: run rollout and verify first")
        by_traj = {e.trajectory_id: e for e in state.estimates}
        rewards = [by_traj[t.id].mean for t in state.trajectories]
        stds = [by_traj[t.id].std for t in state.trajectories]
        metrics = self.trainer.step(state.rollout, rewards, stds, staleness=state.staleness,
                                    group_ids=[t.group_id for t in state.trajectories])
        metrics["reward/validity"] = valid_share(self.ledger, self.ladder, state.candidates)
        if state.result is not None and state.result.unavailable:
            metrics["tiers/unavailable"] = list(state.result.unavailable)  # reported in the run's artifacts
        metrics["reward/unique"] = len({c.key for c in state.candidates}) / max(len(state.candidates), 1)
        return metrics

    # ------------------------------------------------------------------ hindsight
    def hindsight(self, step: int) -> dict[str, float]:
        """Distill the step's failed trajectories (relabeling or a hinted teacher, by suite)."""
        if not self.config.hindsight.enabled:
            return {}
        state = self.steps[step]
        if state.rollout is None or not state.estimates:
            raise RuntimeError(f"step {step} has no verified rollout yet: run rollout and verify first")
        by_traj = {e.trajectory_id: e for e in state.estimates}
        prompts = {p.id: p for p in state.prompts}
        mask = state.rollout.completion_mask
        rows = [Failure(t, prompts[t.prompt_id], state.rollout.completion_ids[r, : int(mask[r].sum())].tolist(), [], by_traj[t.id])
                for r, t in enumerate(state.trajectories)]
        # Late verdicts first: a top-tier answer that came after its group was learned makes its relabel exact.
        return self._distill(self._recorded(state.late) + rows)

    def distill_late(self, late: list[LateTrajectory]) -> dict[str, float]:
        """Hindsight on late-verdict trajectories alone (the asynchronous learner's use of idle time)."""
        if not self.config.hindsight.enabled or not late:
            return {}
        return self._distill(self._recorded(late))

    @staticmethod
    def _recorded(late: list[LateTrajectory]) -> list[Failure]:
        return [Failure(x.trajectory, x.prompt, list(x.trajectory.completion_ids or []), [], x.estimate) for x in late]

    def _distill(self, rows: list[Failure]) -> dict[str, float]:
        """One distillation step on the failures among ``rows`` (their verdicts are read here, from the ledger)."""
        hcfg = self.config.hindsight
        verdicts = ladder_verdicts(self.ledger, [r.trajectory.candidate_key for r in rows], self.ladder)
        verdicts += self._new_lab_verdicts()
        by_key: dict[str, list[Verdict]] = {}
        for v in verdicts:
            by_key.setdefault(v.candidate_key, []).append(v)
        failures, seen = [], set()
        for row in rows:
            key = row.trajectory.candidate_key
            if row.estimate.mean >= hcfg.threshold or key in seen:
                continue
            seen.add(key)
            if row.completion_ids:
                failures.append(replace(row, verdicts=by_key.get(key, [])))
        if not isinstance(self.suite, Hindsight):
            logging.getLogger("arl.hindsight").info("the %s suite offers no hindsight: nothing to distill", self.suite.name)
            return {"hindsight/examples": 0.0}
        relabeled, hinted = self.suite.hindsight(self.policy, failures)
        relabeled, hinted = relabeled[: hcfg.max_examples], hinted[: hcfg.max_examples]
        if not relabeled and not hinted:
            return {"hindsight/examples": 0.0}
        metrics = self.trainer.distill_step(relabeled=relabeled, hinted=hinted)
        out = {f"hindsight/{k.split('/')[-1]}": v for k, v in metrics.items()}
        return out | {"hindsight/examples": float(len(relabeled) + len(hinted))}

    def _new_lab_verdicts(self) -> list[Verdict]:
        """Lab results that arrived since the last step (they join hindsight and, via the cache, GRPO)."""
        done = [r for r in self.ledger.lab_requests(Status.ok, run_id=self.run.id) if r.id not in self.lab_seen]
        self.lab_seen.update(r.id for r in done)
        return self.ledger.verdicts_for([r.candidate_key for r in done], verifiers=[r.verifier for r in done])

    # ------------------------------------------------------------------ checkpoint
    def checkpoint(self, step: int, metrics: dict[str, Any]) -> CheckpointRecord:
        """Save weights + optimizer atomically, then register checkpoint and step in the ledger."""
        final = settings().run_dir(self.run.id) / f"step-{step:05d}"
        tmp = final.with_name(final.name + f".tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        path, sha = self.policy.save(tmp)
        torch.save(self.trainer.optimizer.state_dict(), tmp / "optimizer.pt")
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        record = CheckpointRecord(run_id=self.run.id, step=step, path=str(final), sha256=sha)
        # One transaction: the step counts as done exactly when its checkpoint is registered.
        groups = self.steps[step].group_ids if step in self.steps else []
        self.ledger.record_step(TrainingStepRecord(run_id=self.run.id, step=step, metrics=_finite(metrics), group_ids=groups),
                                checkpoint=record)
        self.run = self.ledger.get_run(self.run.id)
        self.steps.pop(step - 1, None)  # keep memory bounded: only the current step's tensors
        return record

    def finish(self, status: RunStatus = RunStatus.completed) -> RunRecord:
        self.run = self.ledger.set_run_status(self.run.id, status)
        for v in self.ladder:
            if isinstance(v, Closable):
                v.close()
        return self.run

    # ------------------------------------------------------------------ one whole step
    def summary(self, step: int, metrics: dict[str, float], seconds: float) -> StepSummary:
        state = self.steps[step]
        result = state.result
        spend = self.ledger.spend_by_tier(self.run.id)
        left = self.config.scheduler.budget_per_run - sum(spend.values())
        return StepSummary(
            step=step,
            reward_mean=metrics.get("reward/mean", math.nan),
            reward_max=metrics.get("reward/max", math.nan),
            validity=metrics.get("reward/validity", math.nan),
            spend=spend,
            budget_left=left,
            calls=dict(result.calls) if result else {},
            metrics=metrics,
            seconds=seconds,
        )


def _initial_policy(config: RunConfig, policy_config: PolicyConfig, on_pretrain: Callable[[str], None] | None) -> Policy:
    """The suite's starting policy (policy_path, or the suite's own; ``on_pretrain`` hears of a first training)."""
    return suite_for(config).load_policy(policy_config, on_pretrain=on_pretrain)


def _finite(metrics: dict[str, Any]) -> dict[str, Any]:
    """JSON has no NaN: replace non-finite floats by None."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in metrics.items()}

