"""Domain records shared by every ARL package.

These pydantic models are what the ledger takes and returns, what verifiers
produce and what the flows pass around. The module deliberately imports
nothing heavier than pydantic (no SQLAlchemy, no RDKit, no torch) so that
``verifiers`` and ``policies`` can use it without pulling in the database.

The one rule that shapes everything here: "could not verify" is not a score
of 0. Only a verdict whose status is ``ok`` carries a value.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from datetime import datetime, timezone
from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

__all__ = [
    "TIER_ORDER",
    "CheckpointRecord",
    "LabRequest",
    "Prompt",
    "RewardEstimate",
    "RunRecord",
    "RunStatus",
    "SpendRecord",
    "Status",
    "Tier",
    "TierDisagreement",
    "TrainingStepRecord",
    "Trajectory",
    "Turn",
    "TurnKind",
    "Verdict",
    "VerifierSpec",
    "candidate_key",
    "new_id",
    "params_hash",
    "ladder_order",
    "tier_rank",
    "utcnow",
]


def utcnow() -> datetime:
    """Timezone-aware UTC now (every timestamp in the ledger is UTC)."""
    return datetime.now(timezone.utc)


def new_id() -> str:
    """A fresh 32-character hex id for runs, trajectories and lab requests."""
    return uuid.uuid4().hex


class Tier(StrEnum):
    """Fidelity levels, cheapest and least faithful first."""

    fast = "fast"
    simulation = "simulation"
    high_fidelity = "high_fidelity"
    lab = "lab"


TIER_ORDER: dict[str, int] = {t.value: i for i, t in enumerate(Tier)}


def tier_rank(tier: str | Tier | int) -> int:
    """Ordinal fidelity of a tier name (``fast`` = 0 ... ``lab`` = 3) or an int level."""
    if isinstance(tier, int):
        return tier
    try:
        return TIER_ORDER[str(tier)]
    except KeyError:
        raise ValueError(
            f"unknown tier {tier!r}; use one of {', '.join(TIER_ORDER)} or an integer fidelity level"
        ) from None


def ladder_order(tier: str) -> tuple[int, str]:
    """Sort key listing tier names as the ladder does, cheapest first; a name that is no tier sorts last."""
    return TIER_ORDER.get(str(tier), len(TIER_ORDER)), str(tier)


class Status(StrEnum):
    """Outcome of one verifier on one candidate."""

    ok = "ok"  # verified; carries a value
    invalid = "invalid"  # the candidate itself is wrong (bad SMILES, malformed code)
    failed = "failed"  # the verifier could not decide (SCF did not converge, crash)
    timeout = "timeout"  # the verifier ran out of time
    pending = "pending"  # asked for (lab tier); the answer arrives later


class RunStatus(StrEnum):
    running = "running"
    completed = "completed"
    failed = "failed"
    interrupted = "interrupted"


def params_hash(params: dict[str, Any] | BaseModel | None) -> str:
    """Stable 16-hex-digit hash of verifier params (key order does not matter)."""
    if params is None:
        data: Any = {}
    elif isinstance(params, BaseModel):
        data = params.model_dump(mode="json")
    else:
        data = params
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def candidate_key(suite: str, canonical: str, task_id: str | None = None) -> str:
    """Content-addressed key of what a verifier looks at.

    ``canonical`` must already be normalised by the suite (canonical SMILES,
    normalised code); long payloads are hashed so keys stay short. Two
    trajectories with the same key share verdicts.
    """
    body = canonical if len(canonical) <= 200 else "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    return f"{suite}:{task_id}:{body}" if task_id else f"{suite}:{body}"


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Prompt(_Record):
    """A task the policy is asked to solve."""

    id: str = Field(default_factory=new_id, description="Stable id; unique per suite.")
    suite: str = Field(description="Suite name, e.g. 'molecules' or 'code'.")
    text: str = Field(description="What the policy sees.")
    goal: dict[str, Any] = Field(
        default_factory=dict,
        description="Structured goal, e.g. {'property': 'gap_ev', 'low': 3.0, 'high': 4.0}.",
    )
    metadata: dict[str, Any] = Field(default_factory=dict)


class TurnKind(StrEnum):
    text = "text"
    tool_call = "tool_call"
    observation = "observation"


class Turn(_Record):
    """One turn of a (possibly multi-turn) trajectory."""

    role: str = Field(description="'system', 'user', 'assistant' or 'tool'.")
    content: str
    kind: TurnKind = TurnKind.text

    @computed_field  # type: ignore[prop-decorator]
    @property
    def trainable(self) -> bool:
        """Whether training may put loss on this turn's tokens (policy-written, not observed)."""
        return self.role == "assistant" and self.kind != TurnKind.observation


