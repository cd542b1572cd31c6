"""GRPO update throughput: our PolicyTrainer.step versus TRL's GRPOTrainer loss path.

Both sides train an identical copy of the same tiny GPT-2 (the SMILES prior's
architecture, random weights) on the same sampled batch with the same settings
(loss_type, clip range, lr, gradient clipping, no KL). Generation is excluded:
the batch is sampled once and reused. One timed update is, for both:
forward log-probs of the completions, loss, backward, gradient clip, AdamW step.

TRL's side calls ``GRPOTrainer.compute_loss`` (its real ``_compute_loss``,
including TRL's fused LM-head log-prob path and its entropy computation), then
``accelerator.backward``, ``accelerator.clip_grad_norm_`` and its optimizer's
step. ``GRPOTrainer.training_step`` cannot be used directly because its
``_prepare_inputs`` generates new completions.

Run:  OMP_NUM_THREADS=1 python -m benchmarks.grpo_step [--iters 10] [--threads 1] [--update-docs]
"""

from __future__ import annotations

import argparse
import copy
import re
import statistics
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
from policies import GRPOLossConfig, PolicyTrainer, TrainerConfig
from arl_flows.suites.molecules.prior import PretrainConfig, build_prior
from arl_flows.suites.molecules.smiles import build_smiles_tokenizer, goal_prompt_ids
from arl_flows.suites.molecules.datasets import load_qm9_gaps
from benchmarks.provenance import format_provenance
from tests.helpers.trl_loss import trl_loss_trainer

HEADING = "## GRPO update throughput"


def _trl_side(model, tokenizer, config: TrainerConfig, completions: int, out_dir: str):
    """TRL's trainer with our side's settings, read from its config so that the two sides cannot drift apart."""
    loss = config.loss
    trainer = trl_loss_trainer(
        model, tokenizer, out_dir, per_device_train_batch_size=completions, num_generations=config.group_size,
        max_completion_length=loss.max_completion_length, loss_type=loss.loss_type, beta=loss.beta,
        epsilon=loss.epsilon_low, epsilon_high=loss.epsilon_high, learning_rate=config.lr,
        max_grad_norm=config.max_grad_norm, weight_decay=config.weight_decay, temperature=config.temperature,
        bf16=False,  # TRL turns bf16 autocast on by default; both sides run float32 here
    )
    trainer.create_optimizer()
    return trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=10, help="timed updates per side")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=40)
    parser.add_argument("--loss-type", default="dapo", choices=["grpo", "bnpo", "dapo", "dr_grpo"])
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--update-docs", action="store_true", help=f"rewrite the '{HEADING}' section of docs/benchmarks.md")
    a = parser.parse_args()
    torch.set_num_threads(a.threads)

    tokenizer = build_smiles_tokenizer(s for s, _ in load_qm9_gaps())
    prior_cfg = PretrainConfig()
    ours = build_prior(prior_cfg, tokenizer)
    trl_model = copy.deepcopy(ours.model)

    # One batch, sampled once (generation is not timed), reused by both sides.
    prompts = [goal_prompt_ids(tokenizer, lo, lo + 0.5) for lo in [3.0 + 0.5 * i for i in range(a.prompts)]]
    rollout = ours.sample(prompts, group_size=a.group, max_new_tokens=a.max_new_tokens, seed=0)
    rewards = torch.rand(len(rollout.texts), generator=torch.Generator().manual_seed(0)).tolist()
    tokens = int(rollout.completion_mask.sum())

    config = TrainerConfig(group_size=a.group, lr=a.lr, max_grad_norm=1.0, dynamic_sampling=False,
                           loss=GRPOLossConfig(loss_type=a.loss_type, epsilon_low=0.2, epsilon_high=0.28,
                                               max_completion_length=a.max_new_tokens))
    trainer = PolicyTrainer(ours, config)

    from policies import group_advantages

    with tempfile.TemporaryDirectory() as tmp:
        trl_trainer = _trl_side(trl_model, tokenizer, config, len(rollout.texts), tmp)
        inputs = {
            "prompt_ids": rollout.prompt_ids,
            "prompt_mask": rollout.prompt_mask,
            "completion_ids": rollout.completion_ids,
            "completion_mask": rollout.completion_mask.long(),
            "advantages": group_advantages(torch.tensor(rewards), a.group),
            "old_per_token_logps": rollout.logps,
            "num_items_in_batch": rollout.completion_mask.sum(),
        }

        def ours_update() -> None:
            trainer.step(rollout, rewards)

        def trl_update() -> None:
            model = trl_trainer.model
            loss = trl_trainer.compute_loss(model, inputs)
            trl_trainer.accelerator.backward(loss)
            trl_trainer.accelerator.clip_grad_norm_(model.parameters(), config.max_grad_norm)
            trl_trainer.optimizer.step()
            trl_trainer.optimizer.zero_grad(set_to_none=True)

        times: dict[str, list[float]] = {"ours": [], "trl": []}
        for i in range(a.warmup + a.iters):  # interleaved so background load hits both sides alike
            for name, fn in (("ours", ours_update), ("trl", trl_update)):
                t0 = time.perf_counter()
                fn()
                if i >= a.warmup:
                    times[name].append(time.perf_counter() - t0)

    med = {k: statistics.median(v) for k, v in times.items()}
    tps = {k: tokens / v for k, v in med.items()}
    params = sum(p.numel() for p in ours.model.parameters())
    lines = [
        f"model: GPT-2 {prior_cfg.n_layer}x{prior_cfg.n_embd} ({params / 1e6:.2f}M params), batch {a.prompts} prompts x G={a.group}"
        f" = {len(rollout.texts)} completions, {tokens} completion tokens, loss_type={a.loss_type}, threads={a.threads}",
        f"{'side':<6} {'median s/update':>16} {'tokens/s':>10}",
        f"{'ours':<6} {med['ours']:>16.4f} {tps['ours']:>10.0f}",
        f"{'trl':<6} {med['trl']:>16.4f} {tps['trl']:>10.0f}",
        f"ratio ours/trl tokens/s: {tps['ours'] / tps['trl']:.2f}",
    ]
    lines.append(f"provenance: {format_provenance()}")
    print("\n".join(lines))
    if a.update_docs:
        _update_docs(lines, a)


def _update_docs(lines: list[str], a: argparse.Namespace) -> None:
    import trl
    import transformers

    path = ROOT / "docs" / "benchmarks.md"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    cmd = f"OMP_NUM_THREADS={a.threads} python -m benchmarks.grpo_step --iters {a.iters} --threads {a.threads} --loss-type {a.loss_type}"
    body = (
        f"{HEADING}\n\n"
        "Training-update throughput (forward log-probs + loss + backward + grad clip + AdamW step; generation excluded) "
        "of `PolicyTrainer.step` versus TRL's `GRPOTrainer.compute_loss` + backward + optimizer step, same model copy, "
        f"batch and settings, interleaved runs, medians. torch {torch.__version__}, transformers {transformers.__version__}, "
        f"trl {trl.__version__}, CPU shared with other jobs.\n\n"
        f"Command: `{cmd}`\n\n```\n" + "\n".join(lines) + "\n```\n"
    )
    pattern = re.compile(rf"^{re.escape(HEADING)}\n.*?(?=^## |\Z)", re.S | re.M)
    text = pattern.sub(lambda _: body + "\n", text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + body
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)


if __name__ == "__main__":
    main()
