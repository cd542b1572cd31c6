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

import functools
import hashlib
import json
import math
import os
import random
import time
import warnings
from collections.abc import Iterable
from pathlib import Path

import torch
from pydantic import BaseModel, Field
from transformers import GPT2Config

from arl_flows.suites.molecules.datasets import load_qm9_gaps, smiles_column
from policies import Policy, PolicyConfig, collate
from storage.records import params_hash
from storage.settings import settings

from arl_flows.suites.molecules.grammar import space_grammar
from arl_flows.suites.molecules.options import PretrainConfig
from arl_flows.suites.molecules.sample_quality import sample_metrics, space_references

from arl_flows.suites.molecules.smiles import GAP_BIN_WIDTH, build_smiles_tokenizer, goal_prompt_ids

# rdkit is heavy: imported in the function that checks sampled molecules.
__all__ = [
    "DRUGLIKE_LABELS",
    "DRUGLIKE_PRIOR_DIR",
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
    "druglike_goal_labels",
    "kekule_smiles",
    "druglike_training_smiles",
    "evaluate_prior",
    "read_pretrain_config",
    "goal_steering",
    "save_prior",
    "shipped_dir",
    "shipped_prior",
]

SHIPPED_PRIOR_DIR = Path(__file__).parent / "data" / "smiles_prior"
DRUGLIKE_PRIOR_DIR = Path(__file__).parent / "data" / "druglike_prior"
# The druglike prior's goal labels: the fast tier's gap on a fixed subset of MOSES train (benchmarks/moses_labels.py).
DRUGLIKE_LABELS = Path(__file__).parent / "data" / "druglike_prior_labels.csv.gz"

# Fields that bound or tune how a pretraining run executes, not which prior it
# produces: they are left out of the cache key.
_RUN_ONLY_FIELDS = {"max_minutes", "budget_clock", "num_threads", "min_validity", "data"}
# Fields a qm9 prior leaves out of its key (they do not apply to it), so the shipped qm9 prior keeps its hash.
_DRUGLIKE_ONLY_FIELDS = {"space", "labeled_share", "smiles_form"}


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
    internal_diversity: float | None = Field(
        default=None, description="MOSES IntDiv1 of the valid samples: 1 - mean pairwise Tanimoto (Morgan r=2, 1024 bits)."
    )
    scaffold_novelty: float | None = Field(
        default=None, description="Distinct Bemis-Murcko scaffolds of valid samples that no training molecule has / distinct scaffolds."
    )
    fcd: float | None = Field(
        default=None, description="Frechet ChemNet Distance of the valid samples to fcd_reference (druglike: MOSES test); None: no reference."
    )
    fcd_reference: str | None = Field(default=None, description="What fcd compares against (file, molecules, seed).")
    invalid_kinds: dict[str, float] | None = Field(
        default=None, description="Why invalid samples fail, as shares of all samples (unclosed_ring, unbalanced_branch, "
        "syntax, valence, aromaticity, other); None: a report written before it was measured."
    )
    grammar: dict | None = Field(
        default=None, description="The same metrics (same prompts, seeds and sample count) sampled under the space's SMILES "
        "grammar (grammar.py), as runs sample by default; the fields above decode unconstrained, as MOSES's baselines do. "
        "None: not measured.",
    )
    samples: int
    config_hash: str
    start_steps: int = Field(default=0, description="Optimizer steps of the warm-start prior(s) this one continued (0: from scratch).")
    labeled_molecules: int | None = Field(default=None, description="druglike: molecules of the gap-labeled subset.")
    goal_set_copies: float | None = Field(
        default=None, description="druglike: share of valid samples that repeat a molecule of the gap-labeled subset (the "
        "goal-prompted examples, seen far more often than the rest of MOSES): how memorising the labels shows. None: qm9, "
        "or a report written before it was measured."
    )
    goal_steering: list[dict] = Field(
        default_factory=list, description="druglike: per goal bin, the fast tier's median gap of samples and share in the bin."
    )

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


