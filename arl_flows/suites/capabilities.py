"""What a suite may offer beyond its core: one small protocol per capability, checked with ``isinstance``.

A suite defines the methods of a capability it has and nothing for one it has
not: it still loads, and the feature that needs the capability says in one
line that the suite does not offer it. The protocols are structural (a suite
need not name them) and runtime-checkable:

- :class:`Hindsight`: supervision from failed trajectories (the distillation step after each GRPO step);
- :class:`Lab`: a candidate rebuilt from its cache key (late lab answers, teaching the surrogate from the ledger);
- :class:`Rerank`: sampling candidates for a goal (``arl rerank`` lines without candidates);
- :class:`Report`: a picture of candidates in the run report;
- :class:`Prior`: a learned model the scheduler's surrogate stacks on its linear one;
- :class:`Calibration`: candidates worth verifying on every tier when the scheduler has no history.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotations only: policies loads torch, and the suite base imports this module
    from policies import HintedExample, Policy, RelabeledExample

    from arl_flows.suites import Failure
    from verifiers import Candidate
    from verifiers.scheduler.config import LearnedSurrogateConfig
    from verifiers.scheduler.learned import SurrogateLearner

__all__ = ["Calibration", "Hindsight", "Lab", "Prior", "Report", "Rerank"]


@runtime_checkable
class Hindsight(Protocol):
    """Supervision from failed trajectories: each comes with its verdicts and the scheduler's estimate."""

    def hindsight(self, policy: Policy, failures: list[Failure]) -> tuple[list[RelabeledExample], list[HintedExample]]: ...


@runtime_checkable
class Lab(Protocol):
    """A candidate rebuilt from a cache key (None: that key is not one of this suite's candidates)."""

    def history_candidate(self, key: str) -> Candidate | None: ...


@runtime_checkable
class Rerank(Protocol):
    """``sample(goal, n, seed) -> n completions`` for a goal, from the suite's policy or ``policy_path``."""

    def sampler(self, policy_path: str | None = None) -> Callable[[dict[str, Any], int, int], list[str]] | None: ...


@runtime_checkable
class Report(Protocol):
    """A PNG picture of candidates (named as ``show_candidate`` names them) for the run report; None: nothing to draw."""

    def draw_candidates(self, shown: Sequence[str], legends: Sequence[str]) -> bytes | None: ...


@runtime_checkable
class Prior(Protocol):
    """The learned model the scheduler's surrogate stacks on its linear one once the history is large.

    ``surrogate_learner(lower_tiers, scheduler.learned, seed)`` returns a ``SurrogateLearner`` whose ``fit``
    gives a ``LearnedModel`` (or None if it cannot read the payloads); see ``verifiers.scheduler.learned`` (a
    ``SurrogateLearnerFactory``). The molecules suite's is a graph network, shipped pre-trained.
    """

    def surrogate_learner(self, tiers: Sequence[str], learned: LearnedSurrogateConfig, seed: int) -> SurrogateLearner: ...


@runtime_checkable
class Calibration(Protocol):
    """Candidates worth verifying on every tier when the scheduler has no history (``TieredReward.warm_start``)."""

    def calibration_candidates(self) -> list[Candidate]: ...
