"""The round-based planner: the caller drives it, the verifiers run wherever the caller likes.

::

    plan = scheduler.plan_step(candidates, group_ids=groups, cached=verdicts_from_ledger)
    while requests := plan.next_round():          # {verifier name: [Candidate, ...]}
        for name, batch in requests.items():      # e.g. one Prefect task per tier and round
            plan.observe(scheduler.verifier(name).verify_batch(batch))
    result = plan.result()                        # verdicts, reward estimates, spend, lab requests, log

The cache comes first: verdicts passed in ``cached`` are used as
they are and their (candidate, verifier) pair is never requested again.
Round 0 runs the fast tier on the rest; later rounds ask the policy
(:mod:`verifiers.scheduler.escalation`, :mod:`verifiers.scheduler.policies`)
and admit its actions in priority order while the expected cost fits in the
remaining budget and the per-tier caps. Lab-tier answers that come back
``pending`` become lab requests; the step never waits for them.

Without a round barrier (the streaming pipeline), the caller asks for work
whenever a tier has free slots and feeds verdicts back one at a time::

    plan = scheduler.plan_step(candidates, group_ids=groups, cached=verdicts_from_ledger)
    requests = plan.request({"rdkit-eht": 64, "simulated-cluster": 16})   # free slots per verifier
    ...                                                   # as each call returns:
    plan.observe([verdict]); more = plan.request(free_slots_now)
    plan.settled_groups()                                 # groups whose rewards will not change
    plan.done                                             # nothing in flight and nothing worth asking

Calls in flight stay in flight: their expected cost counts against the
budget until they answer, so the budget holds however many are out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from storage.records import TIER_ORDER, LabRequest, new_id, RewardEstimate, SpendRecord, Status, Tier, Verdict
from verifiers.base import Candidate, Verifier
from verifiers.scheduler.config import SchedulerConfig
from verifiers.scheduler.escalation import Action, EscalationPolicy, PlanView
from verifiers.scheduler.features import Featurizer
from verifiers.scheduler.learned import PretrainedLearner, SurrogateLearnerFactory
from verifiers.scheduler.policies import make_policy
from verifiers.scheduler.reward import discovery_value, objective_moments
from verifiers.scheduler.spend import charge_one
from verifiers.scheduler.surrogate import Observation, Surrogate, SurrogatePrior

__all__ = ["Decision", "Scheduler", "StepPlan", "StepResult"]


@dataclass(frozen=True)
class Decision:
    """One line of the decision log: what was asked, in which round, why, at what expected cost."""

    round: int
    candidate_key: str
    verifier: str
    tier: str
    expected_cost: float
    value_per_cost: float | None
    reason: str


@dataclass
class StepResult:
    """Everything a step produced; the flow writes it to the ledger."""

    verdicts: list[Verdict]  # new verdicts of this step (cached ones are not repeated)
    estimates: list[RewardEstimate]  # one per input item, in input order
    posteriors: dict[str, tuple[float, float]]  # candidate key -> (mean, std) of the top-tier value
    verdicts_used: dict[str, list[tuple[str, str, str, str]]]  # trajectory id -> cache keys of its verdicts
    spend: dict[str, float]  # tier -> CPU-seconds charged this step
    calls: dict[str, int]  # verifier -> calls made this step
    spend_by_verifier: dict[str, float]
    lab_requests: list[LabRequest]
    unavailable: list[str]  # verifiers whose recent calls all failed (stepped over; probed again each step)
    decisions: list[Decision]
    rounds: int
    budget: float
    trace: list[tuple[int, float]] = field(default_factory=list)  # (round, cumulative spend) after each round

    @property
    def total_spend(self) -> float:
        return float(sum(self.spend.values()))

    def spend_records(self, run_id: str, step: int, tiers: Mapping[str, Tier]) -> list[SpendRecord]:
        """Spend per verifier as ledger records (``tiers`` maps verifier name -> tier)."""
        return [
            SpendRecord(run_id=run_id, step=step, tier=tiers[name], verifier=name, cost_s=cost, calls=self.calls[name])
            for name, cost in self.spend_by_verifier.items()
        ]


class Scheduler:
    """Routes candidates through a verifier ladder under a budget.

    ``ladder`` is ordered cheapest first; its last verifier is the top tier
    whose value the surrogate predicts. ``featurize`` maps a candidate to
    cheap features (the suite's ``featurize``); ``learner(lower_tiers, config.learned, seed)``
    makes the learned model the surrogate stacks once the history is large (the suite's
    ``surrogate_learner``; None: the linear surrogate only).
    ``policy`` defaults to the one registered as ``config.policy`` (``voi``,
    ``all``, ``fast-only``, ``random``); any other :class:`EscalationPolicy`
    instance may be passed in (the benchmarks pass their baselines so).
    """

    def __init__(
        self,
        ladder: Sequence[Verifier],
        config: SchedulerConfig | None = None,
        *,
        featurize: Featurizer | None = None,
        policy: EscalationPolicy | None = None,
        surrogate_prior: SurrogatePrior | None = None,
        run_spent: float = 0.0,
        learner: SurrogateLearnerFactory | None = None,
    ) -> None:
        if len(ladder) < 2:
            raise ValueError("a ladder needs at least two verifiers (a fast one and a top one)")
        names = [v.name for v in ladder]
        if len(set(names)) != len(names):
            raise ValueError(f"ladder has duplicate verifier names: {names}")
        self.ladder = list(ladder)
        self.config = config or SchedulerConfig()
        self.featurize = featurize
        self.learner = learner
        self._features: dict[str, np.ndarray] = {}
        n_features = 0 if featurize is None else int(np.size(featurize(Candidate(key="probe", suite="probe", payload=""))))
        self.surrogate = Surrogate(names[:-1], names[-1], n_features, surrogate_prior, seed=self.config.seed)
        if policy is None:
            policy = make_policy(self.config.policy, self.config)
        self.policy = policy
        self.run_spent = run_spent
        self.consecutive_failures: dict[str, int] = {}
        self._learned_at = 0  # history size at the last training of the surrogate's network
        if self.config.learned.shipped and learner is not None:
            maker = learner(names[:-1], self.config.learned, self.config.seed)
            shipped = maker.pretrained() if isinstance(maker, PretrainedLearner) else None
            if shipped is not None:  # the suite's network, trained once on its data: used from step 0
                self.surrogate.attach_learned(shipped, blend=self.config.learned.blend)
                self._learned_at = -1  # never replaced by a network trained on the run's history alone
        self._tuned_at = 0  # unseen pairs at the last fine-tuning of the shipped network

    # -- helpers for callers --------------------------------------------------
    def verifier(self, name: str) -> Verifier:
        for v in self.ladder:
            if v.name == name:
                return v
        raise KeyError(f"{name!r} is not in this scheduler's ladder ({', '.join(v.name for v in self.ladder)})")

    def features(self, candidate: Candidate) -> np.ndarray:
        """Cheap features of a candidate (memoised by key: a key names the same thing every step)."""
        if self.featurize is None:
            return np.zeros(0)
        got = self._features.get(candidate.key)
        if got is None:
            got = self._features[candidate.key] = np.asarray(self.featurize(candidate), dtype=float)
        return got

    def observation(self, candidate: Candidate, values: Mapping[str, float]) -> Observation:
        """An observation of ``candidate`` with the given ok values per verifier name."""
        return Observation(
            key=candidate.key, features=self.features(candidate), values=dict(values), payload=candidate.payload
        )

    def add_history(self, observations: Iterable[Observation], progress: Callable[[str], None] | None = None) -> int:
        """Teach the surrogate paired observations (e.g. from ``Ledger.ok_values`` of each ladder verifier).

        With ``config.learned.enabled``, a ``learner`` and at least ``min_pairs`` pairs (or
        ``refit_growth`` times the pairs of the last training), this also
        trains the surrogate's learned model, once, here: never mid-step.
        """
        added = self.surrogate.add(list(observations))
        learned = self.config.learned
        if self._learned_at < 0:  # the shipped network: fine-tune it on enough answers of the run's own
            unseen = self.surrogate.unseen_pairs
            if unseen >= learned.finetune_pairs and unseen >= learned.refit_growth * self._tuned_at:
                self._tuned_at = unseen
                self.surrogate.fine_tune_learned(learned.calibration_share, learned.finetune_epochs)
            return added
        n = self.surrogate.n_pairs
        if learned.enabled and self.learner is not None and self._learned_at >= 0 and n >= learned.min_pairs and (
            self.surrogate.learned is None or n >= learned.refit_growth * self._learned_at
        ):
            report = None
            if progress is not None:
                report = lambda e, k, loss: progress(f"surrogate network epoch {e}/{k}, loss {loss:.3f}")  # noqa: E731
            learner = self.learner(self.surrogate.lower, learned, self.config.seed)
            if self.surrogate.fit_learned(learner, learned.calibration_share, progress=report):
                self._learned_at = n
        return added

    # -- the step -------------------------------------------------------------
    def plan_step(
        self,
        candidates: Sequence[Candidate],
        *,
        group_ids: Sequence[str] | None = None,
        trajectory_ids: Sequence[str] | None = None,
        cached: Iterable[Verdict] = (),
        budget: float | None = None,
        step: int = 0,
        run_id: str | None = None,
    ) -> StepPlan:
        """Start a step. ``budget`` defaults to :meth:`step_budget` of ``step``."""
        if budget is None:
            budget = self.step_budget(step)
        return StepPlan(self, candidates, group_ids, trajectory_ids, cached, max(budget, 0.0), step, run_id)

    def step_budget(self, step: int, committed: float | None = None) -> float:
        """What step ``step`` (from 0) may spend: its own budget, or with ``budget_carry`` what the steps so far
        have accrued and not spent; never more than the run has left. ``committed`` (default: what the run has
        spent) is what counts as taken, for a caller that also holds budgets of open steps."""
        cfg = self.config
        taken = self.run_spent if committed is None else committed
        own = cfg.budget_per_step
        if cfg.budget_carry and math.isfinite(own):
            own = own * (step + 1) - taken
        return max(min(own, cfg.budget_per_run - taken), 0.0)

    def run_step(self, candidates: Sequence[Candidate], **kwargs: object) -> StepResult:
        """Plan and execute a step with the ladder's verifiers in this process (tests, benchmarks)."""
        plan = self.plan_step(candidates, **kwargs)  # type: ignore[arg-type]
        while requests := plan.next_round():
            for name, batch in requests.items():
                plan.observe(self.verifier(name).verify_batch(batch))
        return plan.result()


class StepPlan:
    """State of one step between rounds. Use :meth:`next_round`, :meth:`observe`, :meth:`result`."""

    def __init__(
        self,
        scheduler: Scheduler,
        candidates: Sequence[Candidate],
        group_ids: Sequence[str] | None,
        trajectory_ids: Sequence[str] | None,
        cached: Iterable[Verdict],
        budget: float,
        step: int,
        run_id: str | None,
    ) -> None:
        n_items = len(candidates)
        group_ids = list(group_ids) if group_ids is not None else ["all"] * n_items
        trajectory_ids = list(trajectory_ids) if trajectory_ids is not None else [c.key for c in candidates]
        if len(group_ids) != n_items or len(trajectory_ids) != n_items:
            raise ValueError(
                f"got {n_items} candidates, {len(group_ids)} group ids and {len(trajectory_ids)} trajectory ids; "
                "pass one of each per candidate"
            )
        self.s = scheduler
        self.ladder = scheduler.ladder
        self.config = scheduler.config
        self.budget = budget
        self.step = step
        self.run_id = run_id
        self.items = list(zip(candidates, group_ids, trajectory_ids))
        # Unique candidates by key; several trajectories may share one.
        self.keys: list[str] = []
        self.cands: list[Candidate] = []
        index: dict[str, int] = {}
        for c in candidates:
            if c.key not in index:
                index[c.key] = len(self.keys)
                self.keys.append(c.key)
                self.cands.append(c)
        self.index = index
        by_group: dict[str, list[int]] = {}
        for c, g, _ in self.items:
            by_group.setdefault(g, []).append(index[c.key])
        self.groups = list(by_group.values())
        self.features = [scheduler.features(c) for c in self.cands]
        n, t = len(self.keys), len(self.ladder)
        self.verdicts: list[list[Verdict | None]] = [[None] * t for _ in range(n)]
        self._vals: list[dict[str, float]] = [{} for _ in range(n)]
        self.objective = scheduler.config.reward_objective()
        # Exact properties the objective reads, from the ok and failed verdicts' values: (tier index, value) per name.
        self._props: list[dict[str, tuple[int, float]]] = [{} for _ in range(n)]
        # Expected cost per candidate and tier from the cost models, scaled per round by measured/expected.
        self._base_cost = np.array([[max(v.expected_cost(c), 1e-9) for v in self.ladder] for c in self.cands]).reshape(n, t)
        self.level = np.full(n, -1)
        self.new_verdicts: list[Verdict] = []
        self.decisions: list[Decision] = []
        self.spend_by_verifier: dict[str, float] = {v.name: 0.0 for v in self.ladder}
        self.calls: dict[str, int] = {v.name: 0 for v in self.ladder}
        self.expected_sum: dict[str, float] = {v.name: 0.0 for v in self.ladder}
        self.outstanding: dict[tuple[int, int], float] = {}  # (candidate, tier) -> expected cost
        self.round = 0
        self.finished = False
        self._charged_to_run = False
        self.trace: list[tuple[int, float]] = []
        self.group_ids = list(by_group)
        self._wanted: set[int] = set()  # candidates the policy wants escalated but no slot was free for
        self._unplanned: set[int] = set()  # candidates with a verdict since the last request()
        self._asked_once = False
        self._idle = False  # the last request() with free slots found nothing worth asking
        self._identity = {(v.name, v.version, v.params_hash): j for j, v in enumerate(self.ladder)}
        for verdict in cached:  # step 1: the cache
            j = self._identity.get((verdict.verifier, verdict.version, verdict.params_hash))
            i = index.get(verdict.candidate_key)
            if j is not None and i is not None:
                self._record(i, j, verdict)
        self._learn()

    # -- public protocol ------------------------------------------------------
    @property
    def spent(self) -> float:
        return float(sum(self.spend_by_verifier.values()))

    def next_round(self) -> dict[str, list[Candidate]]:
        """Requests for this round (verifier name -> candidates); empty when the step is done."""
        if self.finished:
            return {}
        for i, j in list(self.outstanding):  # asked but never answered: do not ask again
            self._give_up(i, j, "no verdict came back")
        view = self._view()
        actions = self.s.policy.choose(view)
        requests = self._admit([*self._property_reads(), *actions])
        self.round += 1
        if not requests:
            self.finished = True
        return {name: [self.cands[i] for i in idx] for name, idx in requests.items()}

    def observe(self, verdicts: Iterable[Verdict]) -> None:
        """Record verdicts for requested (candidate, verifier) pairs and charge their cost."""
        for verdict in verdicts:
            j = self._identity.get((verdict.verifier, verdict.version, verdict.params_hash))
            i = self.index.get(verdict.candidate_key)
            if j is None or i is None or (i, j) not in self.outstanding:
                raise ValueError(
                    f"verdict of {verdict.verifier!r} on {verdict.candidate_key!r} was not requested in this round; "
                    "pass only the verdicts of the batches that next_round() returned"
                )
            expected = self.outstanding.pop((i, j))
            name = self.ladder[j].name
            self.spend_by_verifier[name] += charge_one(self.ladder[j], self.cands[i], verdict)
            self.calls[name] += 1
            # Circuit breaker across steps: consecutive failures of a verifier, reset by any answer.
            failed = verdict.status in (Status.failed, Status.timeout)
            self.s.consecutive_failures[name] = self.s.consecutive_failures.get(name, 0) + 1 if failed else 0
            self.expected_sum[name] += expected
            self.new_verdicts.append(verdict)
            self._record(i, j, verdict)
            self._unplanned.add(i)
        self.trace.append((self.round, self.spent))
        self._learn()

    # -- incremental protocol (no round barrier) -------------------------------
    @property
    def committed(self) -> float:
        """Spend so far plus the expected cost of every call in flight."""
        return self.spent + float(sum(self.outstanding.values()))

    def in_flight(self) -> dict[str, int]:
        """Calls in flight per verifier name."""
        out = {v.name: 0 for v in self.ladder}
        for _, j in self.outstanding:
            out[self.ladder[j].name] += 1
        return out

    @property
    def done(self) -> bool:
        """Nothing in flight, no verdict unplanned, and the last :meth:`request` found nothing worth asking."""
        return self.finished or (self._idle and not self.outstanding and not self._unplanned)

    def request(self, capacity: Mapping[str, int]) -> dict[str, list[Candidate]]:
        """Work for free slots now (verifier name -> candidates), given every verdict observed so far.

        ``capacity`` is the number of free slots per verifier name (a name left out has none).
        Calls already in flight are neither repeated nor forgotten, and their expected cost is
        held against the budget. Call it whenever a verdict arrives or a slot frees up.
        """
        if self.finished:
            return {}
        self._unplanned.clear()
        busy = {i for i, _ in self.outstanding}
        fresh = bool(np.any((self.level < 0) & self._open() & ~np.isin(np.arange(len(self.keys)), list(busy))))
        view = self._view(round_=0 if fresh or not self._asked_once else max(self.round, 1))
        actions = self.s.policy.choose(view)
        requests = self._admit([*self._property_reads(), *actions], capacity=capacity)
        self._asked_once = True
        if requests:
            self.round += 1
        self._idle = not requests and not self._wanted
        return {name: [self.cands[i] for i in idx] for name, idx in requests.items()}

    def request_on_loan(self, capacity: Mapping[str, int], loan: float) -> tuple[dict[str, list[Candidate]], float]:
        """:meth:`request` as if the plan had ``loan`` more CPU-seconds; returns the work and what it kept of the loan.

        For a slot that would otherwise sit idle: the plan buys what the larger budget makes worth its cost
        (the policy's marginal rate falls as the budget grows), and keeps only the expected cost of the calls it
        sends (0 when it sends none). What the plan wanted with its own budget, and so which of its groups are
        settled, is left as it was.
        """
        if self.finished or loan <= 0:
            return {}, 0.0
        own, wanted, idle, unplanned = self.budget, set(self._wanted), self._idle, set(self._unplanned)
        self.budget = own + loan
        requests = self.request(capacity)
        self.budget = max(own, min(self.budget, self.committed))
        self._wanted, self._idle = wanted, idle
        if not requests:
            self._unplanned = unplanned
        return requests, self.budget - own

    @property
    def unspent(self) -> float:
        """Budget not yet committed (spent, or held by calls in flight)."""
        return max(self.budget - self.committed, 0.0)

    def give_back(self, amount: float = math.inf) -> float:
        """Lower the budget by up to ``amount``, never below what is committed; returns what was given back."""
        give = min(self.unspent, amount)
        self.budget -= give
        return give

    def abandon(self, candidate_key: str, verifier: str, reason: str = "no verdict came back") -> None:
        """A call in flight will not answer (its worker died): free its budget and do not ask it again."""
        j = next(k for k, v in enumerate(self.ladder) if v.name == verifier)
        i = self.index[candidate_key]
        if (i, j) in self.outstanding:
            self._give_up(i, j, reason)
            self._unplanned.add(i)

    def _give_up(self, i: int, j: int, reason: str) -> None:
        """A call in flight that will not answer: log it, free its budget, and never ask that tier again."""
        del self.outstanding[(i, j)]
        self.decisions.append(Decision(self.round, self.keys[i], self.ladder[j].name, self.ladder[j].tier.value, 0.0, None, reason))
        self.level[i] = max(self.level[i], j)

    def settled(self, settle_std: float | None = None) -> np.ndarray:
        """(n,) bool per candidate: its reward will not move unless something new is asked.

        Settled: no call on it in flight, and the last plan did not want it escalated (top
        tier reached, invalid, or not worth its cost), or its posterior std of the top-tier
        value is at most ``settle_std``.
        """
        n = len(self.keys)
        busy = np.zeros(n, dtype=bool)
        for i, _ in self.outstanding:
            busy[i] = True
        wanted = np.zeros(n, dtype=bool)
        wanted[list(self._wanted | self._unplanned)] = True
        if not self._asked_once:
            wanted[:] = True
        out = ~busy & ~wanted
        if settle_std is not None:
            _, std, _, _ = self._posterior()
            out |= ~busy & (self.level >= 0) & (std <= settle_std)
        return out

    def settled_groups(self, settle_std: float | None = None) -> list[str]:
        """Group ids all of whose members are :meth:`settled`."""
        ok = self.settled(settle_std)
        return [g for g, members in zip(self.group_ids, self.groups) if all(ok[i] for i in members)]

    def estimates(self, trajectory_ids: Iterable[str] | None = None) -> list[RewardEstimate]:
        """Reward estimates now for some trajectories (default all), in input order; charges nothing."""
        wanted = None if trajectory_ids is None else set(trajectory_ids)
        return self._estimates([k for k, (_, _, t) in enumerate(self.items) if wanted is None or t in wanted])[0]

    def result(self) -> StepResult:
        """Verdicts, reward estimates, spend, lab requests and the decision log of the step."""
        estimates, used, mean, std = self._estimates(range(len(self.items)))
        return self._result(estimates, used, mean, std)

    def _estimates(
        self, rows: Iterable[int]
    ) -> tuple[list[RewardEstimate], dict[str, list[tuple[str, str, str, str]]], np.ndarray, np.ndarray]:
        mean, std, rate, scale = self._posterior()
        cfg = self.config
        exact = self._exact()
        r_mean, r_var = objective_moments(self.objective, mean, std, exact, rate, scale)
        p_hit, _ = discovery_value(self.objective, mean, std, exact, rate, scale)
        estimates, used = [], {}
        for c, _, traj in (self.items[k] for k in rows):
            i = self.index[c.key]
            got = [v for v in self.verdicts[i] if v is not None]
            ok = [v for v in got if v.status == Status.ok]
            invalid = any(v.status == Status.invalid for v in got)
            fidelity = max((v.tier for v in ok), key=lambda t: TIER_ORDER[t.value], default=None)
            if invalid:
                rm, rs, value_mean, value_std, comps = cfg.invalid_reward, 0.0, None, None, {}
            else:
                rm, rs = float(r_mean[i]), float(math.sqrt(r_var[i]))
                value_mean, value_std = float(mean[i]), float(std[i])
                comps = {"p_hit": float(p_hit[i])}
                comps |= {f"property:{k}": float(v[i]) for k, v in exact.items() if not math.isnan(v[i])}
            estimates.append(
                RewardEstimate(
                    trajectory_id=traj,
                    run_id=self.run_id,
                    step=self.step,
                    mean=rm,
                    std=rs,
                    fidelity=fidelity,
                    verdict_ids=[v.id for v in got if v.id is not None],
                    value_mean=value_mean,
                    value_std=value_std,
                    invalid=invalid,
                    components=comps,
                )
            )
            used[traj] = [v.cache_key for v in got]
        return estimates, used, mean, std

    def _result(
        self, estimates: list[RewardEstimate], used: dict[str, list[tuple[str, str, str, str]]], mean: np.ndarray, std: np.ndarray
    ) -> StepResult:
        spend: dict[str, float] = {}
        for v in self.ladder:
            spend[v.tier.value] = spend.get(v.tier.value, 0.0) + self.spend_by_verifier[v.name]
        if not self._charged_to_run:  # result() may be called again; the run is charged once
            self.s.run_spent += self.spent
            self._charged_to_run = True
        labs = [
            LabRequest(
                id=v.request_id or new_id(),
                run_id=self.run_id,
                candidate_key=v.candidate_key,
                payload=self.cands[self.index[v.candidate_key]].payload,
                verifier=v.verifier,
                version=v.version,
                params_hash=v.params_hash,
            )
            for v in self.new_verdicts
            if v.status == Status.pending
        ]
        return StepResult(
            verdicts=list(self.new_verdicts),
            estimates=estimates,
            posteriors={k: (float(mean[i]), float(std[i])) for i, k in enumerate(self.keys)},
            verdicts_used=used,
            spend=spend,
            calls=dict(self.calls),
            spend_by_verifier=dict(self.spend_by_verifier),
            lab_requests=labs,
            decisions=list(self.decisions),
            unavailable=[n for n in self.calls if self.s.consecutive_failures.get(n, 0) >= self.config.dead_after],
            rounds=self.round,
            budget=self.budget,
            trace=list(self.trace),
        )

    # -- internals ------------------------------------------------------------
    def _record(self, i: int, j: int, verdict: Verdict) -> None:
        self.verdicts[i][j] = verdict
        self.level[i] = max(self.level[i], j)
        if verdict.status == Status.ok and verdict.value is not None:
            self._vals[i][self.ladder[j].name] = float(verdict.value)
        if verdict.status in (Status.ok, Status.failed):
            # A failed verdict may still report what it computed before failing (a molecule's QED before its
            # geometry): left unknown, a composite objective would count those terms as met.
            props = self._props[i]
            for name in self.objective.exact_properties:
                x = verdict.values.get(name)
                if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x):
                    if name not in props or props[name][0] <= j:  # the most faithful tier that reports it wins
                        props[name] = (j, float(x))

    def _property_reads(self) -> list[Action]:
        """Calls that read a property the objective needs and no verdict of the candidate reported yet, from the
        cheapest tier below the top that declares it (``reports``), whatever the policy thinks of the value.

        The policy ranks calls by what they tell about the top tier's value; a tier that only reports a property
        (a molecule's weight) tells it nothing, and a candidate whose top tier was cached was closed without it:
        the objective then counted the unread term as met (newcomer pass: "mw above 1000" scored 1.0).
        """
        needed = self.objective.exact_properties
        if not needed:
            return []
        reads = []
        top = len(self.ladder) - 1
        for i, row in enumerate(self.verdicts):
            if any(v is not None and v.status in (Status.invalid, Status.pending) for v in row):
                continue
            for name in needed:
                if name in self._props[i]:
                    continue
                j = next((j for j in range(top) if row[j] is None and self.ladder[j].reports is not None
                          and name in self.ladder[j].reports), None)
                if j is not None:
                    reads.append(Action(i, j, None, f"reads {name}, which the objective needs"))
                    break
        return reads

    def _exact(self) -> dict[str, np.ndarray]:
        """(n,) values per exact property the objective reads; NaN where no verifier has reported it."""
        return {
            name: np.array([p[name][1] if name in p else math.nan for p in self._props])
            for name in self.objective.exact_properties
        }

    def _values(self, i: int) -> dict[str, float]:
        """ok values per verifier name of candidate ``i`` (kept up to date by ``_record``)."""
        return self._vals[i]

    def _learn(self) -> None:
        """Pairs whose top tier answered this step teach the surrogate at once (online learning)."""
        top = len(self.ladder) - 1
        pairs = [
            Observation(self.keys[i], self.features[i], self._values(i), self.cands[i].payload)
            for i in range(len(self.keys))
            if self.verdicts[i][top] is not None and self.verdicts[i][top].status == Status.ok
        ]
        if pairs:
            self.s.surrogate.add(pairs)

    def _observations(self) -> list[Observation]:
        return [
            Observation(k, f, self._values(i), c.payload)
            for i, (k, f, c) in enumerate(zip(self.keys, self.features, self.cands))
        ]

    def _posterior(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Mean, std, gross-error rate and its scale of every candidate's top-tier value."""
        mean, std, rate, scale = self.s.surrogate.predict_with_tails(self._observations())
        for i in range(len(self.keys)):
            v = self.verdicts[i][-1]
            if v is not None and v.status == Status.ok and v.uncertainty:
                std[i] = v.uncertainty
        return mean, std, rate, scale

    def _open(self) -> np.ndarray:
        out = np.ones(len(self.keys), dtype=bool)
        for i, row in enumerate(self.verdicts):
            if any(v is not None and v.status in (Status.invalid, Status.pending) for v in row):
                out[i] = False
            if row[-1] is not None:
                out[i] = False
        for i, _ in self.outstanding:  # a call on it is in flight (only between request() calls)
            out[i] = False
        return out

    def _cost_matrix(self) -> np.ndarray:
        # Follow the machine: scale each cost model by what this step's calls actually cost.
        ratio = np.array(
            [self.spend_by_verifier[v.name] / self.expected_sum[v.name] if self.expected_sum[v.name] > 0 else 1.0 for v in self.ladder]
        )
        return self._base_cost * ratio

    def _view(self, round_: int | None = None) -> PlanView:
        mean, std, rate, scale = self._posterior()
        next_std = np.zeros(len(self.keys))
        top = len(self.ladder) - 1
        cache: dict[tuple[str, ...], float] = {}
        for i in range(len(self.keys)):
            nxt = self.level[i] + 1
            if nxt >= top:
                continue  # the top tier answers exactly
            pattern = tuple(sorted(set(self.s.surrogate.pattern(self._values(i))) | {self.ladder[nxt].name},
                                   key=[v.name for v in self.ladder].index))
            if pattern not in cache:
                cache[pattern] = self.s.surrogate.typical_std(pattern)
            next_std[i] = cache[pattern]
        return PlanView(
            round=self.round if round_ is None else round_,
            keys=self.keys,
            candidates=self.cands,
            ladder=self.ladder,
            level=self.level.copy(),
            open=self._open(),
            mean=mean,
            std=std,
            tail_rate=rate,
            tail_scale=scale,
            next_std=next_std,
            disagreement=self.s.surrogate.disagreement(self._observations()) if self.config.learning_value > 0 else None,
            cost=self._cost_matrix(),
            values=[self._values(i) for i in range(len(self.keys))],
            exact=self._exact(),
            groups=self.groups,
            budget_left=self.budget - self.committed,
            config=self.config,
        )

    def _unavailable(self, name: str, taken: int) -> bool:
        """Down: its last ``dead_after`` calls all failed, and this step's probes of it are used up."""
        down = self.s.consecutive_failures.get(name, 0) >= self.config.dead_after
        return down and self.calls[name] + taken >= self.config.dead_after

    def _admit(self, actions: Sequence[Action], capacity: Mapping[str, int] | None = None) -> dict[str, list[int]]:
        """Admit actions in order under the budget, the caps, free slots and the never-pay-twice rule."""
        cost = self._cost_matrix()
        left = self.budget - self.committed  # calls in flight hold their expected cost
        self._wanted = set()
        taken_round: dict[str, int] = {}
        asked: set[int] = set()
        requests: dict[str, list[int]] = {}
        for a in actions:
            i, j = a.index, a.tier
            v = self.ladder[j]
            if i in asked or self.verdicts[i][j] is not None or (i, j) in self.outstanding:
                continue  # one tier per candidate per round; never pay twice for a verdict
            if self._unavailable(v.name, taken_round.get(v.name, 0)) and j < len(self.ladder) - 1:
                # Fall back to the tiers that work: step over the dead one (the next round goes higher).
                self.level[i] = max(self.level[i], j)
                self.decisions.append(Decision(self.round, self.keys[i], v.name, v.tier.value, 0.0, None,
                                               "skipped: this verifier's recent calls all failed"))
                continue
            caps = self.config.caps_for(v.name, v.tier.value)
            if caps.max_calls_per_step is not None and self.calls[v.name] + taken_round.get(v.name, 0) >= caps.max_calls_per_step:
                continue
            if caps.max_concurrency is not None and taken_round.get(v.name, 0) >= caps.max_concurrency:
                continue
            c = float(cost[i, j])
            if c > left:
                continue
            if capacity is not None and taken_round.get(v.name, 0) >= capacity.get(v.name, 0):
                self._wanted.add(i)  # worth it and affordable, but every slot of its tier is busy
                continue
            left -= c
            asked.add(i)
            taken_round[v.name] = taken_round.get(v.name, 0) + 1
            requests.setdefault(v.name, []).append(i)
            self.outstanding[(i, j)] = c
            self.decisions.append(Decision(self.round, self.keys[i], v.name, v.tier.value, c, a.value_per_cost, a.reason))
        return requests
