"""Contract tests a suite's author subclasses (the suite counterpart of ``verifiers.testing``).

A suite passes when the core can use it without knowing its problem: the
registry finds it, its options refuse what they do not know, its ladder names
registered tiers cheapest first, it asks non-empty prompts, a completion
becomes a typed candidate whose key is stable (the verdict cache depends on
it), the scheduler can featurize its candidates, and a step's rewards come
back one per trajectory. Subclass :class:`SuiteContract` in a test module::

    from arl_flows.suites.testing import SuiteContract

    class TestMathSuite(SuiteContract):
        suite_class = MathSuite
        completions = [("2*x", True), ("x**2+1", True), ("2*x+", False)]

``completions`` are texts a policy might write for the first prompt, each with whether it parses
into a well-formed candidate. Nothing here runs at import; ``pytest`` is needed only by the test
modules that subclass it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import numpy as np
import pytest
from pydantic import BaseModel

from arl_flows.config import RunConfig, build_config
from arl_flows.suites import Suite, get_suite
from storage.records import Prompt, RewardEstimate, Trajectory, Turn, tier_rank
from verifiers import Candidate, Closable, Verifier
from verifiers.registry import VerifierRegistry

__all__ = ["SuiteContract"]


class SuiteContract:
    """The promises every suite keeps; a subclass supplies the suite and a few completions.

    Required: ``suite_class`` and ``completions`` (two distinct well-formed ones and one that is not).
    Optional: ``options`` (the run config's ``[options]``), ``config`` (other run-config fields),
    ``by_entry_point`` (False for a suite not installed in the test environment), and
    :meth:`tier_classes` (tiers to register for the ladder check when their entry points are not installed).
    """

    suite_class: ClassVar[type[Suite]]
    options: ClassVar[dict[str, Any]] = {}
    config: ClassVar[dict[str, Any]] = {}
    completions: ClassVar[Sequence[tuple[str, bool]]] = ()
    by_entry_point: ClassVar[bool] = True
    """True: an installed ``arl.suites`` entry point advertises the suite, so ``get_suite(name)`` finds it."""

    def tier_classes(self) -> list[type[Verifier[Any]]]:
        """The suite's tiers, when no installed entry point advertises them (by default: none to add)."""
        return []

    @property
    def reference(self) -> str:
        """How a run config names the suite: its registered name, or its ``module:Class``."""
        cls = self.suite_class
        return cls.name if self.by_entry_point else f"{cls.__module__}:{cls.__qualname__}"

    def run_config(self, **fields: Any) -> RunConfig:
        data: dict[str, Any] = {"suite": self.reference, "options": dict(self.options)} | dict(self.config) | fields
        if self.suite_class.needs_policy_path:
            data.setdefault("policy_path", "(owned by the caller)")
        return build_config(data, "contract")

    # -- fixtures: one suite per test class ---------------------------------------------------------
    @pytest.fixture(scope="class")
    def suite(self) -> Suite:
        return self.suite_class(self.run_config())

    @pytest.fixture(scope="class")
    def ladder(self) -> Iterator[VerifierRegistry]:
        """A registry of the suite's tiers: the installed entry points and :meth:`tier_classes`."""
        tiers = VerifierRegistry()  # not the global one
        added = self.tier_classes()
        origins = [cls.origin for cls in added]  # registering records the origin on the class: put it back after
        try:
            for cls in added:
                tiers.register(cls, origin="entry point")
            yield tiers
        finally:
            for cls, origin in zip(added, origins, strict=True):
                cls.origin = origin

    @pytest.fixture(scope="class")
    def written(self, suite: Suite) -> tuple[Prompt, list[tuple[Candidate, str, list[Turn]]]]:
        """The first prompt and what ``completion`` makes of each of ``completions``."""
        valid = [text for text, ok in self.completions if ok]
        assert len(set(valid)) >= 2 and not all(ok for _, ok in self.completions), (
            "completions needs two distinct well-formed texts and one that is not"
        )
        prompt = suite.prompts(0)[0]
        return prompt, [suite.completion(prompt, text) for text, _ in self.completions]

    # -- the contract ------------------------------------------------------------------------------
    def test_the_registry_finds_it_by_its_name(self) -> None:
        cls = self.suite_class
        assert isinstance(cls.name, str) and cls.name and cls.name == cls.name.strip(), "name: a non-empty word"
        assert cls.description, "description: one line, shown by `arl suites list`"
        assert get_suite(self.reference) is cls

    def test_options_refuse_unknown_fields(self) -> None:
        options_model: type[BaseModel] = self.suite_class.Options
        forbids = options_model.model_config.get("extra") == "forbid"
        assert forbids, "Options needs model_config = ConfigDict(extra='forbid')"
        with pytest.raises(ValueError, match="no_such_option"):
            self.run_config(options=dict(self.options) | {"no_such_option": 1})

    def test_the_ladder_names_registered_tiers_cheapest_first(self, suite: Suite, ladder: VerifierRegistry) -> None:
        ranks = []
        for rung in suite.config.tiers:
            cls = ladder.get(rung.verifier)
            owner = getattr(cls, "suite", None)
            assert owner in (None, suite.name), f"{rung.verifier} is a tier of suite {owner!r}"
            made = cls(rung.params)  # the suite's params for it validate (no worker starts before a batch)
            if isinstance(made, Closable):
                made.close()
            ranks.append(tier_rank(cls.tier))
        assert ranks == sorted(ranks), "list the ladder cheapest tier first"

    def test_prompts_are_non_empty(self, suite: Suite) -> None:
        for step in (0, 1):
            prompts = suite.prompts(step)
            assert prompts and len(prompts) == suite.config.rollout.prompts_per_step
            for prompt in prompts:
                assert isinstance(prompt, Prompt) and prompt.id and prompt.text.strip() and prompt.suite == suite.name

    def test_a_completion_is_a_typed_candidate(self, suite: Suite, written: Any) -> None:
        _prompt, made = written
        for (text, valid), (candidate, answer, turns) in zip(self.completions, made, strict=True):
            assert isinstance(candidate, Candidate) and candidate.suite == suite.name
            assert isinstance(candidate.key, str) and candidate.key
            assert isinstance(answer, str)
            assert turns and all(isinstance(t, Turn) for t in turns) and turns[-1].role == "assistant"
            assert candidate.valid is valid, (text[:80], candidate.valid)
            size = candidate.size  # None: the suite does not size its candidates (cost models see 0)
            sized = size is None or (isinstance(size, int | float) and math.isfinite(size) and size >= 0)
            assert sized, (text[:80], size)

    def test_keys_are_stable(self, suite: Suite, written: Any) -> None:
        """The verdict cache is keyed on them: the same text for the same prompt is the same candidate,
        in another suite object (another process), and the stored answer verified outside a run (``arl verify``)
        is that candidate again; distinct well-formed texts are distinct candidates."""
        prompt, made = written
        again = self.suite_class(self.run_config())
        for (text, _), (candidate, answer, _turns) in zip(self.completions, made, strict=True):
            assert suite.completion(prompt, text)[0].key == candidate.key
            assert again.completion(prompt, text)[0].key == candidate.key
            assert suite.candidate(answer, prompt.goal).key == candidate.key, (text[:80], answer[:80])
        valid_keys = {c.key for (_text, ok), (c, _a, _t) in zip(self.completions, made, strict=True) if ok}
        assert len(valid_keys) == len({text for text, ok in self.completions if ok})

    def test_the_scheduler_can_featurize_every_candidate(self, suite: Suite, written: Any) -> None:
        features = [np.asarray(suite.featurize(candidate)) for candidate, _a, _t in written[1]]
        assert all(f.ndim == 1 and np.isfinite(f).all() for f in features), features  # empty: no features, the prior alone
        assert len({f.shape for f in features}) == 1, "every candidate needs features of the same length"

    def test_a_step_gives_one_reward_per_trajectory(self, suite: Suite, ladder: VerifierRegistry, written: Any) -> None:
        prompt, made = written
        candidates = [candidate for candidate, _a, _t in made]
        trajectories = [
            Trajectory(prompt_id=prompt.id, step=0, group_id="g0", turns=turns, final_answer=answer,
                       candidate_key=c.key)
            for c, answer, turns in made
        ]
        first = suite.config.tiers[0]  # the cheapest tier's real verdicts, with what the suite's options add
        tier_class = ladder.get(first.verifier)
        tier = tier_class(suite.verifier_params(tier_class, dict(first.params)))
        try:
            verdicts = {c.key: [v] for c, v in zip(candidates, tier.verify_batch(candidates), strict=True)}
        finally:
            if isinstance(tier, Closable):
                tier.close()
        estimates = [RewardEstimate(trajectory_id=t.id, mean=0.0, std=1.0) for t in trajectories]
        rewards = suite.rewards(trajectories, candidates, verdicts, estimates)
        ids = [r.trajectory_id for r in rewards]
        assert ids == [t.id for t in trajectories], "one estimate per trajectory, in order"
        for reward in rewards:
            assert isinstance(reward, RewardEstimate) and math.isfinite(reward.mean) and math.isfinite(reward.std)

    def test_reports_can_name_every_candidate(self, suite: Suite, written: Any) -> None:
        for candidate, answer, _turns in written[1]:
            shown = suite.show_candidate(candidate.key, answer)
            assert isinstance(shown, str)
