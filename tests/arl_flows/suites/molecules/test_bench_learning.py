"""Issue 9: the learning-under-a-verification-budget benchmark, on a tiny prior and budget.

The runs are real: the tiny prior is trained by ``flow_home``, the fast and
xTB tiers run live, and the top tier is the QM9 reference table at a declared
cost (so the test needs no DFT). The ``reference-or-dft`` verifier is checked
on its own with molecules of one to three heavy atoms, whose DFT takes well
under a second.
"""

from __future__ import annotations

import json
import math

import pytest

from benchmarks.learning import (
    REGIMES,
    LearningBenchConfig,
    VerdictMemo,
    face_value_estimates,
    learning_benchmark,
    regime_config,
    top_k_auc,
    write_json,
)
from arl_flows.config import load_config
from storage.records import RewardEstimate, Status
from verifiers import registry
from arl_flows.suites.molecules import canonical_smiles, load_reference_table, make_candidate

TOP_COST = 5.0


def _bench(overrides, **extra: object) -> LearningBenchConfig:  # noqa: ANN001
    run = overrides()
    run["tiers"][-1]["params"]["cost_per_call"] = TOP_COST
    run["scheduler"] = {"target_low": 3.0, "target_high": 4.0, "window_softness": 0.5}
    settings = {
        "budget": 24.0,
        "seeds": [0],
        "regimes": ["scheduled", "fast-only"],
        "budget_per_step": 12.0,
        "max_steps": 3,
        "proxy_max_steps": 3,
        "audit_points": 3,
        "history": 60,
        "run_overrides": {k: run[k] for k in ("prior", "rollout", "trainer", "tiers")},
    }
    return LearningBenchConfig(**(settings | extra))


def test_top_k_auc_is_the_normalised_area_of_the_step_curve() -> None:
    # 0 until spend 2, then 0.5 until 6, then 1.0 until the budget of 10: (0*2 + 0.5*4 + 1*4) / 10.
    assert top_k_auc([(0.0, 0.0), (2.0, 0.5), (6.0, 1.0)], 10.0) == pytest.approx(0.6)
    # Points beyond the budget are clipped to it; a lone start point holds over the whole axis.
    assert top_k_auc([(0.0, 0.0), (12.0, 1.0)], 10.0) == pytest.approx(0.0)
    assert top_k_auc([(0.0, 0.3)], 10.0) == pytest.approx(0.3)


@pytest.mark.slow  # ~40 s of training and tiers (the tiny prior is installed from tests/data, shared with the other flow tests)
def test_benchmark_report_budget_and_uncharged_audits(flow_home, overrides, tmp_path) -> None:  # noqa: ANN001
    bench = _bench(overrides)
    report = learning_benchmark(bench, workdir=tmp_path / "work", cache=tmp_path / "memo.db")

    assert set(report["regimes"]) == {"scheduled", "fast-only"}
    for name, r in report["regimes"].items():
        for key in ("top10_auc", "hits", "validity", "uniqueness", "spend", "per_seed"):
            assert key in r, (name, key)
        assert 0.0 <= r["top10_auc"] <= 1.0
        assert 0.0 <= r["validity"] <= 1.0 and 0.0 <= r["uniqueness"] <= 1.0
        (row,) = r["per_seed"]
        # The planner admits a call only if its expected cost fits; a call costs at most TOP_COST here.
        assert row["total_spend"] <= bench.budget + TOP_COST
        assert row["total_spend"] == pytest.approx(sum(row["spend"].values()))
        assert row["curve"][0] == [0.0, 0.0] and len(row["curve"]) >= 2
        assert all(0.0 <= s <= 1.0 for _, s in row["curve"])

    # fast-only never asks the top tier, yet its top-k was audited with it: audits are not charged.
    fast = report["regimes"]["fast-only"]["per_seed"][0]
    assert report["audit_calls"] > 0
    assert fast["spend"].get("lab", 0.0) == 0.0 and fast["spend"].get("simulation", 0.0) == 0.0, fast["spend"]
    assert fast["total_spend"] < 1.0
    # The scheduled regime paid for top-tier verdicts under the same budget.
    sched = report["regimes"]["scheduled"]["per_seed"][0]
    assert sched["spend"].get("lab", 0.0) > 0.0
    # Every regime's scheduler is built as a run's is: the suite's shipped network under the surrogate from step 0.
    assert {row["surrogate"] for r in report["regimes"].values() for row in r["per_seed"]} == {"shipped"}

    out = tmp_path / "report.json"
    write_json(report, out)
    assert json.loads(out.read_text())["regimes"]["scheduled"]["top10_auc"] == sched["top10_auc"]


