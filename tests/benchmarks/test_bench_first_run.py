"""benchmarks/first_run.py: the seed sweep's config and its argument checks (the runs themselves are the benchmark)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from arl_flows.config import load_config
from benchmarks import first_run


def test_a_seed_config_is_the_default_run_with_another_seed(tmp_path: Path) -> None:
    path = first_run._seed_config(3, tmp_path)
    changed = load_config(path)
    default = load_config(None)
    assert changed.seed == 3 and default.seed == 0
    assert changed.model_dump(exclude={"seed", "options"}) == default.model_dump(exclude={"seed", "options"})
    # The example writes the goal windows out as [] where the built-in default leaves them unset: both mean the
    # scheduler's window.
    ours, theirs = dict(changed.model_dump()["options"] or {}), dict(default.model_dump()["options"] or {})
    assert not ours.pop("goal_windows", None) and not theirs.pop("goal_windows", None) and ours == theirs
    assert tomllib.loads(path.read_text())["seed"] == 3


@pytest.mark.parametrize(("args", "message"), [
    (["--seeds", "a"], "--seeds takes integers"),
    (["--seeds", "-1"], "--seeds takes one or more integers"),
    (["--loads", "99"], "--loads takes 0 to 64"),
    (["--venv", "/nonexistent-venv"], "no bin/arl there"),
])
def test_bad_arguments_are_one_line(args: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        first_run.main(args)
    assert exc.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize(("args", "message"), [
    (["RUN", "--samples", "1"], "--samples needs at least 2"),
    (["RUN", "--budget", "0"], "--budget takes a positive number"),
])
def test_bad_eval_arguments_are_one_line(args: list[str], message: str, capsys) -> None:
    from benchmarks import first_run_eval

    with pytest.raises(SystemExit) as exc:
        first_run_eval.main(args)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_the_eval_of_a_run_without_a_checkpoint_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from benchmarks import first_run_eval
    from storage.ledger import Ledger

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("ARL_DATABASE_URL", url)
    run = Ledger(url).create_run("gap-window", load_config(None).model_dump(mode="json"))
    with pytest.raises(SystemExit) as exc:
        first_run_eval.main([run.id])  # the product's evaluation (arl_flows.eval_set), its error as one line
    assert exc.value.code == 2 and "has no checkpoint yet" in capsys.readouterr().err
