"""Learning under a verification budget: does scheduling beat verifying everything? (``arl bench learning``)

Every regime trains the same pretrained SMILES prior from the same seed with
the same trainer settings (GRPO, plus hindsight relabelling where enabled) on
the gap-window design task, through the training step (:func:`arl_flows.step.run_step`),
and stops once it has spent the same CPU-second verification budget (or
reaches its step cap: ``max_steps``, or ``proxy_max_steps`` for the two
fast-only regimes, whose steps cost milliseconds of verification).
The regimes differ only in how candidates are verified:

- ``scheduled``: the scheduler's ``voi`` policy with the ``advantage``
  objective, a per-step budget, hindsight on;
- ``scheduled-no-hindsight``: the same without hindsight distillation;
- ``scheduled-paced``: ``scheduled`` with the proxy regimes' step count: as
  many steps as ``proxy_max_steps``, each with ``budget / proxy_max_steps``
  of its own and the unspent part carried to later steps (``budget_carry``),
  so that the policy learns as many steps as the cheap regimes do and a DFT
  call is bought whenever enough has accrued for one, instead of a few steps
  that each buy one or two;
- ``top-only``: every valid candidate goes up the ladder to the top tier
  (the ``all`` policy with no per-step cap: the fast and simulation tiers on
  the way cost milliseconds, and an invalid SMILES stops at the fast tier, so
  it is never charged DFT);
- ``fast-only``: rewards from the fast tier alone, taken at face value: the
  window score of the fast tier's own value (the ``fast-only`` policy, no
  held-out history, the scheduler's posterior replaced by the proxy). This is
  what training on a proxy means: the regime never sees a top-tier value;
- ``fast-only-calibrated``: the same, but with the held-out history every
  other regime gets, so the fast tier is first mapped onto the top tier's
  scale with top-tier data (a stronger baseline than the issue's literal
  one, reported beside it);
- ``xtb-only-calibrated``: the surrogate on the cheap tiers only: every valid
  candidate goes through the fast and simulation (xTB) tiers and is read
  through the calibrated surrogate, but the top tier is capped at 0 calls per
  step, so the regime never pays DFT;
- ``cascade``: fixed per-tier thresholds tuned on a held-out QM9 split
  (:meth:`benchmarks.baselines.CascadePolicy.tune`, as the retrieval benchmark
  does), with the same per-step budget as ``scheduled``.

All regimes but ``fast-only`` start with the same surrogate history: the
held-out split, every tier's value on a few hundred QM9 molecules (the
cascade's tuning data); in another space, molecules of its reference pool
(``benchmarks/data/pools``) with the pool's own DFT and the lower tiers live.
It is setup, like the prior, and is charged to no regime.

Metric, in the spirit of the PMO benchmark (Gao et al., NeurIPS 2022
Datasets and Benchmarks) but in cost units: whenever a regime's cumulative
spend crosses the next of ``audit_points`` evenly spaced marks (and at the
end), the ``top_k`` molecules that the regime itself ranks best so far, by
its own reward estimates, are scored with the top tier. That audit is cached
and charged to no regime. ``top10_auc`` is the area under the step curve of
the mean audited window score versus cumulative spend, over ``[0, budget]``,
divided by the budget (so it lies in [0, 1]; the last audit holds to the end
of the axis).

That metric saturates once ten verified hits are in hand, and counts QM9
molecules the surrogate's network trained on. So the benchmark also counts
what a user wants: **novel verified hits**, distinct molecules absent from the
space's training data (the fast tier's exact ``novel`` property: in neither
the space's training index nor the QM9 table), whose top-tier value, among
what the regime verified at the top tier or had audited, lies in the window.
Every novel molecule's top-tier value must be computed (with the default
ladder, ``reference-or-dft`` runs real PySCF for any molecule outside its QM9
table); a table answer for a novel molecule stops the benchmark with an error.
At each audit point the regime's own ``novel_k`` best-ranked novel molecules
are audited too (charged to no regime). Two metrics follow:
``novel_hits_per_cpu_hour`` (novel verified hits over the regime's spend in
CPU-hours; ``novel_hits_per_cpu_hour_with_audits`` also charges the regime
the audits of molecules it never verified itself, since a regime that pays
little learns its hits only from the free audits) and ``novel_topk_auc``, the area (as above) under the step curve of
the mean window score of the best ``novel_k`` distinct novel molecules with a
computed top-tier value so far (missing ones count 0), with ``novel_k`` large
enough that no regime reaches 1 within the budget.

Every verdict is computed live once by the real verifiers and memoised (in
memory and, with a cache file, in a SQLite ledger, as a run keeps its paid
verdicts); a regime that asks for a verdict
another regime or an audit already computed gets it back with its measured
cost and is charged that cost, exactly as if it had computed it. That is what
makes five regimes times three seeds fit on two cores.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from arl_flows.config import RunConfig, load_config
from arl_flows.step import StepHooks, run_step
from arl_flows.training import RunSession, StepState, StepSummary
from storage.records import RewardEstimate, Status, Verdict
from storage.settings import settings
from verifiers import Candidate, Closable, Verifier, registry
from verifiers.scheduler import Observation, TierCaps, VoiTarget, charge, window_score

from benchmarks.baselines import CascadePolicy
from benchmarks.molecule_pool import is_novel_key, space_of
from benchmarks.provenance import with_provenance
from benchmarks.replay import surrogate_kind
from benchmarks.settings import bench_settings

__all__ = [
    "REGIMES",
    "LearningBenchConfig",
    "RegimeRun",
    "VerdictMemo",
    "best_k_mean",
    "from_table",
    "learning_benchmark",
    "merge_reports",
    "novel_hits_per_cpu_hour",
    "novel_topk_saturated",
    "plot_curves",
    "regime_config",
    "face_value_estimates",
    "summary_table",
    "truth_value",
]

DEFAULT_REGIMES = ("scheduled", "top-only", "fast-only", "cascade", "scheduled-no-hindsight")  # the five
REGIMES = (*DEFAULT_REGIMES, "fast-only-calibrated", "xtb-only-calibrated", "scheduled-paced")
PROXY_REGIMES = ("fast-only", "fast-only-calibrated", "xtb-only-calibrated")  # never ask the top tier
PROXY_STEP_REGIMES = (*PROXY_REGIMES, "scheduled-paced")  # take proxy_max_steps steps, not max_steps


class LearningBenchConfig(BaseModel):
    """Settings of ``arl bench learning``; the training settings come from ``run_overrides``."""

    model_config = ConfigDict(extra="forbid")

    budget: float = Field(default=240.0, gt=0, description="CPU-seconds of verification each regime may spend.")
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1, description="Seeds; each runs every regime.")
    regimes: list[str] = Field(default_factory=lambda: list(DEFAULT_REGIMES), min_length=1, description="Regimes to run.")
    budget_per_step: float = Field(
        default=30.0, gt=0, description="CPU-seconds one step may spend (scheduled, cascade, fast-only; top-only has no cap)."
    )
    max_steps: int = Field(default=40, ge=1, description="Step cap of every regime but the fast-only ones.")
    proxy_max_steps: int = Field(
        default=5000,
        ge=1,
        description="Step cap of fast-only and fast-only-calibrated: high, so that they too stop on the budget "
        "(their steps cost milliseconds of verification, so equal budget means many more steps).",
    )
    verify_batch: int = Field(
        default=4,
        ge=1,
        description="Verdicts per batch handed back to the planner: audits fall at spend marks inside a step too, "
        "so a regime that spends its budget in one step (top-only) is not audited only at its end.",
    )
    top_k: int = Field(default=10, ge=1, description="Molecules audited at each audit point.")
    novel_k: int = Field(
        default=25,
        ge=1,
        description="Novel molecules audited at each audit point, and the k of novel_topk_auc (the best k novel "
        "molecules with a computed top-tier value; large enough that no regime reaches 1 within the budget).",
    )
    audit_points: int = Field(default=12, ge=1, description="Audits at evenly spaced spend marks over the budget (+ the end).")
    history: int = Field(
        default=400, ge=10, description="Held-out molecules with every tier's value (QM9's; in another space its reference "
        "pool's): surrogate history and cascade tuning."
    )
    history_seed: int = Field(default=12345, description="Seed of the held-out draw (the same for every seed and regime).")
    cascade_keep: float = Field(default=0.9, gt=0, le=1, description="Share of held-out hits each cascade interval keeps.")
    cascade_margin: float = Field(default=0.25, ge=0, description="Widening (eV) of each cascade interval.")
    fooled_estimate: float = Field(
        default=0.5, ge=0, le=1, description="A molecule counts as fooling a regime if its estimated reward is at least this"
    )
    fooled_truth: float = Field(default=0.5, ge=0, le=1, description="... and its audited (top-tier) reward is below this.")
    run_overrides: dict[str, Any] = Field(
        default_factory=dict, description="RunConfig overrides shared by every regime (prior, trainer, rollout, tiers, ...)."
    )


def base_run_overrides(space: str = "qm9") -> dict[str, Any]:
    """The training setup of the benchmark: default GRPO settings, the cached CPU-clock prior, the live ladder.

    In qm9 the top tier is ``reference-or-dft`` (QM9's value where the table has it, real DFT for any novel
    molecule); in another space it is ``pyscf-b3lyp`` in the space's basis, the level of its reference pool,
    whose molecules are the surrogate's history there (:func:`_held_out_pool`).
    """
    top = "reference-or-dft" if space == "qm9" else "pyscf-b3lyp"
    return {
        "name": "bench-learning",
        "prior": {"budget_clock": "cpu", "num_threads": 1},
        "tiers": [
            {"verifier": "rdkit-eht"},
            {"verifier": "gfn2-xtb", "params": {"threads": 1}},
            {"verifier": top, "params": {"threads": 1} | ({} if space == "qm9" else {"workers": 1})},
        ],
    }


def regime_config(base: RunConfig, regime: str, bench: LearningBenchConfig, seed: int) -> RunConfig:
    """The run config of one regime: only the verification policy (and hindsight for the ablation) differ."""
    if regime not in REGIMES:
        raise ValueError(f"unknown regime {regime!r}; use one of {', '.join(REGIMES)}")
    sched = base.scheduler.model_copy(
        update={"budget_per_run": bench.budget, "budget_per_step": bench.budget_per_step, "seed": seed}
    )
    hindsight = base.hindsight
    steps = bench.proxy_max_steps if regime in PROXY_STEP_REGIMES else bench.max_steps
    if regime in ("scheduled", "scheduled-no-hindsight", "scheduled-paced"):
        sched = sched.model_copy(update={"policy": "voi", "voi_target": VoiTarget.advantage})
        if regime == "scheduled-paced":  # the cheap regimes' steps, the budget accruing over them
            sched = sched.model_copy(update={"budget_per_step": bench.budget / steps, "budget_carry": True})
        if regime == "scheduled-no-hindsight":
            hindsight = hindsight.model_copy(update={"enabled": False})
    elif regime == "top-only":
        sched = sched.model_copy(update={"policy": "all", "budget_per_step": math.inf})
    elif regime == "xtb-only-calibrated":  # every tier but the top one: the top tier gets no call in any step
        top = registry.get(base.tiers[-1].verifier).name
        caps = dict(sched.caps) | {top: TierCaps(max_calls_per_step=0)}
        sched = sched.model_copy(update={"policy": "all", "caps": caps})
    elif regime in PROXY_REGIMES:
        sched = sched.model_copy(update={"policy": "fast-only"})
    else:  # cascade: the session is opened with 'all' and its policy swapped for the tuned cascade
        sched = sched.model_copy(update={"policy": "all"})
    return base.model_copy(
        update={
            "name": f"{base.name}-{regime}-s{seed}",
            "seed": seed,
            "steps": steps,
            "scheduler": sched,
            "hindsight": hindsight,
        }
    )


# ---------------------------------------------------------------------------------------------- verdicts


class VerdictMemo:
    """Verdicts computed once per (verifier identity, candidate key), optionally kept in a ledger (a SQLite file).

    The ledger is the one a run keeps its paid verdicts in (``put_verdicts``,
    ``lookup_verdicts``), so another seed, regime or rerun reads them back
    instead of paying again; memory holds what this process has seen.
    """

    def __init__(self, path: Path | None = None) -> None:
        from storage.ledger import Ledger

        self.path = path
        self.ledger: Ledger | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.ledger = Ledger(f"sqlite:///{path}")
        self.verdicts: dict[tuple[str, str, str, str], Verdict] = {}
        self.computed_s = 0.0  # cost of the verdicts computed by this process (not replayed)

    def get(self, verifier: Verifier, candidates: Sequence[Candidate]) -> list[Verdict]:
        """One verdict per candidate: memoised ones replayed (same cost), the rest computed live."""
        ident = (verifier.name, verifier.version, verifier.params_hash)
        missing = {c.key: c for c in candidates if (c.key, *ident) not in self.verdicts}
        if missing and self.ledger is not None:
            for key, v in self.ledger.lookup_verdicts(list(missing), *ident).items():
                self.verdicts[v.cache_key] = v.model_copy(update={"id": None})
                del missing[key]
        if missing:
            fresh = verifier.verify_batch(list(missing.values()))
            # Timeouts depend on machine load: do not keep them, so a rerun tries again.
            keep = [v for v in fresh if v.status != Status.timeout]
            for v in fresh:
                self.computed_s += v.cost_s
            for v in keep:
                self.verdicts[v.cache_key] = v.model_copy(update={"id": None})
            if self.ledger is not None and keep:
                self.ledger.put_verdicts(keep, return_stored=False)
            fresh_by_key = {v.candidate_key: v for v in fresh}
        else:
            fresh_by_key = {}
        out = []
        for c in candidates:
            v = self.verdicts.get((c.key, *ident)) or fresh_by_key[c.key]
            out.append(v.model_copy(update={"id": None}))
        return out

    def close(self) -> None:
        if self.ledger is not None:
            self.ledger.close()


# ---------------------------------------------------------------------------------------------- one regime


@dataclass
class RegimeRun:
    """What one regime did with one seed."""

    regime: str
    seed: int
    steps: int = 0
    spend: dict[str, float] = field(default_factory=dict)
    curve: list[tuple[float, float]] = field(default_factory=lambda: [(0.0, 0.0)])  # (cum. spend, audited top-k score)
    novel_curve: list[tuple[float, float]] = field(default_factory=lambda: [(0.0, 0.0)])  # (cum. spend, best novel_k score)
    estimates: dict[str, tuple[float, float]] = field(default_factory=dict)  # key -> (reward mean, std), latest
    truth: dict[str, float | None] = field(default_factory=dict)  # key -> top-tier value (audited or paid for)
    samples: int = 0
    valid: int = 0
    valid_keys: set[str] = field(default_factory=set)
    novel_keys: set[str] = field(default_factory=set)  # valid molecules absent from the space's training data
    paid_top: set[str] = field(default_factory=set)  # molecules the regime itself verified at the top tier
    audit_costs: dict[str, float] = field(default_factory=dict)  # key -> measured cost of its audit verdict (uncharged)
    seconds: float = 0.0
    surrogate: str = "linear"  # what the scheduler's surrogate stacks at step 0 (see surrogate_kind)

    @property
    def total_spend(self) -> float:
        return float(sum(self.spend.values()))

    @property
    def audit_spend(self) -> float:
        """What the audits of molecules the regime never verified at the top tier itself would have cost it."""
        return float(sum(cost for key, cost in self.audit_costs.items() if key not in self.paid_top))

    def ranked(self, k: int, among: set[str] | None = None) -> list[str]:
        """The regime's own top-k valid molecules (of ``among``, default all valid ones): highest estimated reward,
        then lowest std, then first seen."""
        pool = self.valid_keys if among is None else among
        order = sorted(
            ((mean, -std, -i, key) for i, (key, (mean, std)) in enumerate(self.estimates.items()) if key in pool),
            reverse=True,
        )
        return [key for *_, key in order[:k]]


def from_table(verdict: Verdict) -> bool:
    """True when an ok top-tier verdict was read from a table rather than computed.

    The table tiers (``reference-table``, and ``reference-or-dft`` for a
    molecule in its table) name the file they read in ``values['source']``;
    a DFT run (``pyscf-b3lyp``, ``reference-or-dft`` off the table) records
    its SCF cycles, which no table has.
    """
    return verdict.status == Status.ok and "scf_cycles" not in verdict.values and bool(verdict.values.get("source"))


def truth_value(verdict: Verdict, novel: bool) -> float | None:
    """A top-tier verdict's ok value (None if not ok); a novel molecule's must be computed, never read from a table."""
    if novel and from_table(verdict):
        raise ValueError(
            f"novel molecule {verdict.candidate_key} was answered from a table ({verdict.values.get('source')}) by the "
            f"top tier {verdict.verifier}: a novel molecule's top-tier value must come from real DFT; use a top tier "
            "whose table holds only the space's training data"
        )
    return _top_value(verdict)


def best_k_mean(truth: dict[str, float | None], keys: set[str], k: int, low: float, high: float, softness: float) -> float:
    """Mean window score of the best ``k`` of ``keys`` with a known top-tier value in ``truth``; missing ones count 0."""
    scores = sorted(
        (float(window_score(truth[key], low, high, softness)) for key in keys if truth.get(key) is not None), reverse=True
    )
    return float(sum(scores[:k])) / k


def _top_value(v: Verdict) -> float | None:
    return float(v.value) if v.status == Status.ok and v.value is not None else None


def face_value_estimates(
    estimates: Sequence[RewardEstimate],
    candidate_of: dict[str, str],
    proxy: dict[str, float | None],
    low: float,
    high: float,
    softness: float,
) -> list[RewardEstimate]:
    """The literal fast-only reward: the window score of the fast tier's value, as if it were the truth.

    ``candidate_of`` maps trajectory ids to candidate keys and ``proxy`` keys to
    the fast tier's ok value. Invalid molecules, and any without a fast value,
    keep the scheduler's estimate (the suite's invalid reward). The ledger keeps
    the scheduler's posterior; only training and ranking use the proxy.
    """
    out = []
    for e in estimates:
        value = proxy.get(candidate_of[e.trajectory_id])
        if e.invalid or value is None:
            out.append(e)
            continue
        score = float(window_score(value, low, high, softness))
        out.append(e.model_copy(update={"mean": score, "std": 0.0, "components": {"proxy_value": value}}))
    return out


class _RegimeDriver(StepHooks):
    """Runs one regime through the training step (:func:`arl_flows.step.run_step`), auditing along the way.

    As the step's hooks it runs tier batches through the verdict memo, records
    what the regime sampled and how it ranks it, swaps in the proxy rewards
    of ``fast-only``, and audits at the spend marks.
    """

    def __init__(
        self,
        regime: str,
        seed: int,
        session: RunSession,
        bench: LearningBenchConfig,
        memo: VerdictMemo,
        audit: Callable[[list[str], dict[str, Candidate]], list[Verdict]],
        space: str = "qm9",
    ) -> None:
        self.regime = regime
        self.space = space
        self.session = session
        self.bench = bench
        self.memo = memo
        self.audit = audit
        self.top = session.ladder[-1]
        cfg = session.config.scheduler
        self.low, self.high, self.softness = cfg.target_low, cfg.target_high, cfg.window_softness
        self.out = RegimeRun(regime, seed, surrogate=surrogate_kind(session.scheduler))
        self.marks = [bench.budget * (i + 1) / bench.audit_points for i in range(bench.audit_points)]
        self.step_spend = 0.0
        self.candidates: dict[str, Candidate] = {}
        self.fast = session.ladder[0]
        self.proxy: dict[str, float | None] = {}  # key -> the fast tier's ok value (fast-only's reward source)
        self.max_batch = bench.verify_batch

    def spent(self) -> float:
        return self.session.scheduler.run_spent + self.step_spend

    def run_tier(self, verifier: Verifier, batch: list[Candidate]) -> list[Verdict]:
        name = verifier.name
        verdicts = self.memo.get(verifier, batch)
        self.step_spend += charge(verifier, batch, verdicts)
        if name == self.fast.name:
            self.proxy.update((v.candidate_key, _top_value(v)) for v in verdicts)
        if name == self.top.name:
            # A top-tier answer is exact knowledge of the regime: its reward is known at once.
            for v in verdicts:
                value = self._truth(v)
                self.out.truth[v.candidate_key] = value
                self.out.paid_top.add(v.candidate_key)
                score = float(window_score(value, self.low, self.high, self.softness)) if value is not None else 0.0
                self.out.estimates[v.candidate_key] = (score, 0.0)
        self._maybe_audit()
        return verdicts

    def _maybe_audit(self, final: bool = False) -> None:
        while self.marks and self.spent() >= self.marks[0] - 1e-9:
            self.marks.pop(0)
            self._audit_now()
        if final:
            self._audit_now()

    def _truth(self, verdict: Verdict) -> float | None:
        return truth_value(verdict, verdict.candidate_key in self.out.novel_keys)

    def _audit_now(self) -> None:
        out, k = self.out, self.bench.top_k
        keys = out.ranked(k)
        novel = out.ranked(self.bench.novel_k, among=out.novel_keys)  # the regime's own best-ranked novel molecules
        asked = list(dict.fromkeys(keys + novel))
        verdicts = self.audit(asked, self.candidates)
        values = {v.candidate_key: self._truth(v) for v in verdicts}
        for v in verdicts:
            out.audit_costs.setdefault(v.candidate_key, float(v.cost_s))
        scores = [
            float(window_score(values[key], self.low, self.high, self.softness)) if values.get(key) is not None else 0.0
            for key in keys
        ]
        for key in asked:
            out.truth.setdefault(key, values.get(key))
        # Empty slots (fewer than k valid molecules so far) score 0.
        spent = self.spent()
        out.curve.append((spent, float(sum(scores)) / k))
        novel_score = best_k_mean(out.truth, out.novel_keys, self.bench.novel_k, self.low, self.high, self.softness)
        out.novel_curve.append((spent, novel_score))

    def _cannot_buy_top(self, candidates: Sequence[Candidate]) -> bool:
        """True once the budget left cannot pay for one more top-tier call on any of this step's molecules.

        Without this stop a regime would go on training for free on proxy rewards
        with a few unusable seconds left. The fast-only regimes never ask the top
        tier, so only the budget or their step cap ends them.
        """
        if self.regime in PROXY_REGIMES:
            return False
        valid = [c for c in candidates if c.valid]
        cheapest = min((self.top.expected_cost(c) for c in valid), default=0.0)
        return self.bench.budget - self.session.scheduler.run_spent < cheapest

    def sampled(self, session: RunSession, step: int, state: StepState) -> None:
        out = self.out
        for c in state.candidates:
            self.candidates.setdefault(c.key, c)
            out.samples += 1
            if c.valid:
                out.valid += 1
                out.valid_keys.add(c.key)
                if is_novel_key(c.key, self.space):
                    out.novel_keys.add(c.key)

    def verified(self, session: RunSession, step: int, state: StepState) -> None:
        self.step_spend = 0.0  # now counted in run_spent
        if self.regime == "fast-only":
            keys = {t.id: t.candidate_key for t in state.trajectories}
            state.estimates = face_value_estimates(state.estimates, keys, self.proxy, self.low, self.high, self.softness)
        by_traj = {e.trajectory_id: e for e in state.estimates}
        for traj in state.trajectories:
            e = by_traj[traj.id]
            if traj.candidate_key in self.out.valid_keys:
                self.out.estimates[traj.candidate_key] = (float(e.mean), float(e.std))

    def finished(self, session: RunSession, summary: StepSummary) -> None:
        _prune_checkpoints(session, summary.step)
        self.out.steps = summary.step + 1
        if summary.step == 0:
            self._audit_now()  # the first point at which the regime ranks anything
        self._maybe_audit()

    def run(self) -> RegimeRun:
        s, out = self.session, self.out
        t0 = time.perf_counter()
        budget = self.bench.budget
        for step in range(s.config.steps):
            if s.scheduler.run_spent >= budget - 1e-6:
                break
            self.step_spend = 0.0
            run_step(s, step, self)
            if self._cannot_buy_top(s.steps[step].candidates):
                break
        self._maybe_audit(final=True)
        out.spend = s.ledger.spend_by_tier(s.run.id)
        out.seconds = time.perf_counter() - t0
        return out


def _prune_checkpoints(session: RunSession, step: int) -> None:
    """Keep only the latest checkpoint on disk (a benchmark never resumes an old step)."""
    if step > 0:
        shutil.rmtree(settings().run_dir(session.run.id) / f"step-{step - 1:05d}", ignore_errors=True)


# ---------------------------------------------------------------------------------------------- metrics


def top_k_auc(curve: Sequence[tuple[float, float]], budget: float) -> float:
    """Area under the step curve (each audit holds until the next) over [0, budget], divided by budget."""
    points = sorted((min(max(c, 0.0), budget), s) for c, s in curve)
    area = 0.0
    for (c0, s0), (c1, _) in zip(points, points[1:]):
        area += s0 * (c1 - c0)
    area += points[-1][1] * (budget - points[-1][0])
    return float(area / budget)


def novel_hits_per_cpu_hour(hits: int, spend_s: float) -> float | None:
    """Novel verified hits per CPU-hour of the regime's own verification spend (None: it spent nothing)."""
    return float(hits / (spend_s / 3600.0)) if spend_s > 0 else None


