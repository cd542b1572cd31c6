"""Objectives over named properties: desirabilities, validation, reward moments under the posterior, and VOI.

The scheduler tests use real ``Verifier`` subclasses answering from tables: the
fast tier reports a cheap estimate of the top tier's value and an exact
property ``qed`` in its verdict values, as the molecule fast tier does.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import pytest
from pydantic import ValidationError

from storage.records import Status, Tier
from tests.helpers.scheduler import gap_window_config
from verifiers.base import Candidate, CostModel, Verifier
from verifiers.objectives import VALUE, Objective, Term
from verifiers.scheduler import Observation, Scheduler, SchedulerConfig, VoiTarget, objective_moments, reward_moments

QED_SIGMOID = {"kind": "maximize", "property": "qed", "transform": "sigmoid", "midpoint": 0.4, "steepness": 50.0}
GAP_WINDOW = {"kind": "window", "property": VALUE, "low": 3.0, "high": 4.0}


# -- desirabilities and validation --------------------------------------------
@pytest.mark.parametrize(
    ("term", "x", "expected"),
    [
        (GAP_WINDOW, [2.9, 3.0, 3.5, 4.0, 4.1], [0, 1, 1, 1, 0]),
        ({**GAP_WINDOW, "softness": 0.5}, [2.5, 3.5, 4.5], [math.exp(-0.5), 1, math.exp(-0.5)]),
        ({**QED_SIGMOID, "steepness": 10.0}, [0.4, 0.5], [0.5, 1 / (1 + math.exp(-1.0))]),
        ({**QED_SIGMOID, "kind": "minimize", "steepness": 10.0}, [0.4, 0.5], [0.5, 1 / (1 + math.exp(1.0))]),
        ({"kind": "maximize", "property": "p", "transform": "linear", "low": 2.0, "high": 6.0}, [1, 2, 4, 6, 7], [0, 0, 0.5, 1, 1]),
        ({"kind": "minimize", "property": "p", "transform": "linear", "low": 2.0, "high": 6.0}, [1, 4, 7], [1, 0.5, 0]),
        ({"kind": "threshold", "property": "p", "above": 5.0}, [4.9, 5.0, 9.0], [0, 1, 1]),
        ({"kind": "threshold", "property": "p", "below": 5.0}, [4.9, 5.0, 5.1], [1, 1, 0]),
    ],
)
def test_desirability_table(term, x, expected) -> None:
    assert Term(**term).desirability(np.array(x, dtype=float)) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("term", "message"),
    [
        ({"kind": "maximize", "property": "qed"}, "needs a transform"),
        ({"kind": "maximize", "property": "qed", "transform": "sigmoid", "midpoint": 0.5}, "needs steepness"),
        ({"kind": "window", "property": VALUE, "low": 4.0, "high": 3.0}, "swap them"),
        ({"kind": "window", "property": VALUE, "low": 3.0, "high": 4.0, "midpoint": 1.0}, "has no midpoint"),
        ({"kind": "threshold", "property": "p", "above": 1.0, "below": 2.0}, "exactly one of above or below"),
        ({"kind": "maximize", "property": "p", "transform": "linear", "low": 1.0, "high": math.inf}, "finite"),
    ],
)
def test_bad_terms_say_what_to_write(term, message) -> None:
    with pytest.raises(ValidationError, match=message):
        Term(**term)


def test_terms_on_the_value_that_can_never_all_be_met_are_rejected() -> None:
    with pytest.raises(ValidationError, match="can never all be met"):
        Objective(terms=[GAP_WINDOW, {"kind": "threshold", "property": VALUE, "above": 5.0}])


def test_geometric_and_arithmetic_means_and_the_stake() -> None:
    geo = Objective(terms=[{**GAP_WINDOW, "weight": 2.0}, {**QED_SIGMOID, "transform": "linear", "midpoint": None,
                                                           "steepness": None, "low": 0.0, "high": 1.0}])
    props = {"qed": np.array([0.25, 0.0, 1.0])}
    assert geo.score(props, value=3.5) == pytest.approx([0.25 ** (1 / 3), 0.0, 1.0])
    assert geo.stake(props) == pytest.approx([0.25 ** (1 / 3), 0.0, 1.0])  # value term met adds this much
    ari = geo.model_copy(update={"mean": "arithmetic"})
    assert ari.score(props, value=3.5) == pytest.approx([(2 + 0.25) / 3, 2 / 3, 1.0])
    assert ari.stake(props) == pytest.approx([2 / 3] * 3)  # the value term's share of the weight, whatever qed is
    assert geo.score({}, value=3.5) == pytest.approx(1.0)  # a property no verifier reported is no evidence against


# -- moments under the posterior ----------------------------------------------
def test_window_alone_reproduces_the_window_moments_exactly() -> None:
    mean, std = np.array([2.0, 3.2, 3.9, 5.0]), np.array([0.3, 0.5, 0.1, 1.0])
    for softness in (0.0, 0.4):
        got = objective_moments(Objective.window(3.0, 4.0, softness), mean, std, {}, 0.1, 3.0)
        want = reward_moments(mean, std, 3.0, 4.0, softness, 0.1, 3.0)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@pytest.mark.parametrize("softness", [0.0, 0.4])
def test_composite_moments_match_monte_carlo(softness) -> None:
    objective = Objective(terms=[{**GAP_WINDOW, "softness": softness, "weight": 2.0}, QED_SIGMOID,
                                 {"kind": "minimize", "property": "sa", "transform": "linear", "low": 2.0, "high": 6.0}])
    mean, std = np.array([3.1, 4.2, 2.0, 3.5]), np.array([0.4, 0.3, 0.8, 0.0])
    exact = {"qed": np.array([0.45, 0.42, 0.5, 0.38]), "sa": np.array([3.0, 2.5, 5.0, 4.0])}
    m, v = objective_moments(objective, mean, std, exact, 0.05, 4.0)
    rng = np.random.default_rng(0)
    draws = 400_000
    wide = rng.random((4, draws)) < 0.05
    y = mean[:, None] + std[:, None] * np.where(wide, 4.0, 1.0) * rng.standard_normal((4, draws))
    r = objective.score({k: x[:, None] for k, x in exact.items()}, value=y)
    assert m == pytest.approx(r.mean(axis=1), abs=3e-3)
    assert v == pytest.approx(r.var(axis=1), abs=3e-3)
    assert v[3] == pytest.approx(0.0, abs=1e-12)  # a known value: only the exact terms, no variance


def test_a_hard_window_inside_a_composite_keeps_the_bernoulli_moments() -> None:
    """With QED desirability 1 a geometric mean of a hard window is the window itself: p and p(1 - p)."""
    objective = Objective(terms=[GAP_WINDOW, {"kind": "threshold", "property": "qed", "above": 0.3}])
    mean, std = np.array([2.8, 3.5, 4.3]), np.array([0.3, 0.6, 0.2])
    m, v = objective_moments(objective, mean, std, {"qed": np.full(3, 0.9)})
    p, pv = reward_moments(mean, std, 3.0, 4.0)
    assert m == pytest.approx(p, abs=1e-9) and v == pytest.approx(pv, abs=1e-9)


def test_arithmetic_variance_scales_with_the_square_of_the_value_weight() -> None:
    mean, std = np.array([3.2, 4.1]), np.array([0.5, 0.4])
    exact = {"qed": np.array([0.5, 0.3])}
    var = {}
    for w in (1.0, 3.0):
        objective = Objective(mean="arithmetic", terms=[{**GAP_WINDOW, "softness": 0.3}, {**QED_SIGMOID, "weight": w}])
        var[w] = objective_moments(objective, mean, std, exact)[1]
    assert var[3.0] / var[1.0] == pytest.approx([(1 / 4) ** 2 / (1 / 2) ** 2] * 2, rel=1e-9)


# -- the scheduler --------------------------------------------------------------
class _Table(Verifier):
    """Answers from a table of values (and exact properties), charging its cost model."""

    def __init__(self, values: dict[str, float], props: dict[str, dict[str, float]] | None = None) -> None:
        super().__init__()
        self.table, self.props, self.calls = values, props or {}, []

    def verify_batch(self, candidates):  # noqa: ANN001, ANN201
        self.calls += [c.key for c in candidates]
        return [
            self.verdict(c, Status.ok, value=self.table[c.key], values=self.props.get(c.key, {}), cost_s=self.expected_cost(c))
            for c in candidates
        ]


class _Fast(_Table):
    name: ClassVar[str] = "tab-fast"
    tier: ClassVar[Tier] = Tier.fast
    version: ClassVar[str] = "1"
    cost_model: ClassVar[CostModel] = CostModel(base=0.01)


class _Sim(_Table):
    name: ClassVar[str] = "tab-sim"
    tier: ClassVar[Tier] = Tier.simulation
    version: ClassVar[str] = "1"
    cost_model: ClassVar[CostModel] = CostModel(base=0.5)


class _Top(_Table):
    name: ClassVar[str] = "tab-top"
    tier: ClassVar[Tier] = Tier.high_fidelity
    version: ClassVar[str] = "1"
    cost_model: ClassVar[CostModel] = CostModel(base=10.0)


def _twins(qed: dict[str, float]):
    """Two candidates with identical values on every tier (so identical posteriors), a calibrated history."""
    rng = np.random.default_rng(0)
    truth = {f"h{i}": float(rng.normal(4.5, 1.2)) for i in range(200)} | {"a": 3.5, "b": 3.5}
    fast = {k: 0.8 * y - 0.5 + (0.6 * rng.standard_normal() if k.startswith("h") else 0.2) for k, y in truth.items()}
    sim = {k: y + 0.3 + (0.2 * rng.standard_normal() if k.startswith("h") else -0.1) for k, y in truth.items()}
    ladder = [_Fast(fast, {k: {"qed": q} for k, q in qed.items()}), _Sim(sim), _Top(truth)]
    history = [Observation(k, np.zeros(0), {"tab-fast": fast[k], "tab-sim": sim[k], "tab-top": truth[k]})
               for k in truth if k.startswith("h")]
    return ladder, history, [Candidate(key=k, suite="tab", payload=k) for k in ("a", "b")]


@pytest.mark.parametrize("target", ["discovery", "advantage"])
def test_voi_does_not_pay_the_top_tier_for_a_reward_the_cheap_terms_already_cap(target) -> None:
    geometric = Objective(terms=[{**GAP_WINDOW, "softness": 0.3}, QED_SIGMOID])  # d_qed(0.02) ~ 6e-9
    runs = {}
    for label, reward in (("window", None), ("composite", geometric)):
        ladder, history, pool = _twins({"a": 0.8, "b": 0.02})
        s = Scheduler(ladder, gap_window_config(voi_target=target, reward=reward, window_softness=0.3))
        s.add_history(history)
        result = s.run_step(pool, group_ids=["g", "g"], budget=40.0)
        runs[label] = ({v.name: list(v.calls) for v in ladder[1:]}, result)
    # The window alone cannot tell the twins apart: both are worth the same escalations ...
    window_calls = runs["window"][0]
    assert all(sorted(calls) == ["a", "b"] for calls in window_calls.values())
    # ... but a QED desirability of ~0 caps b's reward: b gets nothing beyond the fast tier, a does.
    calls, result = runs["composite"]
    assert "a" in calls["tab-sim"] and all("b" not in c for c in calls.values())
    if target == "discovery":
        assert calls["tab-top"] == ["a"]  # (advantage: xTB already settles a's reward well enough)
    est = {e.trajectory_id: e for e in result.estimates}
    assert est["b"].mean < 1e-4 and est["b"].std < 1e-4  # sqrt(6e-9) of a window score: the cap
    assert est["b"].components["property:qed"] == 0.02
    assert est["a"].mean > 0.5  # a sits in the window with QED 0.8


def test_voi_of_an_arithmetic_mean_scales_with_the_value_terms_weight() -> None:
    logs = {}
    for w in (1.0, 3.0):
        reward = Objective(mean="arithmetic", terms=[GAP_WINDOW, {**QED_SIGMOID, "weight": w}])
        ladder, history, pool = _twins({"a": 0.8, "b": 0.02})
        s = Scheduler(ladder, SchedulerConfig(voi_target=VoiTarget.discovery, reward=reward))
        s.add_history(history)
        result = s.run_step(pool, budget=40.0)
        logs[w] = {(d.round, d.candidate_key, d.verifier): d.value_per_cost for d in result.decisions if d.round > 0}
    assert logs[1.0].keys() == logs[3.0].keys() and logs[1.0]  # the same decisions ...
    for key, rate in logs[1.0].items():  # ... each worth (1/2) / (1/4) = 2 times more with the value's weight 1 of 2
        assert rate == pytest.approx(2.0 * logs[3.0][key], rel=1e-9)


def test_the_default_objective_is_the_window_and_old_configs_keep_working() -> None:
    cfg = SchedulerConfig(objective="advantage", target_low=2.0, target_high=5.0, window_softness=0.2)
    assert cfg.voi_target == VoiTarget.advantage
    assert cfg.reward_objective() == Objective.window(2.0, 5.0, 0.2)
    with pytest.raises(ValidationError, match="objective is now voi_target"):
        SchedulerConfig(objective="hits")


def test_decisions_of_the_window_equal_those_of_a_composite_whose_exact_term_is_met() -> None:
    """A geometric mean of the window and a met threshold is the window: the general path gives the same decisions."""
    logs = []
    for reward in (None, Objective(terms=[GAP_WINDOW, {"kind": "threshold", "property": "qed", "above": 0.1}])):
        ladder, history, pool = _twins({"a": 0.8, "b": 0.5})
        s = Scheduler(ladder, gap_window_config(reward=reward))
        s.add_history(history)
        result = s.run_step(pool, budget=15.0)
        logs.append([(d.round, d.candidate_key, d.verifier, round(d.value_per_cost or 0.0, 12)) for d in result.decisions])
    assert logs[0] == logs[1]


def test_the_core_has_no_default_window_a_reward_needs_an_objective_or_both_edges() -> None:
    bare = SchedulerConfig()
    assert (bare.target_low, bare.target_high, bare.reward) == (None, None, None)  # a window is the problem's, not the core's
    with pytest.raises(ValueError, match="no reward; give an objective .* or the window target_low and target_high"):
        bare.reward_objective()
    with pytest.raises(ValidationError, match="target_low is given without target_high"):
        SchedulerConfig(target_low=3.0)
    with pytest.raises(ValidationError, match="target_high is given without target_low"):
        SchedulerConfig(target_high=4.0)
    goal = Objective(terms=[Term(**QED_SIGMOID)])
    assert SchedulerConfig(reward=goal).reward_objective() == goal  # an objective alone needs no window


class _FailsFor(_Fast):
    """The fast tier, failing for some keys after computing their exact properties (a molecule whose geometry fails
    after its QED was computed)."""

    def __init__(self, values, props, failing) -> None:  # noqa: ANN001
        super().__init__(values, props)
        self.failing = failing

    def verify_batch(self, candidates):  # noqa: ANN001, ANN201
        answered = super().verify_batch(candidates)
        return [self.verdict(c, Status.failed, values=self.props.get(c.key, {}), feedback="geometry failed")
                if c.key in self.failing else v for c, v in zip(candidates, answered)]


def test_exact_properties_of_a_failed_verdict_still_count() -> None:
    """A failed tier's own exact properties are known: left unknown they would score as met (desirability 1), so
    making the geometry fail would lift a candidate with a QED of 0.02 to a full QED term (fifth attack pass)."""
    geometric = Objective(terms=[{**GAP_WINDOW, "softness": 0.3}, QED_SIGMOID])
    ladder, history, pool = _twins({"a": 0.8, "b": 0.02})
    ladder[0] = _FailsFor(ladder[0].table, ladder[0].props, {"b"})
    s = Scheduler(ladder, gap_window_config(reward=geometric, window_softness=0.3))
    s.add_history(history)
    est = {e.trajectory_id: e for e in s.run_step(pool, group_ids=["g", "g"], budget=0.05).estimates}
    assert est["b"].components["property:qed"] == 0.02
    assert est["b"].mean < 1e-4  # capped by its QED, as when its fast tier answers


class _Weight(_Table):
    """A tier that only reports a property (a molecule's weight), as a user's own tier does."""

    name: ClassVar[str] = "tab-weight"
    tier: ClassVar[Tier] = Tier.fast
    version: ClassVar[str] = "1"
    cost_model: ClassVar[CostModel] = CostModel(base=0.01)
    reports: ClassVar[frozenset[str] | None] = frozenset({"mw"})


@pytest.mark.parametrize("policy", ["voi", "all"])
def test_a_property_the_objective_needs_is_read_even_when_the_top_tier_is_cached(policy: str) -> None:
    """newcomer pass: with the top tier's answers in the ledger, a property-only tier was never called and the
    objective counted its unread term as met: "mw above 1000", which no candidate meets, scored 1.0."""
    heavy = Objective(terms=[GAP_WINDOW, {"kind": "threshold", "property": "mw", "above": 1000.0}])
    ladder, history, pool = _twins({"a": 0.8, "b": 0.8})
    weight = _Weight({"a": 0.0, "b": 0.0}, {"a": {"mw": 120.0}, "b": {"mw": 1500.0}})
    ladder.insert(1, weight)
    s = Scheduler(ladder, gap_window_config(reward=heavy, policy=policy))
    s.add_history(history)
    cached = [ladder[-1].verdict(c, Status.ok, value=3.5, cost_s=10.0) for c in pool]  # both in the window, cached
    est = {e.trajectory_id: e for e in s.run_step(pool, group_ids=["g", "g"], budget=1.0, cached=cached).estimates}
    assert sorted(weight.calls) == ["a", "b"]
    assert est["a"].mean == 0.0 and est["b"].mean == 1.0
