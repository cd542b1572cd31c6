"""Hindsight relabelling of SMILES completions: a molecule asked for gap window A that has gap y answers "window containing y"."""

from __future__ import annotations

import math
from collections.abc import Sequence

from arl_flows.suites.molecules.smiles import GAP_BIN_WIDTH, goal_prompt_ids
from policies import RelabeledExample

__all__ = ["relabel"]


def relabel(
    completion_ids: Sequence[int],
    achieved: float,
    tokenizer,
    *,
    bin_width: float = GAP_BIN_WIDTH,
) -> RelabeledExample:
    """Rewrite the goal of a completion to the bin that contains its achieved value.

    ``completion_ids`` are the tokens the policy wrote (ending in eos if it finished);
    the new prompt is ``<bos> <bin of achieved> <sep>``.
    """
    if not math.isfinite(achieved):
        raise ValueError(f"cannot relabel with a non-finite achieved value {achieved!r}")
    if not completion_ids:
        raise ValueError("cannot relabel an empty completion")
    low = math.floor(achieved / bin_width) * bin_width
    goal = (low, low + bin_width)
    return RelabeledExample(goal_prompt_ids(tokenizer, *goal), list(completion_ids), goal)
