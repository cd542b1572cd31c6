"""The verifier ladder of a run: its configured tiers as verifier instances, cheapest first.

A training run (:class:`arl_flows.training.RunSession`), a :class:`~arl_flows.tiered_reward.TieredReward`
and the benchmarks build it from a run config the same way: the suite adjusts each tier's params
(``Suite.verifier_params``) and the ladder must climb from the cheapest tier to the dearest.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import ValidationError

from arl_flows.config import RunConfig, describe_errors
from arl_flows.suites import suite_for
from storage.records import Verdict, tier_rank
from verifiers import Verifier, registry

__all__ = ["build_ladder", "ladder_verdicts"]


def build_ladder(config: RunConfig) -> list[Verifier]:
    """Instantiate the configured verifiers (names or 'module:Class' references), cheapest first.

    A verifier of another suite, or params its model refuses, is one ValueError line naming the rung.
    """
    suite = suite_for(config)
    ladder = []
    for index, rung in enumerate(config.tiers):
        cls = registry.get(rung.verifier)
        where = f"tiers[{index}] ({cls.name})"
        if cls.suite not in (None, suite.name):
            raise ValueError(
                f"{where}: the verifier belongs to suite {cls.suite!r}, not {suite.name!r}; "
                f"`arl tiers list --suite {suite.name}` lists this suite's"
            )
        try:
            ladder.append(cls(suite.verifier_params(cls, dict(rung.params))))
        except ValidationError as exc:
            raise ValueError(describe_errors(exc, where, cls.Params, f"`arl tiers show {cls.name}` lists its params")) from None
        except ValueError as exc:  # the suite refuses these params for this run (e.g. another chemistry space)
            raise ValueError(f"{where}: {exc}") from None
    ranks = [tier_rank(v.tier) for v in ladder]
    if ranks != sorted(ranks):
        order = ", ".join(f"{v.name} ({v.tier.value})" for v in ladder)
        raise ValueError(f"tiers must be listed cheapest first (fast, simulation, high_fidelity, lab); got {order}")
    return ladder


def ladder_verdicts(ledger: Any, keys: Iterable[str], ladder: Sequence[Verifier]) -> list[Verdict]:
    """The ledger's verdicts on ``keys`` by the ladder's verifiers as they are configured now.

    The same name is not enough: a tier with other params (another chemistry space's rules, another basis or
    geometry) answers another question, so its verdicts count only with the same version and params hash, as
    they do in the scheduler's cache (``Scheduler.plan_step``).
    """
    identity = {(v.name, v.version, v.params_hash) for v in ladder}
    return [v for v in ledger.verdicts_for(keys, verifiers=[v.name for v in ladder])
            if (v.verifier, v.version, v.params_hash) in identity]
