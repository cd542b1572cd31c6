"""Would a minimal-basis rung between xTB and DFT pay? Its cost and what it adds to the shipped surrogate.

    OMP_NUM_THREADS=1 python -m benchmarks.middle_rung --n 300 --seed 0 --json artifacts/bench/middle_rung.json

A middle rung earns its place in the ladder only if its answers narrow the
scheduler's belief about the top tier (B3LYP) enough to save more top-tier
calls than the rung itself costs. The candidate here is the cheapest
ab-initio method with no DFT grid: restricted Hartree-Fock in the STO-3G
minimal basis, on the same MMFF geometry the DFT tier uses
(:func:`arl_flows.suites.molecules.chemistry.embed_molecule`). (The shipped
network exposed as a verifier is no candidate: its answer is the posterior
mean the scheduler already has for free from step 0, so it carries no
information worth a charge.)

On ``--n`` molecules of the shipped network's test split (never trained on),
drawn by ``--seed``, it measures:

- the rung's CPU-seconds per molecule (one thread), against the top tier's 10.5;
- how well the top-tier gap is predicted, out of fold (5 folds), from the
  shipped network given EHT + xTB (what the scheduler knows before the rung)
  and from the network plus the rung's gap (what it would know after);
- the same for the lower tiers alone (a cold start's linear view).

The rung can only pay if the second error is clearly below the first.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

import numpy as np

from arl_flows.suites.molecules.pretrained import LOWER_TIERS, load_lower_tiers, load_shipped, split_of
from benchmarks.provenance import with_provenance

TOP_COST = 10.5  # median CPU-s of one B3LYP/6-31G* call on QM9 (docs/tiers.md)


def hf_minimal_gap(smiles: str, basis: str = "sto-3g") -> dict[str, float]:
    """RHF HOMO-LUMO gap (eV) in a minimal basis on the DFT tier's MMFF geometry, and its CPU-seconds."""
    from pyscf import gto, lib, scf
    from rdkit import Chem

    from arl_flows.suites.molecules.chemistry import embed_molecule, xyz_of
    from arl_flows.suites.molecules.xtb import HARTREE_TO_EV

    lib.num_threads(1)
    c0 = time.process_time()
    molh, _ = embed_molecule(Chem.MolFromSmiles(smiles))
    _, symbols, coords = xyz_of(molh)
    mol = gto.M(atom=[(s, xyz) for s, xyz in zip(symbols, coords, strict=True)], basis=basis, verbose=0)
    mf = scf.RHF(mol)
    mf.conv_tol = 1e-8
    mf.kernel()
    n_occ = mol.nelectron // 2
    gap = float(mf.mo_energy[n_occ] - mf.mo_energy[n_occ - 1]) * HARTREE_TO_EV
    return {"gap_ev": gap, "cpu_s": time.process_time() - c0, "converged": bool(mf.converged)}


def _oof_errors(x: np.ndarray, y: np.ndarray, folds: np.ndarray) -> np.ndarray:
    """Out-of-fold residuals of an ordinary least-squares fit of ``y`` on ``[1, x]``."""
    design = np.column_stack([np.ones(len(y)), x])
    out = np.empty(len(y))
    for k in np.unique(folds):
        held = folds == k
        w, *_ = np.linalg.lstsq(design[~held], y[~held], rcond=None)
        out[held] = y[held] - design[held] @ w
    return out


def _summary(resid: np.ndarray, near: np.ndarray) -> dict[str, float]:
    return {
        "mae": float(np.mean(np.abs(resid))),
        "rmse": float(np.sqrt(np.mean(resid**2))),
        "mae_near_window": float(np.mean(np.abs(resid[near]))) if near.any() else float("nan"),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=300, help="Test-split molecules to run the rung on.")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--basis", default="sto-3g", help="Minimal basis (PySCF name).")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    rows = [r for r in load_lower_tiers() if split_of(r["smiles"]) == "test" and np.isfinite(r[LOWER_TIERS[0]])]
    random.Random(args.seed).shuffle(rows)
    rows = rows[: args.n]
    got: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for i, r in enumerate(rows):
        try:
            out = hf_minimal_gap(r["smiles"], args.basis)
        except Exception as exc:  # an embedding failure: the rung would answer 'failed' for it
            print(f"  {r['smiles']}: {exc}", flush=True)
            continue
        if out["converged"]:
            got.append({**r, "rung": out["gap_ev"], "rung_cpu_s": out["cpu_s"]})
        if (i + 1) % 50 == 0:
            print(f"  {i + 1}/{len(rows)} in {time.perf_counter() - t0:.0f}s", flush=True)

    from arl_flows.suites.molecules.graph import GraphModelConfig

    shipped = load_shipped(LOWER_TIERS, GraphModelConfig())
    if shipped is None:
        raise SystemExit("no shipped network in arl_flows/suites/molecules/data/surrogate/")
    smiles = [g["smiles"] for g in got]
    lower = np.array([[g[t] for t in LOWER_TIERS] for g in got])
    net, net_std = shipped.predict(smiles, lower)
    y = np.array([g["gap_ev"] for g in got])
    rung = np.array([g["rung"] for g in got])
    cost = np.array([g["rung_cpu_s"] for g in got])
    folds = np.arange(len(y)) % 5
    near = np.abs(net - 3.5) <= 1.0  # where the benchmark's 3-4 eV window decisions are made
    views = {
        "network (EHT + xTB)": _oof_errors(net[:, None], y, folds),
        "network + rung": _oof_errors(np.column_stack([net, rung]), y, folds),
        "EHT + xTB (linear)": _oof_errors(lower, y, folds),
        "EHT + xTB + rung (linear)": _oof_errors(np.column_stack([lower, rung]), y, folds),
        "rung alone (linear)": _oof_errors(rung[:, None], y, folds),
    }
    report = {
        "command": f"python -m benchmarks.middle_rung --n {args.n} --seed {args.seed} --basis {args.basis}",
        "method": f"RHF/{args.basis}, MMFF geometry, 1 thread",
        "molecules": len(got),
        "near_window": int(near.sum()),
        "rung_cpu_s": {"median": float(np.median(cost)), "mean": float(np.mean(cost)), "p90": float(np.quantile(cost, 0.9))},
        "top_cost_s": TOP_COST,
        "network_mean_std": float(np.mean(net_std)),
        "residual_corr_rung": float(np.corrcoef(y - net, rung)[0, 1]),
        "out_of_fold": {name: _summary(e, near) for name, e in views.items()},
    }
    report = with_provenance(report)
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