def _regime_metrics(run: RegimeRun, bench: LearningBenchConfig, low: float, high: float, softness: float) -> dict[str, Any]:
    confident = [k for k, (m, _) in run.estimates.items() if m >= bench.fooled_estimate and k in run.truth]
    fooled = [
        k
        for k in confident
        if run.truth[k] is None or float(window_score(run.truth[k], low, high, softness)) < bench.fooled_truth
    ]
    hits = sorted(k for k, y in run.truth.items() if y is not None and low <= y <= high)
    novel = sorted(k for k in run.novel_keys if run.truth.get(k) is not None)  # novel, with a computed top-tier value
    novel_hit_keys = [k for k in novel if low <= run.truth[k] <= high]  # type: ignore[operator]
    return {
        "top10_auc": top_k_auc(run.curve, bench.budget),
        "final_top10": run.curve[-1][1],
        "hits": len(hits),
        "novel_hits": len(novel_hit_keys),  # in neither the space's training set nor QM9
        "novel_hits_per_cpu_hour": novel_hits_per_cpu_hour(len(novel_hit_keys), run.total_spend),
        # The same with the audits charged: a regime that pays little but is audited for free knows its hits only
        # because the audits paid for them.
        "audit_spend": run.audit_spend,
        "novel_hits_per_cpu_hour_with_audits": novel_hits_per_cpu_hour(len(novel_hit_keys), run.total_spend + run.audit_spend),
        "novel_topk_auc": top_k_auc(run.novel_curve, bench.budget),
        "final_novel_topk": run.novel_curve[-1][1],
        "novel_verified": len(novel),  # novel molecules whose top-tier value was computed (by the regime or an audit)
        "novel_sampled": len(run.novel_keys),
        "hit_keys": hits,
        "novel_hit_keys": novel_hit_keys,
        "validity": run.valid / max(run.samples, 1),
        "uniqueness": len(run.valid_keys) / max(run.valid, 1),
        "spend": run.spend,
        "total_spend": run.total_spend,
        "steps": run.steps,
        "samples": run.samples,
        "fooled_rate": len(fooled) / len(confident) if confident else None,
        "fooled": len(fooled),
        "confident_checked": len(confident),
        "curve": [[round(c, 3), round(s, 4)] for c, s in run.curve],
        "novel_curve": [[round(c, 3), round(s, 4)] for c, s in run.novel_curve],
        "seconds": round(run.seconds, 1),
        "surrogate": run.surrogate,
    }


