"""benchmarks/learning.py: the learning-under-a-verification-budget benchmark, on a tiny prior and budget.

The runs are real: the tiny prior is trained by ``flow_home``, the fast and
xTB tiers run live, and the top tier is the QM9 reference table at a declared
cost (so the test needs no DFT). The ``reference-or-dft`` verifier itself is
tested in ``tests/arl_flows/suites/molecules/test_reference_or_dft.py``; here
only the benchmark's guard that a novel molecule's truth comes from real DFT.
"""

from __future__ import annotations

import json
import math

import pytest

from benchmarks.learning import (
    REGIMES,
    LearningBenchConfig,
    RegimeRun,
    VerdictMemo,
    _regime_metrics,
    best_k_mean,
    face_value_estimates,
    from_table,
    learning_benchmark,
    novel_hits_per_cpu_hour,
    regime_config,
    top_k_auc,
    truth_value,
    write_json,
)
from arl_flows.config import load_config
from storage.records import RewardEstimate
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


@pytest.mark.slow  # ~60 s of training and tiers (the tiny prior is installed from tests/data, shared with the other flow tests)
def test_benchmark_report_budget_and_uncharged_audits(flow_home, overrides, tmp_path) -> None:  # noqa: ANN001
    bench = _bench(overrides, regimes=["scheduled", "fast-only", "xtb-only-calibrated"])
    report = learning_benchmark(bench, workdir=tmp_path / "work", cache=tmp_path / "memo.db")

    assert set(report["regimes"]) == {"scheduled", "fast-only", "xtb-only-calibrated"}
    for name, r in report["regimes"].items():
        for key in ("top10_auc", "hits", "validity", "uniqueness", "spend", "per_seed", "novel_topk_auc", "novel_hits"):
            assert key in r, (name, key)
        assert 0.0 <= r["top10_auc"] <= 1.0 and 0.0 <= r["novel_topk_auc"] <= 1.0
        assert 0.0 <= r["validity"] <= 1.0 and 0.0 <= r["uniqueness"] <= 1.0
        (row,) = r["per_seed"]
        # The planner admits a call only if its expected cost fits; a call costs at most TOP_COST here.
        assert row["total_spend"] <= bench.budget + TOP_COST
        assert row["total_spend"] == pytest.approx(sum(row["spend"].values()))
        assert row["curve"][0] == [0.0, 0.0] and len(row["curve"]) >= 2
        assert all(0.0 <= s <= 1.0 for _, s in row["curve"])
        # The best novel_k so far can only grow; it is sampled at the same audit points as the top-10.
        novel_scores = [s for _, s in row["novel_curve"]]
        assert novel_scores == sorted(novel_scores) and len(row["novel_curve"]) == len(row["curve"])
        # The top tier here is the QM9 table: it has no value for a novel molecule, so none counts as verified.
        assert row["novel_sampled"] > 0 and row["novel_verified"] == 0 and row["novel_hits"] == 0, row

    # fast-only never asks the top tier, yet its top-k was audited with it: audits are not charged.
    fast = report["regimes"]["fast-only"]["per_seed"][0]
    assert report["audit_calls"] > 0
    assert fast["spend"].get("lab", 0.0) == 0.0 and fast["spend"].get("simulation", 0.0) == 0.0, fast["spend"]
    assert fast["total_spend"] < 1.0
    # The scheduled regime paid for top-tier verdicts under the same budget.
    sched = report["regimes"]["scheduled"]["per_seed"][0]
    assert sched["spend"].get("lab", 0.0) > 0.0
    # xtb-only-calibrated pays the fast and xTB tiers, never the top one.
    xtb = report["regimes"]["xtb-only-calibrated"]["per_seed"][0]
    assert xtb["spend"].get("simulation", 0.0) > 0.0 and xtb["spend"].get("lab", 0.0) == 0.0, xtb["spend"]
    assert set(report["novel_ratios"]) == {"scheduled/fast-only", "scheduled/xtb-only-calibrated"}
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
        "xtb-only-calibrated": "all",  # with the top tier capped at 0 calls a step
        "scheduled-paced": "voi",
    }
    # Equal budget: the nearly free proxy regimes get a step cap high enough to reach it; the paced
    # scheduler takes as many steps, its budget accruing over them.
    assert {r: c.steps for r, c in configs.items()} == {
        r: 900 if r.startswith(("fast-only", "xtb-only", "scheduled-paced")) else 7 for r in REGIMES
    }
    paced = configs["scheduled-paced"].scheduler
    assert paced.budget_carry and paced.budget_per_step == pytest.approx(100.0 / 900)
    assert paced.voi_target == configs["scheduled"].scheduler.voi_target and not configs["scheduled"].scheduler.budget_carry
    assert all(c.scheduler.budget_per_run == 100.0 and c.seed == 3 for c in configs.values())
    assert math.isinf(configs["top-only"].scheduler.budget_per_step)
    assert not configs["scheduled-no-hindsight"].hindsight.enabled and configs["scheduled"].hindsight.enabled
    assert configs["scheduled"].trainer == configs["fast-only"].trainer == configs["top-only"].trainer


