"""How much the conformer choice moves a drug-like molecule's gap: one ETKDG conformer against the lowest of K.

    OMP_NUM_THREADS=1 python -m benchmarks.conformers --molecules 60 --conformers 10

Molecules: every fifth of ``benchmarks/data/tiers_druglike.csv`` (MOSES test, 12-26 heavy atoms). For each, the
GFN2-xTB gap (tblite, in-process, one thread) on the suite's default geometry (ETKDGv3 seed 42, MMFF94) and on each
of K ETKDG conformers (same seed), MMFF-optimised; reported: |gap(default) - gap(lowest MMFF energy)|, the spread of
the gap over the K conformers (by rotatable bonds), and the CPU cost of embedding K conformers. xTB stands in for
DFT here (minutes per call at this size); the tiers' gaps move together with the geometry (docs/tiers.md).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from arl_flows.suites.molecules.chemistry import GeometryParams, embed_molecule
from arl_flows.suites.molecules.xtb import ANGSTROM_TO_BOHR, HARTREE_TO_EV, _calculator
from benchmarks.provenance import format_provenance
from benchmarks.tiers import load_druglike_sample


def _gap(molh, conf_id: int = -1) -> float:
    z = np.array([a.GetAtomicNum() for a in molh.GetAtoms()])
    positions = np.array(molh.GetConformer(conf_id).GetPositions()) * ANGSTROM_TO_BOHR
    result = _calculator(z, positions, {}).singlepoint()
    energies, occupations = np.asarray(result.get("orbital-energies")), np.asarray(result.get("orbital-occupations"))
    n = int(round(occupations.sum())) // 2
    return float(energies[n] - energies[n - 1]) * HARTREE_TO_EV


def main(argv: list[str] | None = None) -> None:
    from rdkit import Chem
    from rdkit.Chem import AllChem, rdMolDescriptors

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--molecules", type=int, default=60)
    parser.add_argument("--conformers", type=int, default=10)
    args = parser.parse_args(argv)
    if args.molecules < 1 or args.conformers < 2:
        raise SystemExit("--molecules must be at least 1 and --conformers at least 2")
    molecules = load_druglike_sample()[::5][: args.molecules]
    diffs, spreads, rotatable, costs = [], [], [], []
    for smiles, _ in molecules:
        mol = Chem.MolFromSmiles(smiles)
        default, _ = embed_molecule(mol, GeometryParams())
        start = time.process_time()
        many = Chem.AddHs(mol)
        options = AllChem.ETKDGv3()
        options.randomSeed = GeometryParams().seed
        ids = list(AllChem.EmbedMultipleConfs(many, args.conformers, options))
        energies = [e for _, e in AllChem.MMFFOptimizeMoleculeConfs(many, maxIters=GeometryParams().max_force_field_iters)]
        costs.append(time.process_time() - start)
        gaps = [_gap(many, i) for i in ids]
        diffs.append(abs(_gap(default) - gaps[int(np.argmin(energies))]))
        spreads.append(statistics.pstdev(gaps))
        rotatable.append(rdMolDescriptors.CalcNumRotatableBonds(mol))
    k = args.conformers
    print(f"{len(molecules)} molecules, {k} conformers each (ETKDGv3 seed 42 + MMFF94), GFN2-xTB single points")
    q90 = sorted(diffs)[int(0.9 * len(diffs))]
    print(f"|gap(default conformer) - gap(lowest MMFF energy of {k})|: median {statistics.median(diffs):.3f} eV, "
          f"mean {statistics.fmean(diffs):.3f}, 90th percentile {q90:.3f}, max {max(diffs):.3f}")
    print(f"std of the gap over the {k} conformers: median {statistics.median(spreads):.3f} eV, max {max(spreads):.3f}")
    rb, ds, sp = np.array(rotatable), np.array(diffs), np.array(spreads)
    for lo, hi in ((0, 3), (3, 6), (6, 99)):
        sel = (rb >= lo) & (rb < hi)
        if sel.any():
            print(f"rotatable bonds {lo}-{min(hi - 1, rb.max())}: n={int(sel.sum())}, median |diff| {np.median(ds[sel]):.3f} eV, "
                  f"median std {np.median(sp[sel]):.3f} eV")
    print(f"CPU s to embed and MMFF-optimise {k} conformers: median {statistics.median(costs):.2f}, max {max(costs):.2f}")
    print(f"provenance: {format_provenance()}")


if __name__ == "__main__":
    main()
