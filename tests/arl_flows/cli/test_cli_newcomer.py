"""What a newcomer sees first: defaults of `arl verify`, `arl tiers show`, `arl tasks list`, and docs that agree with them."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from arl_flows.cli import app
from arl_flows.suites.code import get_task


def _invoke(args: list[str]):  # noqa: ANN202
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, (result.output, result.exception)
    return result


# ---------------------------------------------------------------- arl verify


def test_verify_without_tiers_runs_the_suites_ladder_and_says_so(tmp_path: Path) -> None:
    good = tmp_path / "good.txt"
    good.write_text(f"<think>add them up</think>\n<code>\n{get_task('sum-to-n').reference}\n</code>\n")
    args = ["verify", "--suite", "code", "--task", "sum-to-n", "--answer-file", str(good)]
    rows = json.loads(_invoke([*args, "--json"]).stdout)
    assert [r["verifier"] for r in rows] == ["code-format", "code-exec", "code-tests"]
    assert all(r["status"] == "ok" for r in rows)
    plain = _invoke(args).stdout
    assert "the code suite's ladder (code-format, code-exec, code-tests)" in plain


def test_a_tier_name_selects_the_ladders_rung_with_its_params() -> None:
    from arl_flows.cli.verify import _resolve_verifiers
    from arl_flows.config import standalone_suite

    suite = standalone_suite("molecules")
    (top,) = [t for t in suite.config.tiers if t.verifier == "pyscf-b3lyp"]
    chosen = _resolve_verifiers(suite, "high_fidelity")
    # With the run's chemistry space passed down (the default space: the params hash is unchanged).
    # The default DFT tier names no basis: it gets the space's (qm9: 6-31G, the basis every published run had).
    expected = {"basis": "6-31g"} | top.params | {"constraints": {"space": "qm9"}}
    assert [(cls.name, params) for cls, params in chosen] == [("pyscf-b3lyp", expected)]
    # A tier the ladder leaves out still finds the suite's verifiers registered at it.
    # (Every one registered in this process: a test that imported benchmarks.counting_tier earlier added its own.)
    from storage.records import Tier
    from verifiers import registry

    at_lab = {cls.name for cls in registry.for_suite("molecules") if cls.tier == Tier.lab}
    assert {cls.name for cls, _ in _resolve_verifiers(suite, "lab")} == at_lab >= {"lab", "reference-table"}
    # A verifier by name runs with its own defaults, in the run's chemistry space.
    assert _resolve_verifiers(suite, "reference-or-dft")[0][1] == {"constraints": {"space": "qm9"}}


def test_verify_with_fast_tiers_runs_only_the_fast_tier() -> None:
    rows = json.loads(_invoke(["verify", "--suite", "molecules", "--answer", "CCO", "--tiers", "fast", "--json"]).stdout)
    assert [r["verifier"] for r in rows] == ["rdkit-eht"]


# ---------------------------------------------------------------- the default ledger has one name

ROOT = Path(__file__).resolve().parents[3]


def test_every_help_and_doc_names_the_ledger_the_settings_open() -> None:
    from storage.settings import Settings

    assert Settings(home=Path.home() / ".arl").ledger_url == f"sqlite:///{Path.home() / '.arl' / 'ledger.db'}"
    # The help names ARL_HOME, not a fixed path: the default follows it.
    for command in (["rerank", "--help"], ["runs", "list", "--help"], ["db", "check", "--help"], ["run", "--help"], ["lab", "list", "--help"]):
        text = " ".join(_invoke(command).stdout.replace("│", " ").split())
        assert "else ledger.db in $ARL_HOME, which is ~/.arl unless set" in text and "~/.arl/ledger.db" not in text, command
    for doc in ["README.md", "examples/trl_grpo.py", *(f"arl_flows/{m}.py" for m in ("integrations", "tiered_reward", "best_of_n", "verl")), *map(str, (ROOT / "docs").glob("*.md"))]:
        assert "arl.db" not in (ROOT / doc).read_text(encoding="utf-8"), doc
    assert "`ARL_DATABASE_URL` | `sqlite:///$ARL_HOME/ledger.db`" in (ROOT / "README.md").read_text(encoding="utf-8")


# ---------------------------------------------------------------- the examples use the default ladder's basis


def test_the_molecule_examples_use_the_default_ladders_dft_basis() -> None:
    import tomllib

    from arl_flows.config import build_config

    def basis(tiers: list[dict]) -> str:
        (dft,) = [t for t in tiers if t["verifier"] == "pyscf-b3lyp"]
        return dft.get("params", {}).get("basis", "")

    from arl_flows.suites.molecules.spaces import get_space

    # The default ladder names no basis and gets the space's; the examples name that one, or none (molecules.toml is
    # the default run written out, so it names none, as the built-in ladder: benchmarks/first_run.py relies on it).
    space_basis = get_space("qm9").dft_basis
    default = basis(build_config({"suite": "molecules"}).model_dump()["tiers"]) or space_basis
    for name in ("molecules.toml", "objective.toml"):
        named = basis(tomllib.loads((ROOT / "examples" / name).read_text(encoding="utf-8"))["tiers"])
        assert (named or space_basis) == default, name


# ---------------------------------------------------------------- "quick" means one thing


def test_the_readme_and_run_help_say_the_same_about_the_quick_profile() -> None:
    promise = "about a minute on an idle machine"
    help_text = " ".join(_invoke(["run", "--help"]).stdout.replace("│", " ").split())
    assert promise in help_text
    lines = [line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines() if "arl run --profile quick " in line]
    assert lines and all(promise in line for line in lines), lines


def test_the_quick_profile_keeps_the_configs_cheap_tiers_and_drops_only_dft(tmp_path: Path) -> None:
    """A user's own cheap tier (the property the objective reads) stays in the quick ladder, with its params;
    DFT gives way to the reference table (newcomer pass: crippen-logp vanished and "maximize logp" scored 1)."""
    from arl_flows.config import load_config

    config = tmp_path / "run.toml"
    config.write_text(
        '[[tiers]]\nverifier = "rdkit-eht"\n[[tiers]]\nverifier = "tests.helpers.fault_targets:ExactMassVerifier"\n'
        '[[tiers]]\nverifier = "gfn2-xtb"\nparams = { threads = 1, optimize = true }\n[[tiers]]\nverifier = "pyscf-b3lyp"\n'
    )
    quick = load_config(config, profile="quick")
    assert [(t.verifier, t.params) for t in quick.tiers] == [
        ("rdkit-eht", {}), ("tests.helpers.fault_targets:ExactMassVerifier", {}), ("gfn2-xtb", {"threads": 1, "optimize": True}),
        ("reference-table", {"cost_per_call": 12.0})]
    assert [t.verifier for t in load_config(profile="quick").tiers] == ["rdkit-eht", "gfn2-xtb", "reference-table"]
    only_dft = tmp_path / "dft.toml"
    only_dft.write_text('[[tiers]]\nverifier = "pyscf-b3lyp"\n[[tiers]]\nverifier = "reference-or-dft"\n')
    assert [t.verifier for t in load_config(only_dft, profile="quick").tiers] == ["rdkit-eht", "gfn2-xtb", "reference-table"]


# ---------------------------------------------------------------- arl tasks list: one line per task


def test_tasks_list_prints_one_line_per_task_and_long_prints_whole_prompts() -> None:
    from arl_flows.suites.code.sources import TaskSource, load_source

    tasks = load_source(TaskSource(source="humaneval")).tasks
    short = _invoke(["tasks", "list", "--source", "humaneval"]).stdout.splitlines()
    assert len([line for line in short if line.startswith("HumanEval/")]) == len(tasks)  # one line per task
    assert "skipped 1 records: HumanEval/34" in " ".join(short)  # and a line for the one skipped, with its reason
    first = next(line for line in short if line.startswith(tasks[0].id + " "))
    assert "Check if in given list of numbers" in first and f"{len(tasks[0].visible_tests)}+{len(tasks[0].tests)}" in first
    long = _invoke(["tasks", "list", "--source", "humaneval", "--long"]).stdout
    assert len(long.splitlines()) > 5 * len(tasks) and "def has_close_elements" in long


def test_the_examples_and_tier_docs_use_the_current_verify_syntax() -> None:
    docs = [ROOT / "docs" / "tiers.md", *(ROOT / "examples").rglob("README.md")]
    for doc in docs:
        for line in doc.read_text(encoding="utf-8").splitlines():
            if "arl verify" in line:
                assert not any(old in line for old in ("--smiles", "--task ", "--goal-low", "--goal-high")), (doc, line)


# ---------------------------------------------------------------- arl tiers show: a parameter table


def test_tiers_show_prints_a_parameter_table_and_json_keeps_the_schema() -> None:
    from arl_flows.suites.molecules.dft import DFTParams

    from arl_flows.cli._common import console

    # One row per parameter, unwrapped. The console reads COLUMNS once, when it is made, so set its width itself.
    old = console._width
    console.width = 200
    try:
        out = _invoke(["tiers", "show", "pyscf-b3lyp"]).stdout
    finally:
        console._width = old
    assert "params_schema" not in out and '"properties"' not in out
    rows = {cells[0]: cells[1:] for line in out.splitlines()
            if len(cells := [c.strip() for c in line.strip("│┃ ").split("│")]) == 4}  # fmt: skip
    assert rows["basis"] == ["str", '"6-31G*"', DFTParams.model_fields["basis"].description]
    assert rows["constraints.max_heavy_atoms"][:2] == ["int", "9"]  # nested params as outer.inner
    assert rows["geometry_source"][0] == "Literal['mmff', 'xtb']"
    schema = json.loads(_invoke(["tiers", "show", "pyscf-b3lyp", "--json"]).stdout)["params_schema"]
    assert schema["properties"]["basis"]["default"] == "6-31G*"


# ---------------------------------------------------------------- arl --help: the core apart from the suites


def test_help_groups_the_suites_commands_apart_from_the_core() -> None:
    import typer

    from arl_flows.cli import CORE_PANEL
    from arl_flows.cli.suites import suite_panel

    group = typer.main.get_command(app)
    panels = {name: command.rich_help_panel for name, command in group.commands.items()}
    core = {"run", "verify", "rerank", "report", "ui", "deploy", "db", "runs", "tiers", "lab", "suites", "config"}
    assert {panels[name] for name in core} == {CORE_PANEL}
    assert (panels["prior"], panels["bench"]) == (suite_panel("molecules"),) * 2 == ("Molecules suite",) * 2
    assert panels["tasks"] == suite_panel("code") == "Code suite"
    assert all(isinstance(panel, str) for panel in panels.values()), panels  # nothing falls back to "Commands"
    out = _invoke(["--help"]).stdout
    assert out.index(CORE_PANEL) < out.index("Code suite") and out.index(CORE_PANEL) < out.index("Molecules suite")
    assert "─ Commands ─" not in out


# ---------------------------------------------------------------- the README's first commands


def test_the_first_commands_a_newcomer_types_say_what_to_do_next(tmp_path: Path) -> None:
    from arl_flows.config import ConfigError, read_toml

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    empty = " ".join(_invoke(["runs", "list", "--url", url]).stdout.split())
    assert "no runs yet" in empty and "start one with `arl run`" in empty
    assert json.loads(_invoke(["runs", "list", "--url", url, "--json"]).stdout) == []
    # The README's `arl config show --config run.toml`, before any run.toml exists: where to start one.
    try:
        read_toml(tmp_path / "run.toml")
    except ConfigError as exc:
        message = str(exc)
    assert "does not exist" in message and "examples/molecules.toml" in message and "\n" not in message
    assert (ROOT / "examples" / "molecules.toml").is_file()


def test_a_suite_option_given_to_arl_run_says_where_it_goes() -> None:
    """`arl verify --space` exists, `arl run --space` does not: click's hint ("Possible options: --name") misled."""
    from tests.helpers.cli_runner import arl, assert_user_error

    code, _, err = arl(["run", "--space", "druglike"])
    assert_user_error(code, err)
    assert err.splitlines()[-1].endswith(
        "space is an option of the molecules suite: set it in the run config's [options] table "
        "(space = ...; `arl suites show molecules` lists them)"
    ), err
    code, _, err = arl(["run", "--no-such-flag"])
    assert_user_error(code, err)
    assert "suite" not in err.splitlines()[-1]  # not a suite's option: click's message alone
