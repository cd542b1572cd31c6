"""TieredReward calls as Prefect flow runs: the Prefect view of a reward used inside another trainer.

``with_prefect(reward)`` returns the same reward function with each call run
as a ``tiered_reward`` flow, whose tier batches are ``run-tier`` tasks under
the same global concurrency limits as ``training_run``'s. The calls then
show in the Prefect UI beside ARL's own runs; the ledger, the budget and the
cache are the reward's, unchanged. This module imports Prefect; the
verification layer itself (:mod:`arl_flows.tiered_reward`) does not.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from prefect import flow

from arl_flows.flows import _setup_limits, _tier_runner
from arl_flows.tiered_reward import TieredReward, _text

__all__ = ["PrefectReward", "tiered_reward_flow", "with_prefect"]

_REWARDS: dict[str, TieredReward] = {}  # flow parameters must be plain data: the reward is looked up by key


@flow(name="tiered_reward", flow_run_name="{name} call")
def tiered_reward_flow(
    reward_key: str, name: str, prompts: list[str], completions: list[str], task_id: list[str] | None = None
) -> list[float]:
    """One call of a registered TieredReward, its tier batches as Prefect tasks."""
    reward = _REWARDS[reward_key]
    runner = _tier_runner(reward.config, reward.ladder, _setup_limits(reward.config))
    details = reward.score(prompts, completions, task_id=task_id, run_tier=runner)
    return [d.reward for d in details]


class PrefectReward:
    """A TieredReward whose calls are ``tiered_reward`` flow runs (TRL's reward-function shape)."""

    def __init__(self, reward: TieredReward) -> None:
        self.reward = reward
        self.key = uuid.uuid4().hex
        self.__name__ = reward.__name__
        _REWARDS[self.key] = reward

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        task_id = kwargs.get("task_id")
        rewards = tiered_reward_flow(
            self.key, self.reward.config.name, [_text(p) for p in prompts], [_text(c) for c in completions],
            list(task_id) if task_id is not None else None,
        )
        self.reward._log_to_trainer(self.reward.last_details, kwargs)
        return rewards

    def close(self) -> None:
        _REWARDS.pop(self.key, None)
        self.reward.close()


def with_prefect(reward: TieredReward) -> PrefectReward:
    """``reward`` with each call a Prefect flow run (start a server with ``arl ui --background`` to watch)."""
    return PrefectReward(reward)