class Trajectory(_Record):
    """What the policy wrote for one prompt at one step."""

    id: str = Field(default_factory=new_id)
    run_id: str | None = None
    prompt_id: str
    step: int = Field(ge=0)
    group_id: str = Field(description="The G samples of one prompt at one step share it.")
    turns: list[Turn] = Field(default_factory=list)
    final_answer: str = Field(description="What gets verified (a SMILES, a code block).")
    candidate_key: str
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    truncated: bool = False
    policy_version: int | None = Field(
        default=None, ge=0, description="Policy version (learner updates so far) whose weights sampled it; None: not recorded."
    )
    completion_ids: list[int] | None = Field(
        default=None, description="The sampled completion's token ids (through eos); None: not recorded."
    )
    behaviour_logprobs: list[float] | None = Field(
        default=None, description="Per-token log-probs of completion_ids under the sampling policy and temperature."
    )
    created_at: datetime = Field(default_factory=utcnow)

    @model_validator(mode="after")
    def _logprobs_match_tokens(self) -> Trajectory:
        if self.behaviour_logprobs is not None and len(self.behaviour_logprobs) != len(self.completion_ids or []):
            raise ValueError("behaviour_logprobs needs completion_ids of the same length")
        return self


class VerifierSpec(_Record):
    """Metadata of one verifier implementation at one tier."""

    name: str
    tier: Tier
    fidelity: int | None = Field(default=None, description="Ordinal level; defaults to the tier's rank.")
    version: str
    params: dict[str, Any] = Field(default_factory=dict)
    expected_cost: float = Field(ge=0, description="Expected CPU-seconds per candidate.")
    description: str = ""
    origin: str = Field(default="built-in", description="'built-in', 'entry point' or 'config'.")

    @model_validator(mode="after")
    def _default_fidelity(self) -> VerifierSpec:
        if self.fidelity is None:
            object.__setattr__(self, "fidelity", tier_rank(self.tier))
        return self

    @computed_field  # type: ignore[prop-decorator]
    @property
    def params_hash(self) -> str:
        return params_hash(self.params)


class Verdict(_Record):
    """One verifier's answer about one candidate."""

    id: int | None = Field(default=None, description="Ledger row id, set once stored.")
    candidate_key: str
    verifier: str
    version: str
    params_hash: str
    tier: Tier
    status: Status
    # NaN and infinity are refused: a NaN value is "could not verify", which is a
    # ``failed`` verdict, and SQLite would read it back as NULL.
    # Beyond 1e15 a value is a unit or a bug (and squared in a surrogate's fit, 1e300 overflowed it).
    value: float | None = Field(
        default=None, allow_inf_nan=False, ge=-1e15, le=1e15,
        description="Primary value, e.g. the gap in eV (finite, at most 1e15 in magnitude).",
    )
    values: dict[str, Any] = Field(default_factory=dict, description="All values (HOMO, LUMO, energy, ...).")
    uncertainty: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)
    feedback: str = Field(default="", description="Why, in words ('valence error on atom 3').")
    cost_s: float = Field(default=0.0, ge=0.0, description="CPU-seconds charged.")
    wall_s: float = Field(default=0.0, ge=0.0)
    request_id: str | None = Field(default=None, description="Lab request id for pending verdicts.")
    created_at: datetime = Field(default_factory=utcnow)
    job_id: str | None = Field(
        default=None, max_length=200,
        description="The batch job (SLURM/PBS job id) or Dask worker that computed it; None: this process.",
    )

    @model_validator(mode="after")
    def _only_ok_carries_values(self) -> Verdict:
        if self.status != Status.ok and self.value is not None:
            raise ValueError(
                f"a {self.status.value!r} verdict cannot carry a value; "
                "'could not verify' is not a score of 0"
            )
        return self

    @property
    def cache_key(self) -> tuple[str, str, str, str]:
        return (self.candidate_key, self.verifier, self.version, self.params_hash)


class TierDisagreement(_Record):
    """Two tiers that should agree about a candidate and do not.

    For code, the visible check (``code-exec``) and the hidden tests
    (``code-tests``) disagree: passing the visible check and failing the hidden
    tests is the typical mark of output matching or test gaming; the reverse
    means the visible check is at fault. For molecules, a lower tier's value
    mapped onto the top tier's scale (the scheduler's surrogate) lies far
    outside its predictive interval around the top tier's value.
    """

    kind: Literal["lower_pass_upper_fail", "lower_fail_upper_pass", "outside_interval"]
    lower: str = Field(description="The lower tier's verifier.")
    upper: str = Field(description="The higher tier's verifier.")
    lower_value: float | None = None
    upper_value: float | None = None
    detail: str = Field(default="", description="The disagreement in words (never an expected value).")


