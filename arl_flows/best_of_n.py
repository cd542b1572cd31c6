"""Best-of-N at inference: verify N candidates a prompt under a budget, keep the top k.

:func:`rerank` runs one :class:`~arl_flows.tiered_reward.TieredReward` per objective window over the same
ladder, scheduler (routing for ``discovery``: find the best) and ledger as a run; ``arl rerank``
(:mod:`arl_flows.cli.rerank`) reads its input and prints its results. The file is not ``rerank.py``: a
submodule ``arl_flows.rerank`` would shadow the function ``arl_flows.rerank`` once imported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from arl_flows.config import RunConfig, describe_errors
from arl_flows.suites import SuiteNotFound, get_suite
from arl_flows.suites.capabilities import objective_window
from arl_flows.tiered_reward import RewardDetail, TieredReward, Window, _is_count, _text, _window_of
from storage.ledger import Ledger
from storage.records import tier_rank
from verifiers.scheduler import VoiTarget

__all__ = ["Ranked", "RerankItem", "RerankResult", "rank_details", "rerank"]


class RerankItem(BaseModel):
    """One prompt to rerank: its candidates (or none, to sample them from a policy) and its goal.

    The goal is ``goal`` plus any other key of the line (``{"task_id": ...}``, ``{"window": [4, 5]}``):
    the suite checks them (``Suite.goal``) and says which keys it reads.
    """

    model_config = ConfigDict(extra="allow")

    prompt: str = Field(default="", description="The prompt (free text; shown in the results).")
    goal: dict[str, Any] = Field(default_factory=dict, description="The goal the candidates answer (the suite's keys).")
    candidates: list[str] = Field(default_factory=list, description="The N completions to choose from.")

    def all_goal(self) -> dict[str, Any]:
        """``goal`` with the line's other keys."""
        return dict(self.model_extra or {}) | self.goal


@dataclass
class Ranked:
    """One chosen candidate: its posterior, the tier it reached and what it cost."""

    rank: int
    completion: str
    candidate_key: str
    reward: float
    std: float
    value_mean: float | None
    value_std: float | None
    tier: str | None
    status: str
    spend_s: float
    cached: bool


@dataclass
class RerankResult:
    """Best-of-N for one prompt: the top k, the spend and calls per verifier."""

    prompt: str
    n: int
    top: list[Ranked]
    spend_s: float
    calls: dict[str, int] = field(default_factory=dict)
    run_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def rank_details(details: Sequence[RewardDetail]) -> list[RewardDetail]:
    """Distinct candidates, best first: higher posterior reward, then lower std, then a higher tier, then first seen."""
    seen: dict[str, int] = {}
    for i, d in enumerate(details):
        seen.setdefault(d.candidate_key, i)
    order = sorted(
        seen.values(),
        key=lambda i: (-details[i].reward, details[i].std, -(tier_rank(details[i].tier) if details[i].tier else -1), i),
    )
    return [details[i] for i in order]


