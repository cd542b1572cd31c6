"""Constrained decoding: which vocabulary ids may come next, as a typed seam the sampler and the scorer share.

A :class:`DecodingConstraint` is an incremental per-row state machine over token ids: ``start`` gives the
state of an empty completion, ``advance`` the state after one more token, and ``allowed`` the ids that may
follow a state. The core knows nothing of what the tokens mean (a suite brings its grammar, e.g. the
molecules suite's SMILES grammar); it only masks disallowed logits to ``-inf`` before sampling.

The masked distribution is the policy: :meth:`Policy.sample` records the log-probs of the *constrained*
(renormalised) distribution, and :meth:`Policy.completion_logprobs` given the same constraint replays the
completion through it and scores under the same masks, so a GRPO ratio of freshly sampled tokens is 1.
A token the constraint bans scores ``-inf``: rescore with a constraint only completions that obey it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import torch

__all__ = ["ConstrainedRows", "DecodingConstraint", "completion_masks"]


@runtime_checkable
class DecodingConstraint(Protocol):
    """Which token ids may follow a completion so far, from an incremental state (one state per row).

    ``advance`` may update the state in place and return it (a state belongs to one row); ``allowed`` returns
    a CPU bool tensor of ``vocab_size`` entries and must allow at least one id in every reachable state. Ids at
    or beyond ``vocab_size`` (a model's padded embedding rows) are never allowed.
    """

    vocab_size: int

    def start(self) -> Any: ...

    def advance(self, state: Any, token_id: int) -> Any: ...

    def allowed(self, state: Any) -> torch.Tensor: ...


class ConstrainedRows:
    """The constraint's states of a batch of rows being decoded, and their masks of allowed ids."""

    def __init__(self, constraint: DecodingConstraint, rows: int, width: int):
        if constraint.vocab_size > width:
            raise ValueError(f"the constraint covers {constraint.vocab_size} token ids but the model scores only {width}")
        self.constraint = constraint
        self.width = width
        self.states = [constraint.start() for _ in range(rows)]

    def masks(self, active: Sequence[bool]) -> torch.Tensor:
        """(N, width) bool: the allowed ids of each active row; every id for an inactive row (finished, padding)."""
        out = torch.ones(len(self.states), self.width, dtype=torch.bool)  # (N, V)
        v = self.constraint.vocab_size
        for row, (state, on) in enumerate(zip(self.states, active, strict=True)):
            if on:
                allowed = self.constraint.allowed(state)  # (v,)
                if not bool(allowed.any()):
                    raise ValueError(f"the decoding constraint allows no token for row {row}: a sound constraint always allows one")
                out[row, :v] = allowed
                out[row, v:] = False
        return out

    def advance(self, tokens: Sequence[int], active: Sequence[bool]) -> None:
        """Feed each active row its next token."""
        for row, (token, on) in enumerate(zip(tokens, active, strict=True)):
            if on:
                self.states[row] = self.constraint.advance(self.states[row], int(token))


def completion_masks(
    constraint: DecodingConstraint, completion_ids: torch.Tensor, completion_mask: torch.Tensor, width: int
) -> torch.Tensor:
    """(N, C, width) bool: at each completion position, the ids the constraint allowed there (all ids on padding).

    The replay of :meth:`Policy.sample`'s masks for given completions (same states, same order), so scoring
    under these masks gives the sampled log-probs.
    """
    n, c = completion_ids.shape
    rows = ConstrainedRows(constraint, n, width)
    ids = completion_ids.tolist()
    live = (completion_mask > 0).tolist()
    out = torch.empty(n, c, width, dtype=torch.bool)  # (N, C, V)
    for t in range(c):
        active = [live[r][t] for r in range(n)]
        out[:, t] = rows.masks(active)
        rows.advance([ids[r][t] for r in range(n)], active)
    return out
