"""`arl run --config examples/objective.toml`: the composite objective (gap window x QED x SA) end to end, 1 step."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import pytest

from tests.helpers.cli_runner import run_one_step_in_process

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "objective.toml"


@pytest.mark.slow(seconds=80)  # 129 s on 2 loaded cores, about 64 s idle
def test_composite_objective_runs_end_to_end(prefect_harness, flow_home, overrides, tmp_path: Path) -> None:
    pytest.importorskip("tomli_w")
    from arl_flows.config import load_config

    config = tomllib.loads(EXAMPLE.read_text())
    small = overrides(steps=1, name="objective-run")  # the tiny prior, xTB and the reference table on top
    config |= {k: small[k] for k in ("steps", "name", "prior", "rollout", "trainer", "tiers", "tier_concurrency")}
    config["scheduler"] |= {"budget_per_step": 15.0, "budget_per_run": 15.0}
    rows = run_one_step_in_process(config, tmp_path / "objective.toml")
    objective = load_config(tmp_path / "objective.toml").scheduler.reward_objective()
    assert objective == load_config(EXAMPLE).objective  # the example's objective, untouched
    assert len(rows) == 8
    valid = [e for e in rows if "property:qed" in e.components]  # the fast tier answered ok
    assert valid, "the tiny prior produced no valid molecule"
    for e in valid:
        qed, sa = e.components["property:qed"], e.components["property:sa_score"]  # exact, from the fast tier
        assert 0.0 <= qed <= 1.0 and 1.0 <= sa <= 10.0
        cheap = objective.score({"qed": qed, "sa_score": sa}, value=3.5)  # the reward with the gap in the window
        assert 0.0 <= e.mean <= cheap + 1e-9  # the exact terms cap the reward
        if e.value_std == 0.0:  # the top tier answered: the reward is exact
            exact = objective.score({"qed": qed, "sa_score": sa}, value=e.value_mean)
            assert e.mean == pytest.approx(float(exact), abs=1e-9) and e.std == pytest.approx(0.0, abs=1e-9)
        assert math.isfinite(e.std)


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ("[objective]\nterms = []\n", "objective.terms: List should have at least 1 item"),
        ("[[objective.terms]]\nkind = 'maximize'\nproperty = 'qed'\n", "objective.terms.0: a 'maximize' term on 'qed' needs a transform"),
        ("[[objective.terms]]\nkind = 'window'\nproperty = 'value'\nlow = 4.0\nhigh = 3.0\n", "swap them"),
        ("[[objective.terms]]\nkind = 'peak'\nproperty = 'value'\n", "objective.terms.0.kind: allowed values are 'window'"),
        ("[objective]\nmean = 'harmonic'\nterms = [{kind = 'threshold', property = 'qed', above = 0.5}]\n", "objective.mean"),
        ("[scheduler]\nobjective = 'hits'\n", "objective is now voi_target"),
    ],
)
def test_a_bad_objective_is_one_line_naming_the_field(tmp_path: Path, toml: str, expected: str) -> None:
    from arl_flows.config import ConfigError, load_config

    cfg = tmp_path / "bad.toml"
    cfg.write_text(toml)
    with pytest.raises(ConfigError) as err:
        load_config(cfg)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_an_old_scheduler_objective_still_loads_as_voi_target(tmp_path: Path) -> None:
    from arl_flows.config import load_config

    cfg = tmp_path / "old.toml"
    cfg.write_text("[scheduler]\nobjective = 'discovery'\n")
    config = load_config(cfg)
    assert config.scheduler.voi_target == "discovery" and config.objective is None
    # A partial [scheduler] is merged over the suite's defaults: its window and softness stay.
    assert config.scheduler.reward_objective().as_window() == (3.0, 4.0, 0.5)
