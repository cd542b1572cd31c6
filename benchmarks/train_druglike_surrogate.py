"""Train the druglike space's shipped surrogate: xTB from the molecule, DFT from xTB (``multifidelity.py``).

    OMP_NUM_THREADS=1 python -m benchmarks.train_druglike_surrogate [--epochs 30] [--threads 1]

Reads ``arl_flows/suites/molecules/data/surrogate_druglike/moses_lower_tiers.csv.gz``
(``python -m benchmarks.moses_lower_tiers export``: EHT and xTB gaps of MOSES train
molecules, and DFT on a few of them), then:

1. **Split** by a hash of the canonical SMILES (``pretrained.split_of``: 65% train,
   10% calibration, 25% test). The DFT-labelled molecules are kept out of all three.
2. **Train** :class:`GraphModel` (the scheduler's default shape) on the train split:
   the molecule and the EHT gap (hidden at random, so it also predicts from the
   molecule alone) to the xTB gap.
3. **Calibrate** the network's std on the calibration split, per pattern (EHT shown
   or not): the conformal factor that makes its 90% interval cover 90% of xTB.
4. **Fit the DFT correction** ``dft = a + b xtb`` by least squares on the DFT-labelled
   molecules; leave-one-out residuals give its out-of-sample error and coverage,
   and the network's composed prediction (xTB estimate through the correction) is
   scored on the same molecules, which it never trained on.
5. **Report** on the test split (the network's xTB error and coverage) and write
   ``xtb_ensemble.pt`` and ``report.json`` beside the table.

``--keep-network`` skips step 2 (the network saved in ``--out`` is loaded): steps 3-5 alone, minutes instead of
half an hour, for a table that has gained DFT labels since the network was trained.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import norm

from arl_flows.suites.molecules.graph import GraphModel, GraphModelConfig
from arl_flows.suites.molecules.multifidelity import (
    CHEAP,
    DRUGLIKE_DIR,
    LABELS_CSV,
    NET_TIERS,
    REPORT,
    TOP,
    WEIGHTS,
    MultiFidelitySurrogate,
    load_moses_lower_tiers,
)
from arl_flows.suites.molecules.pretrained import LOWER_TIERS, split_of
from benchmarks.provenance import format_provenance, with_provenance

_Z90 = float(norm.ppf(0.95))
_Z50 = float(norm.ppf(0.75))


def _conformal(z: np.ndarray) -> float:
    """The factor that makes |z| <= factor * z90 hold for 90% (finite-sample conformal quantile)."""
    level = min(math.ceil((len(z) + 1) * 0.9) / len(z), 1.0)
    return float(np.quantile(z, level) / _Z90)


def _tails(z: np.ndarray) -> tuple[float, float]:
    """Gross errors beyond 3 calibrated stds in excess of the Gaussian's share, and their rms (as Surrogate does)."""
    far = z > 3.0
    expected = len(z) * 2 * norm.sf(3.0)
    rate = float(max(far.sum() - expected - 2 * np.sqrt(expected), 0.0) / len(z))
    return rate, float(np.sqrt(np.mean(z[far] ** 2))) if far.any() else 1.0


