"""The third newcomer pass (2026-12-08), a user's own suite and tiers: a tier of one's own that raises or returns what a
verdict cannot hold is the plugin's to fix (one line naming its class, file and line, exit code 2, never "a bug in
ARL"); Ctrl-C before a run exists names no empty run."""

from __future__ import annotations

from typing import ClassVar

import pytest

from storage.records import Status, Tier
from tests.helpers.cli_runner import arl, assert_user_error
from verifiers.base import CostModel, Verifier

MODE = {"now": "raise"}


class BrokenTier(Verifier):
    """A user's tier, broken in the way MODE says."""

    name: ClassVar[str] = "broken-tier"
    tier: ClassVar[Tier] = Tier.fast
    version: ClassVar[str] = "1"
    suite: ClassVar[str | None] = None
    cost_model: ClassVar[CostModel] = CostModel(base=0.001)

    def verify_batch(self, candidates):  # noqa: ANN001, ANN201
        mode = MODE["now"]
        if mode == "raise":
            raise RuntimeError("simulated solver crash")
        if mode == "short":
            return []
        if mode == "novalue":
            return [self.verdict(c, Status.ok) for c in candidates]
        value = {"nan": float("nan"), "huge": 1e300}[mode]
        return [self.verdict(c, Status.ok, value=value) for c in candidates]


@pytest.mark.parametrize(("mode", "said"), [
    ("raise", "raised RuntimeError: simulated solver crash"),
    ("nan", "raised ValidationError"),
    ("huge", "value Input should be less than or equal to 1000000000000000 [type=less_than_equal, input_value=1e+300"),
    ("short", "returned 0 verdicts for 1 candidates"),
    ("novalue", "returned an 'ok' verdict without a value (on 'molecules:CCO')"),
])
def test_a_broken_tier_of_ones_own_is_named_not_called_a_bug_in_arl(mode: str, said: str, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("ARL_HOME", str(tmp_path / "home"))
    MODE["now"] = mode
    code, out, err = arl(["verify", "--suite", "molecules", "--answer", "CCO", "--tiers", f"{__name__}:BrokenTier"])
    assert_user_error(code, err, out=out)
    text = " ".join(err.split())
    assert f"verifier broken-tier ({__name__}:BrokenTier" in text and said in text, text
    assert "a bug in ARL" not in text and "traceback in" in text and "errors.pydantic.dev" not in text
    if mode not in ("short", "novalue"):
        assert "test_cli_newcomer3.py:" in text  # the line in the plugin that raised, or that built the verdict


@pytest.mark.parametrize("resume", [False, True])
def test_ctrl_c_before_the_run_started_names_no_empty_run(resume: bool, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """newcomer pass: Ctrl-C while the Prefect server was starting said "run  is marked interrupted; continue with
    `arl run --resume `" (no run existed)."""
    import arl_flows.cli.train as train
    import arl_flows.flows as flows
    from arl_flows import prefect_env

    def interrupted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise KeyboardInterrupt

    monkeypatch.setenv("ARL_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(prefect_env, "start_shielded_server", lambda: None)
    monkeypatch.setattr(train, "_sigterm_as_interrupt", lambda: None)
    monkeypatch.setattr(train, "quiet_prefect", lambda verbose: None)
    monkeypatch.setattr(flows, "run_training", interrupted)
    args = ["run", "--profile", "quick", "--steps", "1"]
    if resume:
        from arl_flows.config import load_config
        from storage.ledger import Ledger

        cfg = load_config(None, "quick")
        run = Ledger(f"sqlite:///{tmp_path / 'home' / 'ledger.db'}").create_run(cfg.name, cfg.model_dump(mode="json"))
        args = ["run", "--resume", run.id]
    code, out, _ = arl(args)
    text = " ".join(out.split())
    assert code == 130 and "run is marked" not in text and "--resume `" not in text
    assert (f"interrupted before run {run.id} continued; it is as it was: `arl run --resume {run.id}`" if resume
            else "interrupted before the run started; nothing was recorded") in text


def test_a_relative_policy_path_beside_the_config_is_pointed_at(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """newcomer pass: `cd /tmp && arl run --config newcomer3/palin.toml` said the policy beside the config was not a model
    directory; the path is read from the current directory, and the message now says so and where the model is."""
    monkeypatch.setenv("ARL_HOME", str(tmp_path / "home"))
    project = tmp_path / "project"
    (project / "policy").mkdir(parents=True)
    (project / "policy" / "config.json").write_text("{}")
    (project / "run.toml").write_text("suite = 'code'\npolicy_path = 'policy'\n")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    code, out, err = arl(["run", "--config", str(project / "run.toml"), "--dry-run"])
    assert_user_error(code, err, out=out)
    text = " ".join(err.split())
    assert "is not a local transformers model directory (no config.json); a relative path is read from the current" in text
    assert f"write policy_path = '{(project / 'policy').resolve()}'" in text


def test_the_dry_run_notes_an_objective_property_no_tier_declares_when_a_tier_declares_nothing(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """newcomer pass: with a tier that declares no `reports`, `property = "lenght"` passed the dry run silently and
    would count as met on every candidate."""
    monkeypatch.setenv("ARL_HOME", str(tmp_path / "home"))
    config = tmp_path / "run.toml"
    config.write_text(f"""tiers = [{{ verifier = "rdkit-eht" }}, {{ verifier = "{__name__}:BrokenTier" }}, {{ verifier = "pyscf-b3lyp" }}]
[objective]
terms = [{{ kind = "window", property = "value", low = 3.0, high = 4.0 }}, {{ kind = "threshold", property = "lenght", above = 1.0 }}]
""")
    code, out, err = arl(["run", "--config", str(config), "--dry-run"])
    assert code == 0, err[-2000:]
    text = " ".join(out.split())
    assert "note: objective property 'lenght' declared by no tier, and broken-tier declares nothing" in text
