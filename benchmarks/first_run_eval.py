"""A fixed, seeded evaluation set scored on a finished run's starting policy and on its last checkpoint.

    python -m benchmarks.first_run_eval RUN_ID [--samples 64] [--budget 60] [--json OUT.json]

(with ``ARL_HOME`` or ``ARL_DATABASE_URL`` naming the run's ledger; ``benchmarks/first_run.py`` calls it
after each run.) Both policies sample the same prompts (the run's own goal prompts of its first steps) with
the same fixed sampling seed, ``EVAL_SEED``, which no training step uses, so the before/after difference is
the policy's and not the prompts' or the sampler's. Both sample sets are then scored in one
:class:`~arl_flows.integrations.TieredReward` call on the run's ledger and ladder: one scheduler and one
budget for both (a molecule the run already verified is read from the ledger, never paid twice), so
neither side gets more verification than the other. Printed: mean reward and validity before and after,
the difference with two standard errors (as two independent samples, and paired by sample index: the
shared seed pairs them), and how many of
each side's rewards rest on a top-tier answer rather than an estimate.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

EVAL_SEED = 7_777_777  # training steps sample with seed * 1_000_003 + step; this is none of those for seeds < 7


def _two_se(a: list[float], b: list[float]) -> float:
    return 2.0 * math.sqrt(statistics.pvariance(a) / len(a) + statistics.pvariance(b) / len(b))


def evaluate(run_id: str, samples: int = 64, budget: float = 60.0) -> dict[str, Any]:
    """Sample the evaluation set from the run's first policy and its last checkpoint; score both in one call."""
    from arl_flows.config import build_config
    from arl_flows.integrations import TieredReward
    from arl_flows.suites import suite_for
    from policies import Policy, PolicyConfig
    from storage.ledger import Ledger

    ledger = Ledger()
    run = ledger.get_run(run_id)
    config = build_config(run.config, f"run {run_id}'s config")
    checkpoints = sorted(ledger.checkpoints(run_id), key=lambda c: c.step)
    if not checkpoints:
        raise SystemExit(f"run {run_id} has no checkpoint; evaluate a run that finished at least one step")
    suite = suite_for(config)
    group = config.trainer.group_size
    n_prompts = max(1, math.ceil(samples / group))
    prompts, step = [], 0
    while len(prompts) < n_prompts:  # the run's own goal prompts, in its order
        prompts.extend(suite.prompts(step))
        step += 1
    prompts = prompts[:n_prompts]
    policy_config = PolicyConfig(device=config.device, dtype=config.dtype)
    policies = {"before": suite.load_policy(policy_config), "after": Policy.load(checkpoints[-1].path, policy_config)}
    texts: dict[str, list[str]] = {}
    for side, policy in policies.items():
        rollout = policy.sample(
            [suite.prompt_ids(policy, p) for p in prompts], group_size=group, temperature=config.trainer.temperature,
            top_p=config.trainer.top_p, max_new_tokens=config.trainer.max_new_tokens, seed=EVAL_SEED,
        )
        texts[side] = list(rollout.texts)[:samples]
    k = len(texts["before"])
    prompt_of = [prompts[i // group] for i in range(k)]
    with TieredReward(
        config.suite, tiers=[t.model_dump() for t in config.tiers], budget_per_call=budget, max_wait_s=10 * budget,
        run_name=f"eval-{run_id[:8]}", options=config.options, seed=0,
    ) as reward:
        # One call: the same scheduler and budget for both sides; the sides are interleaved so that
        # neither comes first in the batch.
        both = [t for pair in zip(texts["before"], texts["after"], strict=True) for t in pair]
        goals = [p.goal for p in prompt_of for _ in (0, 1)]
        details = reward.score([p.text for p in prompt_of for _ in (0, 1)], both, goal=goals)
        top = reward.ladder[-1].tier.value  # the top rung's tier (RewardDetail.tier names tiers, not verifiers)
    out: dict[str, Any] = {"run_id": run_id, "eval_seed": EVAL_SEED, "samples": k, "prompts": len(prompts),
                           "last_checkpoint_step": checkpoints[-1].step, "budget_cpu_s": budget}
    for index, side in enumerate(("before", "after")):
        mine = details[index::2]
        out[side] = {
            "reward_mean": statistics.fmean(d.reward for d in mine),
            "validity": sum(d.status != "invalid" for d in mine) / k,
            "top_tier_answers": sum(d.tier == top for d in mine),
            "distinct": len(set(texts[side])),
        }
    before, after = ([d.reward for d in details[i::2]] for i in (0, 1))
    out["difference"] = statistics.fmean(after) - statistics.fmean(before)
    out["two_se"] = _two_se(before, after)
    out["beyond_noise"] = abs(out["difference"]) > out["two_se"]
    # The shared seed pairs the sides (sample i of each comes from the same prompt and random stream).
    paired = [y - x for x, y in zip(before, after, strict=True)]
    out["paired_two_se"] = 2.0 * statistics.stdev(paired) / math.sqrt(k)
    out["beyond_noise_paired"] = abs(out["difference"]) > out["paired_two_se"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_id", help="A finished run in the ledger of $ARL_HOME (or $ARL_DATABASE_URL).")
    parser.add_argument("--samples", type=int, default=64, help="Samples per side (default 64).")
    parser.add_argument("--budget", type=float, default=60.0, help="CPU-seconds of verification for both sides together.")
    parser.add_argument("--json", type=Path, default=None, help="Write the result as JSON.")
    args = parser.parse_args(argv)
    if args.samples < 2:
        parser.error("--samples needs at least 2 per side")
    if not args.budget > 0:
        parser.error("--budget takes a positive number of CPU-seconds")
    out = evaluate(args.run_id, args.samples, args.budget)
    b, a = out["before"], out["after"]
    print(f"eval set ({out['samples']} samples, seed {EVAL_SEED}): reward {b['reward_mean']:.3f} -> {a['reward_mean']:.3f} "
          f"({out['difference']:+.3f}; 2 SE {out['two_se']:.3f} two-sample, {out['paired_two_se']:.3f} paired), "
          f"validity {b['validity']:.2f} -> {a['validity']:.2f}, top-tier answers {b['top_tier_answers']} / "
          f"{a['top_tier_answers']}")
    print(json.dumps(out))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