def rerank(
    items: Sequence[RerankItem | Mapping[str, Any]],
    *,
    suite: str | None = None,
    n: int = 8,
    budget: float = 60.0,
    k: int = 1,
    window: Window | tuple[float, float] | None = None,
    tiers: Sequence[Any] | None = None,
    policy: str = "voi",
    ledger_url: str | None = None,
    ledger: Ledger | None = None,
    sampler: Any = None,
    seed: int = 0,
    goal: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
) -> list[RerankResult]:
    """Best-of-N: for each item, verify its first ``n`` candidates under ``budget`` CPU-seconds, keep the top ``k``.

    Each item's goal is ``goal`` (the default) updated by the item's own keys,
    checked by the suite. Items without candidates are sampled from
    ``sampler(goal, n, seed)`` (a callable returning ``n`` completions;
    ``capabilities.Rerank`` gives the suite's own). The scheduler routes with the
    ``discovery`` objective (find the best); ``window`` is the objective for
    items whose goal implies none (``capabilities.GoalWindow``). Verdicts are
    cached in the ledger like any run's and the calls form one ledger run
    named ``rerank-SUITE``.
    """
    if not (_is_count(n) and _is_count(k)):
        raise ValueError(f"n and k must be whole numbers >= 1 (got n={n!r:.20}, k={k!r:.20})")
    if not (isinstance(budget, (int, float)) and not isinstance(budget, bool) and budget > 0 and math.isfinite(budget)):
        raise ValueError(f"budget must be a positive number of CPU-seconds, got {budget!r:.40}")
    suite = suite or str(RunConfig.model_fields["suite"].default)
    try:
        cls = get_suite(suite)
    except SuiteNotFound as exc:
        raise ValueError(str(exc)) from None
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
        raise ValueError(f"items is a list of mappings, e.g. [{{'candidates': ['CCO', 'CCN']}}], got {type(items).__name__}")
    parsed = []
    for idx, it in enumerate(items):
        if isinstance(it, RerankItem):
            parsed.append(it)
            continue
        if not isinstance(it, Mapping):
            raise ValueError(f"item {idx + 1} is {it!r:.60}; an item is a mapping, e.g. {{'candidates': ['CCO', 'CCN']}}")
        try:
            parsed.append(RerankItem.model_validate(dict(it)))
        except ValidationError as exc:
            raise ValueError(describe_errors(exc, f"item {idx + 1}", RerankItem, "see RerankItem's fields")) from None
    if goal is not None and not isinstance(goal, Mapping):
        raise ValueError(f"goal is one mapping for every item, e.g. goal={{'window': [3, 4]}}; got {goal!r:.60}")
    if window is not None:
        window = _window_of(window)
    goals = []
    for idx, item in enumerate(parsed):
        try:
            goals.append(cls.goal(dict(goal or {}) | item.all_goal()))
        except ValueError as exc:
            raise ValueError(f"item {idx + 1}: {exc}") from None
    default = (window.low, window.high) if window is not None else None
    rewards: dict[tuple[float, float] | None, TieredReward] = {}
    shared_ledger = ledger if ledger is not None else Ledger(ledger_url)
    out = []
    try:
        for idx, (item, item_goal) in enumerate(zip(parsed, goals)):
            key = objective_window(cls, item_goal) or default
            if key not in rewards:
                rewards[key] = TieredReward(
                    suite, objective=key, budget_per_call=budget, tiers=tiers, policy=policy,
                    routing=VoiTarget.discovery, run_name=f"rerank-{cls.name}", seed=seed, ledger=shared_ledger,
                    max_wait_s=math.inf, options=options,
                )
            reward = rewards[key]
            candidates = item.candidates[:n]
            if not candidates:
                if sampler is None:
                    raise ValueError(f"item {idx + 1} has no candidates and no policy to sample them from")
                candidates = list(sampler(item_goal, n, seed + idx))
            details = reward.score([item.prompt] * len(candidates), candidates, goal=[item_goal] * len(candidates))
            summary = reward.last_call
            top = [
                Ranked(rank=r + 1, completion=d.completion, candidate_key=d.candidate_key, reward=d.reward, std=d.std,
                       value_mean=d.value_mean, value_std=d.value_std, tier=d.tier, status=d.status, spend_s=d.spend_s,
                       cached=bool(d.cached and not d.new))
                for r, d in enumerate(rank_details(details)[:k])
            ]
            label = (_text(item.prompt) if item.prompt else "") or ", ".join(f"{key_}={value}" for key_, value in item_goal.items()) or (f"window {key[0]:g}-{key[1]:g}" if key else "")
            out.append(
                RerankResult(prompt=label, n=len(candidates), top=top,
                             spend_s=summary.spend_s if summary else 0.0, calls=summary.calls if summary else {},
                             run_id=reward.run_id)
            )
    finally:
        for reward in rewards.values():
            reward.close()
    return out
