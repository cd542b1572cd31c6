"""Train the molecules suite's shipped graph-network surrogate on the shipped QM9 subset.

    OMP_NUM_THREADS=1 python -m benchmarks.train_surrogate            # tiers (if not shipped yet), train, report
    OMP_NUM_THREADS=1 python -m benchmarks.train_surrogate --tiers-only

1. **Lower tiers.** The network reads the molecule and the lower tiers'
   values (delta learning), so it must see what the real tiers say:
   ``rdkit-eht`` and ``gfn2-xtb`` run live once on every molecule of
   ``data/qm9_gap.csv`` (~7 CPU-minutes on one core) and their values go to
   ``data/surrogate/qm9_lower_tiers.csv.gz`` (shipped, ~0.5 MB), reused
   afterwards. Molecules the suite rejects (QM9's ions) get no value.
2. **Split** by a hash of the canonical SMILES
   (:func:`arl_flows.suites.molecules.pretrained.split_of`): 65% train,
   10% calibration, 25% test, never trained on.
3. **Train** :class:`arl_flows.suites.molecules.graph.GraphModel` (the
   scheduler's default shape: an ensemble of three) on the train split.
4. **Calibrate** on the calibration split: per pattern of lower tiers shown,
   the conformal factor that makes the 90% interval cover 90%.
5. **Report** on the test split (RMSE, MAE, coverage) and write
   ``data/surrogate/graph_ensemble.pt`` and ``data/surrogate/report.json``
   (training CPU-seconds, data sha256, split sizes, versions of the tiers).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import io
import json
import math
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import norm

from arl_flows.suites.molecules import EHTGapVerifier, XTBGapVerifier, make_candidate
from arl_flows.suites.molecules.datasets import QM9_GAP_CSV, load_qm9_gaps
from arl_flows.suites.molecules.graph import GraphModel, GraphModelConfig
from arl_flows.suites.molecules.pretrained import (
    LOWER_TIERS,
    LOWER_TIERS_CSV,
    REPORT,
    SHIPPED_DIR,
    WEIGHTS,
    load_lower_tiers,
    split_of,
)
from benchmarks.provenance import format_provenance, with_provenance


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def compute_lower_tiers(out: Path = LOWER_TIERS_CSV, chunk: int = 500) -> dict[str, Any]:
    """Run the live lower tiers on every shipped QM9 molecule; write (smiles, gap_ev, tier values) to ``out``."""
    rows = load_qm9_gaps()
    cands, gaps = [], []
    seen: set[str] = set()
    for smiles, gap in rows:
        c = make_candidate(smiles, {"property": "gap_ev", "low": 3.0, "high": 4.0})
        canonical = c.meta.get("canonical")
        if not canonical or canonical in seen:
            continue
        seen.add(canonical)
        c = c.model_copy(update={"payload": canonical})
        cands.append(c)
        gaps.append(gap)
    values = {}
    info = {}
    for v in (EHTGapVerifier(), XTBGapVerifier()):
        t0 = time.perf_counter()
        got: dict[str, float] = {}
        cost = 0.0
        for start in range(0, len(cands), chunk):
            for verdict in v.verify_batch(cands[start : start + chunk]):
                cost += verdict.cost_s
                if verdict.status.value == "ok" and verdict.value is not None:
                    got[verdict.candidate_key] = float(verdict.value)
            print(f"  {v.name}: {min(start + chunk, len(cands))}/{len(cands)} in {time.perf_counter() - t0:.0f}s", flush=True)
        values[v.name] = got
        info[v.name] = {"version": v.version, "params_hash": v.params_hash, "ok": len(got), "cpu_s": round(cost, 1)}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with gzip.GzipFile(tmp, "wb", mtime=0) as raw, io.TextIOWrapper(raw, encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)  # mtime=0: the same bytes for the same values
        w.writerow(["smiles", "gap_ev", *LOWER_TIERS])
        for c, gap in zip(cands, gaps):
            w.writerow([c.payload, f"{gap:.4f}", *[f"{values[t][c.key]:.4f}" if c.key in values[t] else "" for t in LOWER_TIERS]])
    os.replace(tmp, out)
    record = with_provenance({"source": QM9_GAP_CSV.name, "source_sha256": _sha256(QM9_GAP_CSV), "molecules": len(cands), "tiers": info})
    (out.parent / "lower_tiers.json").write_text(json.dumps(record, indent=2) + "\n")
    return info


def _arrays(rows: list[dict[str, Any]]) -> tuple[list[str], np.ndarray, np.ndarray]:
    smiles = [r["smiles"] for r in rows]
    values = np.array([[r[t] for t in LOWER_TIERS] for r in rows], dtype=float)
    target = np.array([r["gap_ev"] for r in rows], dtype=float)
    return smiles, values, target


_PATTERNS = {"": (), "rdkit-eht": ("rdkit-eht",), "rdkit-eht+gfn2-xtb": LOWER_TIERS}


def _shown(values: np.ndarray, pattern: tuple[str, ...]) -> np.ndarray:
    out = values.copy()
    for j, t in enumerate(LOWER_TIERS):
        if t not in pattern:
            out[:, j] = np.nan
    return out


def _z90() -> float:
    return float(norm.ppf(0.95))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiers-only", action="store_true", help="Compute the lower tiers' table and stop.")
    ap.add_argument("--recompute-tiers", action="store_true", help="Recompute the lower tiers even if the table exists.")
    ap.add_argument("--epochs", type=int, default=GraphModelConfig.epochs)
    ap.add_argument("--members", type=int, default=GraphModelConfig.members)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=SHIPPED_DIR, help="Where to write the weights and the report.")
    args = ap.parse_args(argv)

    if args.recompute_tiers or not LOWER_TIERS_CSV.is_file():
        print(f"computing {', '.join(LOWER_TIERS)} on the shipped QM9 subset -> {LOWER_TIERS_CSV}", flush=True)
        compute_lower_tiers()
    if args.tiers_only:
        return
    rows = [r for r in load_lower_tiers() if np.isfinite(r[LOWER_TIERS[0]])]  # the suite accepts the molecule
    parts: dict[str, list[dict[str, Any]]] = {"train": [], "calibration": [], "test": []}
    for r in rows:
        parts[split_of(r["smiles"])].append(r)
    print({k: len(v) for k, v in parts.items()}, flush=True)

    config = GraphModelConfig(epochs=args.epochs, members=args.members, seed=args.seed, threads=1)
    model = GraphModel(list(LOWER_TIERS), config)
    smiles, values, target = _arrays(parts["train"])
    c0, t0 = time.process_time(), time.perf_counter()
    model.fit(smiles, values, target, progress=lambda e, k, loss: print(f"  epoch {e}/{k} loss {loss:.3f}", flush=True) if e % 10 == 0 else None)
    train_cpu, train_wall = time.process_time() - c0, time.perf_counter() - t0
    args.out.mkdir(parents=True, exist_ok=True)
    model.save(args.out / WEIGHTS.name)

    stds: dict[str, np.ndarray] = {}  # the network's std per pattern on the last split evaluated

    def evaluate(part: str, scale: dict[str, float] | None) -> dict[str, dict[str, float]]:
        s, v, y = _arrays(parts[part])
        out = {}
        for name, pattern in _PATTERNS.items():
            mean, std = model.predict(s, _shown(v, pattern))
            z = (y - mean) / std
            k = scale[name] if scale else 1.0
            out[name] = {
                "n": len(y),
                "rmse": float(np.sqrt(np.mean((y - mean) ** 2))),
                "mae": float(np.mean(np.abs(y - mean))),
                "coverage_50": float(np.mean(np.abs(z) <= 0.6744897501960817 * k)),
                "coverage_90": float(np.mean(np.abs(z) <= _z90() * k)),
                "mean_std": float(np.mean(std * k)),
                "_z": np.abs(z),
            }
            stds[name] = std
        return out

    cal = evaluate("calibration", None)
    scale, patterns = {}, {}
    for name, r in cal.items():
        z = r.pop("_z")
        level = min(math.ceil((len(z) + 1) * 0.9) / len(z), 1.0)  # finite-sample conformal quantile
        scale[name] = k = float(np.quantile(z, level) / _z90())
        # Gross errors beyond 3 calibrated stds, in excess of the Gaussian's share (as Surrogate does).
        zc = z / k
        far = zc > 3.0
        expected = len(z) * 2 * norm.sf(3.0)
        patterns[name] = {
            "std_scale": k,
            "typical_std": float(np.median(stds[name] * k)),
            "tail_rate": float(max(far.sum() - expected - 2 * np.sqrt(expected), 0.0) / len(z)),
            "tail_scale": float(np.sqrt(np.mean(zc[far] ** 2))) if far.any() else 1.0,
        }
    test = evaluate("test", scale)
    for r in test.values():
        r.pop("_z")
    source = QM9_GAP_CSV
    report = {
        "model": "GraphModel (arl_flows/suites/molecules/graph.py): edge-conditioned message passing, deep ensemble",
        "config": {k: getattr(config, k) for k in ("hidden", "layers", "epochs", "batch_size", "lr", "weight_decay", "hide_tier_prob", "members", "seed")},
        "tiers": list(LOWER_TIERS),
        "data": {
            "source": f"arl_flows/suites/molecules/data/{source.name}",
            "source_sha256": _sha256(source),
            "lower_tiers": f"arl_flows/suites/molecules/data/surrogate/{LOWER_TIERS_CSV.name}",
            "lower_tiers_sha256": _sha256(LOWER_TIERS_CSV),
            "lower_tiers_info": json.loads((LOWER_TIERS_CSV.parent / "lower_tiers.json").read_text()),
        },
        "split": {
            "rule": "sha256 of the canonical SMILES -> share in [0,1): < 0.25 test, < 0.35 calibration, else train "
                    "(arl_flows.suites.molecules.pretrained.split_of)",
            "sizes": {k: len(v) for k, v in parts.items()},
            "excluded": "molecules the suite rejects (no rdkit-eht value: QM9's ions)",
        },
        "training": {
            "cpu_s": round(train_cpu, 1),
            "wall_s": round(train_wall, 1),
            "threads": 1,
            "machine": platform.processor() or platform.machine(),
            "final_loss": [round(x, 4) for x in model.history[config.epochs - 1 :: config.epochs]],
        },
        "std_scale": scale,
        "patterns": patterns,
        "calibration_split": cal,
        "test_split": test,
        "weights_sha256": _sha256(args.out / WEIGHTS.name),
    }
    report = with_provenance(report)
    (args.out / REPORT.name).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"training": report["training"], "std_scale": scale, "test_split": test}, indent=2))
    print(f"provenance: {format_provenance(report['provenance'])}")


if __name__ == "__main__":
    main()
