"""``voi``: value of information per CPU-second (the default policy).

Escalation moves a candidate to the *next* tier of the ladder (a
policy may skip tiers, e.g. the oracle, but ``voi`` does not: lower tiers are
cheap and sharpen the decision about the expensive one).

``VoiPolicy`` ranks by expected value of information per CPU-second:

- ``discovery``: value is expected hits confirmed at the top tier. A
  top-tier call on candidate i is worth ``stake_i p_i``: ``p_i`` = P(the top
  value meets the objective's terms on it, e.g. lies in the window) and
  ``stake_i`` the reward such a value adds given the candidate's exact
  properties (:func:`verifiers.scheduler.reward.discovery_value`; 1 for a
  window alone, 0 when a cheap term already zeroes a geometric mean). A
  lower tier is worth what it does to the later top-tier decision: after it,
  the belief mean moves to ``m' ~ N(m, s^2 - s'^2)`` (the preposterior of a
  Gaussian; s' is the surrogate's std once that tier is known), and the
  top tier is then called only if ``stake p' >= tau``; the path is worth
  ``E[stake p' 1{stake p' >= tau}]`` for ``c_next + c_top P(stake p' >= tau)``
  seconds. This is a
  knowledge-gradient style look-ahead (Frazier, Powell and Dayanik, 2008,
  *SIAM J. Control Optim.* 47, 2410). ``tau = lambda * c_top`` where
  ``lambda`` (hits per second) is the rate of the marginal action that the
  remaining budget can still buy, so a cheap look first is preferred exactly
  when it raises the hit rate above what the budget would otherwise get.
- ``advantage``: value is the expected reduction of the squared error of the
  group-relative advantages ``(r_i - mean_g r) / scale_g``. With independent
  beliefs that error is ``(1 - 1/G) sum_i Var(r_i) / scale_g^2``, so a
  candidate is worth escalating in proportion to how much the next tier
  shrinks the variance of its *reward*, computed with its exact properties
  plugged in (large near the window edges, where a
  rank within the group can flip; about zero for a candidate clearly outside
  the window, so a group whose members are all clearly bad is left alone).

The value of a candidate is the better of the myopic value of its next tier
and the value of going all the way to the top, each per its own cost. With a
finite budget only escalations of positive value at or above the marginal
rate are bought; with an infinite budget cost is no object and every
candidate whose top-tier value is still uncertain goes up (``all``).
"""

from __future__ import annotations

import numpy as np

from verifiers.scheduler.escalation import Action, EscalationPolicy, PlanView
from verifiers.scheduler.policies import register_policy
from verifiers.scheduler.policies.voi_settings import VoiTarget
from verifiers.scheduler.reward import discovery_value, objective_moments
from verifiers.scheduler.window import hit_probability

__all__ = ["VoiPolicy"]

# A coarser rule for the preposterior than the reward's quadrature: it is evaluated for every candidate.
_PRE_Z, _PRE_W = np.polynomial.hermite_e.hermegauss(9)
_PRE_W = _PRE_W / _PRE_W.sum()


