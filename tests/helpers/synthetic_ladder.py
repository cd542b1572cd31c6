"""Synthetic ladders for the scheduler and benchmark tests: real Verifier subclasses with made-up values.

Each tier reports ``a * y + b + noise`` of a hidden true value ``y`` (the top
tier reports ``y``), with a fixed cost per call, and counts its calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from storage.records import Status, Tier, Verdict
from verifiers.base import Candidate, CostModel, Verifier

__all__ = ["SyntheticTier", "ladder_and_pool", "make_ladder", "make_pool", "verified_by_tier"]


class SyntheticTier(Verifier):
    slope: float = 1.0
    offset: float = 0.0
    noise: float = 0.0
    answer: Status = Status.ok

    def __init__(self, truth: dict[str, float], seed: int = 0) -> None:
        super().__init__()
        rng = np.random.default_rng(seed)
        self.values = {k: self.slope * y + self.offset + self.noise * rng.standard_normal() for k, y in sorted(truth.items())}
        self.calls: list[str] = []

    def verify_batch(self, candidates: Sequence[Candidate]) -> list[Verdict]:
        out = []
        for c in candidates:
            self.calls.append(c.key)
            if c.payload == "invalid":
                out.append(self.verdict(c, Status.invalid, feedback="synthetic invalid", cost_s=self.expected_cost(c)))
            elif self.answer == Status.pending:
                out.append(self.verdict(c, Status.pending, cost_s=self.expected_cost(c), request_id=f"req-{c.key}"))
            else:
                out.append(self.verdict(c, Status.ok, value=self.values[c.key], cost_s=self.expected_cost(c)))
        return out


def make_ladder(
    truth: dict[str, float],
    *,
    fast_noise: float = 0.6,
    sim_noise: float = 0.2,
    fast_slope: float = 0.8,
    fast_offset: float = -0.5,
    top_pending: bool = False,
    seed: int = 0,
) -> list[SyntheticTier]:
    class Fast(SyntheticTier):
        name: ClassVar[str] = "syn-fast"
        tier: ClassVar[Tier] = Tier.fast
        version: ClassVar[str] = "1"
        cost_model: ClassVar[CostModel] = CostModel(base=0.01)
        slope, offset, noise = fast_slope, fast_offset, fast_noise

    class Sim(SyntheticTier):
        name: ClassVar[str] = "syn-sim"
        tier: ClassVar[Tier] = Tier.simulation
        version: ClassVar[str] = "1"
        cost_model: ClassVar[CostModel] = CostModel(base=0.5)
        slope, offset, noise = 1.0, 0.3, sim_noise

    class Top(SyntheticTier):
        name: ClassVar[str] = "syn-top"
        tier: ClassVar[Tier] = Tier.lab if top_pending else Tier.high_fidelity
        version: ClassVar[str] = "1"
        cost_model: ClassVar[CostModel] = CostModel(base=10.0)
        answer = Status.pending if top_pending else Status.ok

    return [Fast(truth, seed), Sim(truth, seed + 1), Top(truth, seed + 2)]


def make_pool(n: int, seed: int = 0, prefix: str = "m") -> tuple[list[Candidate], dict[str, float]]:
    """``n`` candidates whose true values spread around a 3-4 window (about 15% hits)."""
    rng = np.random.default_rng(seed)
    truth = {f"{prefix}{i}": float(rng.normal(5.0, 1.2)) for i in range(n)}
    return [Candidate(key=k, suite="syn", payload=k) for k in truth], truth


def ladder_and_pool(n: int = 150):  # noqa: ANN201 - (pool, truth, ladder, held-out observations)
    """A pool of ``n``, its truth, a ladder that knows it and 300 held-out molecules with every tier known."""
    from verifiers.scheduler import Observation

    pool, truth = make_pool(n, seed=7)
    _, hist_truth = make_pool(300, seed=8, prefix="h")
    ladder = make_ladder({**truth, **hist_truth}, seed=3)
    held_out = [Observation(k, np.zeros(0), {v.name: v.values[k] for v in ladder}) for k in hist_truth]
    return pool, truth, ladder, held_out


def verified_by_tier(result, ladder: Sequence[SyntheticTier]) -> dict[str, set[str]]:  # noqa: ANN001
    """The candidate keys each tier of ``ladder`` gave a verdict on in a step's ``result``."""
    return {v.name: {x.candidate_key for x in result.verdicts if x.verifier == v.name} for v in ladder}
