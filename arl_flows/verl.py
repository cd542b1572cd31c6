"""verl's reward shapes over a :class:`~arl_flows.tiered_reward.TieredReward`.

:func:`compute_score` and :func:`compute_score_batch` are what verl's ``naive`` and ``batch`` reward managers
call. ``data_source`` names the suite and the suite reads ``ground_truth``; one reward per (suite, window,
options) lives in each verl worker process and is reused across steps, so its ledger run and its scheduler's
history carry over.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from arl_flows.suites import SuiteNotFound, get_suite
from arl_flows.suites.capabilities import goal_from_ground_truth, objective_window
from arl_flows.tiered_reward import TieredReward
from storage.records import tier_rank

__all__ = ["compute_score", "compute_score_batch"]

_VERL_REWARDS: dict[tuple[Any, ...], TieredReward] = {}
_VERL_LOCK = threading.Lock()


def _verl_target(data_source: str, ground_truth: Any) -> tuple[str, tuple[float, float] | None, dict[str, Any]]:
    """(suite, objective window or None, goal) from verl's data_source and ground_truth.

    ``data_source``: a suite name (an 'arl/' prefix is allowed). ``ground_truth``: read by the
    suite (``capabilities.GroundTruth``): the molecules suite's gap window as ``[low, high]``,
    ``{"low":..,"high":..}`` or ``"low,high"``; the code suite's task id; a mapping of goal keys.
    """
    name = str(data_source).removeprefix("arl/")
    try:
        cls = get_suite(name)
    except SuiteNotFound as exc:
        raise ValueError(f"data_source {data_source!r} is not an ARL suite: {exc}") from None
    goal = goal_from_ground_truth(cls, ground_truth)
    return name, objective_window(cls, goal), goal


def _verl_reward(suite: str, window: tuple[float, float] | None, options: Mapping[str, Any]) -> TieredReward:
    """One TieredReward per (suite, window, options) in this worker process, reused across verl steps."""
    key = (suite, window, tuple(sorted((k, repr(v)) for k, v in options.items())))
    with _VERL_LOCK:
        if key not in _VERL_REWARDS:
            _VERL_REWARDS[key] = TieredReward(suite, objective=window, run_name=f"verl-{suite}", **options)
        return _VERL_REWARDS[key]


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Mapping[str, Any] | None] | None = None,
    **options: Any,
) -> list[dict[str, float]]:
    """verl's ``batch`` reward manager shape: one dict per response, ``score`` plus ARL's details.

    ``options`` are :class:`TieredReward` keyword arguments (verl passes
    ``custom_reward_function.reward_kwargs`` here): ``budget_per_call``,
    ``ledger_url``, ``tiers``, ``max_wait_s``, ... Responses of one prompt
    (same data source, ground truth and ``extra_info['index']``) form one
    GRPO group for the scheduler.
    """
    extra_infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    if not (len(data_sources) == len(solution_strs) == len(ground_truths) == len(extra_infos)):
        raise ValueError("data_sources, solution_strs, ground_truths and extra_infos must have one entry per response")
    for i, info in enumerate(extra_infos):
        if info is not None and not isinstance(info, Mapping):
            raise ValueError(f"extra_info of response {i} is {type(info).__name__}; it is a mapping (verl's extra_info) or None")
    taken = sorted({"objective", "suite", "run_name"} & set(options))
    if taken:
        raise ValueError(f"reward_kwargs {', '.join(taken)}: the suite comes from data_source and the window from "
                         "ground_truth; leave them out")
    batches: dict[tuple[str, tuple[float, float] | None], list[int]] = {}
    targets = []
    for i, (source, truth) in enumerate(zip(data_sources, ground_truths)):
        suite, window, goal = _verl_target(source, truth)
        targets.append(goal)
        batches.setdefault((suite, window), []).append(i)
    out: list[dict[str, float]] = [{} for _ in solution_strs]
    for (suite, window), rows in batches.items():
        reward = _verl_reward(suite, window, options)
        prompts = [
            f"{data_sources[i]}|{ground_truths[i]}|{(extra_infos[i] or {}).get('index', '')}" for i in rows
        ]
        details = reward.score(prompts, [solution_strs[i] for i in rows], goal=[targets[i] for i in rows])
        for i, d in zip(rows, details):
            out[i] = {
                "score": d.reward,
                "std": d.std,
                "tier_rank": float(tier_rank(d.tier)) if d.tier else -1.0,
                "spend_s": d.spend_s,
                "cached": float(bool(d.cached and not d.new)),
                "invalid": float(d.status == "invalid"),  # a real 0, not a completion no tier could verify
            }
    return out


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None = None, **options: Any
) -> dict[str, float]:
    """verl's ``naive`` reward manager shape: one response at a time (a batch of one; prefer the batch form)."""
    return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info], **options)[0]
