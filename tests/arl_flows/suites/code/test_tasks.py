"""The bundled tasks: enough of them, well-formed, and every reference solution passes every tier."""

import json

import pytest

from arl_flows.cli import app
from arl_flows.suites.code import CodeExecution, CodeFormat, CodeTests, get_task, load_tasks, make_candidate
from arl_flows.suites.code.tasks import UnknownTask

LIMITS = {"cpu_s": 2, "wall_s": 10}


def test_at_least_sixty_tasks_with_hidden_tests():
    tasks = load_tasks()
    assert len(tasks) >= 60
    assert len({t.id for t in tasks}) == len(tasks)
    for t in tasks:
        assert t.prompt and t.expected_stdout.strip() and t.tests
        assert f"`{t.function}(" in t.prompt, t.id  # the prompt names the function the hidden tests call


def test_get_task_unknown_id():
    assert get_task("factorial").id == "factorial"
    with pytest.raises(UnknownTask, match="arl tasks list --suite code"):
        get_task("no-such-task")


@pytest.mark.slow  # 31 s on 2 loaded cores, about 15 s idle
def test_every_reference_solution_passes_every_tier():
    tasks = load_tasks()
    cands = [make_candidate(t.id, f"<think>reference</think>\n<code>\n{t.reference}</code>") for t in tasks]
    fast = CodeFormat().verify_batch(cands)
    execution = CodeExecution({"limits": LIMITS}).verify_batch(cands)
    tests = CodeTests({"limits": LIMITS, "own_run": False}).verify_batch(cands)
    for t, f, e, h in zip(tasks, fast, execution, tests):
        assert f.status == "ok", (t.id, f.feedback)
        assert (e.status, e.value) == ("ok", 1.0), (t.id, e.feedback)
        assert (h.status, h.value) == ("ok", 1.0), (t.id, h.feedback)


def test_cli_lists_tasks(capsys):
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["tasks", "list", "--suite", "code", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert len(rows) == len(load_tasks()) and set(rows[0]) == {"id", "prompt", "visible_tests", "hidden_tests"}
    plain = CliRunner().invoke(app, ["tasks", "list", "--suite", "code"])
    assert plain.exit_code == 0 and "sum-to-n" in plain.output


def test_cli_unknown_suite_is_user_error():
    from arl_flows.cli._common import UserError
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["tasks", "list", "--suite", "nope"])
    assert isinstance(result.exception, UserError)
    assert "no bundled task list" in str(result.exception)
