"""Contract tests a verifier tier's author subclasses (as optuna ships ``optuna.testing.pytest_storages``).

A tier passes when it keeps the promises the rest of ARL relies on: the
registry can record it, its params refuse what they do not know, every input
gives one verdict with a status, only ``ok`` carries a value, bad input is
``invalid`` (never an exception), a repeat gives the same answers, a batch
answers as its candidates one by one do, and a worker process can rebuild it
from its name and params. Subclass :class:`VerifierContract` in a test module,
give it the verifier and a small table of cases, and pytest runs the checks::

    from verifiers.testing import Case, VerifierContract

    class TestCrippenLogP(VerifierContract):
        verifier_class = CrippenLogPVerifier
        cases = [Case("CCO", "ok", low=-1.0, high=0.0), Case("CCCl", "invalid")]
        bad_payloads = ["", "not a molecule"]

        def make_candidate(self, case):
            return make_candidate(case.payload)

Nothing here runs at import; ``pytest`` is needed only by the test modules that subclass it.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, ValidationError

from storage.records import Status, Tier, Verdict, VerifierSpec
from verifiers.base import Candidate, Closable, CostModel, Verifier
from verifiers.isolation import IsolatedVerifier
from verifiers.registry import VerifierRegistry, registry

__all__ = ["Case", "VerifierContract"]


@dataclass(frozen=True)
class Case:
    """One row of a tier's table: a payload (and the goal it is judged against) and the verdict expected.

    ``status`` is the expected status; for ``ok``, ``low``/``high`` bound the value (None: any finite value).
    """

    payload: str
    status: Status | str
    low: float | None = None
    high: float | None = None
    goal: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))
        if self.status != Status.ok and (self.low is not None or self.high is not None):
            raise ValueError(f"case {self.payload[:40]!r}: only an 'ok' case bounds a value")


def _answer(verdict: Verdict) -> tuple[Any, ...]:
    """What a verdict says about its candidate (not when, nor how long it took, nor a lab's request id)."""
    return (verdict.candidate_key, verdict.status, verdict.value)


def _same_answer(a: Verdict, b: Verdict, rel: float) -> bool:
    if (a.candidate_key, a.status) != (b.candidate_key, b.status):
        return False
    x, y = a.value, b.value  # the value only: ``values`` may hold measurements (CPU-seconds) that vary
    return (x is None) == (y is None) and (x is None or math.isclose(x, y, rel_tol=rel, abs_tol=rel))


class VerifierContract:
    """The promises every tier keeps; a subclass supplies the tier and its table.

    Required: ``verifier_class``, ``cases`` (at least one ``invalid`` case and one that is not) and
    :meth:`make_candidate`. Optional: ``params`` (the params the checks build it with), ``bad_payloads``
    (inputs that must come back ``invalid``), ``by_entry_point`` (False for a tier not installed in
    the test environment), ``tolerance`` (relative tolerance of a repeated value: 0 for exact).
    """

    verifier_class: ClassVar[type[Verifier[Any]]]
    params: ClassVar[dict[str, Any]] = {}
    cases: ClassVar[Sequence[Case]] = ()
    bad_payloads: ClassVar[Sequence[str]] = ("",)
    by_entry_point: ClassVar[bool] = True
    """True: an installed ``arl.verifiers`` entry point advertises the tier, so ``registry.get(name)`` finds it."""
    tolerance: ClassVar[float] = 0.0

    def make_candidate(self, case: Case) -> Candidate:
        """The candidate the tier's suite builds for ``case`` (its key, payload, goal, meta)."""
        raise NotImplementedError(f"{type(self).__name__} must define make_candidate(case)")

    # -- fixtures: one verifier and one batch per test class ----------------------------------------
    @pytest.fixture(scope="class")
    def verifier(self) -> Iterator[Verifier[Any]]:
        made = self.verifier_class(dict(self.params))
        try:
            yield made
        finally:
            if isinstance(made, Closable):
                made.close()

    @pytest.fixture(scope="class")
    def table(self, verifier: Verifier[Any]) -> tuple[list[Candidate], list[Verdict]]:
        """The table's candidates and the verdicts of one batch over all of them."""
        assert any(c.status != Status.invalid for c in self.cases), "the table needs a case the tier answers"
        assert any(c.status == Status.invalid for c in self.cases), "the table needs an 'invalid' case"
        candidates = [self.make_candidate(case) for case in self.cases]
        return candidates, verifier.verify_batch(candidates)

    # -- the contract ------------------------------------------------------------------------------
    def test_metadata_is_what_the_registry_records(self) -> None:
        cls = self.verifier_class
        assert isinstance(cls.name, str) and cls.name and cls.name == cls.name.strip(), "name: a non-empty word"
        assert isinstance(cls.version, str) and cls.version, "version: a non-empty string (part of the cache key)"
        assert Tier(cls.tier) == cls.tier, "tier: one of storage.records.Tier"
        assert isinstance(cls.cost_model, CostModel), "cost_model: a verifiers.CostModel"
        origin = cls.origin  # registering records the origin on the class: put it back for other tests
        try:
            fresh = VerifierRegistry()  # not the global one
            assert fresh.load_reference(f"{cls.__module__}:{cls.__qualname__}") is cls
        finally:
            cls.origin = origin
        if self.by_entry_point:
            assert registry.get(cls.name) is cls, f"the entry point named {cls.name!r} loads another class"

    def test_spec_names_the_tier(self, verifier: Verifier[Any]) -> None:
        spec = verifier.spec()
        assert isinstance(spec, VerifierSpec)
        assert (spec.name, spec.tier, spec.version) == (verifier.name, verifier.tier, verifier.version)
        assert spec.description, "give the class a docstring or a description: `arl tiers list` shows it"
        for case in [*self.cases, *(Case(p, Status.invalid) for p in self.bad_payloads)]:
            cost = verifier.expected_cost(self.make_candidate(case))  # the scheduler prices every candidate
            assert math.isfinite(cost) and cost >= 0.0, (case.payload[:80], cost)

    def test_params_refuse_unknown_fields(self) -> None:
        params_model: type[BaseModel] = self.verifier_class.Params
        forbids = params_model.model_config.get("extra") == "forbid"
        assert forbids, "Params needs model_config = ConfigDict(extra='forbid')"
        with pytest.raises(ValidationError):
            self.verifier_class(dict(self.params) | {"no_such_param": 1})

    def test_every_case_gives_one_verdict_with_its_status(
        self, verifier: Verifier[Any], table: tuple[list[Candidate], list[Verdict]]
    ) -> None:
        candidates, verdicts = table
        assert len(verdicts) == len(candidates), "verify_batch returns exactly one verdict per candidate"
        for case, candidate, verdict in zip(self.cases, candidates, verdicts, strict=True):
            assert isinstance(verdict, Verdict)
            assert verdict.candidate_key == candidate.key, "verdicts come back in the candidates' order"
            assert (verdict.verifier, verdict.version, verdict.tier) == (verifier.name, verifier.version, verifier.tier)
            assert verdict.params_hash == verifier.params_hash
            assert verdict.status == case.status, (case.payload[:80], verdict.status, verdict.feedback)
            assert verdict.cost_s >= 0.0 and verdict.wall_s >= 0.0

    def test_only_ok_carries_a_value(self, table: tuple[list[Candidate], list[Verdict]]) -> None:
        for case, verdict in zip(self.cases, table[1], strict=True):
            if verdict.status == Status.ok:
                carries = verdict.value is not None or bool(verdict.values)
                assert carries, f"{case.payload[:80]!r}: ok without a value"
                if verdict.value is not None:
                    assert math.isfinite(verdict.value)
                    low = -math.inf if case.low is None else case.low
                    high = math.inf if case.high is None else case.high
                    assert low <= verdict.value <= high, (case.payload[:80], verdict.value, (case.low, case.high))
            else:
                assert verdict.value is None
                assert verdict.feedback, f"{case.payload[:80]!r}: a {verdict.status.value} verdict says why in feedback"

    def test_bad_input_is_invalid_not_an_exception(self, verifier: Verifier[Any]) -> None:
        bad = [self.make_candidate(Case(payload, Status.invalid)) for payload in self.bad_payloads]
        verdicts = verifier.verify_batch(bad)  # raising here is the failure this check is for
        assert [v.status for v in verdicts] == [Status.invalid] * len(bad), [v.feedback for v in verdicts]
        assert all(v.feedback for v in verdicts)

    def test_a_repeat_gives_the_same_answers(
        self, verifier: Verifier[Any], table: tuple[list[Candidate], list[Verdict]]
    ) -> None:
        candidates, first = table
        again = verifier.verify_batch(candidates)
        for a, b in zip(first, again, strict=True):
            assert _same_answer(a, b, self.tolerance), (_answer(a), _answer(b))

    def test_a_batch_answers_as_its_candidates_one_by_one(
        self, verifier: Verifier[Any], table: tuple[list[Candidate], list[Verdict]]
    ) -> None:
        candidates, batch = table
        for candidate, in_batch in zip(candidates, batch, strict=True):
            (alone,) = verifier.verify_batch([candidate])
            assert _same_answer(alone, in_batch, self.tolerance), (_answer(alone), _answer(in_batch))

    def test_a_worker_process_can_rebuild_it(
        self, verifier: Verifier[Any], table: tuple[list[Candidate], list[Verdict]]
    ) -> None:
        """A process pool or a Dask worker gets the class by reference, the params as JSON, candidates and
        verdicts pickled; an isolated tier's work function and its prepared arguments are pickled too."""
        cls, params = pickle.loads(pickle.dumps((self.verifier_class, verifier.params.model_dump(mode="json"))))
        rebuilt = cls(params)
        try:
            assert rebuilt.params_hash == verifier.params_hash and rebuilt.spec() == verifier.spec()
        finally:
            if isinstance(rebuilt, Closable):
                rebuilt.close()
        candidates, verdicts = table
        assert pickle.loads(pickle.dumps(candidates)) == candidates
        assert [_answer(v) for v in pickle.loads(pickle.dumps(verdicts))] == [_answer(v) for v in verdicts]
        assert [Verdict.model_validate_json(v.model_dump_json()) for v in verdicts] == verdicts
        if isinstance(verifier, IsolatedVerifier):
            for candidate in candidates:
                prepared = verifier.prepare(candidate)
                if not isinstance(prepared, Verdict):
                    pickle.dumps((type(verifier).work_function, prepared))
