"""A thin wrapper around any ``transformers`` causal LM and its tokenizer.

The wrapper does three things the trainer needs and ``generate`` does not give
directly: sampling that returns per-token log-probs under the *sampling*
distribution (for GRPO's ``old_logps``), padding-correct per-token log-probs of
given sequences with a mask of the tokens training may touch, and checkpoints
with a content hash. Everything is local: a model is built from a config or
loaded from a directory, never downloaded.

Log-prob convention (the same as TRL and vLLM): the log-prob of a token is
``log_softmax(logits / temperature)`` *before* top-p truncation. ``sample``
returns exactly what ``logprobs(..., temperature=same)`` returns for the same
weights, so on the first GRPO inner iteration the ratio is 1. With a
:class:`~policies.constraints.DecodingConstraint` the same holds for the constrained
distribution: ``sample(..., constraint=c)`` and ``completion_logprobs(..., constraint=c)``
both renormalise over the ids ``c`` allows.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PretrainedConfig, PreTrainedModel

from storage.records import CheckpointRecord, Turn

from .config import PolicyConfig
from .constraints import ConstrainedRows, completion_masks

if TYPE_CHECKING:
    from .constraints import DecodingConstraint

__all__ = ["Policy", "PolicyConfig", "Rollout", "TokenBatch", "collate"]

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class TokenBatch:
    """Padded token sequences plus which tokens carry loss.

    ``loss_mask[b, t] = 1`` marks a token the policy wrote and training may put loss on
    (not prompt, not tool observations, not padding).
    """

    input_ids: torch.Tensor  # (B, T) long
    attention_mask: torch.Tensor  # (B, T) long, 1 = real token
    loss_mask: torch.Tensor  # (B, T) float


@dataclass
class Rollout:
    """G sampled completions per prompt, in TRL's layout: prompts left-padded, completions right-padded."""

    prompt_ids: torch.Tensor  # (N, P) long, left-padded; N = prompts * group_size
    prompt_mask: torch.Tensor  # (N, P) long
    completion_ids: torch.Tensor  # (N, C) long, right-padded with pad_token_id
    completion_mask: torch.Tensor  # (N, C) float, 1 up to and including eos
    logps: torch.Tensor  # (N, C) float, log-probs under the sampling temperature (0 on padding)
    truncated: torch.Tensor  # (N,) bool, True if max_new_tokens was hit before eos
    prompt_index: torch.Tensor  # (N,) long, which input prompt each row answers
    texts: list[str]  # decoded completions without special tokens
    temperature: float = 1.0
    group_size: int = 1  # completions per prompt; rows of one group are consecutive

    def select(self, rows: torch.Tensor | Sequence[int]) -> Rollout:
        """The sub-rollout of the given rows (for micro-batches and dynamic sampling)."""
        idx = torch.as_tensor(rows, dtype=torch.long)
        return Rollout(
            prompt_ids=self.prompt_ids[idx],
            prompt_mask=self.prompt_mask[idx],
            completion_ids=self.completion_ids[idx],
            completion_mask=self.completion_mask[idx],
            logps=self.logps[idx],
            truncated=self.truncated[idx],
            prompt_index=self.prompt_index[idx],
            texts=[self.texts[i] for i in idx.tolist()],
            temperature=self.temperature,
            group_size=self.group_size,
        )

    def token_batch(self) -> TokenBatch:
        """Prompt + completion as one batch whose loss mask covers the completion only."""
        input_ids = torch.cat([self.prompt_ids, self.completion_ids], dim=1)  # (N, P + C)
        attention_mask = torch.cat([self.prompt_mask, self.completion_mask.long()], dim=1)  # (N, P + C)
        loss_mask = torch.cat([torch.zeros_like(self.prompt_mask, dtype=torch.float), self.completion_mask], dim=1)
        return TokenBatch(input_ids, attention_mask, loss_mask)


def collate(
    sequences: Sequence[Sequence[int]],
    loss_masks: Sequence[Sequence[float]],
    pad_token_id: int,
    padding_side: Literal["left", "right"] = "right",
) -> TokenBatch:
    """Pad token lists (and their loss masks) into a :class:`TokenBatch`."""
    if len(sequences) != len(loss_masks) or not sequences:
        raise ValueError("collate needs one loss mask per sequence and at least one sequence")
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_token_id, dtype=torch.long)
    attn = torch.zeros((len(sequences), width), dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.float)
    for b, (seq, m) in enumerate(zip(sequences, loss_masks, strict=True)):
        if len(seq) != len(m):
            raise ValueError(f"sequence {b} has {len(seq)} tokens but its loss mask has {len(m)}")
        sl = slice(width - len(seq), width) if padding_side == "left" else slice(0, len(seq))
        ids[b, sl] = torch.as_tensor(list(seq), dtype=torch.long)
        attn[b, sl] = 1
        mask[b, sl] = torch.as_tensor(list(m), dtype=torch.float)
    return TokenBatch(ids, attn, mask)


