"""What a batch of completions becomes on record: trajectories in the ledger, and the rollout GRPO trains on.

One recorder for every sampler: :class:`arl_flows.training.RunSession`'s
own sampling, the TRL/verl reward (:class:`arl_flows.tiered_reward.TieredReward`)
and the pipeline's learner all write a batch through :func:`record_batch`, so
a trajectory row has one shape whoever sampled it. :func:`rollout_from_tokens`
is the one way back, from recorded tokens (or re-encoded text) to the
:class:`policies.Rollout` a loss reads. :func:`teach_from_ledger` is the
ledger's other reader at a run's start: verdicts already paid for calibrate
the scheduler's surrogate.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from arl_flows.suites import Lab, Suite
from policies import DecodingConstraint, Policy, Rollout, collate
from storage.ledger import Ledger
from storage.records import Prompt, Trajectory
from verifiers import Candidate
from verifiers.scheduler import Scheduler

__all__ = ["Completion", "has_behaviour", "record_batch", "rollout_from_tokens", "teach_from_ledger"]


def teach_from_ledger(scheduler: Scheduler, ledger: Ledger, suite: Suite) -> int:
    """Paired observations already in the ledger (any run) calibrate the scheduler's surrogate; returns how many.

    Call it before the first step: with enough history this trains the
    surrogate's graph network (``scheduler.learned``), once.
    """
    # Only the answers of each verifier as this run configures it (its version and parameters): a ledger shared with
    # runs of another basis set or an older tier version holds other numbers under the same name.
    values = {v.name: ledger.ok_values(v.name, v.version, v.params_hash) for v in scheduler.ladder}
    top = values[scheduler.ladder[-1].name]
    observations = []
    for key in top:
        cand = suite.history_candidate(key) if isinstance(suite, Lab) else None
        if cand is None:
            continue
        observations.append(scheduler.observation(cand, {n: vals[key] for n, vals in values.items() if key in vals}))
    if not observations:
        return 0
    log = logging.getLogger("arl.scheduler")
    added = scheduler.add_history(observations, progress=log.info)
    if gross := scheduler.surrogate.gross_values:
        shown = ", ".join(f"{key[:40]} = {value:.6g}" for key, value in list(gross.items())[:3])
        log.warning("the surrogate leaves out %d %s answer(s) of the ledger far from all the others (%s%s): a value in "
                    "other units or mistyped? Their verdicts stand; the surrogate does not learn from them",
                    len(gross), scheduler.ladder[-1].name, shown, ", ..." if len(gross) > 3 else "")
    return added


@dataclass(frozen=True)
class Completion:
    """One completion to record as a trajectory: its prompt, its group in the batch, and what its sampler knows."""

    prompt: Prompt
    group: int  # GRPO group within the batch (the sampler's prompt index; TRL's run of num_generations)
    text: str
    completion_tokens: int
    prompt_tokens: int = 0
    truncated: bool = False
    policy_version: int | None = None  # None: sampled by a policy ARL does not track
    completion_ids: list[int] | None = None
    behaviour_logprobs: list[float] | None = None


def record_batch(
    ledger: Ledger, suite: Suite, run_id: str, step: int, completions: list[Completion]
) -> tuple[list[Trajectory], list[Candidate]]:
    """Parse each completion into a candidate (the suite's job), then write prompts and trajectories to the ledger.

    Returns one trajectory and one candidate per completion, in order. A
    group's id is ``RUN8-STEP-GROUP`` (the run id's first 8 characters): the
    scheduler plans and GRPO normalises within it.
    """
    trajectories, candidates = [], []
    for c in completions:
        cand, answer, turns = suite.completion(c.prompt, c.text)
        candidates.append(cand)
        trajectories.append(
            Trajectory(
                run_id=run_id, prompt_id=c.prompt.id, step=step, group_id=f"{run_id[:8]}-{step}-{c.group}",
                turns=turns, final_answer=answer, candidate_key=cand.key,
                prompt_tokens=c.prompt_tokens, completion_tokens=c.completion_tokens, truncated=c.truncated,
                policy_version=c.policy_version, completion_ids=c.completion_ids, behaviour_logprobs=c.behaviour_logprobs,
            )
        )
    ledger.add_prompts({c.prompt.id: c.prompt for c in completions}.values())
    ledger.add_trajectories(trajectories)
    return trajectories, candidates


def has_behaviour(trajectories: list[Trajectory]) -> bool:
    """Whether every trajectory carries its sampled tokens and their behaviour log-probs (older rows do not)."""
    return all(t.completion_ids is not None and t.behaviour_logprobs is not None for t in trajectories)


def rollout_from_tokens(
    policy: Policy,
    prompts: list[list[int]],
    prompt_index: list[int],
    completions: list[list[int]],
    truncated: list[bool],
    texts: list[str],
    temperature: float,
    *,
    group_size: int,
    logps: list[list[float]] | None = None,
    constraint: DecodingConstraint | None = None,
) -> Rollout:
    """A Rollout of given completions (groups of ``group_size`` consecutive rows), no sampling.

    Its old log-probs are ``logps`` (the behaviour policy's, recorded at sampling), else computed under ``policy``
    (and ``constraint``, the run's decoding constraint, where it has one).
    """
    pad = policy.tokenizer.pad_token_id
    p = collate([prompts[i] for i in prompt_index], [[0.0] * len(prompts[i]) for i in prompt_index], pad, padding_side="left")
    c = collate(completions, [[1.0] * len(x) for x in completions], pad, padding_side="right")
    rollout = Rollout(
        prompt_ids=p.input_ids,
        prompt_mask=p.attention_mask,
        completion_ids=c.input_ids,
        completion_mask=c.loss_mask,
        logps=torch.zeros_like(c.loss_mask),
        truncated=torch.tensor(truncated, dtype=torch.bool),
        prompt_index=torch.tensor(prompt_index, dtype=torch.long),
        texts=texts,
        temperature=temperature,
        group_size=group_size,
    )
    if logps is not None:
        for row, values in enumerate(logps):  # right-padded like the completions, 0 on padding
            rollout.logps[row, : len(values)] = torch.tensor(values, dtype=rollout.logps.dtype)
        return rollout
    with torch.no_grad():
        rollout.logps = policy.completion_logprobs(rollout, constraint=constraint).detach().cpu() * rollout.completion_mask
    return rollout