def test_benchmark_rejects_unknown_regime(overrides, tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(ValueError, match="unknown regime"):
        learning_benchmark(_bench(overrides, regimes=["scheduled", "everything"]), workdir=tmp_path)
    assert "scheduled-no-hindsight" in REGIMES


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



def _hand_made_run() -> tuple[RegimeRun, LearningBenchConfig]:
    """A regime's record by hand: five novel molecules (three with a DFT value, two in the window) and one known."""
    run = RegimeRun("scheduled", 0, spend={"fast": 0.5, "simulation": 1.5, "lab": 178.0})
    run.novel_keys = {"n1", "n2", "n3", "n4", "n5"}
    run.valid_keys = run.novel_keys | {"q1"}
    run.truth = {"n1": 3.5, "n2": 3.9, "n3": 6.0, "n4": None, "q1": 3.2}  # n4: DFT failed; n5: never verified
    run.curve = [(0.0, 0.0), (90.0, 0.5)]
    run.novel_curve = [(0.0, 0.0), (45.0, 0.04), (90.0, 0.08)]
    run.paid_top = {"n1", "q1"}  # the regime paid for these; the audits found the rest
    run.audit_costs = {"n1": 9.0, "n2": 10.0, "n3": 8.0, "n4": 2.0}  # n1's audit is a replay of what it paid
    return run, LearningBenchConfig(budget=180.0, novel_k=25)


def test_novel_metrics_on_hand_made_verdicts() -> None:
    run, bench = _hand_made_run()
    row = _regime_metrics(run, bench, 3.0, 4.0, 0.5)
    # Novel verified hits: novel, with a computed top-tier value in the window; the known QM9 hit q1 is a hit, not novel.
    assert row["novel_hit_keys"] == ["n1", "n2"] and row["novel_hits"] == 2 and row["hits"] == 3
    assert row["novel_verified"] == 3 and row["novel_sampled"] == 5  # n4 (failed) and n5 (unverified) are not verified
    # 2 novel hits for 180 CPU-s of the regime's own spend: 40 per CPU-hour.
    assert row["novel_hits_per_cpu_hour"] == pytest.approx(2 / (180.0 / 3600.0)) == pytest.approx(40.0)
    assert novel_hits_per_cpu_hour(3, 0.0) is None  # a regime that spent nothing has no rate
    # With the audits of molecules it never paid for charged (n2, n3, n4: 20 CPU-s): 2 hits in 200 CPU-s.
    assert row["audit_spend"] == pytest.approx(20.0) and row["novel_hits_per_cpu_hour_with_audits"] == pytest.approx(36.0)
    # The novel curve's area: 0 to 45, 0.04 to 90, then 0.08 to the budget of 180.
    assert row["novel_topk_auc"] == pytest.approx((0.04 * 45 + 0.08 * 90) / 180) and row["final_novel_topk"] == 0.08
    # The best-k mean: window scores of the known novel values, best first, the missing ones 0, over k.
    far = math.exp(-0.5 * (2.0 / 0.5) ** 2)  # n3 is 2 eV above the window
    assert best_k_mean(run.truth, run.novel_keys, 25, 3.0, 4.0, 0.5) == pytest.approx((1.0 + 1.0 + far) / 25)
    assert best_k_mean(run.truth, run.novel_keys, 2, 3.0, 4.0, 0.5) == pytest.approx(1.0)
    assert best_k_mean(run.truth, {"n4", "n5"}, 3, 3.0, 4.0, 0.5) == 0.0


def test_novel_metrics_aggregate_merge_and_print() -> None:
    from benchmarks.learning import merge_reports, summary_table

    a = _report({"scheduled": [0], "cascade": [0]}, novel_k=25)
    b = _report({"scheduled": [1], "cascade": [1]}, novel_k=25)
    for rep, rates in ((a, (40.0, 20.0)), (b, (60.0, 20.0))):
        for (name, reg), rate in zip(rep["regimes"].items(), rates):
            reg["per_seed"][0] |= {"novel_hits_per_cpu_hour": rate, "novel_topk_auc": rate / 100, "final_novel_topk": 0.5,
                                   "novel_hits_per_cpu_hour_with_audits": rate / 2,
                                   "novel_verified": 10}
    merged = merge_reports([a, b])
    assert merged["regimes"]["scheduled"]["novel_hits_per_cpu_hour"] == pytest.approx(50.0)
    assert merged["regimes"]["scheduled"]["novel_hits_per_cpu_hour_std"] == pytest.approx(10.0)
    assert merged["novel_ratios"]["scheduled/cascade"] == {"novel_hits_per_cpu_hour": pytest.approx(2.5),
                                                           "novel_hits_per_cpu_hour_with_audits": pytest.approx(2.5),
                                                           "novel_topk_auc": pytest.approx(2.5)}
    assert "scheduled/cascade" in merged["ratios"]  # the old keys stay
    header, sched, _ = summary_table(merged)
    assert header[5:7] == ["novel hits/CPU-h", "novel top-25 AUC"] and sched[5] == "50 ± 10 (25 ± 5 with audits)"
    assert merged["novel_topk_saturated"] == []  # best 25 at 0.5: the curve still separates them
    # A regime whose best k reach a full score on some seed is named: k was too small to compare it.
    b["regimes"]["cascade"]["per_seed"][0]["final_novel_topk"] = 0.995
    assert merge_reports([a, b])["novel_topk_saturated"] == ["cascade"]
    # A report from before the novel metrics merges and prints with dashes.
    old = merge_reports([_report({"scheduled": [0], "cascade": [0]})])
    assert old["regimes"]["scheduled"]["novel_topk_auc"] is None and summary_table(old)[1][6] == "-"
    assert set(old["novel_ratios"]["scheduled/cascade"].values()) == {None} and old["novel_topk_saturated"] == []
    # The paced scheduler is compared with every other regime too, the plain one included.
    paced = _report({"scheduled": [0], "cascade": [0], "scheduled-paced": [0]})
    for reg, rate in zip(paced["regimes"].values(), (40.0, 20.0, 80.0)):
        reg["per_seed"][0] |= {"novel_hits_per_cpu_hour": rate, "novel_topk_auc": rate / 100,
                               "novel_hits_per_cpu_hour_with_audits": rate / 2, "final_novel_topk": 0.5, "novel_verified": 4}
    ratios = merge_reports([paced])["novel_ratios"]
    assert set(ratios) == {"scheduled/cascade", "scheduled/scheduled-paced", "scheduled-paced/scheduled",
                           "scheduled-paced/cascade"}
    assert ratios["scheduled-paced/cascade"]["novel_hits_per_cpu_hour"] == pytest.approx(4.0)


@pytest.mark.slow  # ~12 s on the shared cores: a live xTB step
def test_xtb_only_calibrated_never_calls_the_top_tier(overrides) -> None:  # noqa: ANN001
    from verifiers.scheduler import Scheduler

    bench = LearningBenchConfig(budget=100.0, budget_per_step=10.0)
    base = load_config(overrides=overrides())
    config = regime_config(base, "xtb-only-calibrated", bench, seed=0)
    top = registry.get(base.tiers[-1].verifier).name
    assert config.scheduler.policy == "all" and config.scheduler.caps_for(top, "lab").max_calls_per_step == 0
    for name in (t.verifier for t in base.tiers[:-1]):  # the cheap tiers stay open
        assert config.scheduler.caps_for(registry.get(name).name, "").max_calls_per_step is None
    assert "xtb-only-calibrated" in REGIMES and regime_config(base, "scheduled", bench, 0).scheduler.caps == {}
    # A real step's plan: every valid molecule climbs the cheap tiers, none is sent to the top.
    ladder = [registry.create(t.verifier, t.params) for t in base.tiers]
    scheduler = Scheduler(ladder, config.scheduler)
    try:
        molecules = [make_candidate(s) for s in ("CCO", "c1ccncc1", "CC(=O)O", "not a smiles")]
        result = scheduler.run_step(molecules)
    finally:
        for v in ladder:
            getattr(v, "close", lambda: None)()
    assert result.calls[ladder[0].name] == 4 and result.calls[ladder[1].name] == 3  # the invalid one stops at the fast tier
    assert result.calls[top] == 0 and result.spend_by_verifier[top] == 0.0


@pytest.mark.slow  # ~20 s: the novelty check of the 24,683-molecule table and one DFT worker
def test_a_novel_molecule_is_never_answered_from_the_table() -> None:
    from arl_flows.suites.molecules.novelty import is_novel

    verifier = registry.create("reference-or-dft", {"threads": 1})
    table = load_reference_table(verifier.params.table_path)
    # The tier's table and the qm9 space's novelty index agree: no molecule of the table is novel, so a novel
    # molecule can only reach the DFT branch.
    assert table and not [s for s in table if is_novel(s, None)]
    try:
        in_table, computed = verifier.verify_batch([make_candidate(s) for s in ("CCO", "CC")])  # ethane is novel
    finally:
        verifier.close()
    assert is_novel(canonical_smiles("CC"), None) and not is_novel(canonical_smiles("CCO"), None)
    assert from_table(in_table) and not from_table(computed) and computed.values["scf_cycles"] > 0
    assert truth_value(computed, novel=True) == computed.value and truth_value(in_table, novel=False) == in_table.value
    # Had the table answered a novel molecule, the benchmark would stop rather than count it.
    with pytest.raises(ValueError, match="must come from real DFT"):
        truth_value(in_table, novel=True)
