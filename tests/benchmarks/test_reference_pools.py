"""Reference pools: selection is deterministic and novel, compute resumes from the ledger or an exported CSV."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from benchmarks import reference_pools as rp

TINY = [("N#CF", "test", 3), ("O=CF", "test", 3)]


def _write_selection(folder: Path, rows: list[tuple[str, str, int]], pool: str = "qm9_novel") -> None:
    with open(folder / f"{pool}.smiles.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["order", "smiles", "source", "heavy_atoms"])
        writer.writerows((i, *row) for i, row in enumerate(rows))


def test_novel_molecules_excludes_qm9_members_and_out_of_space(tmp_path: Path) -> None:
    table = tmp_path / "qm9.csv"
    table.write_text("smiles,gap_ev\nOCC,8.0\nc1ccccc1,6.8\n")
    exclude = rp.qm9_smiles([table])
    assert {"CCO", "OCC", "c1ccccc1"} <= exclude  # canonical forms of the table's rows are excluded too
    candidates = [
        ("C(O)C", "prior"),  # ethanol written another way: in QM9
        ("CCS", "prior"),  # sulfur is outside QM9's elements
        ("CCCCCCCCCC", "prior"),  # 10 heavy atoms
        ("C[NH3+]", "prior"),  # charged
        ("CC.O", "prior"),  # two fragments
        ("[CH3]", "prior"),  # radical
        ("not a smiles", "prior"),
        ("OC=NF", "prior"),
        ("FN=CO", "moses-train"),  # the same molecule again
        ("FC#N", "moses-test"),
    ]
    constraints = rp._constraints(rp.POOLS["qm9_novel"])
    first = rp.novel_molecules(candidates, exclude, constraints, limit=10)
    assert first == rp.novel_molecules(candidates, exclude, constraints, limit=10)
    assert [(r["smiles"], r["source"], r["heavy_atoms"]) for r in first] == [("OC=NF", "prior", 4), ("N#CF", "moses-test", 3)]
    assert len(rp.novel_molecules(candidates, exclude, constraints, limit=1)) == 1


@pytest.mark.slow
def test_prior_samples_are_deterministic() -> None:
    from arl_flows.suites.molecules.prior import SHIPPED_PRIOR_DIR
    from policies import Policy

    prior = Policy.load(SHIPPED_PRIOR_DIR)
    first = list(rp.prior_samples(seed=3, batches=1, batch_size=6, policy=prior))
    assert len(first) == 6 and all(source == "prior" for _, source in first)
    assert first == list(rp.prior_samples(seed=3, batches=1, batch_size=6, policy=prior))
    assert first != list(rp.prior_samples(seed=4, batches=1, batch_size=6, policy=prior))


def test_committed_qm9_novel_selection_is_novel_and_in_space() -> None:
    from arl_flows.suites.molecules import check_molecule
    from arl_flows.suites.molecules.datasets import load_qm9_gaps

    rows = rp.load_selection("qm9_novel")
    assert len(rows) >= 480
    qm9 = {s for s, _ in load_qm9_gaps()}
    assert not {r["smiles"] for r in rows} & qm9
    constraints = rp._constraints(rp.POOLS["qm9_novel"])
    assert all(check_molecule(r["smiles"], constraints).canonical == r["smiles"] for r in rows)
    assert len({r["smiles"] for r in rows}) == len(rows)


def test_druglike_selection_is_stratified_small_first_and_tops_up_a_short_size() -> None:
    smiles = ["C" * n for n in range(12, 16) for _ in range(1)]  # one linear alkane per size 12..15
    smiles += [f"{'C' * (n - 1)}O" for n in range(12, 16)] + [f"{'C' * (n - 2)}OC" for n in (13, 14, 15)]
    smiles += ["CCCCCCCCCCCCCCCCCCCCCCCCC", "CCCCCCCCCCCCS(=O)(=O)Br"]  # too large; sulfonyl bromide of 15
    constraints = rp._constraints(rp.POOLS["druglike_moses"])
    rows = rp.stratified_druglike(smiles, constraints, range(12, 16), total=9, seed=1, round_size=1)
    assert rows == rp.stratified_druglike(smiles, constraints, range(12, 16), total=9, seed=1, round_size=1)
    sizes = [r["heavy_atoms"] for r in rows]
    assert sizes[:4] == [12, 13, 14, 15]  # every size in the first round, the smallest first
    assert sorted(set(sizes)) == [12, 13, 14, 15] and len(rows) >= 9  # size 12 has two: the others top it up
    assert sizes.count(12) == 2


def test_committed_druglike_selection_covers_every_size() -> None:
    rows = rp.load_selection("druglike_moses")
    assert len(rows) >= 240
    sizes = [r["heavy_atoms"] for r in rows]
    assert set(sizes) == set(range(12, 21))
    assert sizes[:27] == sorted(sizes[:27]) and set(sizes[:27]) == set(range(12, 21))  # a first round of every size


@pytest.mark.slow
def test_compute_writes_verdicts_resumes_and_exports(tmp_path: Path) -> None:
    _write_selection(tmp_path, TINY)
    url = f"sqlite:///{tmp_path / 'pools.db'}"
    said: list[str] = []
    counts = rp.compute("qm9_novel", url, tmp_path, progress=said.append)
    assert counts == {"candidates": 2, "exported": 0, "dft_ok": 2, "dft_done": 2}
    assert any(line.startswith("computing pyscf-b3lyp on 2") for line in said)

    again: list[str] = []
    assert rp.compute("qm9_novel", url, tmp_path, progress=again.append) == counts
    assert not any(line.startswith("computing") for line in again)  # everything came from the ledger

    info = rp.export("qm9_novel", url, tmp_path, command="test")
    with open(tmp_path / "qm9_novel.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["smiles"] for r in rows] == ["N#CF", "O=CF"]
    assert set(rp.CSV_COLUMNS) == set(rows[0])
    assert all(float(r["dft_gap_ev"]) > 5 and r["dft_status"] == "ok" and float(r["dft_cpu_s"]) > 0 for r in rows)
    assert rows[0]["dft_level"].startswith("B3LYPG/6-31G*")
    from benchmarks.molecule_pool import load_pool

    assert load_pool(tmp_path / "qm9_novel.csv") == [(r["smiles"], float(r["dft_gap_ev"])) for r in rows]
    saved = json.loads((tmp_path / "qm9_novel.json").read_text())
    assert saved["counts"] == info["counts"] == {"candidates": 2, "ok": 2, "failed": 0, "not_computed": 0, "target": 400}
    assert {"pyscf", "tblite", "rdkit"} <= set(saved["packages"]) and saved["level_of_theory"]["timeout_s"] == 1800.0
    assert saved["summary"]["dft_cpu_s_by_heavy_atoms"]["3"]["n"] == 2

    # A fresh machine with only the exported files: nothing is recomputed and the export keeps the rows.
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    again = []
    assert rp.compute("qm9_novel", fresh, tmp_path, progress=again.append)["exported"] == 2
    assert not any(line.startswith("computing") for line in again)
    assert rp.export("qm9_novel", fresh, tmp_path)["counts"]["ok"] == 2


def test_cli_names_the_fix_for_a_missing_selection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert rp.main(["compute", "--pool", "qm9_novel", "--dir", str(tmp_path), "--ledger", str(tmp_path / "l.db")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "select --pool qm9_novel" in err and "\n" not in err


def test_shards_split_the_work_between_processes_and_bad_shards_get_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_selection(tmp_path, TINY)
    url = f"sqlite:///{tmp_path / 'pools.db'}"
    said: list[str] = []
    first = rp.compute("qm9_novel", url, tmp_path, progress=said.append, shard=(0, 2))
    assert first["dft_done"] == 1 and any("shard 0/2: 1 of them" in line for line in said)
    second = rp.compute("qm9_novel", url, tmp_path, progress=lambda _: None, shard=(1, 2))
    assert second["dft_done"] == 1
    assert rp.compute("qm9_novel", url, tmp_path)["dft_done"] == 2  # both shards landed in the one ledger
    for bad in ("2/2", "x/2", "1"):
        assert rp.main(["compute", "--pool", "qm9_novel", "--dir", str(tmp_path), "--ledger", str(tmp_path / "l.db"),
                        "--shard", bad]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: --shard") and "\n" not in err
