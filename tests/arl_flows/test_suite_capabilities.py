"""A suite is a small core plus optional capabilities; reading a config looks the suite up, the models only check data."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arl_flows.cli import app
from arl_flows.cli._common import UserError
from arl_flows.config import ConfigError, RunConfig, build_config, standalone_suite
from arl_flows.suites import Calibration, Hindsight, Lab, Prior, Report, Rerank, Suite, get_suite
from arl_flows.suites.capabilities import (
    Commands,
    Disagreements,
    GoalColumns,
    GoalWindow,
    GroundTruth,
    Profiles,
    flag_disagreements,
    goal_columns,
    goal_from_ground_truth,
    objective_window,
    suite_commands,
    suite_profiles,
)
from storage.records import Prompt, RewardEstimate, Status, Tier, Turn, Verdict
from verifiers import Candidate

CAPABILITIES = (Hindsight, Lab, Rerank, Report, Prior, Calibration, Commands, Profiles, Disagreements, GoalColumns, GroundTruth, GoalWindow)
LADDER = [{"verifier": "rdkit-eht"}, {"verifier": "reference-table"}]


class CoreSuite(Suite):
    """Only the required core: a name, prompts and completions."""

    name = "core-only"
    # The core has no default reward: the suite names one (here a window on the top tier's value).
    defaults = {"tiers": LADDER, "scheduler": {"policy": "all", "target_low": 0.0, "target_high": 1.0}}

    def prompts(self, step: int) -> list[Prompt]:
        return [Prompt(id=f"core:{step}", suite=self.name, text="say something")]

    def completion(self, prompt: Prompt, text: str) -> tuple[Candidate, str, list[Turn]]:
        return Candidate(key=f"core-{text}", suite=self.name, payload=text), text, []


REF = f"{__name__}:CoreSuite"


def _offered(suite: object) -> set[str]:
    return {p.__name__ for p in CAPABILITIES if isinstance(suite, p)}


def test_builtin_suites_offer_the_capabilities_they_define() -> None:
    assert _offered(get_suite("molecules")) == {p.__name__ for p in CAPABILITIES} - {"GoalColumns"}
    assert _offered(standalone_suite("code")) == {"Hindsight", "Commands", "GoalColumns", "GroundTruth"}


def test_a_suite_with_the_core_only_loads_and_offers_no_capability() -> None:
    suite = standalone_suite(REF)
    assert isinstance(suite, CoreSuite) and _offered(suite) == set()
    assert [t.verifier for t in suite.config.tiers] == ["rdkit-eht", "reference-table"]
    assert suite.candidate("hello").payload == "hello"


def test_a_core_only_suite_gets_what_fits_any_problem_for_the_capabilities_it_lacks() -> None:
    suite = standalone_suite(REF)
    assert suite_commands(CoreSuite) == [] and suite_profiles(CoreSuite) == {} and goal_columns(CoreSuite) == ()
    assert goal_from_ground_truth(CoreSuite, {"k": 1}) == {"k": 1} and objective_window(CoreSuite, {"k": 1}) is None
    with pytest.raises(ValueError, match="mapping of its goal keys, got int"):
        goal_from_ground_truth(CoreSuite, 3)
    # Without Disagreements: a failing simulation tier against a passing high-fidelity one is flagged.
    a, b = suite.candidate("a"), suite.candidate("b")

    def verdict(cand: Candidate, tier: Tier, passed: bool) -> Verdict:
        return Verdict(candidate_key=cand.key, verifier=f"v-{tier.value}", version="1", params_hash="p", tier=tier,
                       status=Status.ok, value=1.0 if passed else 0.0)  # fmt: skip

    by_key = {
        a.key: [verdict(a, Tier.simulation, True), verdict(a, Tier.high_fidelity, True)],
        b.key: [verdict(b, Tier.simulation, False), verdict(b, Tier.high_fidelity, True)],
    }
    estimates = [RewardEstimate(trajectory_id=f"t{i}", mean=0.5, std=0.1) for i in range(2)]
    out = flag_disagreements(suite, None, [a, b], by_key, estimates)
    assert out[0].disagreement is None and out[1].disagreement.kind == "lower_fail_upper_pass"


def test_rerank_says_in_one_line_that_the_suite_cannot_sample(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"prompt": "anything"}) + "\n", encoding="utf-8")
    out = CliRunner().invoke(app, ["rerank", "--suite", REF, "--input", str(path), "--ledger", f"sqlite:///{tmp_path / 'l.db'}"])
    assert isinstance(out.exception, UserError), out.output
    assert "suite needs candidates" in str(out.exception) and "\n" not in str(out.exception)


def test_the_models_check_data_and_build_config_brings_the_suite() -> None:
    # The model alone does not look the suite up: without the suite's ladder the data has none.
    with pytest.raises(ValueError, match="tiers: a ladder needs at least two verifiers"):
        RunConfig.model_validate({"suite": "molecules"})
    assert RunConfig.model_validate({"suite": "no-such-suite", "tiers": LADDER}).suite == "no-such-suite"
    assert [t.verifier for t in build_config({"suite": "molecules"}).tiers][-1] == "pyscf-b3lyp"
    with pytest.raises(ConfigError, match=r"^here: suite: no suite named 'no-such-suite'"):
        build_config({"suite": "no-such-suite"}, "here")
    with pytest.raises(ConfigError, match=r"^here: options\.priorr: unknown field; did you mean 'prior'\?$"):
        build_config({"options": {"priorr": {}}}, "here")


def test_reading_a_config_and_the_cli_import_no_torch() -> None:
    code = (
        "import sys\n"
        "from arl_flows.cli import app\n"
        "from arl_flows.config import load_config\n"
        "load_config()\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
