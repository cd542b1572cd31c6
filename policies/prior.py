"""The tiny goal-conditioned SMILES prior: build, pretrain on shipped QM9, cache.

The prior is a small GPT-2 trained from scratch on the QM9 SMILES shipped in
``storage/data/qm9_gap.csv``, each conditioned on a gap window that contains the
molecule's own DFT gap. Windows are usually the molecule's single 0.5 eV bin and
sometimes a wider run of bins around it, so that multi-bin goal prompts used
later by GRPO are in distribution.

Nothing is downloaded: the architecture comes from ``GPT2Config`` and the
weights from :func:`pretrain`. A pretrained prior is cached under
``~/.arl/priors/<config-hash>/`` (``ARL_HOME`` moves ``~/.arl``) and reused.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from pathlib import Path
from typing import Literal

import torch
from pydantic import BaseModel, Field
from transformers import GPT2Config

from storage.datasets import load_qm9_gaps
from storage.records import params_hash

from .model import Policy, PolicyConfig, collate
from .smiles import GAP_BIN_WIDTH, build_smiles_tokenizer, goal_prompt_ids

__all__ = [
    "PretrainConfig",
    "PretrainReport",
    "build_prior",
    "load_or_pretrain",
    "prior_dir",
    "pretrain",
    "sample_metrics",
]


class PretrainConfig(BaseModel):
    """Architecture, optimisation and evaluation of the SMILES prior."""

    n_layer: int = Field(default=4, ge=1, description="Transformer blocks.")
    n_embd: int = Field(default=128, ge=16, description="Hidden width (must be divisible by n_head).")
    n_head: int = Field(default=4, ge=1, description="Attention heads.")
    n_positions: int = Field(default=64, ge=16, description="Longest prompt + SMILES + eos in tokens (QM9 needs ~45).")
    batch_size: int = Field(default=128, ge=1, description="Sequences per optimizer step.")
    lr: float = Field(default=3e-3, gt=0, description="Peak AdamW learning rate.")
    warmup_steps: int = Field(default=50, ge=0, description="Linear warm-up steps before cosine decay.")
    weight_decay: float = Field(default=0.01, ge=0)
    max_steps: int = Field(default=4000, ge=1, description="Step budget; training also stops at max_minutes.")
    max_minutes: float = Field(
        default=9.0,
        gt=0,
        description=(
            "Wall-clock cap on training (evaluation excluded). The cosine schedule follows "
            "max(step / max_steps, elapsed / max_minutes), so a slow machine still ends at a low lr."
        ),
    )
    budget_clock: Literal["wall", "cpu"] = Field(
        default="wall",
        description=(
            "Clock that max_minutes counts: 'wall' (the default) or 'cpu' = this process's CPU time, which on a "
            "shared machine measures what free cores would do (with num_threads=1, cpu minutes = minutes "
            "of one free core)."
        ),
    )
    wide_window_prob: float = Field(
        default=0.3, ge=0, le=1, description="Share of examples whose goal window spans 2-4 bins instead of one."
    )
    seed: int = Field(default=0, description="Seeds data order, initialisation and evaluation sampling.")
    num_threads: int | None = Field(
        default=None, ge=1, description="torch.set_num_threads during training; None keeps the default."
    )
    eval_samples: int = Field(
        default=1000, ge=1, description="Molecules sampled to measure validity/uniqueness/novelty."
    )
    eval_temperature: float = Field(default=1.0, gt=0, description="Sampling temperature for the evaluation.")
    max_molecules: int | None = Field(default=None, ge=1, description="Train on the first N molecules only (tests).")


class PretrainReport(BaseModel):
    """What pretraining achieved, measured on freshly sampled molecules."""

    steps: int
    minutes: float = Field(description="Training minutes on the config's budget clock.")
    wall_minutes: float = Field(description="Training wall-clock minutes.")
    final_loss: float
    parameters: int
    validity: float = Field(description="Share of samples RDKit parses.")
    uniqueness: float = Field(description="Distinct canonical SMILES / valid samples.")
    novelty: float = Field(description="Distinct valid samples not in the training set / distinct valid samples.")
    samples: int
    config_hash: str


def build_prior(config: PretrainConfig, tokenizer) -> Policy:
    """A freshly initialised GPT-2 sized by ``config`` for the SMILES tokenizer."""
    if config.n_embd % config.n_head:
        raise ValueError(f"n_embd={config.n_embd} must be divisible by n_head={config.n_head}")
    model_config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=config.n_positions,
        n_embd=config.n_embd,
        n_layer=config.n_layer,
        n_head=config.n_head,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    torch.manual_seed(config.seed)
    return Policy.from_config(model_config, tokenizer, PolicyConfig())


def prior_dir(config: PretrainConfig, root: str | Path | None = None) -> Path:
    """Cache directory of the prior trained with ``config`` (``$ARL_HOME/priors/<hash>``, default ``~/.arl``)."""
    base = Path(root) if root else Path(os.environ.get("ARL_HOME", Path.home() / ".arl")) / "priors"
    return base / params_hash(config)


def _goal_window(gap: float, rng: random.Random, wide_prob: float) -> tuple[float, float]:
    low = math.floor(gap / GAP_BIN_WIDTH) * GAP_BIN_WIDTH
    high = low + GAP_BIN_WIDTH
    if rng.random() < wide_prob:
        low -= GAP_BIN_WIDTH * rng.randint(0, 2)
        high += GAP_BIN_WIDTH * rng.randint(0, 2)
        if high - low < 2 * GAP_BIN_WIDTH - 1e-9:
            high += GAP_BIN_WIDTH
    return low, high


def _length_bucketed_batches(seqs: list[list[int]], batch_size: int, rng: random.Random) -> list[list[int]]:
    """One epoch of batches whose members have similar lengths (less padding), in random order."""
    idx = list(range(len(seqs)))
    rng.shuffle(idx)
    chunk = batch_size * 50
    batches = []
    for c in range(0, len(idx), chunk):
        part = sorted(idx[c : c + chunk], key=lambda i: len(seqs[i]))
        batches += [part[b : b + batch_size] for b in range(0, len(part), batch_size)]
    rng.shuffle(batches)
    return batches


def sample_metrics(smiles: list[str], training_set: set[str]) -> dict[str, float]:
    """Validity, uniqueness and novelty of sampled SMILES (canonicalised with RDKit)."""
    from rdkit import Chem, rdBase

    canon = []
    # Silenced here only: RDLogger.DisableLog is process-wide, and the chemistry
    # verifiers read their feedback ("unclosed ring") from RDKit's log.
    with rdBase.BlockLogs():
        for s in smiles:
            mol = Chem.MolFromSmiles(s) if s else None
            if mol is not None and mol.GetNumAtoms() > 0:
                canon.append(Chem.MolToSmiles(mol))
    unique = set(canon)
    return {
        "validity": len(canon) / max(len(smiles), 1),
        "uniqueness": len(unique) / max(len(canon), 1),
        "novelty": len(unique - training_set) / max(len(unique), 1),
    }


def pretrain(config: PretrainConfig | None = None, out_dir: str | Path | None = None) -> tuple[Policy, PretrainReport]:
    """Train the prior from scratch on shipped QM9 SMILES; save it to ``out_dir`` if given."""
    config = config or PretrainConfig()
    if config.num_threads:
        torch.set_num_threads(config.num_threads)
    data = load_qm9_gaps()
    if config.max_molecules:
        data = data[: config.max_molecules]
    tokenizer = build_smiles_tokenizer(s for s, _ in data)
    policy = build_prior(config, tokenizer)
    model = policy.model
    rng = random.Random(config.seed)
    smiles_ids = [tokenizer(s, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for s, _ in data]

    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay, betas=(0.9, 0.98))
    clock = time.process_time if config.budget_clock == "cpu" else time.monotonic
    start, wall_start = clock(), time.monotonic()
    budget_s = config.max_minutes * 60.0
    order: list[list[int]] = []
    step, loss_ema = 0, float("nan")
    model.train()
    while step < config.max_steps:
        elapsed = clock() - start
        if elapsed >= budget_s:
            break
        progress = max(step / config.max_steps, elapsed / budget_s)
        warm = min(1.0, (step + 1) / max(config.warmup_steps, 1))
        for group in opt.param_groups:
            group["lr"] = config.lr * warm * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress)))
        if not order:
            order = _length_bucketed_batches(smiles_ids, config.batch_size, rng)
        idx = order.pop()
        seqs, masks = [], []
        for i in idx:
            prompt = goal_prompt_ids(tokenizer, *_goal_window(data[i][1], rng, config.wide_window_prob))
            seq = (prompt + smiles_ids[i])[: config.n_positions]
            seqs.append(seq)
            masks.append([0.0] * len(prompt) + [1.0] * (len(seq) - len(prompt)))
        batch = collate(seqs, masks, tokenizer.pad_token_id, padding_side="right")
        logps, mask = policy.logprobs(batch)
        loss = -(logps * mask).sum() / mask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        loss_ema = loss.item() if math.isnan(loss_ema) else 0.98 * loss_ema + 0.02 * loss.item()
    minutes = (clock() - start) / 60.0
    wall_minutes = (time.monotonic() - wall_start) / 60.0
    model.eval()

    # Evaluate on goals drawn like the training data: each sampled prompt is a real molecule's bin.
    eval_rng = random.Random(config.seed + 1)
    goals = [_goal_window(eval_rng.choice(data)[1], eval_rng, 0.0) for _ in range(config.eval_samples)]
    prompts = [goal_prompt_ids(tokenizer, *goal) for goal in goals]
    texts: list[str] = []
    for b in range(0, len(prompts), 250):
        rollout = policy.sample(prompts[b : b + 250], temperature=config.eval_temperature,
                                max_new_tokens=config.n_positions - 8, seed=config.seed + b)
        texts += rollout.texts
    metrics = sample_metrics(texts, {s for s, _ in data})
    report = PretrainReport(
        steps=step,
        minutes=round(minutes, 2),
        wall_minutes=round(wall_minutes, 2),
        final_loss=round(loss_ema, 4),
        parameters=sum(p.numel() for p in model.parameters()),
        samples=len(texts),
        config_hash=params_hash(config),
        **{k: round(v, 4) for k, v in metrics.items()},
    )
    if out_dir is not None:
        policy.save(out_dir)
        (Path(out_dir) / "pretrain_report.json").write_text(report.model_dump_json(indent=2))
        (Path(out_dir) / "pretrain_config.json").write_text(config.model_dump_json(indent=2))
    return policy, report


def load_or_pretrain(
    config: PretrainConfig | None = None, root: str | Path | None = None, policy_config: PolicyConfig | None = None
) -> tuple[Policy, PretrainReport]:
    """The cached prior for ``config`` if present, else pretrain it and cache it."""
    config = config or PretrainConfig()
    directory = prior_dir(config, root)
    report_file = directory / "pretrain_report.json"
    if report_file.exists() and (directory / "config.json").exists():
        return Policy.load(directory, policy_config), PretrainReport.model_validate(json.loads(report_file.read_text()))
    policy, report = pretrain(config, out_dir=directory)
    if policy_config is not None:
        policy = Policy(policy.model, policy.tokenizer, policy_config)
    return policy, report
