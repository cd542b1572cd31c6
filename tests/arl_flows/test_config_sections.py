"""Every section of a run config refuses an unknown field in one line; a given section merges over the suite's."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from arl_flows.config import ConfigError, RunConfig, _models_in, build_config, load_config
from tests.helpers.toy_suite import ToySuite

SECTIONS = [name for name, f in RunConfig.model_fields.items() if _models_in(f.annotation) and name != "tiers"]


def _error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "run.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_every_section_is_covered() -> None:
    assert {"trainer", "scheduler", "rollout", "hindsight", "streaming", "objective"} <= set(SECTIONS)


@pytest.mark.parametrize("section", SECTIONS)
def test_unknown_field_in_each_section_is_one_line(tmp_path: Path, section: str) -> None:
    extra = '\n[[objective.terms]]\nproperty = "gap"\n' if section == "objective" else ""
    message = _error(tmp_path, f"[{section}]\nbogus_fieldx = 4\n{extra}")
    assert f"{section}.bogus_fieldx: unknown field" in message


@pytest.mark.parametrize("nested", ["trainer.loss", "scheduler.learned"])
def test_unknown_field_in_nested_tables(tmp_path: Path, nested: str) -> None:
    assert f"{nested}.bogus_fieldx: unknown field" in _error(tmp_path, f"[{nested}]\nbogus_fieldx = 4\n")


def test_prior_and_tier_typos(tmp_path: Path) -> None:
    assert "prior.bogus_fieldx: unknown field" in _error(tmp_path, "[prior]\nbogus_fieldx = 4\n")
    assert "tiers.0.verifer: unknown field; did you mean 'verifier'?" in _error(tmp_path, '[[tiers]]\nverifer = "x"\n')


def test_a_close_typo_names_the_field(tmp_path: Path) -> None:
    assert "trainer.group_sise: unknown field; did you mean 'group_size'?" in _error(tmp_path, "[trainer]\ngroup_sise = 4\n")
    assert "did you mean 'n_layer'?" in _error(tmp_path, "[prior]\nn_layr = 3\n")


def test_partial_scheduler_keeps_the_suites_window(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text("[scheduler]\nbudget_per_step = 5.0\nbudget_per_run = 50.0\n[trainer]\ngroup_size = 4\n", encoding="utf-8")
    cfg, default = load_config(path), load_config(None)
    assert cfg.scheduler.budget_per_step == 5.0 and cfg.scheduler.budget_per_run == 50.0
    assert cfg.scheduler.model_dump(exclude={"budget_per_step", "budget_per_run"}) == default.scheduler.model_dump(
        exclude={"budget_per_step", "budget_per_run"})
    assert cfg.trainer.group_size == 4 and cfg.trainer.lr == default.trainer.lr


def test_old_name_overrides_the_suites_new_name() -> None:
    assert load_config(None, overrides={"scheduler": {"objective": "discovery"}}).scheduler.voi_target.value == "discovery"


def test_config_show_reads_back_to_the_same_config(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from arl_flows.cli import app

    given = tmp_path / "run.toml"
    given.write_text("steps = 2\n[scheduler]\nbudget_per_step = 5.0\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["config", "show", "--config", str(given)])
    assert result.exit_code == 0, result.output
    shown = tomllib.loads(result.stdout)
    assert shown["scheduler"]["target_low"] == 3.0 and shown["scheduler"]["budget_per_step"] == 5.0
    again = tmp_path / "resolved.toml"
    again.write_text(result.stdout, encoding="utf-8")
    back, first = load_config(again), load_config(given)
    assert back.model_dump(exclude={"options"}) == first.model_dump(exclude={"options"})
    assert back.suite_options == first.suite_options
    bad = CliRunner().invoke(app, ["config", "show", "--config", str(tmp_path / "missing.toml")])
    assert bad.exit_code != 0 and "does not exist" in str(bad.exception)  # main() prints a UserError as one line


def test_summary_names_steps_whose_rewards_were_all_equal() -> None:
    from arl_flows.cli.train import _flat_reward_note
    from arl_flows.training import StepSummary

    rows = [StepSummary(step=0, reward_mean=0.0, reward_max=0.0), StepSummary(step=1, reward_mean=0.2, reward_max=0.9),
            StepSummary(step=2, reward_mean=0.0, reward_max=0.0)]
    note = _flat_reward_note(rows)
    assert "steps 0, 2" in note and "reward 0.000" in note and "\n" not in note
    assert _flat_reward_note(rows[1:2]) == ""


class NoRewardSuite(ToySuite):
    """The toy suite without its window: a suite that declares no reward of its own."""

    defaults = {**ToySuite.defaults, "scheduler": {"policy": "all", "budget_per_step": 100.0}}


def test_the_window_comes_from_the_suite_and_a_suite_without_one_needs_an_objective(tmp_path: Path) -> None:
    molecules = load_config(None)
    assert (molecules.scheduler.target_low, molecules.scheduler.target_high) == (3.0, 4.0)  # the molecules suite's eV
    toy = build_config({"suite": f"{ToySuite.__module__}:ToySuite"})
    assert (toy.scheduler.target_low, toy.scheduler.target_high) == (2.0, 3.0)
    suite = f"{__name__}:NoRewardSuite"
    message = _error(tmp_path, f'suite = "{suite}"\n')
    assert "declares no reward; give [objective] or the window [scheduler] target_low and target_high" in message
    windowed = build_config({"suite": suite, "scheduler": {"target_low": 1.0, "target_high": 2.0}})
    assert windowed.scheduler.reward_objective().as_window() == (1.0, 2.0, 0.0)