def _position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    # Positions count real tokens only, so left padding does not shift them (padding-correctness).
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)  # (B, T)


def _cache_io(model: PreTrainedModel) -> tuple[str, str]:
    # transformers 5.x renamed past_key_values -> cache; older releases only know the old name.
    params = inspect.signature(model.forward).parameters
    return ("cache", "cache") if "cache" in params else ("past_key_values", "past_key_values")


def _top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Set logits outside the smallest set with cumulative probability >= top_p to -inf."""
    if top_p >= 1.0:
        return logits
    sorted_logits, order = torch.sort(logits, descending=True, dim=-1)  # (N, V)
    cum = sorted_logits.softmax(-1).cumsum(-1)  # (N, V)
    drop_sorted = cum - sorted_logits.softmax(-1) >= top_p  # keep the token that crosses top_p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


class Policy:
    """An ``AutoModelForCausalLM`` plus tokenizer, with sampling, log-probs and checkpoints."""

    def __init__(self, model: PreTrainedModel, tokenizer, config: PolicyConfig | None = None):
        self.config = config or PolicyConfig()
        self.model = model.to(device=self.config.device, dtype=_DTYPES[self.config.dtype])
        self.tokenizer = tokenizer
        if tokenizer.pad_token_id is None:
            # Causal LMs often ship without a pad token; eos is safe because padding is masked everywhere.
            tokenizer.pad_token = tokenizer.eos_token
        if tokenizer.eos_token_id is None:
            raise ValueError("the tokenizer needs an eos token so completions can end")

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_config(cls, model_config: PretrainedConfig, tokenizer, config: PolicyConfig | None = None) -> Policy:
        """A freshly initialised model of the given architecture (no weights downloaded)."""
        return cls(AutoModelForCausalLM.from_config(model_config), tokenizer, config)

    @classmethod
    def load(cls, path: str | Path, config: PolicyConfig | None = None) -> Policy:
        """Load model and tokenizer from a local directory written by :meth:`save` (or any HF checkpoint dir)."""
        path = Path(path)
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"{path} is not a model directory (no config.json); pass a local checkpoint path")
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        return cls(model, tokenizer, config)

    def save(self, directory: str | Path) -> tuple[str, str]:
        """Write safetensors weights, config and tokenizer; return (directory, sha256 of the weights)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(directory, safe_serialization=True)
        self.tokenizer.save_pretrained(directory)
        digest = hashlib.sha256()
        for weights in sorted(directory.glob("*.safetensors")):  # all shards, in name order
            with open(weights, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
        return str(directory), digest.hexdigest()

    def save_replacing(self, directory: str | Path, extra_files: Mapping[str, str]) -> None:
        """Write the policy and ``extra_files`` (name -> text) to a temporary sibling, then rename it over
        ``directory``: a crash never leaves half a cache entry."""
        directory = Path(directory)
        tmp = directory.with_name(directory.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        self.save(tmp)
        for name, text in extra_files.items():
            (tmp / name).write_text(text)
        shutil.rmtree(directory, ignore_errors=True)
        tmp.rename(directory)

    def checkpoint(self, directory: str | Path, run_id: str, step: int) -> CheckpointRecord:
        """Save and return the record the ledger stores (path, sha256, step)."""
        path, sha = self.save(directory)
        return CheckpointRecord(run_id=run_id, step=step, path=path, sha256=sha)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # ----------------------------------------------------------------- encoding
    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def encode_trajectory(self, prompt: str | Sequence[int], turns: Sequence[Turn]) -> tuple[list[int], list[float]]:
        """Token ids of prompt + turns and a loss mask that is 1 only on trainable turns (``Turn.trainable``)."""
        ids = list(prompt) if not isinstance(prompt, str) else self.encode(prompt)
        mask = [0.0] * len(ids)
        for turn in turns:
            turn_ids = self.encode(turn.content)
            ids += turn_ids
            mask += [1.0 if turn.trainable else 0.0] * len(turn_ids)
        return ids, mask

    # ----------------------------------------------------------------- scoring
    def forward_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, V) in float32, with position ids that ignore padding."""
        out = self.model(
            input_ids=input_ids.to(self.device),
            attention_mask=attention_mask.to(self.device),
            position_ids=_position_ids(attention_mask).to(self.device),
            use_cache=False,
        )
        return out.logits.float()

    def logprobs(
        self, batch: TokenBatch, temperature: float = 1.0, with_entropy: bool = False, allowed: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor] | tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-token log-probs ``out[b, t] = log p(x_t | x_<t)`` and the loss mask, both (B, T).

        The first real token of each row has no context; its log-prob and mask are 0. With
        ``with_entropy`` also returns the per-token entropy of the predictive distribution (B, T).
        ``allowed`` (B, T, V) bool, where given, says which ids may stand at each position: the others
        are masked out of the distribution before it is normalised (constrained decoding).
        """
        logits = self.forward_logits(batch.input_ids, batch.attention_mask)[:, :-1] / temperature  # (B, T-1, V)
        if allowed is not None:
            allowed = allowed[:, 1:].to(logits.device)  # (B, T-1, V): position t predicts x_{t+1}
            logits = logits.masked_fill(~allowed, float("-inf"))
        targets = batch.input_ids[:, 1:].to(logits.device)  # (B, T-1)
        # gather - logsumexp avoids materialising a full log_softmax for large vocabularies
        token_logps = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - logits.logsumexp(-1)  # (B, T-1)
        attn = batch.attention_mask.to(logits.device) > 0  # (B, T)
        # A token is scored only if it and its predecessor are real: the first real token of a
        # left-padded row has no context, exactly like position 0 of a right-padded row.
        scored = torch.cat([torch.zeros_like(attn[:, :1]), attn[:, 1:] & attn[:, :-1]], dim=1)  # (B, T)
        zero = torch.zeros_like(token_logps[:, :1])
        logps = torch.cat([zero, token_logps], dim=1) * scored  # (B, T)
        mask = batch.loss_mask.to(logps.device) * scored  # (B, T)
        if not with_entropy:
            return logps, mask
        p = logits.softmax(-1)  # (B, T-1, V)
        log_p = logits.log_softmax(-1)  # (B, T-1, V)
        if allowed is not None:
            log_p = log_p.masked_fill(~allowed, 0.0)  # 0 * -inf would be nan; banned ids carry no probability
        ent = -(p * log_p).sum(-1)  # (B, T-1)
        return logps, mask, torch.cat([zero, ent], dim=1) * scored

    def completion_logprobs(
        self, rollout: Rollout, temperature: float | None = None, constraint: DecodingConstraint | None = None
    ) -> torch.Tensor:
        """Log-probs (N, C) of a rollout's completion tokens under the current weights.

        With ``constraint``, under the constrained distribution :meth:`sample` drew from with it.
        """
        batch = rollout.token_batch()
        allowed = None
        if constraint is not None:
            width = self.model.get_output_embeddings().weight.shape[0]
            masks = completion_masks(constraint, rollout.completion_ids, rollout.completion_mask, width)  # (N, C, V)
            prompt_part = torch.ones(masks.shape[0], rollout.prompt_ids.shape[1], width, dtype=torch.bool)  # (N, P, V)
            allowed = torch.cat([prompt_part, masks], dim=1)  # (N, P + C, V)
        logps, _ = self.logprobs(batch, temperature or rollout.temperature, allowed=allowed)
        c = rollout.completion_ids.shape[1]
        return logps[:, -c:] * rollout.completion_mask.to(logps.device)  # (N, C)

    def completion_logits(
        self, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits (B, C, V) at the positions that predict each completion token, and the mask (B, C).

        Prompts are left-padded and completions right-padded, so position j of every row
        predicts completion token j whatever the prompt lengths (used to align a hinted
        teacher with the unhinted student in distillation).
        """
        p = collate(prompts, [[0.0] * len(x) for x in prompts], self.tokenizer.pad_token_id, "left")
        c = collate(completions, [[1.0] * len(x) for x in completions], self.tokenizer.pad_token_id, "right")
        logits = self.forward_logits(
            torch.cat([p.input_ids, c.input_ids], dim=1), torch.cat([p.attention_mask, c.attention_mask], dim=1)
        )  # (B, P + C, V)
        width_p, width_c = p.input_ids.shape[1], c.input_ids.shape[1]
        return logits[:, width_p - 1 : width_p + width_c - 1], c.loss_mask.to(logits.device)

    # ----------------------------------------------------------------- sampling
    @torch.no_grad()
    def sample(
        self,
        prompts: Sequence[str] | Sequence[Sequence[int]],
        group_size: int = 1,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_new_tokens: int = 64,
        seed: int | None = None,
        constraint: DecodingConstraint | None = None,
    ) -> Rollout:
        """``group_size`` completions per prompt with a KV-cached sampling loop.

        Returns tokens, per-token log-probs under ``temperature`` (before top-p, see the
        module docstring) and whether each completion hit ``max_new_tokens`` without eos.
        With ``constraint``, each step samples only ids it allows, and the log-probs are those
        of the constrained (renormalised) distribution.
        """
        if temperature <= 0:
            raise ValueError("temperature must be > 0 for sampling (use a small value like 1e-3 for near-greedy)")
        if not 0 < top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if group_size < 1 or max_new_tokens < 1 or not prompts:
            raise ValueError("need at least one prompt, group_size >= 1 and max_new_tokens >= 1")
        prompt_lists = [self.encode(p) if isinstance(p, str) else list(p) for p in prompts]
        if any(len(p) == 0 for p in prompt_lists):
            raise ValueError("empty prompt: a causal LM needs at least one token to condition on")
        rows = [p for p in prompt_lists for _ in range(group_size)]
        prompt_index = torch.arange(len(prompt_lists)).repeat_interleave(group_size)  # (N,)
        pad, eos = self.tokenizer.pad_token_id, self.tokenizer.eos_token_id
        batch = collate(rows, [[0.0] * len(r) for r in rows], pad, padding_side="left")
        device = self.device
        gen = torch.Generator(device=device)
        gen.manual_seed(seed if seed is not None else int(torch.randint(0, 2**31 - 1, ()).item()))

        was_training = self.model.training
        self.model.eval()
        cache_arg, cache_attr = _cache_io(self.model)
        attn = batch.attention_mask.to(device)  # (N, P)
        pos = _position_ids(attn)  # (N, P)
        out = self.model(input_ids=batch.input_ids.to(device), attention_mask=attn, position_ids=pos, use_cache=True)
        n = len(rows)
        finished = torch.zeros(n, dtype=torch.bool, device=device)
        tokens, logps, masks = [], [], []
        pos = pos[:, -1:]  # (N, 1)
        constrained = ConstrainedRows(constraint, n, out.logits.shape[-1]) if constraint is not None else None
        for _ in range(max_new_tokens):
            logits = out.logits[:, -1, :].float() / temperature  # (N, V)
            if constrained is not None:
                active = (~finished).tolist()
                logits = logits.masked_fill(~constrained.masks(active).to(device), float("-inf"))  # (N, V)
            logp_all = logits.log_softmax(-1)  # (N, V)
            probs = _top_p_filter(logits, top_p).softmax(-1)  # (N, V)
            nxt = torch.multinomial(probs, 1, generator=gen).squeeze(-1)  # (N,)
            nxt = torch.where(finished, torch.full_like(nxt, pad), nxt)
            masks.append((~finished).float())
            logps.append(logp_all.gather(-1, nxt.unsqueeze(-1)).squeeze(-1) * (~finished))
            tokens.append(nxt)
            if constrained is not None:
                constrained.advance(nxt.tolist(), active)
            finished = finished | (nxt == eos)
            if bool(finished.all()):
                break
            attn = torch.cat([attn, torch.ones_like(attn[:, :1])], dim=1)  # (N, P + t + 1)
            pos = pos + 1
            out = self.model(
                input_ids=nxt.unsqueeze(-1), attention_mask=attn, position_ids=pos,
                use_cache=True, **{cache_arg: getattr(out, cache_attr)},
            )
        self.model.train(was_training)

        completion_ids = torch.stack(tokens, dim=1).cpu()  # (N, C)
        completion_mask = torch.stack(masks, dim=1).cpu()  # (N, C)
        texts = [
            self.tokenizer.decode(ids[m > 0].tolist(), skip_special_tokens=True)
            for ids, m in zip(completion_ids, completion_mask, strict=True)
        ]
        return Rollout(
            prompt_ids=batch.input_ids,
            prompt_mask=batch.attention_mask,
            completion_ids=completion_ids,
            completion_mask=completion_mask,
            logps=torch.stack(logps, dim=1).cpu(),
            truncated=(~finished).cpu(),
            prompt_index=prompt_index,
            texts=texts,
            temperature=temperature,
            group_size=group_size,
        )