@register_policy
class VoiPolicy(EscalationPolicy):
    """Value of information per unit cost, for the ``discovery`` or ``advantage`` target."""

    name = "voi"

    def escalate(self, view: PlanView) -> list[Action]:
        nxt = view.next_tier()
        uncertain = (nxt >= 0) & (view.std > view.config.exact_std)
        if view.objective.as_window() is None:
            # The top tier's value can move the reward only by the stake its exact properties leave
            # (0 when a cheap term zeroes a geometric mean): such a reward is known, like an exact value.
            uncertain &= np.broadcast_to(view.objective.stake(view.exact), nxt.shape) > 0
        idx = np.flatnonzero(uncertain)
        if idx.size == 0:
            return []
        if view.config.voi_target == VoiTarget.discovery:
            ratio, path_cost, why = self._discovery(view, idx, nxt[idx])
        else:
            ratio, path_cost, why = self._advantage(view, idx, nxt[idx])
        order = np.argsort(-ratio, kind="stable")
        if not np.isfinite(view.budget_left):
            # Cost is no object: every uncertain candidate is worth its next tier (this equals ``all``).
            keep = np.ones(idx.size, dtype=bool)
            floor = 0.0
        else:
            floor = max(_frontier_rate(ratio, path_cost, view.budget_left), view.config.min_value_per_cost)
            keep = (ratio > 0) & (ratio >= floor)  # worthless escalations are never bought, even if affordable
        return [
            Action(int(idx[k]), int(nxt[idx[k]]), float(ratio[k]), f"{why[k]}; rate {ratio[k]:.3g}/s >= {floor:.3g}/s")
            for k in order
            if keep[k]
        ]

    # -- discovery ----------------------------------------------------------
    def _discovery(
        self, view: PlanView, idx: np.ndarray, nxt: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, list[str]]:
        objective = view.objective
        m, s = view.mean[idx], view.std[idx]
        rate, scale = view.tail_rate[idx], view.tail_scale[idx]
        p, stake = discovery_value(objective, m, s, {k: v[idx] for k, v in view.exact.items()}, rate, scale)
        c_top = view.cost[idx, view.top]
        c_next = view.cost[idx, nxt]
        # Cost of the tiers after the next one and up to the top, paid only if the path goes on.
        later = np.array([view.cost[i, n + 1 : view.top + 1].sum() for i, n in zip(idx, nxt)])
        at_top = nxt == view.top
        m_after, s_next, w = _preposterior(m, s, rate, scale, view.next_std[idx])
        low, high = objective.hit_interval()
        learn = _learning_value(view, idx, stake, low, high)  # (k,) worth of the top tier's answer to the surrogate
        p_after = stake[:, None] * hit_probability(m_after, s_next, low, high) + learn[:, None]  # (k, nodes)

        def path(lam: float) -> tuple[np.ndarray, np.ndarray]:
            go_on = p_after >= (lam * later)[:, None]  # (k, nodes)
            hits = (w * p_after * go_on).sum(axis=1)
            cost = c_next + later * (w * go_on).sum(axis=1)
            hits = np.where(at_top, stake * p + learn, hits)
            cost = np.where(at_top, c_top, cost)
            return hits, cost

        hits, cost = path(0.0)
        for _ in range(2):  # the rate and the look-ahead threshold depend on each other; two passes settle it
            lam = _frontier_rate(hits / cost, cost, view.budget_left)
            hits, cost = path(lam)
        staked = objective.as_window() is None  # a window alone stakes the whole reward on every candidate
        why = [
            f"discovery: P(hit)={p[k]:.3f}{f', stake {stake[k]:.3f}' if staked else ''}"
            f"{f', teaches the surrogate {learn[k]:.3f}' if learn[k] > 0 else ''}, expected hits {hits[k]:.3f} "
            f"for {cost[k]:.3g}s via tier {int(nxt[k])}"
            for k in range(idx.size)
        ]
        return hits / cost, cost, why

    # -- advantage ----------------------------------------------------------
    def _advantage(
        self, view: PlanView, idx: np.ndarray, nxt: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, list[str]]:
        cfg, objective = view.config, view.objective
        mu, var = objective_moments(objective, view.mean, view.std, view.exact, view.tail_rate, view.tail_scale)
        weight = np.zeros(len(view.keys))
        for members in view.groups:
            size = len(members)
            if size < 2:
                continue  # a group of one has advantage 0 whatever its reward
            scale2 = max(np.var(mu[members]) + np.mean(var[members]), cfg.advantage_scale_floor**2)
            np.add.at(weight, members, (1.0 - 1.0 / size) / scale2)
        m_after, s_next, w = _preposterior(
            view.mean[idx], view.std[idx], view.tail_rate[idx], view.tail_scale[idx], view.next_std[idx]
        )
        _, var_after = objective_moments(objective, m_after, s_next, {k: v[idx] for k, v in view.exact.items()})
        var_after = (w * var_after).sum(axis=1)  # (k,) expected reward variance once the next tier answers
        gain_next = weight[idx] * np.maximum(var[idx] - var_after, 0.0)
        gain_path = weight[idx] * var[idx]
        c_next = view.cost[idx, nxt]
        c_path = np.array([view.cost[i, n : view.top + 1].sum() for i, n in zip(idx, nxt)])
        ratio_next = gain_next / c_next
        ratio_path = gain_path / c_path
        use_path = ratio_path > ratio_next
        ratio = np.where(use_path, ratio_path, ratio_next)
        path_cost = np.where(use_path, c_path, c_next)
        why = [
            f"advantage: reward var {var[i]:.3g} -> {'0 at top' if use_path[k] else f'{var_after[k]:.3g}'}"
            f", weight {weight[i]:.3g}"
            for k, i in enumerate(idx)
        ]
        return ratio, path_cost, why


