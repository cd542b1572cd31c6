"""The verifier ladder of a run: its configured tiers as verifier instances, cheapest first.

A training run (:class:`arl_flows.training.RunSession`), a :class:`~arl_flows.tiered_reward.TieredReward`
and the benchmarks build it from a run config the same way: the suite adjusts each tier's params
(``Suite.verifier_params``) and the ladder must climb from the cheapest tier to the dearest.
"""

from __future__ import annotations

from arl_flows.config import RunConfig
from arl_flows.suites import suite_for
from storage.records import tier_rank
from verifiers import Verifier, registry

__all__ = ["build_ladder"]


def build_ladder(config: RunConfig) -> list[Verifier]:
    """Instantiate the configured verifiers (names or 'module:Class' references), cheapest first."""
    suite = suite_for(config)
    ladder = [registry.create(t.verifier, suite.verifier_params(registry.get(t.verifier), dict(t.params))) for t in config.tiers]
    ranks = [tier_rank(v.tier) for v in ladder]
    if ranks != sorted(ranks):
        order = ", ".join(f"{v.name} ({v.tier.value})" for v in ladder)
        raise ValueError(f"tiers must be listed cheapest first (fast, simulation, high_fidelity, lab); got {order}")
    return ladder
