"""The verifier interface.

A verifier is one implementation at one tier: a class with a typed params
model, a name, a tier, a version, a cost model and a batch method that
returns exactly one :class:`~storage.records.Verdict` per candidate. The
registry (``verifiers.registry``) records the class; nothing here imports
Prefect.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator

from storage.records import LabRequest, Status, Tier, Verdict, VerifierSpec, params_hash

__all__ = ["Candidate", "Closable", "CostModel", "LabRequester", "NoParams", "RemoteVerifier", "Verifier", "check_batch"]


class NoParams(BaseModel):
    """Params model for verifiers that take none."""

    model_config = ConfigDict(extra="forbid")


class Candidate(BaseModel):
    """What a verifier looks at: a keyed payload (a molecule's text, a program), built by its suite."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(description="Candidate key (cache key in the ledger).")
    suite: str
    payload: str = Field(description="The text to verify, e.g. a trajectory's final answer.")
    task_id: str | None = None
    goal: dict[str, Any] = Field(default_factory=dict)
    valid: bool = Field(
        default=True,
        description="Whether the completion parsed into a well-formed candidate (a molecule, a program of the expected "
        "shape). A run's validity (`reward/validity`, the summary's 'validity' column) is the share of candidates with "
        "valid true. The suite sets it in Suite.completion; a verifier may still find a valid candidate wrong.",
    )
    size: float | None = Field(
        default=None,
        description="The candidate's size as its suite measures it (heavy atoms, characters, expression nodes): what "
        "the cost models and the default scheduler features scale with. None: the suite gives none (read as 0).",
    )
    meta: dict[str, Any] = Field(
        default_factory=dict,
        description="Suite-specific extras the core never reads (e.g. a molecule's canonical SMILES).",
    )

    @model_validator(mode="before")
    @classmethod
    def _typed_from_meta(cls, data: Any) -> Any:
        """A candidate written before ``valid`` and ``size`` were fields carried them in ``meta``: lift them out."""
        if not isinstance(data, dict) or not isinstance(data.get("meta"), dict):
            return data
        meta = dict(data["meta"])
        lifted = {name: meta.pop(name) for name in ("valid", "size") if name in meta}
        if not lifted:
            return data
        return {**data, **{k: v for k, v in lifted.items() if data.get(k) is None}, "meta": meta}


class CostModel(BaseModel):
    """Expected CPU-seconds per candidate: ``base + per_unit * size``.

    ``size`` is suite-specific (``Candidate.size``: e.g. heavy atoms
    of a molecule). ``refine`` fits both numbers to costs measured in the ledger, so
    the scheduler's budget arithmetic follows the machine it runs on.
    """

    base: float = Field(ge=0.0, description="CPU-seconds independent of size.")
    per_unit: float = Field(default=0.0, ge=0.0, description="CPU-seconds per unit of size.")
    exponent: float = Field(default=1.0, gt=0.0, description="Size exponent (3 for DFT-like scaling).")
    measured: int = Field(default=0, ge=0, description="How many measurements the fit used.")

    def expected(self, size: float = 0.0) -> float:
        return self.base + self.per_unit * max(size, 0.0) ** self.exponent

    def refine(self, sizes: Sequence[float], costs: Sequence[float]) -> CostModel:
        """Least-squares refit of base and per_unit from measured (size, cost) pairs."""
        pairs = [(float(s), float(c)) for s, c in zip(sizes, costs, strict=True) if c >= 0]
        if not pairs:
            return self
        if len(pairs) < 3 or len({s for s, _ in pairs}) < 2:
            mean_cost = sum(c for _, c in pairs) / len(pairs)
            mean_size = sum(s for s, _ in pairs) / len(pairs)
            scale = mean_cost / max(self.expected(mean_size), 1e-9)
            return self.model_copy(
                update={"base": self.base * scale, "per_unit": self.per_unit * scale, "measured": len(pairs)}
            )
        xs = [s**self.exponent for s, _ in pairs]
        ys = [c for _, c in pairs]
        n = len(xs)
        mx, my = sum(xs) / n, sum(ys) / n
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = max(sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx, 0.0) if sxx > 0 else 0.0
        base = max(my - slope * mx, 0.0)
        return self.model_copy(update={"base": base, "per_unit": slope, "measured": n})


P = TypeVar("P", bound=BaseModel)


class Verifier(ABC, Generic[P]):
    """Base class of every verifier.

    Subclasses set the class attributes and implement :meth:`verify_batch`.
    ``Params`` is a pydantic model; a verifier's identity in the verdict
    cache is ``(name, version, hash(params))``.
    """

    name: ClassVar[str]
    tier: ClassVar[Tier]
    version: ClassVar[str]
    suite: ClassVar[str | None] = None  # None: applies to any suite
    Params: ClassVar[type[BaseModel]] = NoParams
    cost_model: ClassVar[CostModel] = CostModel(base=0.001)
    description: ClassVar[str] = ""
    origin: ClassVar[str] = "built-in"
    # The names of the values an ok verdict carries (an objective's properties); None: not declared. Where every tier
    # of a ladder declares them, an objective naming none of them but one nearly (a case or spelling slip) is refused.
    reports: ClassVar[frozenset[str] | None] = None

    @classmethod
    def check_definition(cls) -> None:
        """Raise TypeError (one line) if the class is not usable as defined; the registry calls it at registration."""

    def __init__(self, params: P | dict[str, Any] | None = None) -> None:
        if params is None:
            params = {}
        self.params: P = params if isinstance(params, BaseModel) else self.Params.model_validate(params)  # type: ignore[assignment]
        self.costs: CostModel = type(self).cost_model.model_copy()

    # -- identity ---------------------------------------------------------
    @property
    def params_hash(self) -> str:
        return params_hash(self.params)

    def spec(self) -> VerifierSpec:
        return VerifierSpec(
            name=self.name,
            tier=self.tier,
            version=self.version,
            params=self.params.model_dump(mode="json"),
            expected_cost=self.costs.expected(0.0),
            description=self.description or (type(self).__doc__ or "").strip().split("\n")[0],
            origin=self.origin,
        )

    # -- cost -------------------------------------------------------------
    def size(self, candidate: Candidate) -> float:
        """Size of a candidate for the cost model (override per suite)."""
        return float(candidate.size or 0.0)

    def expected_cost(self, candidate: Candidate) -> float:
        """Expected CPU-seconds to verify ``candidate``."""
        return self.costs.expected(self.size(candidate))

    # -- work -------------------------------------------------------------
    @abstractmethod
    def verify_batch(self, candidates: Sequence[Candidate]) -> list[Verdict]:
        """Return exactly one verdict per candidate, in order."""

    def verdict(
        self,
        candidate: Candidate,
        status: Status,
        *,
        value: float | None = None,
        values: dict[str, Any] | None = None,
        uncertainty: float | None = None,
        feedback: str = "",
        cost_s: float = 0.0,
        wall_s: float = 0.0,
        request_id: str | None = None,
    ) -> Verdict:
        """Build a verdict for ``candidate`` stamped with this verifier's identity."""
        return Verdict(
            candidate_key=candidate.key,
            verifier=self.name,
            version=self.version,
            params_hash=self.params_hash,
            tier=self.tier,
            status=status,
            value=value,
            values=values or {},
            uncertainty=uncertainty,
            feedback=feedback,
            cost_s=cost_s,
            wall_s=wall_s,
            request_id=request_id,
        )

    def timed(self) -> _Timer:
        """Context manager measuring CPU and wall seconds of a block."""
        return _Timer()


class _Timer:
    def __enter__(self) -> _Timer:
        self._cpu = time.process_time()
        self._wall = time.perf_counter()
        self.cpu_s = 0.0
        self.wall_s = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.cpu_s = max(time.process_time() - self._cpu, 0.0)
        self.wall_s = max(time.perf_counter() - self._wall, 0.0)


# -- optional capabilities of a verifier ----------------------------------------
# A verifier opts in by defining the method; callers test ``isinstance(v, Closable)`` etc.


@runtime_checkable
class Closable(Protocol):
    """A verifier that holds resources (worker processes, a thread pool): whoever built it calls ``close`` when done."""

    def close(self) -> None: ...


@runtime_checkable
class RemoteVerifier(Protocol):
    """A verifier whose calls run elsewhere (a cluster): ``answer`` waits for one job on one candidate.

    ``submitted_at`` (``time.time()`` when the job was sent) lets a job sent before a restart finish when
    it would have; the asynchronous service calls ``answer`` instead of ``verify_batch`` and does not wait
    for such a call on a stop (it stays recorded in flight and a resume continues it).
    """

    def answer(self, candidate: Candidate, submitted_at: float | None = None) -> Verdict: ...


@runtime_checkable
class LabRequester(Protocol):
    """A verifier whose answers come from outside (a lab): its ``pending`` verdicts become requests to store.

    The tier does not say it: a reference table sits on the lab tier but answers when called.
    """

    def lab_requests(
        self, candidates: Sequence[Candidate], verdicts: Sequence[Verdict], run_id: str | None = None
    ) -> list[LabRequest]: ...


def check_batch(verifier: Verifier, candidates: Sequence[Candidate], verdicts: Sequence[Verdict]) -> None:
    """What a tier's ``verify_batch`` returned keeps the contract: one verdict per candidate, an ``ok`` with its value
    (RuntimeError naming the tier otherwise; the CLI names a tier of one's own by its file and line)."""
    if len(verdicts) != len(candidates):
        raise RuntimeError(f"verifier {verifier.name} returned {len(verdicts)} verdicts for {len(candidates)} "
                           "candidates; verify_batch must return one verdict per candidate, in order")
    if empty := next((v for v in verdicts if v.status == Status.ok and v.value is None), None):
        raise RuntimeError(f"verifier {verifier.name} returned an 'ok' verdict without a value (on "
                           f"{empty.candidate_key[:60]!r}); an ok verdict carries its value, or is 'failed'")

