"""One GRPO training step and one hindsight-distillation step, read top to bottom.

The trainer does not compute rewards: the flows (and the budget-aware
scheduler behind them) turn completions into reward estimates (mean, std) and
hand them back as plain numbers. ``train_step`` takes a reward function only
as a convenience for tests and benchmarks where the reward is cheap.

    rollout -> rewards -> advantages -> loss (num_iterations x micro-batches) -> step -> metrics
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch

from .config import TrainerConfig
from .hindsight import HintedExample, RelabeledExample
from .losses import (
    decoupled_ppo_loss,
    group_advantages,
    group_order,
    grpo_loss,
    reverse_kl_distill_loss,
    sft_loss,
    spread_mask,
    staleness_histogram,
    staleness_weights,
)
from .model import Policy, Rollout, collate

if TYPE_CHECKING:
    from .constraints import DecodingConstraint

__all__ = ["PolicyTrainer", "TrainerConfig"]


class PolicyTrainer:
    """Owns the optimizer of a :class:`Policy` and performs GRPO and distillation steps.

    With a ``constraint`` the policy is the constrained distribution: rollouts sample under it and every
    GRPO log-prob (current, proximal, reference) is scored under it, so the ratio compares like with like.
    """

    def __init__(
        self, policy: Policy, config: TrainerConfig | None = None, ref_policy: Policy | None = None,
        constraint: DecodingConstraint | None = None,
    ):
        self.policy = policy
        self.config = config or TrainerConfig()
        self.ref_policy = ref_policy
        self.constraint = constraint
        if self.config.loss.beta > 0 and ref_policy is None:
            raise ValueError("loss.beta > 0 needs a reference policy (ref_policy=...)")
        self.optimizer = torch.optim.AdamW(
            [p for p in policy.model.parameters() if p.requires_grad],
            lr=self.config.lr,
            weight_decay=self.config.weight_decay,
        )
        self.steps_done = 0

    # ----------------------------------------------------------------- GRPO
    def rollout(self, prompts: Sequence[str] | Sequence[Sequence[int]], seed: int | None = None) -> Rollout:
        c = self.config
        return self.policy.sample(
            prompts, group_size=c.group_size, temperature=c.temperature, top_p=c.top_p,
            max_new_tokens=c.max_new_tokens, seed=seed, constraint=self.constraint,
        )

    def train_step(
        self,
        prompts: Sequence[str] | Sequence[Sequence[int]],
        reward_fn: Callable[[list[str]], Sequence[float]],
        seed: int | None = None,
    ) -> tuple[Rollout, dict[str, float]]:
        """Rollout, reward with ``reward_fn`` (one float per completion text), update."""
        rollout = self.rollout(prompts, seed=seed)
        rewards = list(reward_fn(rollout.texts))
        return rollout, self.step(rollout, rewards)

    def step(
        self,
        rollout: Rollout,
        rewards: Sequence[float],
        reward_stds: Sequence[float] | None = None,
        staleness: Sequence[int] | None = None,
        group_ids: Sequence[str] | None = None,
    ) -> dict[str, float]:
        """One GRPO update from a rollout and its reward estimates (mean and optional std per completion).

        ``group_ids`` (per completion: the group it was sampled in, e.g. ``Trajectory.group_id``)
        groups rows by id, in whatever order they come; every row of a group must answer the same
        prompt. Without them a group is ``rollout.group_size`` consecutive rows, as sampled.

        ``staleness`` (per completion: policy versions between the weights that sampled it and
        these) switches to the decoupled loss: ``rollout.logps`` are then the behaviour
        policy's, the proximal ones are computed here before the first inner update, and rows
        beyond ``max_staleness`` are dropped (see :func:`policies.losses.decoupled_ppo_loss`).
        """
        c = self.config
        n = rollout.completion_ids.shape[0]
        if len(rewards) != n or (reward_stds is not None and len(reward_stds) != n):
            raise ValueError(f"need one reward (and std) per completion: {n} completions, {len(rewards)} rewards")
        reward_t = torch.tensor(rewards, dtype=torch.float32)  # (N,)
        std_t = torch.tensor(reward_stds, dtype=torch.float32) if reward_stds is not None else None  # (N,)
        metrics: dict[str, float] = {
            "reward/mean": reward_t.mean().item(),
            "reward/std": reward_t.std().item() if n > 1 else 0.0,
            "reward/max": reward_t.max().item(),
            "completions/truncated_frac": rollout.truncated.float().mean().item(),
            "completions/mean_length": rollout.completion_mask.sum(1).mean().item(),
        }

        # advantages per group (rows put in group order and back), then keep only groups that can teach something
        order = self._group_order(rollout, group_ids)  # (N,)
        back = torch.empty_like(order)
        back[order] = torch.arange(n)  # (N,) inverse permutation
        advantages = group_advantages(reward_t[order], rollout.group_size, scale=c.advantage_scale)[back]  # (N,)
        keep = spread_mask(reward_t[order], rollout.group_size)[back] if c.dynamic_sampling else torch.ones(n, dtype=torch.bool)
        weights = None
        if staleness is not None:
            if len(staleness) != n:
                raise ValueError(f"need one staleness per completion: {n} completions, {len(staleness)} given")
            stale_t = torch.tensor(list(staleness), dtype=torch.long)  # (N,)
            weights = staleness_weights(stale_t, c.max_staleness, c.staleness_decay)  # (N,)
            metrics |= staleness_histogram(stale_t)
            metrics["offpolicy/dropped_frac"] = (weights == 0).float().mean().item()
            keep = keep & (weights > 0)
        metrics["groups/kept_frac"] = keep.float().mean().item()
        if not keep.any():
            metrics["step/skipped"] = 1.0
            return metrics
        rows = keep.nonzero().squeeze(1)  # (K,)
        batch, advantages = rollout.select(rows), advantages[rows]
        stds = std_t[rows] if std_t is not None else None
        ref_logps = None
        if c.loss.beta > 0:
            with torch.no_grad():
                ref_logps = self.ref_policy.completion_logprobs(batch, constraint=self.constraint)  # type: ignore[union-attr]
        prox_logps = None
        if weights is not None:
            weights = weights[rows]
            # The proximal policy: these weights before the update (the behaviour policy sampled).
            with torch.no_grad():
                prox_logps = (self.policy.completion_logprobs(batch, constraint=self.constraint).detach().cpu() * batch.completion_mask)  # (K, C)

        # loss and step, num_iterations times over the same old_logps (the sampling log-probs)
        micro = c.micro_batch_size or len(rows)
        chunks = [torch.arange(i, min(i + micro, len(rows))) for i in range(0, len(rows), micro)]
        # DAPO normalises by all loss-carrying tokens of the optimizer step
        token_mask = batch.completion_mask
        if c.loss.mask_truncated:
            token_mask = token_mask * (~batch.truncated).float().unsqueeze(1)
        num_tokens = token_mask.sum()
        self.policy.model.train()
        loss_metrics: dict[str, float] = {}
        for _ in range(c.num_iterations):
            self.optimizer.zero_grad(set_to_none=True)
            for idx in chunks:
                sub = batch.select(idx)
                logps = self.policy.completion_logprobs(sub, constraint=self.constraint)  # (m, C)
                dev = logps.device
                if prox_logps is None:
                    loss, loss_metrics = grpo_loss(
                        logps, sub.logps.to(dev), advantages[idx].to(dev), sub.completion_mask.to(dev),
                        ref_logps=ref_logps[idx] if ref_logps is not None else None,
                        config=c.loss, truncated=sub.truncated.to(dev),
                        reward_std=stds[idx].to(dev) if stds is not None else None,
                        num_items_in_batch=num_tokens,
                    )
                else:
                    loss, loss_metrics = decoupled_ppo_loss(
                        logps, prox_logps[idx].to(dev), sub.logps.to(dev), advantages[idx].to(dev),
                        sub.completion_mask.to(dev), config=c.loss, behaviour_weight_cap=c.behaviour_weight_cap,
                        sample_weights=weights[idx].to(dev),  # type: ignore[index]
                        reward_std=stds[idx].to(dev) if stds is not None else None,
                        truncated=sub.truncated.to(dev), num_items_in_batch=num_tokens,
                    )
                (loss * self._micro_weight(len(idx), len(rows), len(chunks))).backward()
            metrics["grad/norm"] = self._clip_and_step()
        metrics.update(loss_metrics)  # loss/clip/KL metrics of the last micro-batch of the last inner update
        self.steps_done += 1
        return metrics

    # ----------------------------------------------------------------- hindsight distillation
    @staticmethod
    def _group_order(rollout: Rollout, group_ids: Sequence[str] | None) -> torch.Tensor:
        """(N,) the rows in group order: by ``group_ids`` when given (checked against the prompts), else as sampled."""
        n = rollout.completion_ids.shape[0]
        if group_ids is None:
            return torch.arange(n)
        if len(group_ids) != n:
            raise ValueError(f"need one group id per completion: {n} completions, {len(group_ids)} group ids")
        order = group_order(group_ids, rollout.group_size)  # (N,)
        prompts = rollout.prompt_index[order].view(-1, rollout.group_size)  # (N/G, G)
        mixed = (prompts != prompts[:, :1]).any(dim=1).nonzero()
        if len(mixed):
            first = group_ids[int(order[int(mixed[0]) * rollout.group_size])]
            raise ValueError(f"group {first!r} holds completions of different prompts: group ids must follow the prompts")
        return order

    def distill_step(
        self,
        relabeled: Sequence[RelabeledExample] = (),
        hinted: Sequence[HintedExample] = (),
        teacher: Policy | None = None,
    ) -> dict[str, float]:
        """SFT on relabeled examples plus reverse KL to a hinted teacher; one optimizer step.

        The teacher defaults to the policy itself (self-distillation: the same weights with a
        privileged context); its logits never receive gradient.
        """
        if not relabeled and not hinted:
            raise ValueError("distill_step needs relabeled or hinted examples")
        c = self.config
        teacher = teacher or self.policy
        self.policy.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        total: torch.Tensor | float = 0.0
        metrics: dict[str, float] = {}
        if relabeled:
            seqs = [ex.prompt_ids + ex.completion_ids for ex in relabeled]
            masks = [[0.0] * len(ex.prompt_ids) + [1.0] * len(ex.completion_ids) for ex in relabeled]
            logps, mask = self.policy.logprobs(collate(seqs, masks, self.policy.tokenizer.pad_token_id))
            sft = sft_loss(logps, mask)
            total = total + c.sft_weight * sft
            metrics["loss/sft"] = sft.item()
        if hinted:
            completions = [ex.completion_ids for ex in hinted]
            student_logits, mask = self.policy.completion_logits([ex.student_prompt_ids for ex in hinted], completions)
            with torch.no_grad():
                teacher_logits, _ = teacher.completion_logits([ex.teacher_prompt_ids for ex in hinted], completions)
            kl, kl_metrics = reverse_kl_distill_loss(student_logits, teacher_logits.to(student_logits.device), mask)
            total = total + c.distill_weight * kl
            metrics.update(kl_metrics)
        total.backward()  # type: ignore[union-attr]
        metrics["grad/norm"] = self._clip_and_step()
        metrics["loss/total"] = float(total.detach())
        return metrics

    def _micro_weight(self, rows_in_micro: int, rows_in_step: int, num_micro: int) -> float:
        """Weight of one micro-batch loss so the accumulated gradient equals the full-batch one.

        dapo is already normalised by all tokens of the step; grpo (mean of sequence means) and
        dr_grpo (sum / rows) weight by the micro-batch's share of rows; bnpo averages the
        micro-batch token means, as TRL does.
        """
        loss_type = self.config.loss.loss_type
        if loss_type == "dapo":
            return 1.0
        if loss_type in ("grpo", "dr_grpo"):
            return rows_in_micro / rows_in_step
        return 1.0 / num_micro

    def _clip_and_step(self) -> float:
        params = [p for p in self.policy.model.parameters() if p.grad is not None]
        if self.config.max_grad_norm is not None:
            norm = torch.nn.utils.clip_grad_norm_(params, self.config.max_grad_norm)
        else:
            norm = torch.norm(torch.stack([p.grad.detach().norm() for p in params]))
        self.optimizer.step()
        return float(norm)