def fit_correction(xtb: np.ndarray, dft: np.ndarray) -> dict[str, Any]:
    """Least squares ``dft = a + b xtb``: coefficients, residual sigma (n - 2 dof), their covariance, and LOO."""
    n = len(xtb)
    if n < 5:
        raise SystemExit(f"the DFT correction needs at least 5 DFT-labelled molecules, the table has {n}")
    design = np.stack([np.ones(n), xtb], axis=1)
    coef, *_ = np.linalg.lstsq(design, dft, rcond=None)
    resid = dft - design @ coef
    sigma = float(np.sqrt(resid @ resid / (n - 2)))
    cov = sigma**2 * np.linalg.inv(design.T @ design)
    loo = np.empty(n)
    for i in range(n):
        keep = np.arange(n) != i
        c, *_ = np.linalg.lstsq(design[keep], dft[keep], rcond=None)
        loo[i] = dft[i] - design[i] @ c
    return {"a": float(coef[0]), "b": float(coef[1]), "sigma": sigma, "cov": cov.tolist(), "n": n,
            "loo_mae": float(np.mean(np.abs(loo))), "loo_rmse": float(np.sqrt(np.mean(loo**2))),
            "fit_mae": float(np.mean(np.abs(resid)))}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=GraphModelConfig.epochs)
    ap.add_argument("--members", type=int, default=GraphModelConfig.members)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--table", type=Path, default=LABELS_CSV)
    ap.add_argument("--out", type=Path, default=DRUGLIKE_DIR, help="Where to write the weights and the report.")
    ap.add_argument("--keep-network", action="store_true",
                    help="Load the trained network from --out and refit only its calibration and the DFT correction.")
    ap.add_argument("--limit", type=int, default=None,
                    help="Keep only the first N molecules without DFT (a quick check; the DFT-labelled all stay).")
    args = ap.parse_args(argv)
    if not args.table.is_file():
        raise SystemExit(f"{args.table}: no such file; run python -m benchmarks.moses_lower_tiers export first")
    rows = [r for r in load_moses_lower_tiers(args.table) if np.isfinite(r["rdkit-eht"]) and np.isfinite(r[CHEAP])]
    labelled = [r for r in rows if np.isfinite(r[TOP])]
    if args.limit is not None:
        rows = [r for r in rows if not np.isfinite(r[TOP])][: args.limit] + labelled
    parts: dict[str, list[dict[str, Any]]] = {"train": [], "calibration": [], "test": []}
    for r in rows:
        if not np.isfinite(r[TOP]):
            parts[split_of(r["smiles"])].append(r)
    print({**{k: len(v) for k, v in parts.items()}, "dft": len(labelled)}, flush=True)

    config = GraphModelConfig(epochs=args.epochs, members=args.members, seed=args.seed, threads=args.threads)
    model = GraphModel(list(NET_TIERS), config)

    def arrays(part: list[dict[str, Any]], show_eht: bool = True) -> tuple[list[str], np.ndarray, np.ndarray]:
        eht = np.array([[r["rdkit-eht"] if show_eht else math.nan] for r in part])
        return [r["smiles"] for r in part], eht, np.array([r[CHEAP] for r in part])

    smiles, values, target = arrays(parts["train"])
    args.out.mkdir(parents=True, exist_ok=True)
    if args.keep_network:
        # The network as it is (its training record kept): only the calibration and the DFT correction are refitted,
        # e.g. after more DFT labels landed in the table. Its train split must be the table's (same hash rule).
        old = json.loads((args.out / REPORT.name).read_text()) if (args.out / REPORT.name).is_file() else None
        if old is None or not model.load(args.out / WEIGHTS.name):
            raise SystemExit(f"--keep-network: no trained network of this shape in {args.out}; train one first")
        train_cpu, train_wall = old["training"]["cpu_s"], old["training"]["wall_s"]
    else:
        c0, t0 = time.process_time(), time.perf_counter()
        model.fit(smiles, values, target,
                  progress=lambda e, k, loss: print(f"  epoch {e}/{k} loss {loss:.3f}", flush=True) if e % 5 == 0 else None)
        train_cpu, train_wall = time.process_time() - c0, time.perf_counter() - t0
        model.save(args.out / WEIGHTS.name)

    def evaluate(part: list[dict[str, Any]], scale: dict[str, float] | None) -> dict[str, dict[str, Any]]:
        out = {}
        for name, show in (("", False), ("rdkit-eht", True)):
            s, v, y = arrays(part, show)
            mean, std = model.predict(s, v)
            k = scale[name] if scale else 1.0
            z = np.abs(y - mean) / (std * k)
            out[name] = {"n": len(y), "rmse": float(np.sqrt(np.mean((y - mean) ** 2))),
                         "mae": float(np.mean(np.abs(y - mean))), "coverage_50": float(np.mean(z <= _Z50)),
                         "coverage_90": float(np.mean(z <= _Z90)), "mean_std": float(np.mean(std * k)), "_z": z,
                         "_std": std * k}
        return out

    cal = evaluate(parts["calibration"], None)
    net_patterns = {name: {"std_scale": _conformal(r["_z"])} for name, r in cal.items()}
    test = evaluate(parts["test"], {k: v["std_scale"] for k, v in net_patterns.items()})

    correction = fit_correction(np.array([r[CHEAP] for r in labelled]), np.array([r[TOP] for r in labelled]))
    report: dict[str, Any] = {
        "model": "multi-fidelity (arl_flows/suites/molecules/multifidelity.py): GraphModel ensemble xTB <- molecule"
                 " [+ EHT], then DFT = a + b xTB fitted on the DFT-labelled molecules",
        "config": {k: getattr(config, k) for k in ("hidden", "layers", "epochs", "batch_size", "lr", "weight_decay",
                                                   "hide_tier_prob", "members", "seed")},
        "tiers": list(LOWER_TIERS), "net_tiers": list(NET_TIERS), "net_target": CHEAP,
        "data": {"table": f"arl_flows/suites/molecules/data/surrogate_druglike/{args.table.name}",
                 "table_sha256": hashlib.sha256(args.table.read_bytes()).hexdigest()},
        "split": {"rule": "pretrained.split_of (sha256 of the canonical SMILES): < 0.25 test, < 0.35 calibration,"
                          " else train; DFT-labelled molecules in none",
                  "sizes": {k: len(v) for k, v in parts.items()}},
        "training": {"cpu_s": round(train_cpu, 1), "wall_s": round(train_wall, 1), "threads": args.threads},
        "net_patterns": net_patterns,
        "net_test_split": {k: {kk: vv for kk, vv in v.items() if not kk.startswith("_")} for k, v in test.items()},
        "correction": correction,
        "patterns": {},
    }
    # The scheduler's priors per pattern, and the composed prediction scored on the DFT-labelled molecules
    # (the network never trained on them; the correction's own share of the error is leave-one-out).
    surrogate = MultiFidelitySurrogate(model, report)
    dft = np.array([r[TOP] for r in labelled])
    scored = {}
    for pattern in ((), ("rdkit-eht",), tuple(LOWER_TIERS)):
        values = np.array([[r[t] if t in pattern else math.nan for t in LOWER_TIERS] for r in labelled])
        mean, std = surrogate.predict([r["smiles"] for r in labelled], values)
        z = np.abs(dft - mean) / std
        name = "+".join(pattern)
        scored[name] = {"n": len(dft), "mae": float(np.mean(np.abs(dft - mean))),
                        "coverage_50": float(np.mean(z <= _Z50)), "coverage_90": float(np.mean(z <= _Z90)),
                        "mean_std": float(np.mean(std)), "note": "in-sample for the correction (fitted on these)"}
        # Typical std from the calibration split (many molecules); the gross-error tail from the network's
        # xTB errors there (the correction's few labels cannot measure one).
        cal_part = parts["calibration"]
        cal_values = np.array([[r[t] if t in pattern else math.nan for t in LOWER_TIERS] for r in cal_part])
        _, cal_std = surrogate.predict([r["smiles"] for r in cal_part], cal_values)
        rate, tail = _tails(cal[name]["_z"] / net_patterns[name]["std_scale"]) if name in cal else (0.0, 1.0)
        report["patterns"][name] = {"std_scale": 1.0, "typical_std": float(np.median(cal_std)),
                                    "tail_rate": rate, "tail_scale": tail}
    report["dft_labelled"] = scored
    report = with_provenance(report)
    report["weights_sha256"] = hashlib.sha256((args.out / WEIGHTS.name).read_bytes()).hexdigest()
    (args.out / REPORT.name).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"net_test_split": report["net_test_split"], "correction": {k: v for k, v in correction.items()
                      if k != "cov"}, "dft_labelled": scored, "training": report["training"]}, indent=2))
    print(f"provenance: {format_provenance(report['provenance'])}")


if __name__ == "__main__":
    main()
