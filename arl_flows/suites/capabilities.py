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
- :class:`Calibration`: candidates worth verifying on every tier when the scheduler has no history;
- :class:`ConstrainedDecoding`: a grammar the policy samples (and is scored) under, e.g. SMILES syntax;
- :class:`Commands`: command groups the suite adds to ``arl``;
- :class:`Profiles`: named variants of a run config (``arl run --profile``);
- :class:`Disagreements`: the suite's own test of tiers that disagree (else a pass/fail one);
- :class:`GoalColumns`, :class:`GroundTruth`, :class:`GoalWindow`: goals from a trainer's dataset (TRL, verl)
  and the objective window a goal asks for.

The functions after the protocols are what the core calls: the capability where the suite has it, else
what fits any problem.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from storage.records import Tier
from verifiers.disagreement import pass_fail_disagreement

if TYPE_CHECKING:  # annotations only: policies loads torch, and the suite base imports this module
    import typer

    from policies import DecodingConstraint, HintedExample, Policy, RelabeledExample

    from arl_flows.config import RunConfig
    from arl_flows.suites import Failure
    from storage.records import RewardEstimate, Verdict
    from verifiers import Candidate
    from verifiers.scheduler import Scheduler
    from verifiers.scheduler.config import LearnedSurrogateConfig
    from verifiers.scheduler.learned import SurrogateLearner

__all__ = [
    "Calibration",
    "Commands",
    "ConstrainedDecoding",
    "Disagreements",
    "GoalColumns",
    "GoalWindow",
    "GroundTruth",
    "Hindsight",
    "Lab",
    "Prior",
    "Profiles",
    "Report",
    "Rerank",
    "flag_disagreements",
    "decoding_constraint",
    "goal_columns",
    "goal_from_ground_truth",
    "objective_window",
    "pass_fail_disagreements",
    "suite_commands",
    "suite_profiles",
]


@runtime_checkable
class Hindsight(Protocol):
    """Supervision from failed trajectories: each comes with its verdicts and the scheduler's estimate."""

    def hindsight(self, policy: Policy, failures: list[Failure]) -> tuple[list[RelabeledExample], list[HintedExample]]: ...


@runtime_checkable
class Lab(Protocol):
    """A candidate rebuilt from a cache key (None: that key is not one of this suite's candidates)."""

    def history_candidate(self, key: str) -> Candidate | None: ...


@runtime_checkable
class ConstrainedDecoding(Protocol):
    """The ids a completion may continue with, for the suite's tokenizer; None: the run samples unconstrained.

    A run samples and scores its GRPO log-probs under it (``PolicyTrainer(constraint=)``), so the
    constrained distribution is the policy that training moves.
    """

    def decoding_constraint(self, tokenizer: Any) -> DecodingConstraint | None: ...


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


@runtime_checkable
class Commands(Protocol):
    """Command groups the suite adds to ``arl`` (name, typer app); e.g. the molecules suite's ``arl prior``."""

    @classmethod
    def commands(cls) -> list[tuple[str, typer.Typer]]: ...


@runtime_checkable
class Profiles(Protocol):
    """Named variants of a run config (``arl run --profile NAME``) besides 'default'."""

    profiles: ClassVar[dict[str, Callable[[RunConfig], RunConfig]]]


@runtime_checkable
class Disagreements(Protocol):
    """The estimates, with ``disagreement`` set where two tiers that should agree about a candidate do not.

    ``estimates`` are one per candidate, in order. A suite without it gets :func:`pass_fail_disagreements`.
    """

    def disagreements(
        self,
        scheduler: Scheduler,
        candidates: Sequence[Candidate],
        verdicts: dict[str, list[Verdict]],
        estimates: list[RewardEstimate],
    ) -> list[RewardEstimate]: ...


@runtime_checkable
class GoalColumns(Protocol):
    """Goal keys a trainer's dataset gives per completion (TRL passes dataset columns to reward functions)."""

    goal_columns: ClassVar[tuple[str, ...]]


@runtime_checkable
class GroundTruth(Protocol):
    """verl's ``ground_truth`` of one response as a goal, when it is not a mapping of goal keys."""

    @classmethod
    def goal_from_ground_truth(cls, ground_truth: Any) -> dict[str, Any]: ...


@runtime_checkable
class GoalWindow(Protocol):
    """The window on the top tier's value that a goal asks for, when a goal is the objective (None: the run's)."""

    @classmethod
    def objective_window(cls, goal: Mapping[str, Any]) -> tuple[float, float] | None: ...


# -- what the core uses: the capability where the suite has it, else what fits any problem -------------------


def suite_commands(suite: object) -> list[tuple[str, typer.Typer]]:
    """The command groups a suite (class or instance) adds to ``arl``; none without :class:`Commands`."""
    return suite.commands() if isinstance(suite, Commands) else []


def suite_profiles(suite: object) -> dict[str, Callable[[RunConfig], RunConfig]]:
    """A suite's own run-config profiles; none without :class:`Profiles`."""
    return dict(suite.profiles) if isinstance(suite, Profiles) else {}


def decoding_constraint(suite: object, tokenizer: Any) -> DecodingConstraint | None:
    """The suite's decoding constraint for ``tokenizer`` (:class:`ConstrainedDecoding`); None without one."""
    return suite.decoding_constraint(tokenizer) if isinstance(suite, ConstrainedDecoding) else None


def goal_columns(suite: object) -> tuple[str, ...]:
    """The goal keys a dataset may give per completion; none without :class:`GoalColumns`."""
    return tuple(suite.goal_columns) if isinstance(suite, GoalColumns) else ()


def goal_from_ground_truth(suite: Any, ground_truth: Any) -> dict[str, Any]:
    """verl's ground truth as a checked goal: the suite's reading (:class:`GroundTruth`), else a mapping of goal keys."""
    if isinstance(suite, GroundTruth):
        return suite.goal_from_ground_truth(ground_truth)
    if isinstance(ground_truth, Mapping):
        return suite.goal(ground_truth)
    raise ValueError(f"suite {suite.name!r} reads ground_truth as a mapping of its goal keys, got {type(ground_truth).__name__}")


def objective_window(suite: object, goal: Mapping[str, Any]) -> tuple[float, float] | None:
    """The window a goal asks for (:class:`GoalWindow`); None: the run's objective."""
    return suite.objective_window(goal) if isinstance(suite, GoalWindow) else None


def flag_disagreements(
    suite: object,
    scheduler: Scheduler,
    candidates: Sequence[Candidate],
    verdicts: dict[str, list[Verdict]],
    estimates: list[RewardEstimate],
) -> list[RewardEstimate]:
    """The suite's :class:`Disagreements`, else :func:`pass_fail_disagreements`."""
    if isinstance(suite, Disagreements):
        return suite.disagreements(scheduler, candidates, verdicts, estimates)
    return pass_fail_disagreements(candidates, verdicts, estimates)


def pass_fail_disagreements(
    candidates: Sequence[Candidate], verdicts: dict[str, list[Verdict]], estimates: list[RewardEstimate]
) -> list[RewardEstimate]:
    """Two pass/fail tiers that should agree: the simulation verdict and the high-fidelity one (``verifiers.disagreement``)."""
    out = []
    for cand, est in zip(candidates, estimates, strict=True):
        by_tier = {v.tier: v for v in verdicts.get(cand.key, [])}
        flag = pass_fail_disagreement(by_tier.get(Tier.simulation), by_tier.get(Tier.high_fidelity))
        out.append(est.model_copy(update={"disagreement": flag}) if flag else est)
    return out
