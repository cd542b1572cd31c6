"""The tiny goal-conditioned SMILES prior: build, pretrain on shipped QM9, cache.

The prior is a small GPT-2 trained from scratch on the QM9 SMILES shipped in
``arl_flows/suites/molecules/data/qm9_gap.csv``, each conditioned on a gap window that contains the
molecule's own DFT gap. Windows are usually the molecule's single 0.5 eV bin and
sometimes a wider run of bins around it, so that multi-bin goal prompts used
later by GRPO are in distribution.

Nothing is downloaded: the architecture comes from ``GPT2Config`` and the
weights from :func:`pretrain`. The budget that decides the prior's quality is
a number of optimizer steps, never seconds, so the same config gives the same
prior on an idle laptop and on a loaded cluster node; ``max_minutes`` is only a
safety cap, and a run it cuts short is reported as truncated and never cached.

The default prior ships with the package (``arl_flows/suites/molecules/data/smiles_prior/``,
trained once by ``arl prior pretrain --ship``), so a first run loads it instead
of pretraining. Any other config is pretrained on first use and cached under
``~/.arl/priors/<config-hash>/`` (``ARL_HOME`` moves ``~/.arl``), but only when
it completed its steps and passes the quality gate (validity of its own
samples >= ``min_validity``); a prior below the gate is used for that run with
a loud warning and kept aside for inspection, never as a cached default.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import time
import warnings
from pathlib import Path

import torch
from pydantic import BaseModel, Field
from transformers import GPT2Config

from arl_flows.suites.molecules.datasets import load_qm9_gaps
from policies import Policy, PolicyConfig, collate
from storage.records import params_hash
from storage.settings import settings

from arl_flows.suites.molecules.options import PretrainConfig

from arl_flows.suites.molecules.smiles import GAP_BIN_WIDTH, build_smiles_tokenizer, goal_prompt_ids

# rdkit is heavy: imported in the function that checks sampled molecules.
__all__ = [
    "SHIPPED_PRIOR_DIR",
    "LowQualityPrior",
    "PretrainConfig",
    "PretrainReport",
    "build_prior",
    "load_or_pretrain",
    "prior_cache_key",
    "prior_dir",
    "pretrain",
    "sample_metrics",
    "save_prior",
    "shipped_prior",
]

SHIPPED_PRIOR_DIR = Path(__file__).parent / "data" / "smiles_prior"

# Fields that bound or tune how a pretraining run executes, not which prior it
# produces: they are left out of the cache key.
_RUN_ONLY_FIELDS = {"max_minutes", "budget_clock", "num_threads", "min_validity"}


class LowQualityPrior(UserWarning):
    """A prior that was cut short by its safety cap or fell below the validity gate."""


class PretrainReport(BaseModel):
    """What pretraining achieved, measured on freshly sampled molecules."""

    steps: int
    max_steps: int = Field(default=0, description="The step budget asked for.")
    truncated: bool = Field(default=False, description="The safety cap stopped training before max_steps.")
    data_sha256: str = Field(default="", description="SHA-256 of the training data (canonical SMILES and gaps).")
    molecules: int = Field(default=0, description="Training molecules.")
    minutes: float = Field(description="Training minutes on the config's budget clock.")
    wall_minutes: float = Field(description="Training wall-clock minutes.")
    final_loss: float
    parameters: int
    validity: float = Field(description="Share of samples RDKit parses.")
    uniqueness: float = Field(description="Distinct canonical SMILES / valid samples.")
    novelty: float = Field(description="Distinct valid samples not in the training set / distinct valid samples.")
    samples: int
    config_hash: str

    @property
    def completed(self) -> bool:
        """Trained for its whole step budget."""
        return not self.truncated and self.steps >= self.max_steps


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


def prior_cache_key(config: PretrainConfig) -> str:
    """Hash of the fields that decide the prior (architecture, optimisation, steps, seed, data)."""
    return params_hash(config.model_dump(mode="json", exclude=_RUN_ONLY_FIELDS))


def prior_dir(config: PretrainConfig, root: str | Path | None = None) -> Path:
    """Cache directory of the prior trained with ``config`` (``$ARL_HOME/priors/<hash>``, default ``~/.arl``)."""
    base = Path(root) if root else settings().home / "priors"
    return base / prior_cache_key(config)


def shipped_prior(config: PretrainConfig) -> Path | None:
    """The prior shipped in the package if it was trained with ``config``'s cache key, else None."""
    report_file = SHIPPED_PRIOR_DIR / "pretrain_report.json"
    if not (report_file.is_file() and (SHIPPED_PRIOR_DIR / "config.json").is_file()):
        return None
    try:
        key = json.loads(report_file.read_text())["config_hash"]
    except (OSError, ValueError, KeyError):
        return None
    return SHIPPED_PRIOR_DIR if key == prior_cache_key(config) else None