def test_fast_only_trains_on_the_fast_value_at_face_value() -> None:
    posterior = {"value_mean": 3.5, "value_std": 0.4, "components": {"p_hit": 0.7}}
    estimates = [
        RewardEstimate(trajectory_id="t-in", mean=0.6, std=0.2, **posterior),
        RewardEstimate(trajectory_id="t-out", mean=0.6, std=0.2, **posterior),
        RewardEstimate(trajectory_id="t-bad", mean=-1.0, std=0.0, invalid=True),
        RewardEstimate(trajectory_id="t-none", mean=0.1, std=0.3, **posterior),
    ]
    keys = {"t-in": "a", "t-out": "b", "t-bad": "c", "t-none": "d"}
    proxy = {"a": 3.4, "b": 6.0, "c": 3.5}  # "c" is flagged invalid whatever its value; "d": no fast value
    got = {e.trajectory_id: e for e in face_value_estimates(estimates, keys, proxy, 3.0, 4.0, 0.5)}
    # The fast tier's value in the window is a full reward with no doubt about it ...
    assert got["t-in"].mean == 1.0 and got["t-in"].std == 0.0 and got["t-in"].components == {"proxy_value": 3.4}
    # ... and 2 eV outside it is the window's Gaussian fall-off, whatever the posterior said.
    assert got["t-out"].mean == pytest.approx(math.exp(-0.5 * (2.0 / 0.5) ** 2)) and got["t-out"].std == 0.0
    # An invalid molecule, or one without a fast value, keeps the scheduler's estimate.
    assert got["t-bad"] == estimates[2] and got["t-none"] == estimates[3]


def test_regime_configs_differ_only_in_verification(overrides) -> None:  # noqa: ANN001
    bench = LearningBenchConfig(budget=100.0, budget_per_step=10.0, max_steps=7, proxy_max_steps=900)
    base = load_config(overrides=overrides())
    configs = {r: regime_config(base, r, bench, seed=3) for r in REGIMES}
    assert {r: c.scheduler.policy for r, c in configs.items()} == {
        "scheduled": "voi",
        "top-only": "all",
        "fast-only": "fast-only",
        "cascade": "all",  # swapped for the tuned cascade once the session is open
        "scheduled-no-hindsight": "voi",
        "fast-only-calibrated": "fast-only",
    }
    # Equal budget: the nearly free proxy regimes get a step cap high enough to reach it.
    assert {r: c.steps for r, c in configs.items()} == {
        r: 900 if r.startswith("fast-only") else 7 for r in REGIMES
    }
    assert all(c.scheduler.budget_per_run == 100.0 and c.seed == 3 for c in configs.values())
    assert math.isinf(configs["top-only"].scheduler.budget_per_step)
    assert not configs["scheduled-no-hindsight"].hindsight.enabled and configs["scheduled"].hindsight.enabled
    assert configs["scheduled"].trainer == configs["fast-only"].trainer == configs["top-only"].trainer


