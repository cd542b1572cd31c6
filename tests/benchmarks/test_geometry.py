"""benchmarks/geometry.py: DFT and xTB on the xTB-relaxed geometry beside a pool's MMFF-geometry values."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from benchmarks import geometry
from benchmarks.tiers import make_verifier
from arl_flows.suites.molecules.chemistry import make_candidate


def _pool(tmp_path: Path, smiles: list[str]) -> Path:
    """A reference pool of small molecules with their MMFF-geometry xTB and DFT gaps computed here."""
    cands = [make_candidate(s) for s in smiles]
    dft = make_verifier("pyscf-b3lyp:geometry_source=mmff", 1, space="druglike").verify_batch(cands)
    xtb = make_verifier("gfn2-xtb", 1, space="druglike").verify_batch(cands)
    path = tmp_path / "pool.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["smiles", "heavy_atoms", "xtb_gap_ev", "xtb_cpu_s", "dft_gap_ev", "dft_status", "dft_cpu_s"])
        for s, d, x in zip(smiles, dft, xtb):
            w.writerow([s, sum(1 for a in s if a.isalpha() and a.isupper()), x.value, x.cost_s, d.value, d.status.value, d.cost_s])
    return path


def test_relaxed_geometry_is_computed_compared_and_resumed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pool = _pool(tmp_path, ["CCO"])
    out = tmp_path / "geo.json"
    geometry.main(["--pool", str(pool), "--molecules", "1", "--sizes", "1-9", "--out", str(out)])
    report = json.loads(out.read_text())
    rows, summary = report["per_molecule"], report["summary"]
    assert [r["smiles"] for r in rows] == ["CCO"] and summary["n_ok"] == 1  # the pool holds one
    for r in rows:
        # The relaxation moves the geometry, so the gaps move, but by far less than the tiers differ (~2 eV).
        assert 0 < abs(r["dft_xtb_geometry_ev"] - r["dft_mmff_ev"]) < 0.5
        assert 0 < abs(r["xtb_relaxed_ev"] - r["xtb_mmff_ev"]) < 0.5
        assert r["xtb_relaxed_cpu_s"] > 0 and r["dft_xtb_geometry_cpu_s"] > 0
    shifts = [r["dft_xtb_geometry_ev"] - r["dft_mmff_ev"] for r in rows]
    assert summary["dft_xtb_geometry_vs_mmff"]["mean_shift_ev"] == pytest.approx(sum(shifts) / len(shifts))
    assert summary["dft_xtb_geometry_vs_mmff"]["max_abs_shift_ev"] == pytest.approx(max(map(abs, shifts)))
    # A rerun with --resume computes nothing again: the saved rows come back unchanged. While xTB runs again
    # (before DFT), the file keeps the DFT answers it started from: a kill then used to lose them all.
    real, seen = geometry.run_tier_druglike, []

    def watched(spec, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if spec == geometry.SPECS["dft"]:
            seen.append(json.loads(out.read_text())["tiers"]["dft"]["per_molecule"])
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(geometry, "run_tier_druglike", watched)
    geometry.main(["--pool", str(pool), "--molecules", "1", "--sizes", "1-9", "--out", str(out), "--resume"])
    assert seen == [report["tiers"]["dft"]["per_molecule"]]
    again = json.loads(out.read_text())
    assert again["tiers"]["dft"]["per_molecule"] == report["tiers"]["dft"]["per_molecule"]

    # --also reuses another file's answers: a run into a new file computes nothing and writes the same rows.
    merged = tmp_path / "merged.json"
    seen.clear()
    geometry.main(["--pool", str(pool), "--molecules", "1", "--sizes", "1-9", "--out", str(merged), "--also", str(out)])
    assert json.loads(merged.read_text())["per_molecule"] == again["per_molecule"]
    with pytest.raises(SystemExit, match="--also: no such file"):
        geometry.main(["--pool", str(pool), "--sizes", "1-9", "--also", str(tmp_path / "none.json")])

    # --adopt moves the pool to the relaxed geometry, keeping the MMFF94 values beside it, and records it.
    from benchmarks.learning import _check_pool_level
    from benchmarks.molecule_pool import load_pool

    pool.with_suffix(".json").write_text(json.dumps({"level_of_theory": {"dft": "B3LYPG/6-31G*", "density_fitting": True}}))
    mmff_dft = make_verifier("pyscf-b3lyp:geometry_source=mmff", 1, space="druglike")
    relaxed_dft = make_verifier(geometry.SPECS["dft"], 1, space="druglike")
    _check_pool_level(mmff_dft, pool)  # a pool without the key is on MMFF94
    with pytest.raises(ValueError, match="on mmff geometries, but the top tier"):
        _check_pool_level(relaxed_dft, pool)
    before = {r["smiles"]: r for r in csv.DictReader(open(pool, newline=""))}
    geometry.main(["--pool", str(pool), "--out", str(out), "--adopt"])
    (after,) = csv.DictReader(open(pool, newline=""))
    (answer,) = again["tiers"]["dft"]["per_molecule"]
    assert float(after["dft_gap_ev"]) == float(after["gap_ev"]) == pytest.approx(answer["gap_ev"], abs=1e-4)
    assert after["dft_mmff_gap_ev"] == before["CCO"]["dft_gap_ev"] and after["dft_geometry"] == "GFN2-xTB"
    assert load_pool(pool) == [("CCO", float(after["dft_gap_ev"]))]
    meta = json.loads(pool.with_suffix(".json").read_text())
    assert meta["level_of_theory"]["geometry_source"] == "xtb" and "--adopt" in meta["geometry_change"]["command"]
    _check_pool_level(relaxed_dft, pool)
    with pytest.raises(ValueError, match="on xtb geometries, but the top tier"):
        _check_pool_level(mmff_dft, pool)
    # The comparison reads the MMFF94 gap from its own column now, and adopting twice is refused.
    assert geometry.compare(geometry.pick(pool, 1, 1, 9), again["tiers"]["dft"], again["tiers"]["xtb"])["per_molecule"][0][
        "dft_mmff_ev"] == float(before["CCO"]["dft_gap_ev"])
    with pytest.raises(SystemExit, match="already on the relaxed geometry"):
        geometry.main(["--pool", str(pool), "--out", str(out), "--adopt"])



def test_bad_sizes_and_an_empty_range_are_one_line_errors(tmp_path: Path) -> None:
    pool = tmp_path / "pool.csv"
    pool.write_text("smiles,heavy_atoms,xtb_gap_ev,xtb_cpu_s,dft_gap_ev,dft_status,dft_cpu_s\nCCO,3,8.0,0.01,9.0,ok,2.0\n")
    with pytest.raises(SystemExit, match="--sizes must be LOW-HIGH"):
        geometry.main(["--pool", str(pool), "--sizes", "twelve"])
    with pytest.raises(SystemExit, match="no molecule with a converged DFT gap has 12-20 heavy atoms"):
        geometry.main(["--pool", str(pool)])


def test_adopt_refuses_a_pool_with_molecules_not_yet_answered(tmp_path: Path) -> None:
    pool = tmp_path / "pool.csv"
    pool.write_text("smiles,heavy_atoms,xtb_gap_ev,xtb_cpu_s,dft_gap_ev,dft_status,dft_cpu_s\nCCO,3,8.0,0.01,9.0,ok,2.0\n"
                    "CCN,3,8.0,0.01,9.0,ok,2.0\n")
    out = tmp_path / "geo.json"
    out.write_text(json.dumps({"tiers": {"dft": {"per_molecule": [
        {"smiles": "CCO", "status": "ok", "gap_ev": 9.2, "cost_s": 2.1, "wall_s": 2.2}]}}}))
    with pytest.raises(SystemExit, match="1 of 2 molecules of pool.csv have no relaxed-geometry DFT answer"):
        geometry.main(["--pool", str(pool), "--out", str(out), "--adopt"])
    with pytest.raises(SystemExit, match="--adopt needs --out"):
        geometry.main(["--pool", str(pool), "--adopt"])
    assert "dft_mmff_gap_ev" not in pool.read_text()  # nothing written


def test_network_error_reads_both_geometries_and_needs_both(tmp_path: Path) -> None:
    pool = tmp_path / "pool.csv"
    rows = [("CCO", 8.5, 6.0, 6.5), ("c1ccncc1", 6.0, 3.5, 4.0), ("CC(=O)N", 7.0, 5.0, 5.2)]
    lines = ["smiles,eht_gap_ev,xtb_gap_ev,dft_gap_ev,dft_mmff_gap_ev,dft_status"]
    lines += [f"{s},{eht},{xtb},{dft},{dft - 0.3},ok" for s, dft, eht, xtb in rows]
    pool.write_text("\n".join(lines) + "\n")
    report = geometry.network_error(pool)
    assert report["n"] == 3
    for pattern in ("none", "rdkit-eht", "rdkit-eht+gfn2-xtb"):
        on_mmff, on_xtb = report[f"{pattern} vs mmff"], report[f"{pattern} vs xtb"]
        # The same predictions against a truth 0.3 eV lower: the mean error moves by exactly that.
        assert on_mmff["mean_error_ev"] == pytest.approx(on_xtb["mean_error_ev"] + 0.3)
        assert 0 <= on_xtb["coverage_90"] <= 1 and on_xtb["mae_ev"] >= abs(on_xtb["mean_error_ev"])
    pool.write_text("smiles,eht_gap_ev,xtb_gap_ev,dft_gap_ev\nCCO,6.0,6.5,8.5\n")
    with pytest.raises(SystemExit, match="needs both geometries' DFT"):
        geometry.main(["--pool", str(pool), "--network"])