def _data_digest(data: list[tuple[str, float]]) -> str:
    digest = hashlib.sha256()
    for smiles, gap in data:
        digest.update(f"{smiles},{gap!r}\n".encode())
    return digest.hexdigest()


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
        if clock() - start >= budget_s:  # the safety cap, reported as truncated below
            break
        progress = step / config.max_steps
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
        max_steps=config.max_steps,
        truncated=step < config.max_steps,
        data_sha256=_data_digest(data),
        molecules=len(data),
        minutes=round(minutes, 2),
        wall_minutes=round(wall_minutes, 2),
        final_loss=round(loss_ema, 4),
        parameters=sum(p.numel() for p in model.parameters()),
        samples=len(texts),
        config_hash=prior_cache_key(config),
        **{k: round(v, 4) for k, v in metrics.items()},
    )
    if out_dir is not None:
        save_prior(policy, report, config, Path(out_dir))
    return policy, report


def _gate_failures(config: PretrainConfig, report: PretrainReport) -> list[str]:
    problems = []
    if not report.completed:
        problems.append(f"the {config.max_minutes:g}-minute safety cap stopped it at {report.steps} of {report.max_steps} steps")
    if report.validity < config.min_validity:
        problems.append(f"only {report.validity:.0%} of its samples are valid (the gate is {config.min_validity:.0%})")
    return problems


def load_or_pretrain(
    config: PretrainConfig | None = None, root: str | Path | None = None, policy_config: PolicyConfig | None = None
) -> tuple[Policy, PretrainReport]:
    """The shipped or cached prior for ``config`` if there is one, else pretrain it (and cache it if it passes).

    A prior that was cut short by its safety cap, or whose validity is below
    ``config.min_validity``, is returned for this run with a
    :class:`LowQualityPrior` warning and saved beside the cache as
    ``<hash>.rejected`` for inspection; the next run pretrains again.
    """
    config = config or PretrainConfig()
    directory = shipped_prior(config) if root is None else None
    if directory is None:
        directory = prior_dir(config, root)
    report_file = directory / "pretrain_report.json"
    if report_file.exists() and (directory / "config.json").exists():
        return Policy.load(directory, policy_config), PretrainReport.model_validate(json.loads(report_file.read_text()))
    policy, report = pretrain(config)
    problems = _gate_failures(config, report)
    target = directory.with_name(directory.name + ".rejected") if problems else directory
    save_prior(policy, report, config, target)
    if problems:
        warnings.warn(
            f"the SMILES prior {report.config_hash} is below the quality gate: {'; '.join(problems)}. It is used for "
            f"this run only and not cached (kept in {target}); retrain with `arl prior pretrain`.",
            LowQualityPrior, stacklevel=2,
        )
    if policy_config is not None:
        policy = Policy(policy.model, policy.tokenizer, policy_config)
    return policy, report


def save_prior(policy: Policy, report: PretrainReport, config: PretrainConfig, directory: Path) -> None:
    """Write the prior with its report and config, replacing ``directory`` at once (:meth:`Policy.save_replacing`)."""
    policy.save_replacing(
        directory,
        {"pretrain_report.json": report.model_dump_json(indent=2), "pretrain_config.json": config.model_dump_json(indent=2)},
    )