def _start_policy(config: PretrainConfig, tokenizer) -> tuple[Policy, int]:  # noqa: ANN001
    """The weights training starts from, and the steps already in them: fresh, or ``config.warm_start``'s prior.

    The warm start is found as any prior is (shipped, cached, else pretrained first, with this config's data);
    its tokenizer must be this data's, token for token.
    """
    if config.warm_start is None:
        return build_prior(config, tokenizer), 0
    start = config.warm_start.model_copy(update={"data": config.warm_start.data or config.data})
    with warnings.catch_warnings():  # a start below the gate is a starting point, not a prior anyone samples from
        warnings.simplefilter("ignore", LowQualityPrior)
        policy, report = load_or_pretrain(start)
    if policy.tokenizer.get_vocab() != tokenizer.get_vocab():
        raise ValueError(f"the warm-start prior {report.config_hash} has another tokenizer than this data's; continue a "
                         "prior trained on the same data")
    return policy, report.steps + report.start_steps


def prior_cache_key(config: PretrainConfig) -> str:
    """Hash of the fields that decide the prior (architecture, optimisation, steps, seed, data)."""
    exclude = _RUN_ONLY_FIELDS | {"warm_start"} | (_DRUGLIKE_ONLY_FIELDS if config.space == "qm9" else set())
    if config.smiles_form == "aromatic":  # the form every prior had before Kekule priors: their hashes stand
        exclude = exclude | {"smiles_form"}
    fields = config.model_dump(mode="json", exclude=exclude)
    if config.warm_start is not None:  # the prior it continues enters by its own key (a prior from scratch keeps its hash)
        fields["warm_start"] = prior_cache_key(config.warm_start)
    return params_hash(fields)


def prior_dir(config: PretrainConfig, root: str | Path | None = None) -> Path:
    """Cache directory of the prior trained with ``config`` (``$ARL_HOME/priors/<hash>``, default ``~/.arl``)."""
    base = Path(root) if root else settings().home / "priors"
    return base / prior_cache_key(config)


def shipped_dir(space: str) -> Path:
    """Where the package ships ``space``'s prior (qm9: ``data/smiles_prior``, druglike: ``data/druglike_prior``)."""
    return DRUGLIKE_PRIOR_DIR if space == "druglike" else SHIPPED_PRIOR_DIR


def shipped_prior(config: PretrainConfig) -> Path | None:
    """The prior shipped in the package for ``config.space`` if it was trained with ``config``'s cache key, else None."""
    directory = shipped_dir(config.space)
    report_file = directory / "pretrain_report.json"
    if not (report_file.is_file() and (directory / "config.json").is_file()):
        return None
    try:
        key = json.loads(report_file.read_text())["config_hash"]
    except (OSError, ValueError, KeyError):
        return None
    return directory if key == prior_cache_key(config) else None


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


def druglike_training_smiles(config: PretrainConfig) -> list[str]:
    """MOSES train as read from ``config.data`` (first ``max_molecules`` rows if set); one-line error if it is missing."""
    if not config.data:
        raise ValueError("the druglike prior trains on MOSES train, which is not shipped: set [options.prior] data or "
                         "pass --data path/to/moses/train.csv.gz")
    path = Path(config.data).expanduser()
    if not path.is_file():
        raise ValueError(f"MOSES training data {str(path)!r} is not a file; pass --data path/to/moses/train.csv.gz")
    smiles = list(smiles_column(path))
    return smiles[: config.max_molecules] if config.max_molecules else smiles


def kekule_smiles(smiles: list[str]) -> list[str]:
    """RDKit's canonical Kekule SMILES of each molecule (explicit single and double bonds, no aromatic atoms).

    A SMILES RDKit cannot parse or kekulize is a one-line ValueError naming it: training data must be valid.
    """
    from rdkit import Chem, rdBase

    out = []
    # BlockLogs, not RDLogger.DisableLog: that is process-wide, and the evaluation after training reads why a sample
    # is invalid ("unclosed ring") from RDKit's log.
    with rdBase.BlockLogs():
        for smi in smiles:
            mol = Chem.MolFromSmiles(smi)
            if mol is None:
                raise ValueError(f"training SMILES {smi[:80]!r} does not parse; the prior trains on valid molecules only")
            Chem.Kekulize(mol, clearAromaticFlags=True)
            out.append(Chem.MolToSmiles(mol, kekuleSmiles=True))
    return out


