"""The pieces of ``benchmarks.tiers --space druglike``: the DFT subset, rank agreement, cost fits, saved reports."""

from __future__ import annotations

import json

import pytest

from benchmarks.tiers import agreement, fit_cost_model, load_druglike_sample, main, spearman, spread_by_size


def test_the_shipped_sample_is_stratified_and_the_dft_subset_spreads_over_its_sizes() -> None:
    sample = load_druglike_sample()
    sizes = [h for _, h in sample]
    assert len(sample) == 300 and min(sizes) == 12 and max(sizes) == 26
    picked = spread_by_size(sample, 8)
    assert [h for _, h in picked] == [12, 14, 16, 18, 20, 22, 24, 26]
    assert len(spread_by_size(sample, 20)) == 20  # more than the sizes: one of each, then the rest in order


def test_spearman_is_a_rank_correlation() -> None:
    assert spearman([1, 2, 3, 4], [10, 200, 3000, 40000]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 2, 3], [1, 2, 2, 3]) == pytest.approx(1.0)  # ties share their mean rank


def test_the_cost_fit_recovers_a_power_law() -> None:
    rows = [{"heavy_atoms": n, "cost_s": 0.002 * n**2.5} for n in range(10, 30)]
    fitted = fit_cost_model(rows)
    assert fitted["exponent"] == pytest.approx(2.5, abs=0.02) and fitted["measured"] == 20
    assert fit_cost_model(rows, exponent=3.0)["exponent"] == 3.0


def _tier(name: str, tier: str, gaps: dict[str, float]) -> dict:
    rows = [{"smiles": s, "heavy_atoms": 12 + i, "status": "ok", "gap_ev": g, "cost_s": 0.1 * (i + 1), "wall_s": 0.1}
            for i, (s, g) in enumerate(gaps.items())]
    return {"verifier": name, "tier": tier, "n": len(rows), "n_planned": len(rows), "n_ok": len(rows),
            "statuses": {"ok": len(rows)}, "failure_rate": 0.0, "median_cost_s": 0.2, "max_cost_s": 0.4,
            "median_cost_by_size": {}, "cost_model": {"base": 0.0, "per_unit": 0.01, "exponent": 1.0},
            "per_molecule": rows}


def test_agreement_is_on_the_molecules_both_tiers_answered_and_a_saved_run_reports(tmp_path, capsys) -> None:
    cheap = _tier("rdkit-eht", "fast", {"A": 1.0, "B": 2.0, "C": 3.0, "D": 4.0})
    dft = _tier("pyscf-b3lyp", "high_fidelity", {"A": 3.1, "B": 4.0, "C": 5.2})
    (row,) = agreement([cheap, dft])
    assert row["n"] == 3 and row["spearman"] == pytest.approx(1.0) and row["mean_difference_ev"] == pytest.approx(2.1)
    saved = tmp_path / "run.json"
    saved.write_text(json.dumps({"results": [cheap, dft]}))
    main(["--space", "druglike", "--report", str(saved)])
    out = capsys.readouterr().out
    assert "| rdkit-eht | pyscf-b3lyp | 3 | 1.00 |" in out and "fitted cost model" in out
    with pytest.raises(SystemExit, match="no such file"):
        main(["--space", "druglike", "--report", str(tmp_path / "missing.json")])


def test_a_reference_pool_gives_the_tables_and_a_fitted_dft_exponent(tmp_path, capsys) -> None:
    from benchmarks.tiers import pool_results

    pool = tmp_path / "pool.csv"
    lines = ["smiles,heavy_atoms,eht_gap_ev,xtb_gap_ev,dft_gap_ev,dft_cpu_s,xtb_cpu_s"]
    for i, n in enumerate(range(12, 21)):
        xtb = 3.0 + 0.1 * i
        lines.append(f"{'C' * n},{n},{xtb - 0.2 + 0.05 * (i % 2)},{xtb},{xtb + 2.0},{0.01 * n**2.5:.4f},{0.0002 * n**2:.5f}")
    pool.write_text("\n".join(lines) + "\n")
    results = pool_results(pool)
    assert [r["verifier"] for r in results] == ["rdkit-eht", "gfn2-xtb", "pyscf-b3lyp"]
    assert results[0]["median_cost_by_size"] == {} and results[2]["n"] == 9
    out = tmp_path / "pool.json"
    main(["--space", "druglike", "--pool", str(pool), "--out", str(out)])
    printed = capsys.readouterr().out
    assert "| rdkit-eht | fast | 9 | 9 | 0.0% | not kept | not kept | not kept |" in printed
    assert "| gfn2-xtb | pyscf-b3lyp | 9 | 1.00 | 1.00 | 0.00 | +2.00 |" in printed
    saved = json.loads(out.read_text())
    dft = next(r for r in saved["results"] if r["verifier"] == "pyscf-b3lyp")
    assert dft["fitted_cost_model"]["exponent"] == pytest.approx(2.5, abs=0.02)  # fitted, not the declared n^3
    assert saved["pool"] == "pool.csv" and saved["provenance"]


def test_a_file_that_is_not_a_pool_gets_one_line(tmp_path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("smiles,gap_ev\nCCO,5.0\n")
    with pytest.raises(SystemExit, match="is not a reference pool"):
        main(["--space", "druglike", "--pool", str(bad)])
    with pytest.raises(SystemExit, match="--pool: no such file"):
        main(["--space", "druglike", "--pool", str(tmp_path / "missing.csv")])


def test_resume_reuses_saved_rows_only_when_the_tier_runs_with_the_same_params(tmp_path, capsys) -> None:
    """A default that changed since (the druglike DFT geometry did) makes other verdicts: they are computed again."""
    sample, out = tmp_path / "sample.csv", tmp_path / "run.json"
    sample.write_text("smiles,heavy_atoms\nc1ccccc1Cl,7\nCCOC(=O)c1ccccc1,11\n")
    args = ["--space", "druglike", "--sample", str(sample), "--verifiers", "rdkit-eht", "--out", str(out)]
    main(args)
    saved = json.loads(out.read_text())
    for row in saved["results"][0]["per_molecule"]:
        row["gap_ev"] = -1.0  # a marker: reused rows keep it
    out.write_text(json.dumps(saved))
    main([*args, "--resume"])
    assert {r["gap_ev"] for r in json.loads(out.read_text())["results"][0]["per_molecule"]} == {-1.0}
    saved["results"][0]["params"]["geometry"] = {"conformers": 7}  # as if computed with other params
    out.write_text(json.dumps(saved))
    main([*args, "--resume"])
    assert "computed with other params; computing again" in capsys.readouterr().out
    assert -1.0 not in {r["gap_ev"] for r in json.loads(out.read_text())["results"][0]["per_molecule"]}