def test_benchmark_rejects_unknown_regime(overrides, tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(ValueError, match="unknown regime"):
        learning_benchmark(_bench(overrides, regimes=["scheduled", "everything"]), workdir=tmp_path)
    assert "scheduled-no-hindsight" in REGIMES


def test_reference_or_dft_answers_from_table_or_runs_dft() -> None:
    table = load_reference_table(registry.create("reference-or-dft").params.table_path)
    known, novel = "CCO", "CC"  # ethanol is in the shipped QM9 table, ethane is not
    assert canonical_smiles(known) in table and canonical_smiles(novel) not in table
    verifier = registry.create("reference-or-dft", {"threads": 1})
    try:
        goal = {"property": "gap_ev", "low": 3.0, "high": 4.0}
        got = verifier.verify_batch([make_candidate(s, goal) for s in (known, novel, "C(C)(C)(C)(C)C", "not a smiles")])
    finally:
        verifier.close()
    in_table, computed, pentavalent, garbage = got
    assert in_table.status == Status.ok and in_table.value == pytest.approx(table[canonical_smiles(known)])
    assert in_table.cost_s == pytest.approx(verifier.table_charge(3)) and in_table.uncertainty is None
    assert computed.status == Status.ok and computed.cost_s > 0 and computed.uncertainty
    p = verifier.params
    assert computed.value == pytest.approx(p.correction_slope * computed.values["gap_631g_ev"] + p.correction_intercept)
    assert 7.0 < computed.value < 12.0  # ethane's B3LYP gap is ~9 eV
    for bad in (pentavalent, garbage):
        assert bad.status == Status.invalid and bad.cost_s == 0.0 and bad.feedback


def _report(regimes: dict[str, list[int]], offset: float = 0.0, **settings: object) -> dict:
    """A minimal report as learning_benchmark writes it: per regime, one row per seed."""

    def row(seed: int, auc: float) -> dict:
        return {"seed": seed, "top10_auc": auc, "final_top10": auc, "hits": 1, "validity": 0.9, "uniqueness": 1.0,
                "total_spend": 10.0, "steps": 3, "fooled_rate": None, "spend": {"fast": 1.0}}

    seeds = sorted({s for ss in regimes.values() for s in ss})
    base = {"budget": 10.0, "seeds": seeds, "regimes": list(regimes), "proxy_max_steps": 300, "cascade_keep": 0.9,
            "cascade_margin": 0.25, "max_steps": 5}
    return {
        "settings": base | settings,
        "seeds": seeds,
        "regimes": {n: {"per_seed": [row(s, offset + 0.1 * (i + 1) + 0.01 * s) for s in ss]} for i, (n, ss) in enumerate(regimes.items())},
        "cascade_thresholds": {"rdkit-eht": [1.0, 2.0]} if "cascade" in regimes else None,
        "audit_calls": 5,
        "fresh_verdict_cost_s": 2.0,
        "wall_s": 7.0,
    }


def test_merge_joins_reports_of_other_seeds_or_regimes() -> None:
    from benchmarks.learning import merge_reports

    a = _report({"scheduled": [0, 1]}, proxy_max_steps=5000)  # no proxy regime: its proxy cap is not compared
    b = _report({"fast-only": [0, 1], "cascade": [0, 1]}, offset=0.2)
    merged = merge_reports([a, b])
    assert list(merged["regimes"]) == ["scheduled", "fast-only", "cascade"] and merged["seeds"] == [0, 1]
    assert merged["settings"]["proxy_max_steps"] == 300 and merged["cascade_thresholds"] == {"rdkit-eht": [1.0, 2.0]}
    assert merged["regimes"]["scheduled"]["top10_auc"] == pytest.approx(0.105)
    assert merged["ratios"]["scheduled/fast-only"] == pytest.approx(0.105 / 0.305)
    assert merged["audit_calls"] == 10

    with pytest.raises(ValueError, match="scheduled seed 1"):
        merge_reports([a, _report({"scheduled": [1, 2]}, proxy_max_steps=5000)])
    with pytest.raises(ValueError, match="differ in budget"):
        merge_reports([a, _report({"fast-only": [0]}, budget=20.0)])
    with pytest.raises(ValueError, match="proxy_max_steps"):
        merge_reports([b, _report({"fast-only-calibrated": [0]}, proxy_max_steps=100)])


def test_verdict_memo_keeps_paid_verdicts_in_a_ledger_and_replays_them_at_their_cost(tmp_path) -> None:
    from storage.ledger import Ledger

    fast = registry.create("rdkit-eht")
    molecules = [make_candidate(s) for s in ("CCO", "c1ccncc1", "CC(=O)O")]
    memo = VerdictMemo(tmp_path / "memo.db")
    paid = memo.get(fast, molecules)
    memo.close()
    assert memo.computed_s > 0 and [v.candidate_key for v in paid] == [c.key for c in molecules]
    with Ledger(f"sqlite:///{tmp_path / 'memo.db'}") as ledger:  # a ledger like a run's: the same lookup finds them
        assert set(ledger.lookup_verdicts([c.key for c in molecules], fast.name, fast.version, fast.params_hash)) == {
            c.key for c in molecules
        }

    again = VerdictMemo(tmp_path / "memo.db")  # another process, seed or rerun: nothing is paid twice
    replayed = again.get(fast, [*molecules, make_candidate("CCN")])
    again.close()
    assert [v.cost_s for v in replayed[:3]] == [v.cost_s for v in paid]
    assert [v.value for v in replayed[:3]] == [v.value for v in paid]
    assert 0 < again.computed_s == replayed[3].cost_s  # only the new molecule was computed


def test_a_merged_report_records_where_each_part_ran() -> None:
    from benchmarks.learning import merge_reports

    a = _report({"scheduled": [0]}) | {"provenance": {"commit": "aaa"}}
    b = _report({"scheduled": [1]}) | {"provenance": {"commit": "bbb"}}
    merged = merge_reports([a, b])
    assert merged["merged_from_provenance"] == [{"commit": "aaa"}, {"commit": "bbb"}]
    assert "provenance" not in merged  # write_json stamps the merged report with its own

