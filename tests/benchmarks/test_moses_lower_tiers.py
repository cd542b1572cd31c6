"""The druglike surrogate's pretraining data: a resumable ledger computation of the cheap tiers, and its export."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pytest

from benchmarks import moses_lower_tiers as mlt

DRUGLIKE = ["CC(=O)Nc1ccc(O)cc1", "O=C(O)c1ccccc1OC(C)=O", "Cc1ccc(S(N)(=O)=O)cc1", "Clc1ccc(Br)cc1C#N", "CCN(CC)CC"]


def _data(folder: Path) -> Path:
    path = folder / "train.csv.gz"
    with gzip.open(path, "wt", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["SMILES", "SPLIT"])
        writer.writerows([s, "train"] for s in DRUGLIKE)
    return path


def test_compute_resumes_from_the_ledger_and_export_writes_every_answer(tmp_path: Path) -> None:
    data, ledger = _data(tmp_path), f"sqlite:///{tmp_path / 'tiers.db'}"
    said: list[str] = []
    counts = mlt.compute(data, n=4, seed=0, ledger_url=ledger, say=said.append)
    assert counts == {"rdkit-eht": 4, "gfn2-xtb": 4}
    assert any("computing gfn2-xtb on 4" in s for s in said)
    again: list[str] = []
    assert mlt.compute(data, n=5, seed=0, ledger_url=ledger, say=again.append) == {"rdkit-eht": 5, "gfn2-xtb": 5}
    # The draw of 5 holds the 4 already computed (random.sample keeps a prefix for the same seed): one new molecule.
    assert any("computing rdkit-eht on 1 molecules" in s for s in again), again
    out = tmp_path / "table.csv.gz"
    record = mlt.export(data, n=5, seed=0, ledger_url=ledger, out=out, command="test")
    with gzip.open(out, "rt", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [list(r) for r in rows[:1]] == [["smiles", "rdkit-eht", "gfn2-xtb", "pyscf-b3lyp"]]
    assert len(rows) == record["answered"] == 5
    assert all(float(r["gfn2-xtb"]) > 0.5 and r["pyscf-b3lyp"] == "" for r in rows)
    saved = json.loads(out.with_name("table.json").read_text())
    assert saved["tiers"]["gfn2-xtb"]["ok"] == 5 and saved["dft"]["ok"] == 0 and saved["seed"] == 0
    assert saved["source_sha256"] and saved["provenance"]


def test_the_dft_subset_takes_the_first_molecules_of_each_size() -> None:
    from arl_flows.suites.molecules import make_candidate

    smiles = ["C" * 12, "C" * 13, "C" * 11 + "O", "C" * 14, "C" * 12 + "N", "C" * 25]
    subset = mlt.dft_subset([make_candidate(s) for s in smiles], per_size=1)
    assert [c.meta["heavy_atoms"] for c in subset] == [12, 13, 14]
    assert mlt.dft_subset([make_candidate(s) for s in smiles], per_size=2, sizes=range(12, 13))[1].payload == "C" * 11 + "O"


def test_bad_input_gets_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="no such file; pass --data"):
        mlt.main(["compute", "--data", str(tmp_path / "missing.csv.gz"), "--ledger", str(tmp_path / "l.db")])
    with pytest.raises(SystemExit, match="--n must be at least 1"):
        mlt.main(["compute", "--data", str(_data(tmp_path)), "--n", "0", "--ledger", str(tmp_path / "l.db")])