_NOVEL_METRICS = (
    "novel_hits_per_cpu_hour", "novel_hits_per_cpu_hour_with_audits", "novel_topk_auc", "final_novel_topk", "novel_verified",
    "audit_spend",
)
_AGGREGATED = ("top10_auc", "final_top10", "hits", "novel_hits", *_NOVEL_METRICS)


def _aggregate(per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in (*_AGGREGATED, "validity", "uniqueness", "total_spend", "steps", "fooled_rate"):
        vals = [r[key] for r in per_seed if r.get(key) is not None]
        out[key] = float(np.mean(vals)) if vals else None
        out[f"{key}_std"] = float(np.std(vals)) if len(vals) > 1 else 0.0
    tiers = sorted({t for r in per_seed for t in r["spend"]})
    out["spend"] = {t: float(np.mean([r["spend"].get(t, 0.0) for r in per_seed])) for t in tiers}
    return out


# ---------------------------------------------------------------------------------------------- the benchmark


def _held_out(top: Verifier, ladder: Sequence[Verifier], memo: VerdictMemo, n: int, seed: int) -> list[tuple[Candidate, dict[str, float]]]:
    """``n`` QM9 molecules drawn at random with every tier's ok value (the top tier answers from the table)."""
    from arl_flows.suites.molecules.datasets import load_qm9_gaps
    from arl_flows.suites.molecules.chemistry import make_candidate

    data = load_qm9_gaps()
    rng = random.Random(seed)
    picks = [make_candidate(s) for s, _ in rng.sample(data, min(n, len(data)))]
    picks = [c for c in picks if c.valid]
    values: dict[str, dict[str, float]] = {c.key: {} for c in picks}
    for v in ladder:
        for verdict in memo.get(v, picks):
            if verdict.status == Status.ok and verdict.value is not None:
                values[verdict.candidate_key][v.name] = float(verdict.value)
    return [(c, values[c.key]) for c in picks if top.name in values[c.key] and len(values[c.key]) == len(ladder)]


def _held_out_pool(
    space: str, top: Verifier, ladder: Sequence[Verifier], memo: VerdictMemo, n: int, seed: int
) -> list[tuple[Candidate, dict[str, float]]]:
    """``n`` molecules of ``space``'s reference pool with every tier's ok value, for a space other than qm9.

    The lower tiers run live (memoised); the top tier's value is the pool's own DFT, computed here at the
    pool's level of theory, and never recomputed: a history of drug-sized molecules would otherwise cost
    minutes of DFT each. The top tier must be at that level (the same functional, basis, density fitting and
    geometry); a different one is a ValueError naming both.
    """
    from arl_flows.suites.molecules.chemistry import make_candidate

    from benchmarks.molecule_pool import load_pool, space_reference_pool

    path = space_reference_pool(space)
    assert path is not None  # qm9 reads the table (_held_out)
    _check_pool_level(top, path)
    rows = load_pool(path)
    rng = random.Random(seed)
    picks = rng.sample(rows, min(n, len(rows)))
    truth: dict[str, float] = {}
    candidates = []
    for smiles, gap in picks:
        c = make_candidate(smiles)
        if c.valid and c.key not in truth:
            truth[c.key] = gap
            candidates.append(c)
    values: dict[str, dict[str, float]] = {c.key: {top.name: truth[c.key]} for c in candidates}
    for v in ladder[:-1]:
        for verdict in memo.get(v, candidates):
            if verdict.status == Status.ok and verdict.value is not None:
                values[verdict.candidate_key][v.name] = float(verdict.value)
    return [(c, values[c.key]) for c in candidates if len(values[c.key]) == len(ladder)]


def _check_pool_level(top: Verifier, pool: Path) -> None:
    """A ValueError unless ``top`` computes the gap at the reference pool's level of theory (its JSON's)."""
    meta = json.loads(pool.with_suffix(".json").read_text())["level_of_theory"]
    xc, basis = meta["dft"].split("/", 1)
    geometry = meta.get("geometry_source", "mmff")  # a pool from before the key was written is on MMFF94
    want = {"xc": xc.upper(), "basis": basis.lower(), "density_fitting": bool(meta["density_fitting"]), "geometry_source": geometry}
    params = top.params.model_dump()
    have = {key: params.get(key) for key in want}
    have["xc"] = str(have["xc"]).upper()
    have["basis"] = str(have["basis"]).lower()
    if top.name != "pyscf-b3lyp" or have != want:
        raise ValueError(
            f"the history of this space is {pool.name}, {meta['dft']} on {geometry} geometries, but the top tier is "
            f"{top.name} with {', '.join(f'{k}={v}' for k, v in have.items())}; make the last tier pyscf-b3lyp at the "
            "pool's level (the default ladder of `arl bench learning --space` does)"
        )


def learning_benchmark(
    bench: LearningBenchConfig,
    *,
    workdir: Path,
    cache: Path | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Run every regime for every seed; return the JSON report (per regime: mean over seeds and per seed)."""
    from storage.ledger import Ledger

    _thread_setup()
    for r in bench.regimes:
        if r not in REGIMES:
            raise ValueError(f"unknown regime {r!r}; use one of {', '.join(REGIMES)}")
    space = space_of(bench.run_overrides)
    overrides = base_run_overrides(space) | bench.run_overrides
    base = load_config(overrides=overrides)
    workdir.mkdir(parents=True, exist_ok=True)
    memo = VerdictMemo(cache)
    # A ladder of our own for setup and audits (the regimes' sessions build theirs from the same config).
    from arl_flows.ladder import build_ladder

    ladder = build_ladder(base)
    top = ladder[-1]
    sched = base.scheduler
    low, high, softness = sched.target_low, sched.target_high, sched.window_softness
    t0 = time.perf_counter()
    if space == "qm9":
        progress(f"held-out split: {bench.history} QM9 molecules through {', '.join(v.name for v in ladder)}")
        held_out = _held_out(top, ladder, memo, bench.history, bench.history_seed)
    else:
        progress(f"held-out split: {bench.history} molecules of the {space} reference pool through "
                 f"{', '.join(v.name for v in ladder[:-1])} (the pool's own {top.name} values)")
        held_out = _held_out_pool(space, top, ladder, memo, bench.history, bench.history_seed)
    cascade: CascadePolicy | None = None
    if "cascade" in bench.regimes:
        cascade = CascadePolicy.tune(
            [Observation(c.key, np.zeros(0), vals) for c, vals in held_out],
            [v.name for v in ladder[:-1]],
            top.name,
            low,
            high,
            keep=bench.cascade_keep,
            margin=bench.cascade_margin,
        )

    audit_charged = {"calls": 0}

    def audit(keys: list[str], candidates: dict[str, Candidate]) -> list[Verdict]:
        verdicts = memo.get(top, [candidates[k] for k in keys])
        audit_charged["calls"] += len(verdicts)
        return verdicts

    runs: dict[str, list[dict[str, Any]]] = {r: [] for r in bench.regimes}
    for seed in bench.seeds:
        for regime in bench.regimes:
            config = regime_config(base, regime, bench, seed)
            db = workdir / f"{regime}-s{seed}.db"
            db.unlink(missing_ok=True)  # each regime pays for its own verdicts: a fresh ledger per run
            ledger = Ledger(f"sqlite:///{db}")
            session = RunSession.open(config, ledger)
            try:
                if regime != "fast-only":  # the proxy regime never sees a top-tier value
                    session.scheduler.add_history(session.scheduler.observation(c, vals) for c, vals in held_out)
                if regime == "cascade":
                    session.scheduler.policy = cascade
                progress(f"seed {seed}: {regime}")
                driver = _RegimeDriver(regime, seed, session, bench, memo, audit, space)
                result = driver.run()
            finally:
                session.finish()
                ledger.close()
            shutil.rmtree(settings().run_dir(session.run.id), ignore_errors=True)
            row = _regime_metrics(result, bench, low, high, softness) | {"seed": seed}
            runs[regime].append(row)
            progress(
                f"seed {seed}: {regime}: auc {row['top10_auc']:.3f}, hits {row['hits']}, novel hits {row['novel_hits']} "
                f"(novel top-{bench.novel_k} auc {row['novel_topk_auc']:.3f}), spend {row['total_spend']:.1f}s "
                f"in {row['steps']} steps ({row['seconds']:.0f}s wall)"
            )
    for v in ladder:
        if isinstance(v, Closable):
            v.close()
    memo.close()
    regimes = {r: _aggregate(rows) | {"per_seed": rows} for r, rows in runs.items()}
    report: dict[str, Any] = {
        "budget": bench.budget,
        "seeds": bench.seeds,
        "window": [low, high],
        "softness": softness,
        "top_tier": top.name,
        "top_tier_params": top.params.model_dump(mode="json"),
        "ladder": [v.name for v in ladder],
        "settings": bench.model_dump(mode="json") | {"run_overrides": overrides},
        "held_out": len(held_out),
        "held_out_hits": sum(1 for _, vals in held_out if low <= vals[top.name] <= high),
        "cascade_thresholds": cascade.thresholds if cascade else None,
        "audit_calls": audit_charged["calls"],
        "fresh_verdict_cost_s": round(memo.computed_s, 1),
        "wall_s": round(time.perf_counter() - t0, 1),
        "regimes": regimes,
    }
    report["ratios"] = _ratios(regimes)
    report["novel_ratios"] = _novel_ratios(regimes)
    report["novel_topk_saturated"] = novel_topk_saturated(regimes)
    return report


# Settings only some regimes read: compared only between reports that ran one of those regimes.
_REGIME_SETTINGS = {"proxy_max_steps": PROXY_STEP_REGIMES, "cascade_keep": ("cascade",), "cascade_margin": ("cascade",)}


def merge_reports(reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One report from several runs of the same benchmark on other seeds or regimes (e.g. one process per seed).

    Every setting but the seeds and regimes must agree (a setting only some
    regimes read, such as ``proxy_max_steps``, only between reports that ran
    one of them), and each (regime, seed) may come from one report only.
    """
    if not reports:
        raise ValueError("nothing to merge")
    first = reports[0]
    skip = {"seeds", "regimes", *_REGIME_SETTINGS}
    shared = lambda r: {k: v for k, v in r["settings"].items() if k not in skip}  # noqa: E731
    for r in reports[1:]:
        if shared(r) != shared(first):
            differ = sorted(k for k in shared(r).keys() | shared(first).keys() if shared(r).get(k) != shared(first).get(k))
            raise ValueError(f"reports differ in {', '.join(differ)}; merge only runs of the same benchmark")
    settings = dict(first["settings"])
    for key, users in _REGIME_SETTINGS.items():
        using = [r for r in reports if set(r["regimes"]) & set(users)]
        if len({json.dumps(r["settings"].get(key)) for r in using}) > 1:
            raise ValueError(f"reports that ran {' or '.join(users)} differ in {key}")
        if using:
            settings[key] = using[0]["settings"].get(key)
    pairs = Counter((name, row["seed"]) for r in reports for name, reg in r["regimes"].items() for row in reg["per_seed"])
    repeated = sorted(p for p, n in pairs.items() if n > 1)
    if repeated:
        raise ValueError(f"regime and seed repeat across the reports: {', '.join(f'{n} seed {s}' for n, s in repeated)}")
    rows: dict[str, list[dict[str, Any]]] = {}
    for r in reports:
        for name, reg in r["regimes"].items():
            rows.setdefault(name, []).extend(reg["per_seed"])
    order = sorted(rows, key=lambda n: REGIMES.index(n) if n in REGIMES else len(REGIMES))
    regimes = {name: _aggregate(rows[name]) | {"per_seed": sorted(rows[name], key=lambda row: row["seed"])} for name in order}
    seeds = sorted({s for r in reports for s in r["seeds"]})
    merged = dict(first) | {
        "seeds": seeds,
        "regimes": regimes,
        "cascade_thresholds": next((r["cascade_thresholds"] for r in reports if r.get("cascade_thresholds")), None),
        "audit_calls": sum(r["audit_calls"] for r in reports),
        "fresh_verdict_cost_s": sum(r["fresh_verdict_cost_s"] for r in reports),
        "wall_s": max(r["wall_s"] for r in reports),
        "merged_from_provenance": [r.get("provenance") for r in reports],  # where each part ran
    }
    merged.pop("provenance", None)  # the merged report's own is where it is written
    merged["settings"] = settings | {"seeds": seeds, "regimes": order}
    merged["ratios"] = _ratios(regimes)
    merged["novel_ratios"] = _novel_ratios(regimes)
    merged["novel_topk_saturated"] = novel_topk_saturated(regimes)
    return merged


SATURATED = 0.99  # a best-k mean this close to 1 no longer tells regimes apart


def novel_topk_saturated(regimes: dict[str, Any]) -> list[str]:
    """The regimes whose best ``novel_k`` novel molecules reached a mean window score of ``SATURATED`` on some seed.

    The novel top-k AUC is meant not to saturate (issue 29: k large enough that no regime reaches 1 within the
    budget); a regime listed here held a full score for the rest of its axis, so ``--novel-k`` was too small to
    compare it.
    """
    return [
        name for name, r in regimes.items()
        if any((row.get("final_novel_topk") or 0.0) >= SATURATED for row in r.get("per_seed", []))
    ]


def _ratios(regimes: dict[str, Any]) -> dict[str, float | None]:
    def ratio(a: str, b: str) -> float | None:
        if a not in regimes or b not in regimes:
            return None
        x, y = regimes[a]["top10_auc"], regimes[b]["top10_auc"]
        return float(x / y) if y else (math.inf if x else None)

    out = {
        "scheduled/top-only": ratio("scheduled", "top-only"),
        "scheduled/fast-only": ratio("scheduled", "fast-only"),
        "scheduled/fast-only-calibrated": ratio("scheduled", "fast-only-calibrated"),
        "scheduled/cascade": ratio("scheduled", "cascade"),
        "scheduled/scheduled-no-hindsight": ratio("scheduled", "scheduled-no-hindsight"),
    }
    if "scheduled" in regimes and "scheduled-no-hindsight" in regimes:
        out["hindsight_auc_gain"] = regimes["scheduled"]["top10_auc"] - regimes["scheduled-no-hindsight"]["top10_auc"]
    return out


def _novel_ratios(regimes: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """``scheduled`` (and ``scheduled-paced``) over every other regime on the novel metrics (None: a regime or
    value is missing)."""
    out = {}
    for lead in ("scheduled", "scheduled-paced"):
        if lead not in regimes:
            continue
        for name, other in regimes.items():
            if name == lead:
                continue
            row = {}
            for key in ("novel_hits_per_cpu_hour", "novel_hits_per_cpu_hour_with_audits", "novel_topk_auc"):
                x, y = regimes[lead].get(key), other.get(key)
                row[key] = None if x is None or y is None else (float(x / y) if y else (math.inf if x else None))
            out[f"{lead}/{name}"] = row
    return out


# ---------------------------------------------------------------------------------------------- output


def summary_table(report: dict[str, Any]) -> list[list[str]]:
    """Rows of the printed table: header first."""
    k = report["settings"].get("novel_k", "k")
    rows = [["regime", "top10 AUC", "final top10", "hits", "novel hits", "novel hits/CPU-h", f"novel top-{k} AUC",
             "validity", "uniqueness", "fooled", "steps", "spend (s) by tier"]]

    def pm(r: dict[str, Any], key: str, fmt: str) -> str:
        if r.get(key) is None:  # a report merged from before novel hits were counted has none
            return "-"
        return f"{r[key]:{fmt}} ± {r[f'{key}_std']:{fmt}}" if r[f"{key}_std"] else f"{r[key]:{fmt}}"

    for name, r in report["regimes"].items():
        spend = ", ".join(f"{t} {s:.1f}" for t, s in r["spend"].items() if s > 0)
        rate = pm(r, "novel_hits_per_cpu_hour", ".0f")
        if r.get("novel_hits_per_cpu_hour_with_audits") is not None:
            rate += f" ({pm(r, 'novel_hits_per_cpu_hour_with_audits', '.0f')} with audits)"
        rows.append(
            [name, pm(r, "top10_auc", ".3f"), pm(r, "final_top10", ".3f"), pm(r, "hits", ".1f"), pm(r, "novel_hits", ".1f"),
             rate, pm(r, "novel_topk_auc", ".3f"), pm(r, "validity", ".2f"),
             pm(r, "uniqueness", ".2f"), pm(r, "fooled_rate", ".2f"), pm(r, "steps", ".1f"), spend]
        )
    return rows


def plot_curves(report: dict[str, Any], path: Path) -> None:
    """Audited top-10 score versus cumulative spend, one line per regime and seed (mean shown bold); beside it, the
    best ``novel_k`` novel molecules' score (reports from before the novel metrics: the first panel only)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budget = report["budget"]
    grid = np.linspace(0.0, budget, 200)
    rows = [row for r in report["regimes"].values() for row in r["per_seed"]]
    panels = [("curve", "top10_auc", f"mean audited window score of own top-{report['settings']['top_k']}")]
    if rows and all("novel_curve" in row for row in rows):
        k = report["settings"].get("novel_k")
        panels.append(("novel_curve", "novel_topk_auc", f"mean score, best {k} novel verified"))
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 4.5), squeeze=False)
    for ax, (curve_key, auc_key, ylabel) in zip(axes[0], panels):
        for i, (name, r) in enumerate(report["regimes"].items()):
            color = f"C{i}"
            stacks = []
            for row in r["per_seed"]:
                curve = sorted(row[curve_key])
                xs = [c for c, _ in curve] + [budget]
                ys = [s for _, s in curve] + [curve[-1][1]]
                ax.step(xs, ys, where="post", color=color, alpha=0.25, lw=1)
                idx = np.searchsorted(np.array([c for c, _ in curve]), grid, side="right") - 1
                stacks.append(np.array([s for _, s in curve])[np.maximum(idx, 0)])
            ax.plot(grid, np.mean(stacks, axis=0), color=color, lw=2, label=f"{name} (AUC {r[auc_key]:.3f})")
        ax.set_xlabel("cumulative verification spend (CPU-s)")
        ax.set_ylabel(ylabel)
        ax.set_xlim(0, budget)
        ax.set_ylim(0, 1)
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(f"Learning under a {budget:g} CPU-s verification budget ({len(report['seeds'])} seeds)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_json(report: dict[str, Any], path: Path) -> None:
    """The report as JSON at ``path``, with its provenance (commit, versions, machine); non-finite numbers as null."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(with_provenance(report), indent=2, default=lambda o: None if isinstance(o, float) and not math.isfinite(o) else str(o)))


def _thread_setup() -> None:
    """``ARL_BENCH_TORCH_THREADS`` torch threads (1 by default): the verifiers' workers use the other cores."""
    import torch

    torch.set_num_threads(bench_settings().torch_threads)
