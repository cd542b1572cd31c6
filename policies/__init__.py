"""Policies: the transformers model wrapper, the GRPO trainer and the GRPO and hindsight distillation losses.

A suite's own tokenizer or prior lives in its suite (the SMILES prior: ``arl_flows.suites.molecules``).

Nothing here imports Prefect or ``verifiers``: rewards arrive as numbers. The settings models
(``policies.config``) need no torch; the tensor code is imported on first use.
"""

import importlib
from typing import TYPE_CHECKING, Any

from .config import GRPOLossConfig, PolicyConfig, TrainerConfig
from .hindsight import HintedExample, RelabeledExample, achieved_value, feedback_hint, hint_prompt, top_scale_value

if TYPE_CHECKING:
    from .losses import *  # noqa: F403 - the names of _TORCH_NAMES, for type checkers
    from .constraints import ConstrainedRows, DecodingConstraint, completion_masks  # noqa: F401 - re-exported
    from .model import Policy, Rollout, TokenBatch, collate  # noqa: F401 - re-exported
    from .trainer import PolicyTrainer  # noqa: F401 - re-exported

# Names whose modules import torch (and transformers): loaded on first use, so that reading a run
# config or printing `arl --help` does not pay for them.
_TORCH_NAMES = {
    "decoupled_ppo_loss": "losses",
    "group_advantages": "losses",
    "group_order": "losses",
    "grpo_loss": "losses",
    "reverse_kl_distill_loss": "losses",
    "sft_loss": "losses",
    "spread_mask": "losses",
    "staleness_histogram": "losses",
    "staleness_weights": "losses",
    "uncertainty_weights": "losses",
    "ConstrainedRows": "constraints",
    "DecodingConstraint": "constraints",
    "completion_masks": "constraints",
    "Policy": "model",
    "Rollout": "model",
    "TokenBatch": "model",
    "collate": "model",
    "PolicyTrainer": "trainer",
}


def __getattr__(name: str) -> Any:
    module = _TORCH_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "GRPOLossConfig",
    "HintedExample",
    "PolicyConfig",
    "RelabeledExample",
    "TrainerConfig",
    "achieved_value",
    "feedback_hint",
    "hint_prompt",
    "top_scale_value",
    *_TORCH_NAMES,
]
