"""A fixed, seeded evaluation set scored on a finished run's starting policy and on its last checkpoint.

A run's own step means compare different samples of different prompts, and its last steps' rewards may be
the surrogate's estimates once the budget is spent: they move by sampling alone. The evaluation set holds
everything but the policy fixed. Both policies sample the same prompts (the run's own goal prompts of its
first steps, in its order) with the same sampling seed (``[eval] seed``, which no training step uses), so
sample ``i`` of each side comes from the same prompt and random stream: the two sides are paired. Both sample
sets are then scored in one :class:`~arl_flows.tiered_reward.TieredReward` call on the run's ledger and ladder:
one scheduler and one budget for both (a candidate the ledger already verified is read, never paid twice;
the sides are interleaved so that neither comes first in the batch), so neither side gets more verification
than the other.

The difference is called beyond noise only when it exceeds two standard errors of the paired differences
(the two-sample standard error, which ignores the pairing, is reported too). The result is kept beside the
run's checkpoints (``$ARL_HOME/runs/RUN_ID/eval.json``); the verification it paid for is a ledger run of its
own, ``eval-RUN_ID``, so the spend stays accounted for. ``arl run`` scores it at the end when ``[eval]
samples`` > 0; ``arl runs eval RUN_ID`` scores a finished run at any time.
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError, computed_field

from storage.ledger import Ledger
from storage.settings import settings

__all__ = ["DEFAULT_SAMPLES", "EvalError", "EvalResult", "EvalSide", "evaluate", "stored_result", "summary_line"]

DEFAULT_SAMPLES = 64  # per side, when the run's config has the evaluation set off and the caller names no number
_FILE = "eval.json"


class EvalError(ValueError):
    """A run that cannot be evaluated (no checkpoint, not finished); the message says what to do."""


class EvalSide(BaseModel):
    """One side (the starting policy, or the last checkpoint) of the evaluation set."""

    reward_mean: float = Field(description="Mean reward of the side's samples (a posterior mean where no top-tier answer).")
    validity: float = Field(description="Share of the side's samples that no tier called invalid.")
    top_tier_answers: int = Field(description="Samples whose reward rests on a top-tier answer, not an estimate.")
    distinct: int = Field(description="Distinct completions among the side's samples.")


class EvalResult(BaseModel):
    """The evaluation set of one run: both sides, their difference and its noise."""

    run_id: str
    eval_run_id: str = Field(description="The ledger run holding the evaluation's trajectories and spend.")
    last_checkpoint_step: int = Field(description="The step whose checkpoint is the 'after' side.")
    # What both sides sampled.
    eval_seed: int = Field(description="The sampling seed both sides used.")
    samples: int = Field(description="Samples per side.")
    prompts: int = Field(description="Distinct prompts (the run's own goal prompts of its first steps).")
    group_size: int = Field(description="Samples per prompt (the run's trainer.group_size).")
    # What scoring them cost.
    budget_cpu_s: float = Field(description="The verification budget of the one call that scored both sides.")
    spend_cpu_s: float = Field(description="What that call spent (CPU-seconds, all tiers).")
    seconds: float = Field(description="Wall seconds of the evaluation (sampling and verification).")
    # What they scored, and whether the difference is more than sampling noise.
    before: EvalSide
    after: EvalSide
    two_se: float = Field(description="Two standard errors of the difference, as two independent samples.")
    paired_two_se: float = Field(description="Two standard errors of the mean of the paired differences.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def difference(self) -> float:
        """after.reward_mean - before.reward_mean."""
        return self.after.reward_mean - self.before.reward_mean

    @computed_field  # type: ignore[prop-decorator]
    @property
    def beyond_noise(self) -> bool:
        """Whether the difference exceeds two standard errors of two independent samples."""
        return abs(self.difference) > self.two_se

    @computed_field  # type: ignore[prop-decorator]
    @property
    def beyond_noise_paired(self) -> bool:
        """Whether the difference exceeds two paired standard errors: the verdict the summary prints."""
        return abs(self.difference) > self.paired_two_se


def _two_se(a: list[float], b: list[float]) -> float:
    """Two standard errors of mean(b) - mean(a) for independent samples."""
    return 2.0 * math.sqrt(statistics.pvariance(a) / len(a) + statistics.pvariance(b) / len(b))


def evaluate(ledger: Ledger, run_id: str, samples: int | None = None, budget: float | None = None,
             seed: int | None = None) -> EvalResult:
    """Sample the evaluation set from the run's first policy and its last checkpoint, score both in one call, keep it.

    ``samples``, ``budget`` and ``seed`` default to the run's ``[eval]`` section (``DEFAULT_SAMPLES`` when that
    is off). Raises :class:`EvalError` for a run without a checkpoint, ``LedgerError`` for an unknown run.
    """
    from arl_flows.config import ConfigError, build_config
    from arl_flows.tiered_reward import TieredReward
    from arl_flows.suites import suite_for
    from arl_flows.suites.capabilities import decoding_constraint
    from policies import Policy, PolicyConfig

    t0 = time.monotonic()
    run = ledger.get_run(run_id)
    try:
        config = build_config(run.config, f"run {run.id}'s config")
    except ConfigError as exc:
        raise EvalError(f"{exc}; the run's stored config no longer validates, so it cannot be evaluated") from None
    samples = samples or config.eval.samples or DEFAULT_SAMPLES
    budget = config.eval.budget if budget is None else budget
    seed = config.eval.seed if seed is None else seed
    if samples < 2:
        raise EvalError(f"samples: {samples} a side has no standard error; give at least 2")
    if not budget > 0:
        raise EvalError(f"budget: {budget} CPU-s cannot verify anything; give a positive number")
    checkpoints = sorted(ledger.checkpoints(run.id), key=lambda c: c.step)
    if not checkpoints:
        raise EvalError(f"run {run.id} has no checkpoint yet; evaluate a run that finished at least one step")
    last = checkpoints[-1]
    if not (Path(last.path) / "config.json").is_file():
        raise EvalError(f"run {run.id}'s last checkpoint {last.path} is gone from this machine; evaluate it where "
                        "its $ARL_HOME is")
    suite = suite_for(config)
    group = config.trainer.group_size
    n_prompts = max(1, math.ceil(samples / group))
    prompts, step = [], 0
    while len(prompts) < n_prompts:  # the run's own goal prompts, in its order
        batch = suite.prompts(step)
        if not batch:
            raise EvalError(f"the {config.suite} suite gives no prompts for step {step}; there is nothing to evaluate on")
        prompts.extend(batch)
        step += 1
    prompts = prompts[:n_prompts]
    policy_config = PolicyConfig(device=config.device, dtype=config.dtype)
    texts: dict[str, list[str]] = {}
    prompt_of: list[int] = []
    for side in ("before", "after"):
        policy = suite.load_policy(policy_config) if side == "before" else Policy.load(last.path, policy_config)
        rollout = policy.sample(
            [suite.prompt_ids(policy, p) for p in prompts], group_size=group, temperature=config.trainer.temperature,
            top_p=config.trainer.top_p, max_new_tokens=config.trainer.max_new_tokens, seed=seed,
            constraint=decoding_constraint(suite, policy.tokenizer),  # as the run sampled
        )
        texts[side] = list(rollout.texts)[:samples]
        prompt_of = [int(i) for i in rollout.prompt_index[:samples].tolist()]  # the same rows for both sides
        del policy, rollout
    k = len(texts["before"])
    # The run's own suite, ladder, objective and scheduler; only the budget is the evaluation's.
    scoring = config.model_copy(update={
        "name": f"eval-{run.id}"[:200],
        "scheduler": config.scheduler.model_copy(
            update={"budget_per_step": budget, "budget_per_run": math.inf, "budget_carry": False}
        ),
    })
    with TieredReward(config=scoring, budget_per_call=budget, max_wait_s=10 * budget, ledger=ledger) as reward:
        # One call: the same scheduler and budget for both sides, interleaved so that neither comes first.
        both = [t for pair in zip(texts["before"], texts["after"], strict=True) for t in pair]
        chosen = [prompts[i] for i in prompt_of for _ in (0, 1)]
        details = reward.score([p.text for p in chosen], both, goal=[p.goal for p in chosen])
        top = reward.ladder[-1].tier.value  # the top rung's tier (RewardDetail.tier names tiers, not verifiers)
        spend = reward.last_call.spend_s if reward.last_call is not None else 0.0
        eval_run_id = reward.run_id or ""
    sides = {}
    for index, side in enumerate(("before", "after")):
        mine = details[index::2]
        sides[side] = EvalSide(
            reward_mean=statistics.fmean(d.reward for d in mine),
            validity=sum(d.status != "invalid" for d in mine) / k,
            top_tier_answers=sum(d.tier == top for d in mine),
            distinct=len(set(texts[side])),
        )
    before, after = ([d.reward for d in details[i::2]] for i in (0, 1))
    result = EvalResult(
        run_id=run.id, eval_run_id=eval_run_id, eval_seed=seed, samples=k, prompts=len(prompts), group_size=group,
        last_checkpoint_step=last.step, budget_cpu_s=budget, spend_cpu_s=spend, seconds=time.monotonic() - t0,
        before=sides["before"], after=sides["after"], two_se=_two_se(before, after),
        # The shared seed pairs the sides: sample i of each comes from the same prompt and random stream.
        paired_two_se=2.0 * statistics.stdev([y - x for x, y in zip(before, after, strict=True)]) / math.sqrt(k),
    )
    path = settings().run_dir(run.id) / _FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(result.model_dump_json(indent=2))
    return result


def stored_result(run_id: str) -> EvalResult | None:
    """The run's last evaluation set, if one was scored on this machine (None: none, or unreadable)."""
    path = settings().run_dir(run_id) / _FILE
    try:
        return EvalResult.model_validate_json(path.read_text())
    except (OSError, ValidationError):
        return None


def summary_line(result: EvalResult) -> str:
    """One line: both sides' mean reward, the difference, its paired two standard errors and the verdict."""
    b, a = result.before, result.after
    verdict = "beyond noise" if result.beyond_noise_paired else "within noise"
    prompts = f"{result.prompts} prompt{'s' if result.prompts != 1 else ''}"
    return (f"eval set ({prompts} x {result.group_size} samples, {result.samples} a side, seed "
            f"{result.eval_seed}): reward {b.reward_mean:.3f} -> {a.reward_mean:.3f} ({result.difference:+.3f}, paired "
            f"2 SE {result.paired_two_se:.3f}: {verdict}); validity {b.validity:.0%} -> {a.validity:.0%}; "
            f"top-tier answers {b.top_tier_answers} / {a.top_tier_answers}; {result.spend_cpu_s:.1f} CPU-s, "
            f"{result.seconds:.0f} s")
