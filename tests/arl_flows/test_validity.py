"""A run's validity is the share of well-formed completions no tier calls invalid, in a training step and in ``TieredReward`` alike.

Each test runs one real training step of a suite (its real policy, ladder,
scheduler and ledger) and, once the step has sampled, puts completions whose
well-formedness is known by hand in place of the sampled ones (``sampled`` is
the caller's hook to change the step's state). The step's ``reward/validity``
must be that share; ``TieredReward`` given the same completions must report
the same number.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from storage.ledger import Ledger

# (completion, well-formed?) per suite; as many as the step's batch (prompts_per_step * group_size).
MOLECULES = [("CCO", True), ("c1ccncc1", True), ("C1CC", False), ("not a smiles((", False),
             ("OCC#N", True), ("CC(=O)C", True), ("", False),
             ("CCCl", False)]  # parses, but chlorine is outside the qm9 space: the fast tier calls it invalid
CODE = [("<think>add</think>\n<code>\nprint(1 + 1)\n</code>", True), ("<think>x</think><code>print(1)", False),
        ("plain text, no blocks", False), ("<think>loop</think>\n<code>\nfor i in range(3):\n    print(i)\n</code>", True)]
MATH = [("2*x", True), ("sin(x)+x", True), ("2*x)(", False), ("__import__(1)", False)]


def _share(labelled: list[tuple[str, bool]]) -> float:
    return sum(ok for _, ok in labelled) / len(labelled)


def _step_validity(overrides: dict[str, Any], sqlite_url: str, labelled: list[tuple[str, bool]]) -> tuple[float, list[tuple[Any, str]]]:
    """One training step on the labelled completions: its ``reward/validity`` and the (prompt, completion) pairs."""
    from arl_flows.config import load_config
    from arl_flows.step import StepHooks, run_step
    from arl_flows.training import RunSession

    ledger = Ledger(sqlite_url)
    session = RunSession.open(load_config(overrides=overrides), ledger)
    used: list[tuple[Any, str]] = []

    class KnownCompletions(StepHooks):
        def sampled(self, session, step, state) -> None:  # noqa: ANN001
            assert len(state.trajectories) == len(labelled), "size the run's batch to the labelled completions"
            prompts = {p.id: p for p in state.prompts}
            used.extend((prompts[t.prompt_id], text) for t, (text, _) in zip(state.trajectories, labelled, strict=True))
            state.candidates = [session.suite.completion(prompt, text)[0] for prompt, text in used]

    try:
        run_step(session, 0, KnownCompletions())
    finally:
        session.finish()
    (record,) = ledger.training_steps(session.run.id)
    return record.metrics["reward/validity"], used


def _reward_validity(suite: str, tiers: list[Any], sqlite_url: str, used: list[tuple[Any, str]]) -> float:
    """``TieredReward``'s ``reward/validity`` for the same prompts, goals and completions."""
    from arl_flows.integrations import TieredReward

    with TieredReward(suite, tiers=tiers, policy="all", budget_per_call=1000.0, ledger_url=sqlite_url, history=False) as reward:
        reward([p.text for p, _ in used], [text for _, text in used], goal=[p.goal for p, _ in used])
        run_id = reward.run_id
    return Ledger(sqlite_url).training_steps(run_id)[-1].metrics["reward/validity"]


def test_molecules_validity_is_the_share_of_molecules_that_parse_and_are_in_the_space(flow_home, overrides, sqlite_url) -> None:  # noqa: ANN001
    tiers = [{"verifier": "rdkit-eht"}, {"verifier": "reference-table", "params": {"cost_per_call": 5.0}}]
    config = overrides(steps=1, tiers=tiers, rollout={"prompts_per_step": 2}, hindsight={"enabled": False},
                       scheduler={"policy": "all", "target_low": 3.0, "target_high": 8.0, "budget_per_step": 1000.0})
    validity, used = _step_validity(config, sqlite_url, MOLECULES)
    assert validity == pytest.approx(_share(MOLECULES)) == pytest.approx(0.5)
    assert _reward_validity("molecules", tiers, sqlite_url, used) == pytest.approx(validity)


def test_code_validity_is_the_share_of_well_formed_trajectories(flow_home, tmp_path: Path, sqlite_url: str) -> None:  # noqa: ANN001
    from tests.arl_flows.suites.code.test_code_suite_flow import _code_overrides, _tiny_text_policy

    tiers = [{"verifier": "code-format"}, {"verifier": "code-exec"}]
    config = _code_overrides(_tiny_text_policy(tmp_path / "policy"), tiers=tiers, hindsight={"enabled": False})
    validity, used = _step_validity(config, sqlite_url, CODE)
    assert validity == pytest.approx(_share(CODE)) == pytest.approx(0.5)
    assert _reward_validity("code", tiers, sqlite_url, used) == pytest.approx(validity)


@pytest.fixture
def math_suite(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The example math suite importable by reference (as ``pip install -e examples/math_suite`` would make it)."""
    import sys

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "examples" / "math_suite"))
    yield "arl_math.suite:MathSuite"
    for name in [m for m in sys.modules if m == "arl_math" or m.startswith("arl_math.")]:
        del sys.modules[name]


def test_math_validity_is_the_share_of_answers_that_parse(flow_home, math_suite: str, sqlite_url: str) -> None:  # noqa: ANN001
    tiers = [{"verifier": "arl_math.fast:MathFormat"}, {"verifier": "arl_math.numeric:NumericAgreement"}]
    prior = {"max_steps": 5, "pairs": 20, "n_layer": 1, "n_embd": 16, "n_head": 2, "eval_samples": 4}
    config = {"name": "math-validity", "suite": math_suite, "steps": 1, "tiers": tiers, "options": {"prior": prior},
              "rollout": {"prompts_per_step": 1}, "trainer": {"group_size": 4, "max_new_tokens": 8},
              "hindsight": {"enabled": False}, "scheduler": {"policy": "all", "budget_per_step": 100.0}}
    validity, used = _step_validity(config, sqlite_url, MATH)
    assert validity == pytest.approx(_share(MATH)) == pytest.approx(0.5)
    assert _reward_validity(math_suite, tiers, sqlite_url, used) == pytest.approx(validity)
