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
