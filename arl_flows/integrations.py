"""ARL's verification layer for other trainers and for inference: TRL, verl, Best-of-N.

The public names, one import away: each adapter lives in a file of its own over one
:class:`~arl_flows.tiered_reward.TieredReward`, and this module only re-exports them, so it imports
the three and none of them imports it.

- :class:`TieredReward` (:mod:`arl_flows.tiered_reward`): the reward function TRL's ``GRPOTrainer``
  calls, verifying completions through the tiers under a budget into the ledger;
- :func:`rerank` (:mod:`arl_flows.best_of_n`): Best-of-N at inference over the same machinery;
- :func:`compute_score` / :func:`compute_score_batch` (:mod:`arl_flows.verl`): the shapes verl's
  ``naive`` and ``batch`` reward managers call (point verl at a file holding
  ``from arl_flows.integrations import compute_score, compute_score_batch``).
"""

from __future__ import annotations

from arl_flows.best_of_n import Ranked, RerankItem, RerankResult, rerank
from arl_flows.tiered_reward import CallSummary, RewardDetail, TieredReward, Window, verification_config
from arl_flows.verl import compute_score, compute_score_batch

__all__ = [
    "CallSummary",
    "Ranked",
    "RerankItem",
    "RerankResult",
    "RewardDetail",
    "TieredReward",
    "Window",
    "compute_score",
    "compute_score_batch",
    "rerank",
    "verification_config",
]