def druglike_goal_labels() -> list[tuple[str, float]]:
    """The goal labels of the druglike prior: (canonical SMILES, gap in eV) for the labeled MOSES subset.

    MOSES has no gap labels, so a fixed subset was labeled with the suite's fast tier (``rdkit-eht``,
    ``benchmarks/moses_labels.py``). Extended Hueckel gaps sit on their own scale; they are put on the
    DFT scale that goal windows are written in by a least-squares line fitted on the shipped QM9 lower-tier
    table (EHT vs B3LYP gap) over the range of EHT gaps the subset spans. This is an estimate extrapolated
    from 9 to ~27 heavy atoms: the bins order molecules by their EHT gap; their absolute eV are approximate.
    """
    import csv
    import gzip

    with gzip.open(DRUGLIKE_LABELS, "rt", newline="") as fh:
        rows = [(r["smiles"], float(r["eht_gap_ev"])) for r in csv.DictReader(fh)]
    slope, intercept = eht_to_dft_line(min(g for _, g in rows), max(g for _, g in rows))
    return [(smi, slope * g + intercept) for smi, g in rows]


@functools.cache
def eht_to_dft_line(low: float, high: float) -> tuple[float, float]:
    """(slope, intercept) of DFT gap ~ EHT gap on QM9's shipped lower-tier table, rows with EHT in [low, high]."""
    import csv
    import gzip

    import numpy as np

    table = Path(__file__).parent / "data" / "surrogate" / "qm9_lower_tiers.csv.gz"
    xs, ys = [], []
    with gzip.open(table, "rt", newline="") as fh:
        for row in csv.DictReader(fh):
            if row["rdkit-eht"] and low <= float(row["rdkit-eht"]) <= high:
                xs.append(float(row["rdkit-eht"]))
                ys.append(float(row["gap_ev"]))
    slope, intercept = np.polyfit(np.array(xs), np.array(ys), 1)
    return float(slope), float(intercept)


def _train(config: PretrainConfig, policy: Policy, next_batch) -> tuple[int, float, float, float]:  # noqa: ANN001
    """The optimizer loop shared by every space: ``next_batch()`` gives (sequences, loss masks)."""
    model = policy.model
    tokenizer = policy.tokenizer
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay, betas=(0.9, 0.98))
    clock = time.process_time if config.budget_clock == "cpu" else time.monotonic
    start, wall_start = clock(), time.monotonic()
    budget_s = config.max_minutes * 60.0
    step, loss_ema = 0, float("nan")
    model.train()
    while step < config.max_steps:
        if clock() - start >= budget_s:  # the safety cap, reported as truncated below
            break
        progress = step / config.max_steps
        warm = min(1.0, (step + 1) / max(config.warmup_steps, 1))
        for group in opt.param_groups:
            group["lr"] = config.lr * warm * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress)))
        seqs, masks = next_batch()
        batch = collate(seqs, masks, tokenizer.pad_token_id, padding_side="right")
        logps, mask = policy.logprobs(batch)
        loss = -(logps * mask).sum() / mask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        loss_ema = loss.item() if math.isnan(loss_ema) else 0.98 * loss_ema + 0.02 * loss.item()
        if os.environ.get("ARL_PRIOR_PROGRESS") and step % 100 == 0:
            print(f"step {step}/{config.max_steps} loss {loss_ema:.4f} {time.monotonic() - wall_start:.0f} s", flush=True)
    model.eval()
    return step, loss_ema, (clock() - start) / 60.0, (time.monotonic() - wall_start) / 60.0


def _sample_goals(policy: Policy, config: PretrainConfig, goals: list[tuple[float, float]], seed: int,
                  grammar: bool = False) -> list[str]:
    """Samples for ``goals``, 250 a batch; with ``grammar``, under the space's SMILES grammar (``grammar.py``)."""
    prompts = [goal_prompt_ids(policy.tokenizer, *goal) for goal in goals]
    constraint = space_grammar(policy.tokenizer, config.space, kekule=config.smiles_form == "kekule") if grammar else None
    texts: list[str] = []
    for b in range(0, len(prompts), 250):
        rollout = policy.sample(prompts[b : b + 250], temperature=config.eval_temperature,
                                max_new_tokens=config.n_positions - 8, seed=seed + b, constraint=constraint)
        texts += rollout.texts
    return texts


def pretrain(config: PretrainConfig | None = None, out_dir: str | Path | None = None) -> tuple[Policy, PretrainReport]:
    """Train the prior of ``config.space`` on its training set (from scratch, or on from ``config.warm_start``); save it to ``out_dir`` if given."""
    config = config or PretrainConfig()
    if config.num_threads:
        torch.set_num_threads(config.num_threads)
    if config.space == "druglike":
        policy, report = _pretrain_druglike(config)
    else:
        policy, report = _pretrain_qm9(config)
    if out_dir is not None:
        save_prior(policy, report, config, Path(out_dir))
    return policy, report


