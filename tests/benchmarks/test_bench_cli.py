"""``arl bench scheduler`` and ``arl bench advantages`` on a tiny QM9 pool with the real chemistry tiers."""

from __future__ import annotations

import pytest
import json
import sqlite3

from typer.testing import CliRunner

from arl_flows.cli import app


@pytest.mark.slow  # 18 s on 2 loaded cores, about 9 s idle
def test_bench_scheduler_and_advantages_on_a_tiny_pool(tmp_path) -> None:
    cache, out, png = tmp_path / "verdicts.db", tmp_path / "report.json", tmp_path / "curve.png"
    common = ["--limit", "40", "--held-out", "40", "--window", "5.5", "7.0", "--cache", str(cache), "--top-cost", "10"]
    runner = CliRunner()
    result = runner.invoke(
        app, ["bench", "scheduler", *common, "--policies", "voi,all,cascade,oracle", "--json", str(out), "--png", str(png)]
    )
    assert result.exit_code == 0, result.output
    assert "…" not in result.output  # piped, the table is printed whole (80 columns cut it to 'cost@5…'; newcomer pass)
    report = json.loads(out.read_text())
    assert report["pool"] == 40 and report["hits"] > 0 and report["top_cost"] == 10
    for name in ("voi", "all", "cascade", "oracle"):
        assert set(report["policies"][name]["cost_to_recall"]) == {"0.5", "0.8", "0.95"}
        assert set(report["policies"][name]["ratio_to_oracle"]) == {"0.5", "0.8", "0.95"}
    assert report["policies"]["all"]["calls"] == {"rdkit-eht": 40, "gfn2-xtb": 40, "reference-table": 40}
    assert set(report["surrogate_calibration"]) == {"rdkit-eht", "rdkit-eht+gfn2-xtb"}
    assert png.stat().st_size > 0
    rows = _verdict_rows(cache)
    assert rows >= 3 * 80  # every tier on pool and held-out split, computed once and kept in the ledger ...

    result = runner.invoke(
        app, ["bench", "advantages", *common, "--groups", "5", "--policies", "voi,all", "--fractions", "0.2", "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert _verdict_rows(cache) == rows  # ... and read back from it the second time
    report = json.loads(out.read_text())
    assert report["groups"] == 5 and [r["budget_fraction"] for r in report["policies"]["voi"]] == [0.2]
    # Every policy's scheduler is built as a run's is: the suite's shipped network under the surrogate ...
    assert report["surrogate"] == ["shipped"]
    result = runner.invoke(
        app, ["bench", "advantages", *common, "--groups", "5", "--policies", "voi", "--fractions", "0.2", "--no-shipped",
              "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["surrogate"] == ["linear"]  # ... unless asked for a cold start


def _verdict_rows(path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]


def test_bench_rejects_bad_input() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["bench", "scheduler", "--window", "4", "3"])
    assert result.exit_code != 0
    result = runner.invoke(app, ["bench", "advantages", "--policies", "oracle"])
    assert result.exit_code != 0 and "--policies: unknown oracle; use a comma list of voi," in str(result.exception)
    result = runner.invoke(app, ["bench", "learning", "--regimes", " , "])
    assert result.exit_code != 0 and "--regimes: unknown (none given)" in str(result.exception)


def test_bench_caches_tier_verdicts_in_the_ledger(tmp_path) -> None:
    from storage.ledger import Ledger

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    args = ["bench", "scheduler", "--limit", "20", "--held-out", "20", "--window", "5.5", "7.0",
            "--policies", "voi,oracle", "--ledger", url]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    stored = Ledger(url).ok_values("gfn2-xtb")
    assert len(stored) == 40


def test_bench_scheduler_options_for_novel_pools_reject_bad_input_in_one_line(tmp_path) -> None:
    from tests.helpers.cli_runner import arl, assert_user_error

    cache = ["--cache", str(tmp_path / "v.db")]
    cases = {
        ("--pool", "no_such_pool"): "neither a file nor a reference pool",
        ("--pool", "qm9_novel", "--history", "201"): "--history must be from 0 to 200",
        ("--pool", "qm9_novel", "--history", "-1"): "--history must be from 0 to 200",
        ("--pool", "qm9_novel", "--history", "20", "--held-out", "20"): "not both",
        ("--pool", "qm9_novel", "--space", "nope"): "unknown chemistry space 'nope'",
        ("--pool", "qm9_novel", "--window", "3", "4", "--maximize"): "--window and --maximize/--minimize exclude each other",
    }
    for args, message in cases.items():
        code, out, err = arl(["bench", "scheduler", *args, *cache])  # the real entry point: one line, exit code 2
        assert_user_error(code, err, out=out)
        assert message in err, (args, err)
    assert not (tmp_path / "v.db").exists()  # rejected before any ledger is made


def test_a_reference_pool_is_named_and_history_sets_the_held_out_split() -> None:
    from benchmarks.molecule_pool import REFERENCE_POOLS, resolve_pool

    assert resolve_pool("qm9_novel") == REFERENCE_POOLS / "qm9_novel.csv"
    assert resolve_pool(REFERENCE_POOLS / "qm9_novel.csv") == REFERENCE_POOLS / "qm9_novel.csv"  # a file stays a file
    assert resolve_pool(None) is None
    result = CliRunner().invoke(app, ["bench", "scheduler", "--help"])
    assert "--history" in result.output and "--space" in result.output and "qm9_novel" in result.output


def test_history_is_the_held_out_split_of_a_small_pool(tmp_path) -> None:
    from benchmarks.molecule_pool import REFERENCE_POOLS, molecule_pool
    from storage.ledger import Ledger

    rows = (REFERENCE_POOLS / "qm9_novel.csv").read_text().splitlines()[:21]
    small = tmp_path / "small.csv"
    small.write_text("\n".join(rows) + "\n")
    ledger = Ledger(f"sqlite:///{tmp_path / 'v.db'}")
    try:
        data = molecule_pool(small, limit=5000, held_out=7, seed=0, top_cost=10.0, ledger=ledger, low=3.0, high=6.0)
        assert (len(data.held_out), len(data.pool)) == (7, 13)  # the history asked for, the rest evaluated
        data = molecule_pool(small, limit=5000, held_out=1000, seed=0, top_cost=10.0, ledger=ledger, low=3.0, high=6.0)
        assert (len(data.held_out), len(data.pool)) == (4, 16)  # more than the pool holds: a fifth, as before
    finally:
        ledger.close()


def test_bench_learning_names_the_file_that_is_wrong(tmp_path) -> None:
    """A bad field in --config was blamed on the "default config"; a bad --merge file showed Python's exception."""
    runner = CliRunner()
    config = tmp_path / "bad.toml"
    config.write_text('[trainer]\nlr = "fast"\n')
    for command in ("learning", "pipeline"):
        result = runner.invoke(app, ["bench", command, "--config", str(config), "--workdir", str(tmp_path / "w")])
        assert result.exit_code != 0 and "Traceback" not in result.output
        assert f"{config}: trainer.lr: should be a valid number" in str(result.exception), result.exception
    good = {"settings": {"budget": 1.0}, "regimes": {}}
    for name, text in (("broken.json", "{not json"), ("list.json", "[1, 2, 3]"), ("other.json", '{"a": 1}')):
        (tmp_path / name).write_text(text)
        (tmp_path / "good.json").write_text(json.dumps(good))
        result = runner.invoke(app, ["bench", "learning", "--merge", str(tmp_path / "good.json"), "--merge", str(tmp_path / name)])
        assert result.exit_code != 0
        message = str(result.exception)
        assert message.startswith(f"--merge {tmp_path / name}: not a learning-benchmark report"), message
        assert "Error" not in message and "\n" not in message


def test_bench_flags_that_cannot_go_together_or_out_of_range_name_the_flag(tmp_path) -> None:
    """newcomer pass: --cache with --ledger was taken silently (--ledger won); --max-ahead -1 said
    'default config: streaming.max_ahead'."""
    from tests.helpers.cli_runner import arl, assert_user_error

    code, out, err = arl(["bench", "scheduler", "--cache", str(tmp_path / "c.db"), "--ledger", f"sqlite:///{tmp_path / 'l.db'}"])
    assert_user_error(code, err, out=out)
    assert "give --cache FILE or --ledger URL, not both" in err
    assert not (tmp_path / "c.db").exists() and not (tmp_path / "l.db").exists()
    code, out, err = arl(["bench", "pipeline", "--max-ahead", "-1"])
    assert_user_error(code, err, out=out)
    assert "--max-ahead must be from 1 to 64, got -1" in err
