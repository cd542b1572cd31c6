"""The suite's own policy: a character-level GPT-2 pretrained on sympy's (task, answer) pairs.

Nothing is downloaded. The tokenizer is one token per character of the
answer grammar plus two task tokens; a prompt is ``<bos> <derivative> x**2*sin(x)
<sep>`` and the completion is the answer, character by character, then
``<eos>``. :func:`pretrain` draws pairs from :mod:`arl_math.tasks` (the
reference answer of each drawn task) and trains on a budget of optimizer
steps, never seconds, so a config gives the same prior on every machine (one
core, about a minute for the default). :func:`load_or_pretrain` caches it
under ``$ARL_HOME/priors/math-<config hash>/`` (default ``~/.arl``) and
loads it from there on later runs.
"""

from __future__ import annotations

import json
import math
import os
import random
import string
import time
from pathlib import Path

import torch
from pydantic import BaseModel, Field
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import GPT2Config, PreTrainedTokenizerFast

from arl_math.expressions import KINDS, AnswerLimits, InvalidAnswer, parse_answer
from arl_math.options import PriorConfig
from arl_math.tasks import draw_task
from policies import Policy, PolicyConfig, collate
from storage.records import params_hash

__all__ = ["PriorConfig", "PriorReport", "build_tokenizer", "load_or_pretrain", "pretrain", "prior_dir", "prompt_ids"]

_SPECIAL = {"pad_token": "<pad>", "bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "sep_token": "<sep>"}
_KIND_TOKENS = [f"<{k}>" for k in KINDS]
_CHARS = string.digits + string.ascii_letters + "+-*/()."
_RUN_ONLY_FIELDS = {"num_threads"}


class PriorReport(BaseModel):
    """What pretraining did and how the prior's own samples look."""

    steps: int
    pairs: int
    final_loss: float
    parse_rate: float = Field(description="Share of sampled answers the format tier accepts.")
    exact_rate: float = Field(description="Share of sampled answers equal, as text, to the drawn reference.")
    minutes: float
    parameters: int
    config_hash: str


def build_tokenizer() -> PreTrainedTokenizerFast:
    """One token per character of the answer grammar, plus the special and task tokens."""
    vocab_tokens = [*_SPECIAL.values(), *_KIND_TOKENS, *_CHARS]
    core = Tokenizer(models.WordLevel(vocab={t: i for i, t in enumerate(vocab_tokens)}, unk_token=_SPECIAL["unk_token"]))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, **_SPECIAL, padding_side="left")
    tok.add_special_tokens({"additional_special_tokens": _KIND_TOKENS})
    return tok


def prompt_ids(tokenizer: PreTrainedTokenizerFast, kind: str, expr: str) -> list[int]:
    """``<bos> <kind> expr <sep>`` as token ids."""
    body = tokenizer(expr, add_special_tokens=False)["input_ids"]
    return [tokenizer.bos_token_id, tokenizer.convert_tokens_to_ids(f"<{kind}>"), *body, tokenizer.sep_token_id]


def prior_dir(config: PriorConfig) -> Path:
    home = Path(os.environ.get("ARL_HOME", Path.home() / ".arl"))
    return home / "priors" / f"math-{params_hash(config.model_dump(mode='json', exclude=_RUN_ONLY_FIELDS))}"


def pretrain(config: PriorConfig) -> tuple[Policy, PriorReport]:
    """Train the prior from scratch on ``config.pairs`` drawn pairs for ``config.max_steps`` steps."""
    if config.n_embd % config.n_head:
        raise ValueError(f"n_embd={config.n_embd} must be divisible by n_head={config.n_head}")
    if config.num_threads:
        torch.set_num_threads(config.num_threads)
    tokenizer = build_tokenizer()
    rng = random.Random(config.seed)
    tasks = [draw_task(rng) for _ in range(config.pairs)]
    prompts = [prompt_ids(tokenizer, t.kind, t.expr) for t in tasks]
    answers = [tokenizer(t.reference, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for t in tasks]
    torch.manual_seed(config.seed)
    model_config = GPT2Config(
        vocab_size=len(tokenizer), n_positions=config.n_positions, n_embd=config.n_embd, n_layer=config.n_layer,
        n_head=config.n_head, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )
    policy = Policy.from_config(model_config, tokenizer, PolicyConfig())
    opt = torch.optim.AdamW(policy.model.parameters(), lr=config.lr, weight_decay=0.01, betas=(0.9, 0.98))
    start = time.monotonic()
    loss_ema = float("nan")
    policy.model.train()
    for step in range(config.max_steps):
        warm = min(1.0, (step + 1) / max(config.warmup_steps, 1))
        for group in opt.param_groups:
            group["lr"] = config.lr * warm * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * step / config.max_steps)))
        idx = [rng.randrange(len(tasks)) for _ in range(config.batch_size)]
        seqs = [(prompts[i] + answers[i])[: config.n_positions] for i in idx]
        masks = [[0.0] * len(prompts[i]) + [1.0] * (len(s) - len(prompts[i])) for i, s in zip(idx, seqs)]
        batch = collate(seqs, masks, tokenizer.pad_token_id, padding_side="right")
        logps, mask = policy.logprobs(batch)
        loss = -(logps * mask).sum() / mask.sum().clamp(min=1.0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.model.parameters(), 1.0)
        opt.step()
        loss_ema = loss.item() if math.isnan(loss_ema) else 0.95 * loss_ema + 0.05 * loss.item()
    minutes = (time.monotonic() - start) / 60.0
    policy.model.eval()
    eval_tasks = [draw_task(random.Random(config.seed + 1 + i)) for i in range(config.eval_samples)]
    rollout = policy.sample([prompt_ids(tokenizer, t.kind, t.expr) for t in eval_tasks], temperature=1.0,
                            max_new_tokens=48, seed=config.seed)
    texts = ["".join(t.split()) for t in rollout.texts]
    parsed = 0
    for text in texts:
        try:
            parse_answer(text, AnswerLimits())
            parsed += 1
        except InvalidAnswer:
            pass
    report = PriorReport(
        steps=config.max_steps, pairs=config.pairs, final_loss=round(loss_ema, 4),
        parse_rate=round(parsed / len(texts), 4),
        exact_rate=round(sum(a == t.reference for a, t in zip(texts, eval_tasks)) / len(texts), 4),
        minutes=round(minutes, 2), parameters=sum(p.numel() for p in policy.model.parameters()),
        config_hash=prior_dir(config).name,
    )
    return policy, report


def load_or_pretrain(config: PriorConfig, policy_config: PolicyConfig | None = None) -> tuple[Policy, PriorReport]:
    """The cached prior of ``config``, or pretrain it now and cache it (written to a temporary folder, then renamed)."""
    directory = prior_dir(config)
    report_file = directory / "pretrain_report.json"
    if report_file.is_file() and (directory / "config.json").is_file():
        return Policy.load(directory, policy_config), PriorReport.model_validate(json.loads(report_file.read_text()))
    policy, report = pretrain(config)
    policy.save_replacing(
        directory,
        {"pretrain_report.json": report.model_dump_json(indent=2), "pretrain_config.json": config.model_dump_json(indent=2)},
    )
    if policy_config is not None:
        policy = Policy(policy.model, policy.tokenizer, policy_config)
    return policy, report
