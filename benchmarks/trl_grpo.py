"""TRL GRPO rewarded by TieredReward vs TRL GRPO rewarded by the top tier on every completion, at equal spend.

Both regimes train the same model from the same seed with TRL's real
``GRPOTrainer`` and the same settings on the gap-window task; they differ
only in the reward function:

- ``tiered``: :class:`arl_flows.TieredReward` with the ``voi`` policy and
  the ``advantage`` objective (``--routing discovery``: the discovery one)
  under ``--budget-per-call`` CPU-seconds;
- ``top-only``: the same class with the ``all`` policy and no per-call cap:
  every valid completion goes up the ladder to the top tier (the fast and
  xTB tiers on the way cost milliseconds to a second; an invalid SMILES
  stops at the fast tier).

Each regime stops once its verification spend reaches ``--budget``
CPU-seconds (or at ``--max-steps``). Both start from a copy of one ledger
holding the same calibration history (``TieredReward.warm_start``; setup,
charged to neither), as in ``arl bench learning``.

Metric: the learning benchmark's top-10 AUC on the cost axis
(:func:`benchmarks.learning.top_k_auc`): whenever a regime's spend
crosses one of ``--audit-points`` evenly spaced marks (and at the end), the
10 molecules it ranks best so far by its own reward estimates are scored
with the top tier, and the mean score is held until the next mark. The top
tier is ``reference-table``: the shipped QM9 gaps, charged one DFT call's
cost (``--top-cost``); it runs no DFT, so this fits on 2 cores. A molecule
outside the QM9 subset cannot be verified there: the regime gets "could
not verify" (its reward then comes from the scheduler's posterior), and an
audit scores it 0, for both regimes alike.

    python -m benchmarks.trl_grpo --budget 600 --seeds 0,1,2 --model prior:1500 --window 3.0 4.0 --max-steps 200
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any
from benchmarks.provenance import format_provenance, with_provenance

os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]


def _ladder(top_cost: float) -> list[Any]:
    return ["rdkit-eht", ("gfn2-xtb", {"threads": 1, "workers": 1}), ("reference-table", {"cost_per_call": top_cost})]


class Audited:
    """A TRL reward function around a TieredReward that keeps the cost-axis audit curve and stops at the budget."""

    def __init__(self, reward: Any, budget: float, marks: list[float], table: dict[str, float], window: tuple[float, float]):
        self.reward = reward
        self.__name__ = reward.__name__
        self.budget = budget
        self.marks = list(marks)
        self.table = table
        self.window = window
        self.spent = 0.0
        self.estimates: dict[str, tuple[float, float]] = {}
        self.valid: set[str] = set()
        self.curve: list[tuple[float, float]] = [(0.0, 0.0)]
        self.samples = 0
        self.valid_samples = 0
        self.calls = 0

    def audit(self) -> float:
        from verifiers.scheduler import window_score

        low, high = self.window
        order = sorted(((m, -s, -i, k) for i, (k, (m, s)) in enumerate(self.estimates.items()) if k in self.valid), reverse=True)
        top = [k for *_, k in order[:10]]
        scores = [float(window_score(self.table[k], low, high, 0.5)) if k in self.table else 0.0 for k in top]
        return sum(scores) / 10.0

    def __call__(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
        out = self.reward(prompts, completions, **kwargs)
        self.calls += 1
        for d in self.reward.last_details:
            self.samples += 1
            if d.status != "invalid":
                self.valid_samples += 1
                self.valid.add(d.candidate_key)
            self.estimates[d.candidate_key] = (d.reward, d.std)
        self.spent += self.reward.last_call.spend_s
        while self.marks and self.spent >= self.marks[0]:
            self.curve.append((self.marks.pop(0), self.audit()))
        return out

    @property
    def done(self) -> bool:
        return self.spent >= self.budget


def run_regime(regime: str, seed: int, args: argparse.Namespace, base_db: Path, work: Path, table: dict[str, float]) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from arl_flows import TieredReward
    from benchmarks.learning import top_k_auc
    from arl_flows.suites.molecules.smiles import goal_prompt_ids

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(args.model, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(args.model, local_files_only=True)
    low, high = args.window
    prompt = tokenizer.decode(goal_prompt_ids(tokenizer, low, high))
    db = work / f"{regime}-s{seed}.db"
    shutil.copy(base_db, db)
    if regime == "tiered":
        kw = {"policy": "voi", "routing": args.routing, "budget_per_call": args.budget_per_call}
    else:
        kw = {"policy": "all", "budget_per_call": math.inf, "max_wait_s": math.inf}
    reward = TieredReward("molecules", objective=(low, high), ledger_url=f"sqlite:///{db}", tiers=_ladder(args.top_cost),
                          run_name=f"bench-trl-{regime}-s{seed}", seed=seed, group_size=args.num_generations, **kw)
    marks = [args.budget * (i + 1) / args.audit_points for i in range(args.audit_points)]
    audited = Audited(reward, args.budget, marks, table, (low, high))

    class StopAtBudget(TrainerCallback):
        def on_step_end(self, _args, state, control, **_kw):  # noqa: ANN001, ANN201 - TRL's callback signature
            if audited.done:
                control.should_training_stop = True
            return control

    config = GRPOConfig(
        output_dir=str(work / f"trl-{regime}-s{seed}"), max_steps=args.max_steps,
        per_device_train_batch_size=args.prompts * args.num_generations, num_generations=args.num_generations,
        max_completion_length=args.max_completion_length, learning_rate=args.learning_rate, temperature=1.0, beta=0.0,
        logging_steps=10_000, save_strategy="no", report_to="none", use_cpu=True, bf16=False, seed=seed, data_seed=seed,
        dataloader_num_workers=0, disable_tqdm=True,
    )
    dataset = Dataset.from_dict({"prompt": [prompt] * (args.prompts * args.max_steps)})
    trainer = GRPOTrainer(model=model, reward_funcs=audited, args=config, train_dataset=dataset, processing_class=tokenizer,
                          callbacks=[StopAtBudget()])
    t0 = time.perf_counter()
    with reward:  # closed however training ends: the ledger run is marked completed, the tiers' workers stop
        trainer.train()
    seconds = time.perf_counter() - t0
    audited.curve.append((min(audited.spent, args.budget), audited.audit()))
    hits = sorted(k for k in audited.valid if k in table and low <= table[k] <= high)
    return {
        "regime": regime, "seed": seed, "top10_auc": top_k_auc(audited.curve, args.budget), "final_top10": audited.curve[-1][1],
        "spend": audited.spent, "steps": audited.calls, "wall_s": seconds, "samples": audited.samples,
        "validity": audited.valid_samples / max(audited.samples, 1), "distinct_valid": len(audited.valid),
        "hits_found": len(hits), "curve": [[round(c, 2), round(s, 4)] for c, s in audited.curve],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=str(ROOT / "tests" / "data" / "tiny_prior"),
                   help="Local SMILES model directory, or 'prior:STEPS' for a 2-layer prior pretrained for STEPS steps "
                   "(cached under ~/.arl/priors; 1500 steps took 3 minutes and samples 68%% valid SMILES).")
    p.add_argument("--budget", type=float, default=600.0, help="Verification CPU-seconds per regime and seed.")
    p.add_argument("--budget-per-call", type=float, default=30.0, help="The tiered regime's budget per reward call.")
    p.add_argument("--routing", default="advantage", choices=["advantage", "discovery"], help="What the tiered regime's voi maximises.")
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--max-steps", type=int, default=60)
    p.add_argument("--prompts", type=int, default=2)
    p.add_argument("--num-generations", type=int, default=8)
    p.add_argument("--max-completion-length", type=int, default=32)
    p.add_argument("--learning-rate", type=float, default=1e-4)
    p.add_argument("--window", type=float, nargs=2, default=(4.0, 5.0))
    p.add_argument("--top-cost", type=float, default=12.0)
    p.add_argument("--history", type=int, default=200, help="QM9 molecules of calibration history (setup, charged to none).")
    p.add_argument("--audit-points", type=int, default=12)
    p.add_argument("--json", default=None)
    args = p.parse_args()

    from arl_flows import TieredReward
    from arl_flows.suites.molecules.datasets import load_qm9_gaps
    from arl_flows.suites.molecules.chemistry import make_candidate

    if args.model.startswith("prior:"):
        from arl_flows.suites.molecules.prior import PretrainConfig, load_or_pretrain, prior_dir

        config = PretrainConfig(n_layer=2, n_embd=96, n_head=2, max_steps=int(args.model.split(":", 1)[1]), max_minutes=25.0,
                                min_validity=0.0, eval_samples=100, batch_size=64, num_threads=1)
        _policy, report = load_or_pretrain(config)
        args.model = str(prior_dir(config))
        print(f"prior: {report.steps} steps, validity {report.validity:.2f}, at {args.model}")
    work = Path(tempfile.mkdtemp(prefix="arl-trl-bench-"))
    os.environ["ARL_HOME"] = str(work / "home")
    rows = []
    try:
        base = work / "base.db"
        with TieredReward("molecules", objective=tuple(args.window), ledger_url=f"sqlite:///{base}",
                          tiers=_ladder(args.top_cost), history=False) as setup:
            setup.warm_start(args.history, seed=12345)
        table = {}
        for smiles, gap in load_qm9_gaps():
            c = make_candidate(smiles)
            if c.valid:
                table.setdefault(c.key, gap)
        for seed in [int(s) for s in args.seeds.split(",")]:
            for regime in ("tiered", "top-only"):
                row = run_regime(regime, seed, args, base, work, table)
                rows.append(row)
                print(f"seed {seed} {regime}: AUC {row['top10_auc']:.3f}, final top-10 {row['final_top10']:.3f}, "
                      f"spend {row['spend']:.0f} s in {row['steps']} steps, wall {row['wall_s']:.0f} s, "
                      f"validity {row['validity']:.2f}, hits {row['hits_found']}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def mean(regime: str, key: str) -> float:
        vals = [r[key] for r in rows if r["regime"] == regime]
        return sum(vals) / len(vals)

    print(f"\n{'regime':<10}{'top10 AUC':>11}{'final top10':>13}{'steps':>7}{'spend (s)':>11}{'wall (s)':>10}{'hits':>6}")
    for regime in ("tiered", "top-only"):
        print(f"{regime:<10}{mean(regime, 'top10_auc'):>11.3f}{mean(regime, 'final_top10'):>13.3f}{mean(regime, 'steps'):>7.1f}"
              f"{mean(regime, 'spend'):>11.0f}{mean(regime, 'wall_s'):>10.0f}{mean(regime, 'hits_found'):>6.1f}")
    top = mean("top-only", "top10_auc")
    ratio = mean("tiered", "top10_auc") / top if top > 0 else math.inf
    print(f"provenance: {format_provenance()}")
    print(f"AUC ratio tiered / top-only: {ratio:.2f}x (target 1.5x); wall ratio: "
          f"{mean('tiered', 'wall_s') / mean('top-only', 'wall_s'):.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(with_provenance({"args": vars(args), "rows": rows, "auc_ratio": ratio}), indent=2, default=str))


if __name__ == "__main__":
    main()