def _prompted(prompt: list[int], target: list[int], n_positions: int) -> tuple[list[int], list[float]]:
    """``prompt + target`` cut to ``n_positions``, and its loss mask: 0 on the prompt, 1 on the target."""
    seq = (prompt + target)[:n_positions]
    return seq, [0.0] * len(prompt) + [1.0] * (len(seq) - len(prompt))


def _pretrain_qm9(config: PretrainConfig) -> tuple[Policy, PretrainReport]:
    """The QM9 prior: every molecule carries a goal window around its own DFT gap."""
    data = load_qm9_gaps()
    if config.max_molecules:
        data = data[: config.max_molecules]
    tokenizer = build_smiles_tokenizer(s for s, _ in data)
    policy, start_steps = _start_policy(config, tokenizer)
    rng = random.Random(config.seed)
    smiles_ids = [tokenizer(s, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for s, _ in data]
    order: list[list[int]] = []

    def next_batch() -> tuple[list[list[int]], list[list[float]]]:
        if not order:
            order.extend(_length_bucketed_batches(smiles_ids, config.batch_size, rng))
        seqs, masks = [], []
        for i in order.pop():
            prompt = goal_prompt_ids(tokenizer, *_goal_window(data[i][1], rng, config.wide_window_prob))
            seq, mask = _prompted(prompt, smiles_ids[i], config.n_positions)
            seqs.append(seq)
            masks.append(mask)
        return seqs, masks

    step, loss_ema, minutes, wall_minutes = _train(config, policy, next_batch)
    texts, metrics = _evaluate(policy, config, data)
    _, grammar = _evaluate(policy, config, data, grammar=True)
    return policy, _report(config, policy, step, loss_ema, minutes, wall_minutes, _data_digest(data), len(data), texts, metrics,
                           start_steps=start_steps, grammar=_without_reference(grammar))


def _evaluate(policy: Policy, config: PretrainConfig, goal_data: list[tuple[str, float]],
              samples: int | None = None, grammar: bool = False, goal_set: set[str] | None = None) -> tuple[list[str], dict]:
    """Sample ``samples`` (default ``config.eval_samples``) and measure them (:func:`sample_metrics`).

    Each prompt is the goal bin of a molecule of ``goal_data`` (qm9: the table; druglike: the labeled
    subset), drawn with the config's seed: the same config and policy give the same samples, so a prior's
    report can be recomputed from its directory (:func:`evaluate_prior`). With ``grammar`` the same prompts
    and seeds sample under the space's SMILES grammar. ``goal_set`` is :func:`_canonical_set` of a druglike
    ``goal_data``, when the caller has it (canonicalising 30,000 labeled molecules takes ~14 CPU-s).
    """
    training_set, scaffolds, reference = space_references(config.space, [smi for smi, _ in goal_data])  # a missing index fails first
    eval_rng = random.Random(config.seed + 1)
    goals = [_goal_window(eval_rng.choice(goal_data)[1], eval_rng, 0.0) for _ in range(samples or config.eval_samples)]
    texts = _sample_goals(policy, config, goals, config.seed, grammar=grammar)
    if goal_set is None and config.space == "druglike":
        goal_set = _canonical_set(smi for smi, _ in goal_data)
    metrics = sample_metrics(texts, training_set, scaffolds, reference, goal_set)
    rounded = {k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items()}
    return texts, rounded | {"fcd_reference": reference.source if reference is not None else None}


def _canonical_set(smiles: Iterable[str]) -> set[str]:
    """RDKit canonical SMILES of ``smiles`` (Kekule or aromatic alike), the form sampled molecules are compared in."""
    from arl_flows.suites.molecules.chemistry import canonical_smiles

    return {c for c in map(canonical_smiles, smiles) if c is not None}


def _without_reference(metrics: dict) -> dict:
    """A report's ``grammar`` block: the metrics without ``fcd_reference`` (the report's own names it)."""
    return {k: v for k, v in metrics.items() if k != "fcd_reference"}


def read_pretrain_config(directory: str | Path) -> PretrainConfig:
    """The config a prior in ``directory`` was trained with (its ``pretrain_config.json``); a bad directory is one ValueError line."""
    directory = Path(directory).expanduser()
    config_file = directory / "pretrain_config.json"
    if not directory.is_dir():
        raise ValueError(f"{str(directory)!r} is not a directory; pass a prior's directory (one with pretrain_config.json)")
    if not (config_file.is_file() and (directory / "config.json").is_file()):
        raise ValueError(f"{str(directory)!r} holds no saved prior (config.json and pretrain_config.json); pass the "
                         "directory `arl prior pretrain` wrote")
    try:
        return PretrainConfig.model_validate_json(config_file.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{config_file}: not a prior's pretrain config ({' '.join(str(exc).split())[:200]})") from None


def evaluate_prior(directory: str | Path, samples: int | None = None, grammar: bool = False) -> tuple[PretrainConfig, dict]:
    """The sample metrics of the prior saved in ``directory``, recomputed without training (``arl prior evaluate``).

    The directory is one :func:`save_prior` wrote (its ``pretrain_config.json`` says the space and the
    sampling); ``samples`` defaults to the config's ``eval_samples``; ``grammar`` samples under the space's
    SMILES grammar. A bad directory is one ValueError line.
    """
    config = read_pretrain_config(directory)
    goal_data = druglike_goal_labels() if config.space == "druglike" else load_qm9_gaps()
    if config.space != "druglike" and config.max_molecules:
        goal_data = goal_data[: config.max_molecules]
    policy = Policy.load(Path(directory).expanduser())
    texts, metrics = _evaluate(policy, config, goal_data, samples, grammar=grammar)
    return config, metrics | {"samples": len(texts)}


def _report(config, policy, step, loss_ema, minutes, wall_minutes, digest, molecules, texts, metrics, **extra) -> PretrainReport:  # noqa: ANN001
    return PretrainReport(
        steps=step,
        max_steps=config.max_steps,
        truncated=step < config.max_steps,
        data_sha256=digest,
        molecules=molecules,
        minutes=round(minutes, 2),
        wall_minutes=round(wall_minutes, 2),
        final_loss=round(loss_ema, 4),
        parameters=sum(p.numel() for p in policy.model.parameters()),
        samples=len(texts),
        config_hash=prior_cache_key(config),
        **metrics,
        **extra,
    )


def _pretrain_druglike(config: PretrainConfig) -> tuple[Policy, PretrainReport]:
    """The druglike prior: MOSES train, a ``labeled_share`` of each batch from the EHT-labeled subset with goal prompts.

    Unlabeled molecules get the goal-free prompt ``<bos> <sep>``, so the prior learns MOSES's whole
    distribution from 1.58M molecules and what the gap-bin tokens mean from the labeled subset.
    """
    moses = druglike_training_smiles(config)
    space_references("druglike")  # a missing shipped index fails here, before training, not after it
    labeled = druglike_goal_labels()
    if config.smiles_form == "kekule":
        moses = kekule_smiles(moses)
        labeled = list(zip(kekule_smiles([smi for smi, _ in labeled]), (gap for _, gap in labeled)))
    tokenizer = build_smiles_tokenizer([*moses, *(s for s, _ in labeled)])
    policy, start_steps = _start_policy(config, tokenizer)
    rng = random.Random(config.seed)
    free_prompt = [tokenizer.bos_token_id, tokenizer.sep_token_id]
    n_labeled = round(config.batch_size * config.labeled_share) if labeled else 0
    # Length buckets (SMILES characters // 4): every batch is drawn from one bucket, picked by a random MOSES
    # molecule, so the bucket mix follows the data and padding stays small. Each bucket's pool is a shuffled
    # epoch of its molecules, refilled when empty.
    def buckets(items: list[str]) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for i, smi in enumerate(items):
            out.setdefault(len(smi) // 4, []).append(i)
        return out

    moses_buckets = buckets(moses)
    labeled_buckets = buckets([smi for smi, _ in labeled])
    pools: dict[tuple[str, int], list[int]] = {}

    def draw(name: str, members: list[int], size: int, key: int) -> list[int]:
        pool = pools.setdefault((name, key), [])
        out = []
        while len(out) < size:
            if not pool:
                pool.extend(members)
                rng.shuffle(pool)
            out.append(pool.pop())
        return out

    def next_batch() -> tuple[list[list[int]], list[list[float]]]:
        key = len(moses[rng.randrange(len(moses))]) // 4
        prompts, texts = [], []
        if n_labeled:
            near = min(labeled_buckets, key=lambda k: (abs(k - key), k))
            for i in draw("labeled", labeled_buckets[near], n_labeled, near):
                prompts.append(goal_prompt_ids(tokenizer, *_goal_window(labeled[i][1], rng, config.wide_window_prob)))
                texts.append(labeled[i][0])
        for i in draw("moses", moses_buckets[key], config.batch_size - n_labeled, key):
            prompts.append(free_prompt)
            texts.append(moses[i])
        ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
        seqs, masks = [], []
        for prompt, smiles_ids in zip(prompts, ids):
            seq, mask = _prompted(prompt, [*smiles_ids, tokenizer.eos_token_id], config.n_positions)
            seqs.append(seq)
            masks.append(mask)
        return seqs, masks

    step, loss_ema, minutes, wall_minutes = _train(config, policy, next_batch)
    goal_set = _canonical_set(smi for smi, _ in labeled)  # once for both evaluations
    texts, metrics = _evaluate(policy, config, labeled, goal_set=goal_set)
    _, grammar = _evaluate(policy, config, labeled, grammar=True, goal_set=goal_set)
    digest = hashlib.sha256()
    for smi in moses:
        digest.update(smi.encode() + b"\n")
    digest.update(_data_digest(labeled).encode())
    steering = goal_steering(policy, config, labeled)
    return policy, _report(config, policy, step, loss_ema, minutes, wall_minutes, digest.hexdigest(), len(moses), texts,
                           metrics, labeled_molecules=len(labeled), goal_steering=steering, start_steps=start_steps,
                           grammar=_without_reference(grammar))


def goal_steering(policy: Policy, config: PretrainConfig, labeled: list[tuple[str, float]], per_goal: int = 60) -> list[dict]:
    """Does the goal prompt steer? For the labels' 10th, 50th and 90th-percentile bins, the fast tier's gap of samples.

    Each sampled molecule is verified by the suite's fast tier (``rdkit-eht``, druglike constraints) and its gap put
    on the labels' scale; a prior that steers has median gaps that rise with the goal bin.
    """
    import statistics

    from arl_flows.suites.molecules.fast import EHTGapVerifier
    from verifiers.base import Candidate

    gaps = sorted(g for _, g in labeled)
    slope, intercept = eht_to_dft_line(*_raw_range())
    tier = EHTGapVerifier({"constraints": {"space": "druglike"}})
    rows = []
    for q in (0.1, 0.5, 0.9):
        low = math.floor(gaps[int(q * (len(gaps) - 1))] / GAP_BIN_WIDTH) * GAP_BIN_WIDTH
        texts = _sample_goals(policy, config, [(low, low + GAP_BIN_WIDTH)] * per_goal, config.seed + 7)
        verdicts = tier.verify_batch([Candidate(key=str(i), suite="molecules", payload=t) for i, t in enumerate(texts)])
        values = [slope * v.value + intercept for v in verdicts if v.value is not None]
        rows.append({
            "goal": [low, low + GAP_BIN_WIDTH],
            "samples": len(texts),
            "ok": len(values),
            "median_gap_ev": round(statistics.median(values), 3) if values else None,
            "in_goal": round(sum(low <= v < low + GAP_BIN_WIDTH for v in values) / max(len(values), 1), 3),
        })
    return rows


def _raw_range() -> tuple[float, float]:
    import csv
    import gzip

    with gzip.open(DRUGLIKE_LABELS, "rt", newline="") as fh:
        raw = [float(r["eht_gap_ev"]) for r in csv.DictReader(fh)]
    return min(raw), max(raw)


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
        report = PretrainReport.model_validate(json.loads(report_file.read_text()))
        if report.validity < config.min_validity:  # a shipped prior below its gate (druglike's was until its Kekule retraining)
            warnings.warn(
                f"the {config.space} SMILES prior {report.config_hash} ({directory}) is below the quality gate: only "
                f"{report.validity:.0%} of its samples are valid (the gate is {config.min_validity:.0%}); it is used as "
                f"shipped. A better one: `arl prior pretrain --space {config.space} --steps N` with more steps.",
                LowQualityPrior, stacklevel=2,
            )
        return Policy.load(directory, policy_config), report
    policy, report = pretrain(config)
    problems = _gate_failures(config, report)
    target = directory.with_name(directory.name + ".rejected") if problems else directory
    save_prior(policy, report, config, target)
    if problems:
        warnings.warn(
            f"the SMILES prior {report.config_hash} is below the quality gate: {'; '.join(problems)}. It is not cached "
            f"(kept in {target}; a run that pretrained it uses it for that run only): give it more steps "
            f"(`arl prior pretrain --steps N`){' or more --data' if config.space == 'druglike' else ''}.",
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