def _learning_value(view: PlanView, idx: np.ndarray, stake: np.ndarray, low: float, high: float) -> np.ndarray:
    """Worth of a top-tier answer to the surrogate, in the units of discovery (expected hits).

    An answer teaches the learned model most where its ensemble members disagree: the share
    ``d^2 / s^2`` of the posterior variance that is the members' disagreement ``d`` (epistemic, which
    an answer removes, as opposed to the noise it cannot) measures how much the model has to learn
    there (query by committee: Seung, Opper and Sompolinsky, COLT 1992; deep-ensemble disagreement:
    Lakshminarayanan et al., NeurIPS 2017). It is worth something only near the target: the chance of a
    hit under a belief twice as wide (neighbours of the candidate that the policy may sample next).
    ``config.learning_value`` weighs it against the answer's own expected hit; 0 is pure exploitation.
    """
    weight = view.config.learning_value
    if weight <= 0 or view.disagreement is None:
        return np.zeros(idx.size)
    m, s = view.mean[idx], np.maximum(view.std[idx], 1e-9)
    share = np.clip(view.disagreement[idx] ** 2 / s**2, 0.0, 1.0)
    return weight * stake * share * hit_probability(m, 2.0 * s, low, high)


def _preposterior(
    m: np.ndarray, s: np.ndarray, rate: np.ndarray, scale: np.ndarray, next_std: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where the belief mean may land once the next tier answers: nodes, the std there, and weights.

    For a Gaussian belief N(m, s^2) that the next tier sharpens to std s',
    the new mean is distributed N(m, s^2 - s'^2); with a gross-error component
    (weight ``rate``, std ``scale * s``) a second set of nodes covers it.
    Returns (k, 2 * nodes) arrays.
    """
    s_next = np.minimum(next_std, s)
    core = np.sqrt(np.maximum(s * s - s_next * s_next, 0.0))
    wide = np.sqrt(np.maximum((scale * s) ** 2 - s_next * s_next, 0.0))
    m_after = np.concatenate([m[:, None] + core[:, None] * _PRE_Z, m[:, None] + wide[:, None] * _PRE_Z], axis=1)
    w = np.concatenate([(1.0 - rate)[:, None] * _PRE_W, rate[:, None] * _PRE_W], axis=1)
    return m_after, np.broadcast_to(s_next[:, None], m_after.shape), w


def _frontier_rate(ratio: np.ndarray, cost: np.ndarray, budget: float) -> float:
    """Value per second of the marginal action the budget can still buy (0 if it buys them all)."""
    if not np.isfinite(budget):
        return 0.0
    order = np.argsort(-ratio, kind="stable")
    spent = np.cumsum(cost[order])
    beyond = np.flatnonzero(spent > budget)
    return float(ratio[order[beyond[0]]]) if beyond.size else 0.0


