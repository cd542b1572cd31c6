"""Benchmarks of the scheduler against its baselines, on a pool whose top-tier values are known.

Run by ``arl bench scheduler`` and ``arl bench advantages`` (the pool and its
verdicts come from :mod:`benchmarks.molecule_pool`); a harness, not part of
the wheel.

Both benchmarks replay verdicts: every tier's verdict on every pool member is
computed once (live, by the real verifiers; the caller caches them) and
:class:`ReplayVerifier` hands them back with their measured cost, so each
policy is charged exactly as if it had computed what it asked for and the
policies are compared on identical numbers.

- :func:`retrieval_benchmark`: find the pool's hits (true value in the
  window, or in its top fraction for a maximize/minimize objective) by
  confirming them at the top tier; cost to reach 50/80/95% recall and a
  recall-versus-cost curve per policy.
- :func:`advantage_benchmark`: groups of G candidates; how close each
  policy's group advantages are to the true ones, as a function of spend.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from scipy.stats import spearmanr

from storage.records import Status, Verdict
from verifiers.base import Candidate, CostModel, Verifier
from verifiers.scheduler.policies import make_policy
from verifiers.objectives import Objective
from verifiers.scheduler.config import LearnedSurrogateConfig, SchedulerConfig, VoiTarget
from verifiers.scheduler.escalation import EscalationPolicy
from verifiers.scheduler.learned import CalibratedModel
from verifiers.scheduler.features import Featurizer
from verifiers.scheduler.planner import Scheduler
from verifiers.scheduler.surrogate import Observation, SurrogatePrior
from verifiers.scheduler.window import window_score

from benchmarks.baselines import CascadePolicy, OraclePolicy

__all__ = [
    "RECALL_LEVELS",
    "PolicyCurve",
    "ReplayVerifier",
    "advantage_benchmark",
    "replay_ladder",
    "retrieval_benchmark",
    "surrogate_kind",
]

RECALL_LEVELS = (0.5, 0.8, 0.95)


class ReplayVerifier(Verifier[Any]):
    """Answers from a table of verdicts computed earlier by the verifier it stands in for.

    It carries that verifier's name, version and params (so cache keys match)
    and a cost model refitted to the measured costs, as a live scheduler would
    after a few calls. ``charge`` overrides the cost of every call (the top
    tier's declared cost in the benchmarks).
    """

    name: ClassVar[str] = "replay"
    version: ClassVar[str] = "0"

    def __init__(
        self, table: Mapping[str, Verdict], charge: float | None = None, params: Any = None, identity: str | None = None
    ) -> None:
        super().__init__(params)
        self.table = dict(table)
        self.charge = charge
        self.calls = 0
        self._identity = identity

    @property
    def params_hash(self) -> str:
        # The live verifier's own hash (isolated verifiers leave worker settings out of it).
        return self._identity or super().params_hash

    def verify_batch(self, candidates: Sequence[Candidate]) -> list[Verdict]:
        out = []
        for c in candidates:
            stored = self.table.get(c.key)
            if stored is None:
                out.append(self.verdict(c, Status.failed, feedback="no stored verdict for this candidate"))
                continue
            update: dict[str, Any] = {"id": None}
            if self.charge is not None:
                update["cost_s"] = self.charge
            out.append(stored.model_copy(update=update))
            self.calls += 1
        return out


def replay_ladder(
    live: Sequence[Verifier],
    tables: Sequence[Mapping[str, Verdict]],
    candidates: Sequence[Candidate],
    top_cost: float | None = None,
) -> list[ReplayVerifier]:
    """Replay stand-ins for a live ladder; the last one is charged ``top_cost`` per call if given."""
    out = []
    for j, (v, table) in enumerate(zip(live, tables, strict=True)):
        is_top = j == len(live) - 1
        charge = top_cost if is_top else None
        cls = type(
            f"Replay[{v.name}]",
            (ReplayVerifier,),
            {"name": v.name, "tier": v.tier, "version": v.version, "Params": type(v).Params, "suite": v.suite},
        )
        replay = cls(table, charge=charge, params=v.params, identity=v.params_hash)
        if is_top and top_cost is not None:
            replay.costs = CostModel(base=top_cost)
        else:
            sizes = [v.size(c) for c in candidates if c.key in table]
            costs = [table[c.key].cost_s for c in candidates if c.key in table]
            replay.costs = v.costs.refine(sizes, costs)
        out.append(replay)
    return out


@dataclass
class PolicyCurve:
    """Cumulative cost and hits found, after every verdict, for one policy."""

    policy: str
    cost: list[float] = field(default_factory=lambda: [0.0])
    found: list[int] = field(default_factory=lambda: [0])
    calls: dict[str, int] = field(default_factory=dict)

    def cost_to(self, hits_needed: int) -> float | None:
        for c, f in zip(self.cost, self.found):
            if f >= hits_needed:
                return c
        return None


def _drive(
    scheduler: Scheduler,
    candidates: Sequence[Candidate],
    cached: dict[tuple[str, str], Verdict],
    budget: float,
    curve: PolicyCurve,
    is_hit: Callable[[Verdict], bool],
    step: int,
    stop_at_found: int,
) -> bool:
    """One scheduler step over the pool, recording the curve verdict by verdict; False if nothing was asked."""
    plan = scheduler.plan_step(candidates, cached=list(cached.values()), budget=budget, step=step)
    asked = False
    top = scheduler.ladder[-1].name
    while requests := plan.next_round():
        asked = True
        for name, batch in requests.items():
            verdicts = scheduler.verifier(name).verify_batch(batch)
            plan.observe(verdicts)
            for v in verdicts:
                cached[(v.candidate_key, v.verifier)] = v
                curve.calls[name] = curve.calls.get(name, 0) + 1
                curve.cost.append(curve.cost[-1] + v.cost_s)
                curve.found.append(curve.found[-1] + int(v.verifier == top and is_hit(v)))
        if curve.found[-1] >= stop_at_found:
            break
    plan.result()
    return asked


def retrieval_benchmark(
    ladder: Sequence[Verifier],
    pool: Sequence[Candidate],
    truth: Mapping[str, float],
    held_out: Sequence[Observation],
    *,
    low: float,
    high: float,
    policies: Sequence[str],
    featurize: Featurizer | None,
    step_budget: float,
    seed: int = 0,
    learned: LearnedSurrogateConfig | None = None,
    cascade_keeps: Sequence[float] = (0.8, 0.9, 0.95, 1.0),
    cascade_margins: Sequence[float] = (0.0, 0.1, 0.25, 0.5, 1.0),
    objective: Objective | None = None,
    progress: Callable[[str], None] = lambda _: None,
    learner: Callable[[Sequence[str], Any, int], Any] | None = None,
    config_overrides: Mapping[str, Any] | None = None,
    surrogate_prior: SurrogatePrior | None = None,
) -> dict[str, Any]:
    """Cost for each policy to confirm 50/80/95% of the pool's hits at the top tier.

    A hit is a true value in ``[low, high]`` (either may be infinite: the top
    of a maximized property is ``[cut, inf)``). The scheduler's reward is
    ``objective`` (default: the window ``[low, high]``); its terms on the
    top tier's value should be met exactly on that range, as a maximize term
    whose midpoint is the cut is.

    ``ladder`` replays the tiers (see :func:`replay_ladder`); ``truth`` is
    the known top-tier value per key; ``held_out`` is a disjoint split with
    every tier's value: it tunes the cascade and is the surrogate's history
    for ``voi`` (the same data for both). ``voi`` and ``random`` run in steps
    of ``step_budget`` CPU-seconds; the others in one unbounded step. The
    cascade is run for every (keep, margin) pair and reported per variant;
    ``cascade`` is the best variant *at each recall level*, chosen on the
    pool itself: a tuning in hindsight that favours the baseline.
    ``learner`` is the suite's ``surrogate_learner`` (the network ``voi``'s surrogate stacks, shipped or
    trained on the history); ``config_overrides`` are further ``SchedulerConfig`` fields for every policy, and
    ``surrogate_prior`` the surrogate's settings (default: :class:`SurrogatePrior`'s).
    """
    hits = {k for k, y in truth.items() if low <= y <= high}
    n_hits = len(hits)
    if n_hits == 0:
        raise ValueError(f"the pool has no hits in [{low}, {high}]; widen the window or enlarge the pool")
    if objective is not None and objective.hit_interval() != (low, high):
        raise ValueError(f"the objective's terms on the value are met on {objective.hit_interval()}, but hits are "
                         f"[{low}, {high}]; make them the same range")
    need = {r: max(math.ceil(r * n_hits), 1) for r in RECALL_LEVELS}
    top = ladder[-1].name
    lower = [v.name for v in ladder[:-1]]

    def is_hit(v: Verdict) -> bool:
        return v.status == Status.ok and v.value is not None and low <= v.value <= high

    curves: dict[str, PolicyCurve] = {}
    total_all = sum(v.expected_cost(c) for v in ladder for c in pool)
    for name in policies:
        variants: list[tuple[str, EscalationPolicy, float]] = []
        config = SchedulerConfig(
            policy="all" if name in ("cascade", "oracle") else name,  # the baselines are passed as instances
            voi_target=VoiTarget.discovery,
            **({"reward": objective} if objective is not None else {"target_low": low, "target_high": high}),
            seed=seed,
            learned=learned or LearnedSurrogateConfig(),
            **dict(config_overrides or {}),
        )
        if name == "cascade":
            for keep in cascade_keeps:
                for margin in cascade_margins:
                    pol = CascadePolicy.tune(held_out, lower, top, low, high, keep=keep, margin=margin)
                    variants.append((f"cascade@{keep:g}+{margin:g}", pol, math.inf))
        elif name == "oracle":
            variants.append((name, OraclePolicy(truth, config), math.inf))
        elif name in ("voi", "random"):
            variants.append((name, make_policy(name, config), step_budget))
        else:
            variants.append((name, make_policy(name, config), math.inf))
        for label, pol, budget in variants:
            progress(f"policy {label}")
            scheduler = Scheduler(ladder, config, featurize=featurize if name == "voi" else None, policy=pol,
                                  learner=learner if name == "voi" else None, surrogate_prior=surrogate_prior)
            if name == "voi":
                scheduler.add_history(held_out, progress=progress)
            curve = PolicyCurve(label)
            cached: dict[tuple[str, str], Verdict] = {}
            step = 0
            while curve.found[-1] < need[0.95] and curve.cost[-1] < 1.5 * total_all:
                if not _drive(scheduler, pool, cached, budget, curve, is_hit, step, need[0.95]):
                    break
                step += 1
            curves[label] = curve
    oracle = curves.get("oracle")
    report: dict[str, Any] = {
        "pool": len(pool),
        "hits": n_hits,
        "window": [low, high] if math.isfinite(low) and math.isfinite(high) else None,
        "hit_range": [x if math.isfinite(x) else None for x in (low, high)],
        "objective": objective.model_dump(exclude_defaults=True) if objective is not None else None,
        "held_out": len(held_out),
        "step_budget": step_budget,
        "policies": {},
    }
    for label, curve in curves.items():
        ctr = {f"{r:g}": curve.cost_to(need[r]) for r in RECALL_LEVELS}
        ratio = {
            k: (c / oracle.cost_to(need[float(k)]) if c is not None and oracle and oracle.cost_to(need[float(k)]) else None)
            for k, c in ctr.items()
        }
        report["policies"][label] = {
            "cost_to_recall": ctr,
            "ratio_to_oracle": ratio,
            "final_recall": curve.found[-1] / n_hits,
            "total_cost": curve.cost[-1],
            "calls": curve.calls,
        }
    cascades = [k for k in curves if k.startswith("cascade@")]
    if cascades:
        best: dict[str, Any] = {"cost_to_recall": {}, "ratio_to_oracle": {}, "variant": {}}
        for r in RECALL_LEVELS:
            k = f"{r:g}"
            options = [(report["policies"][c]["cost_to_recall"][k], c) for c in cascades]
            options = [o for o in options if o[0] is not None]
            cost, which = min(options) if options else (None, None)
            best["cost_to_recall"][k] = cost
            best["variant"][k] = which
            best["ratio_to_oracle"][k] = report["policies"][which]["ratio_to_oracle"][k] if which else None
        report["policies"]["cascade"] = best
    report["curves"] = {k: {"cost": c.cost[:: max(len(c.cost) // 400, 1)] + [c.cost[-1]],
                            "recall": [f / n_hits for f in c.found[:: max(len(c.found) // 400, 1)]] + [c.found[-1] / n_hits]}
                        for k, c in curves.items()}
    return report


def surrogate_kind(scheduler: Scheduler) -> str:
    """What the scheduler's surrogate stacks: ``shipped`` (the suite's pretrained, calibrated network,
    attached when the scheduler is built with the suite's learner, as every run's is), ``trained``
    (a network fitted on the history) or ``linear`` (none)."""
    model = scheduler.surrogate.learned
    if model is None:
        return "linear"
    return "shipped" if isinstance(model, CalibratedModel) else "trained"


def _advantages(rewards: np.ndarray, floor: float) -> np.ndarray:
    """GRPO group advantages (r - mean) / max(std, floor) for a (groups, G) reward array."""
    centered = rewards - rewards.mean(axis=1, keepdims=True)
    return centered / np.maximum(rewards.std(axis=1, keepdims=True), floor)


def advantage_benchmark(
    ladder: Sequence[Verifier],
    groups: Sequence[Sequence[Candidate]],
    truth: Mapping[str, float],
    held_out: Sequence[Observation],
    *,
    low: float,
    high: float,
    softness: float,
    policies: Sequence[str],
    budget_fractions: Sequence[float],
    featurize: Featurizer | None,
    seed: int = 0,
    learned: LearnedSurrogateConfig | None = None,
    informative_spread: float = 0.1,
    reward_resolution: float = 0.01,
    sign_threshold: float = 0.1,
    progress: Callable[[str], None] = lambda _: None,
    learner: Callable[[Sequence[str], Any, int], Any] | None = None,
) -> dict[str, Any]:
    """Accuracy of group advantages per spend, for each policy at each budget.

    Every policy's scheduler is built as a run builds its own: ``featurize``
    and ``learner`` are the suite's (``Suite.featurize``,
    ``Suite.surrogate_learner``), so with ``learned.shipped`` the suite's
    network is stacked under the surrogate before the history is added, and
    the policies differ only in which calls they buy.

    Advantages use the GRPO normalisation with the scheduler's scale floor.
    Metrics: ``rmse`` of advantages over all groups; mean within-group
    ``spearman`` and ``sign_agreement`` over the *informative* groups, those
    whose true rewards spread by at least ``informative_spread`` (in a group
    whose members all score about 0 the ranking is noise and GRPO learns
    nothing from it whatever the verifiers say). Ranks are taken of rewards
    rounded to ``reward_resolution`` (two misses scoring 1e-5 and 1e-8 tie),
    and signs are compared for members whose true advantage is at least
    ``sign_threshold`` group standard deviations from the group mean.
    """
    flat = [c for g in groups for c in g]
    group_ids = [f"g{gi}" for gi, g in enumerate(groups) for _ in g]
    shape = (len(groups), len(groups[0]))
    if any(len(g) != shape[1] for g in groups):
        raise ValueError("every group must have the same size G")
    true_r = window_score(np.array([truth[c.key] for c in flat]), low, high, softness).reshape(shape)
    floor = SchedulerConfig().advantage_scale_floor
    true_a = _advantages(true_r, floor)
    informative = (true_r.max(axis=1) - true_r.min(axis=1)) >= informative_spread
    full_cost = sum(v.expected_cost(c) for v in ladder for c in flat)

    def score(estimates: np.ndarray) -> dict[str, float]:
        est_r = estimates.reshape(shape)
        est_a = _advantages(est_r, floor)
        rho, sign = [], []
        for g in np.flatnonzero(informative):
            est_rank, true_rank = np.round(est_r[g] / reward_resolution), np.round(true_r[g] / reward_resolution)
            if np.ptp(true_rank) == 0:
                continue  # rewards tie at this resolution: no ranking to get right
            # An estimate that ties every member ranks nothing: correlation 0, not undefined.
            r = spearmanr(est_rank, true_rank).statistic if np.ptp(est_rank) > 0 else 0.0
            rho.append(float(r))
            moving = np.abs(true_a[g]) >= sign_threshold
            sign.append(float(np.mean(np.sign(est_a[g][moving]) == np.sign(true_a[g][moving]))) if moving.any() else 1.0)
        return {
            "rmse": float(np.sqrt(np.mean((est_a - true_a) ** 2))),
            "spearman": float(np.mean(rho)) if rho else float("nan"),
            "sign_agreement": float(np.mean(sign)) if sign else float("nan"),
        }

    rows: dict[str, list[dict[str, float]]] = {}
    surrogates: set[str] = set()
    for name in policies:
        target = VoiTarget.discovery if name == "voi-discovery" else VoiTarget.advantage
        policy_name = "voi" if name.startswith("voi") else name
        fractions = [1.0] if name in ("all", "fast-only") else budget_fractions
        for frac in fractions:
            progress(f"policy {name} at {frac:g} of all")
            config = SchedulerConfig(
                policy=policy_name,
                voi_target=target,
                target_low=low,
                target_high=high,
                window_softness=softness,
                seed=seed,
                learned=learned or LearnedSurrogateConfig(),
            )
            scheduler = Scheduler(ladder, config, featurize=featurize, learner=learner)
            scheduler.add_history(held_out, progress=progress)
            surrogates.add(surrogate_kind(scheduler))
            result = scheduler.run_step(flat, group_ids=group_ids, budget=frac * full_cost if name != "all" else math.inf)
            est = np.array([e.mean for e in result.estimates])
            row = {"budget_fraction": frac, "spend": result.total_spend, "spend_fraction": result.total_spend / full_cost}
            row.update(score(est))
            rows.setdefault(name, []).append(row)
    reference = rows.get("all", [None])[0]
    reached: dict[str, Any] = {}
    if reference:
        for name, rs in rows.items():
            ok = [
                r
                for r in rs
                if r["spearman"] >= reference["spearman"] - 0.02 and r["sign_agreement"] >= reference["sign_agreement"] - 0.02
            ]
            reached[name] = min((r["spend_fraction"] for r in ok), default=None)
    return {
        "groups": shape[0],
        "group_size": shape[1],
        "informative_groups": int(informative.sum()),
        "window": [low, high],
        "softness": softness,
        "reward_resolution": reward_resolution,
        "sign_threshold": sign_threshold,
        "cost_of_all": full_cost,
        "policies": rows,
        "spend_fraction_to_match_all": reached,
        "surrogate": sorted(surrogates),
    }
