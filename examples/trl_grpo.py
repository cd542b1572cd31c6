"""Train a SMILES policy with TRL's GRPOTrainer, rewarded by ARL's tiered verifiers under a budget.

    python examples/trl_grpo.py --max-steps 20 --ledger sqlite:///$HOME/.arl/trl.db
    arl runs list --json          # the reward's calls are a run of their own ("trl-grpo")
    arl runs show RUN_ID          # per call: reward, spend per tier, calls
    arl report RUN_ID --out rep/

Only ARL's public API is used (``arl_flows.TieredReward``, ``policies``), so
this runs from an installed wheel as well as from the repository. The model
is the shipped SMILES prior when the installed ARL has one (``--model
prior``), else a tiny GPT-2 built here from a config (``--model tiny``,
random weights: most of its early SMILES are invalid, which the fast tier
rejects for milliseconds each), or any local model directory (``--model
PATH``). Everything runs on CPU.

Each GRPO step samples ``--num-generations`` completions for each of
``--prompts`` goal prompts; TieredReward routes them through RDKit + extended
Hückel, GFN2-xTB (in worker processes) and a top tier under
``--budget-per-call`` CPU-seconds, reuses every verdict already in the
ledger, and returns the posterior mean window reward. The top tier defaults
to ``reference-table`` (the shipped QM9 gaps, charged ``--top-cost``
CPU-seconds per call, what a DFT call costs; a molecule outside QM9 gets
"could not verify" there, never a 0); ``--top-tier reference-or-dft`` runs
real DFT for those.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path


def _model(kind: str, seed: int):  # noqa: ANN202 - (model, tokenizer)
    """The policy to train: the shipped prior, a tiny GPT-2 from a config, or a local model directory."""
    import policies
    from arl_flows.suites.molecules import prior as smiles_prior
    from arl_flows.suites.molecules.smiles import build_smiles_tokenizer

    if kind == "auto":
        shipped = smiles_prior.SHIPPED_PRIOR_DIR
        kind = "prior" if (Path(shipped) / "config.json").is_file() else "tiny"
    if kind == "prior":
        policy, _report = smiles_prior.load_or_pretrain(smiles_prior.PretrainConfig())
        return policy.model, policy.tokenizer, "shipped prior"
    if kind == "tiny":
        import torch
        from transformers import GPT2Config, GPT2LMHeadModel

        torch.manual_seed(seed)
        tokenizer = build_smiles_tokenizer()
        config = GPT2Config(
            vocab_size=len(tokenizer), n_layer=2, n_embd=64, n_head=2, n_positions=64,
            bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        )
        return GPT2LMHeadModel(config), tokenizer, "tiny GPT-2 (random weights)"
    policy = policies.Policy.load(kind)
    return policy.model, policy.tokenizer, kind


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--max-steps", type=int, default=20, help="GRPO optimizer steps.")
    p.add_argument("--ledger", default=None, help="Ledger URL (default: $ARL_DATABASE_URL, else ledger.db in $ARL_HOME, which is ~/.arl unless set).")
    p.add_argument("--model", default="auto", help="'prior', 'tiny', a local model directory, or 'auto' (prior if shipped).")
    p.add_argument("--window", type=float, nargs=2, default=(3.0, 4.0), metavar=("LOW", "HIGH"), help="Target gap window (eV).")
    p.add_argument("--budget-per-call", type=float, default=30.0, help="CPU-seconds of verification per reward call.")
    p.add_argument("--top-tier", default="reference-table", choices=["reference-table", "reference-or-dft", "pyscf-b3lyp"])
    p.add_argument("--top-cost", type=float, default=12.0, help="CPU-seconds charged per reference-table call.")
    p.add_argument("--policy", default="voi", help="Scheduler policy: 'voi' (default) or 'all' (every completion to the top).")
    p.add_argument("--warm-start", type=int, default=0,
                   help="Calibrate the scheduler first on this many QM9 molecules verified on every tier (charged to the "
                   "run; a later run on the same ledger gets them free). Without any history, 'voi' rarely escalates.")
    p.add_argument("--prompts", type=int, default=2, help="Goal prompts per step.")
    p.add_argument("--num-generations", type=int, default=4, help="Completions per prompt (the GRPO group).")
    p.add_argument("--max-completion-length", type=int, default=32)
    p.add_argument("--learning-rate", type=float, default=5e-5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--run-name", default="trl-grpo", help="Name of the ledger run of the reward's calls.")
    p.add_argument("--output-dir", default=None, help="TRL's output directory (default: a temporary one).")
    p.add_argument("--summary-json", default=None, help="Also write the run id, spend and per-step rewards here.")
    args = p.parse_args(argv)
    if args.max_steps < 1 or args.prompts < 1 or args.num_generations < 2:
        p.error("--max-steps and --prompts must be at least 1 and --num-generations at least 2")
    if not (math.isfinite(args.budget_per_call) and args.budget_per_call > 0):
        p.error("--budget-per-call must be a positive number of CPU-seconds")
    return args


def tiers(top: str, top_cost: float) -> list:
    top_tier = ("reference-table", {"cost_per_call": top_cost}) if top == "reference-table" else (top, {"threads": 1})
    return ["rdkit-eht", ("gfn2-xtb", {"threads": 1, "workers": 1}), top_tier]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from arl_flows import TieredReward
    from arl_flows.suites.molecules.smiles import goal_prompt_ids

    torch.set_num_threads(1)
    model, tokenizer, origin = _model(args.model, args.seed)
    low, high = args.window
    prompt = tokenizer.decode(goal_prompt_ids(tokenizer, low, high))
    dataset = Dataset.from_dict({"prompt": [prompt] * max(64, args.prompts * args.max_steps)})

    reward = TieredReward(
        suite="molecules",
        objective=(low, high),
        budget_per_call=args.budget_per_call,
        ledger_url=args.ledger,
        tiers=tiers(args.top_tier, args.top_cost),
        policy=args.policy,
        group_size=args.num_generations,
        run_name=args.run_name,
        seed=args.seed,
    )
    if args.warm_start > 0:
        spent = reward.warm_start(args.warm_start)
        print(f"warm start: {args.warm_start} QM9 molecules on every tier, {spent:.1f} CPU-seconds charged")
    out_dir = args.output_dir or tempfile.mkdtemp(prefix="arl-trl-")
    config = GRPOConfig(
        output_dir=out_dir,
        max_steps=args.max_steps,
        per_device_train_batch_size=args.prompts * args.num_generations,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        learning_rate=args.learning_rate,
        temperature=1.0,
        beta=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=args.seed,
        data_seed=args.seed,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=config, train_dataset=dataset, processing_class=tokenizer)
    t0 = time.perf_counter()
    with reward:  # closed however training ends: the ledger run is marked completed, the tiers' workers stop
        trainer.train()
    seconds = time.perf_counter() - t0
    summary = reward.ledger.run_summary(reward.run_id)
    spend = sum(summary["spend_by_tier"].values())
    print(f"model: {origin}; {args.max_steps} GRPO steps in {seconds:.1f} s wall")
    for step in summary["steps"]:
        if step["reward_mean"] is None:  # the warm start's calibration step
            continue
        by_tier = ", ".join(f"{t} {s:.2f}s" for t, s in sorted(step["spend_by_tier"].items())) or "nothing new"
        print(f"  reward call {step['step']}: mean reward {step['reward_mean']:.3f}, validity {step['validity']:.2f}, spend {by_tier}")
    print(f"ledger run {reward.run_id}: {summary['trajectories']} completions, {summary['candidates']} distinct, "
          f"{spend:.2f} CPU-seconds of verification; see `arl runs show {reward.run_id}`")
    if args.summary_json:
        Path(args.summary_json).write_text(
            json.dumps({"run_id": reward.run_id, "spend": spend, "seconds": seconds, "steps": summary["steps"]}, default=str)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