class RewardEstimate(_Record):
    """The scheduler's reward for one trajectory, with its uncertainty.

    ``mean`` and ``std`` are the reward's; ``value_mean`` and ``value_std``
    are the scheduler's posterior of the top tier's value (the objective's
    expensive property), which hindsight and reports read. ``components``
    holds named parts of the reward for display only: nothing reads a
    component by convention.
    """

    trajectory_id: str
    run_id: str | None = None
    step: int = Field(default=0, ge=0)
    mean: float
    std: float = Field(ge=0.0)
    fidelity: Tier | None = Field(default=None, description="Highest tier that answered; None if none did.")
    verdict_ids: list[int] = Field(default_factory=list)
    value_mean: float | None = Field(
        default=None,
        description="Posterior mean of the top tier's value (exact once the top tier answered); None for an invalid "
        "candidate or an estimate made without the scheduler's posterior.",
    )
    value_std: float | None = Field(
        default=None, ge=0.0, description="Posterior std of the top tier's value (0 once the top tier answered)."
    )
    invalid: bool = Field(
        default=False, description="A tier found the candidate itself wrong: ``mean`` is the configured invalid reward."
    )
    components: dict[str, float] = Field(default_factory=dict, description="Named parts of the reward (for display).")
    disagreement: TierDisagreement | None = Field(
        default=None, description="Set when two tiers that should agree about the candidate do not."
    )


class RunRecord(_Record):
    id: str = Field(default_factory=new_id)
    name: str
    config: dict[str, Any] = Field(default_factory=dict)
    status: RunStatus = RunStatus.running
    steps_done: int = 0
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class TrainingStepRecord(_Record):
    run_id: str
    step: int = Field(ge=0)
    metrics: dict[str, Any] = Field(default_factory=dict, description="The step's namespaced metrics (for reports).")
    group_ids: list[str] = Field(
        default_factory=list,
        description="Ids of the groups the step learned from (the asynchronous learner's; what a resume skips). "
        "Empty for a synchronous step.",
    )
    created_at: datetime = Field(default_factory=utcnow)


class CheckpointRecord(_Record):
    run_id: str
    step: int = Field(ge=0)
    path: str
    sha256: str
    created_at: datetime = Field(default_factory=utcnow)


class LabRequest(_Record):
    """An asked-for external measurement; its verdict stays ``pending`` until answered."""

    id: str = Field(default_factory=new_id)
    run_id: str | None = None
    candidate_key: str
    payload: str = Field(default="", description="What the lab must measure (e.g. the SMILES).")
    verifier: str
    version: str
    params_hash: str
    status: Status = Status.pending
    value: float | None = None
    notes: str = ""
    created_at: datetime = Field(default_factory=utcnow)
    completed_at: datetime | None = None

    @staticmethod
    def in_flight_note(verifier: str) -> str:
        """The notes of a request that records a run's expensive call in flight (crash safety), not a lab's work."""
        return f"in flight on {verifier}"

    @property
    def in_flight(self) -> bool:
        """A call a run sent to one of its own tiers (answered by that tier, or sent again on resume): no lab's."""
        return self.notes == self.in_flight_note(self.verifier)

    # The key of a pending verdict's ``values`` under which a lab tier says what a result can be: [low, high].
    VALUE_RANGE: ClassVar[str] = "value_range"

    @classmethod
    def value_problem(cls, pending_values: Mapping[str, Any] | None, value: float) -> str | None:
        """Why ``value`` cannot answer a request whose pending verdict holds ``pending_values``, or None.

        A lab tier that declares the plausible range of its measurement stores it with the request; one result
        outside it (3500 typed for 3.5 eV, another unit, 1e200) would teach every later run's surrogate nonsense.
        """
        bounds = (pending_values or {}).get(cls.VALUE_RANGE)
        if not isinstance(bounds, list | tuple) or len(bounds) != 2:
            return None
        low, high = (float(b) for b in bounds)
        if low <= value <= high:
            return None
        what = (pending_values or {}).get("measurement")
        return (f"{value!r} is outside [{low:g}, {high:g}], the plausible range the request was made with"
                f"{f' ({what})' if what else ''}; check the number and its unit")


class SpendRecord(_Record):
    """CPU-seconds charged to one tier in one step of one run."""

    run_id: str
    step: int = Field(ge=0)
    tier: Tier
    verifier: str
    cost_s: float = Field(ge=0.0)
    calls: int = Field(ge=0)
