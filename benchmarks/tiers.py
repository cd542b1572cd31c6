"""Accuracy and cost of each molecules tier against QM9 gaps.

    OMP_NUM_THREADS=1 python -m benchmarks.tiers                       # all tiers on tests/data/qm9_sample.csv
    python -m benchmarks.tiers --verifiers rdkit-eht,gfn2-xtb          # skip DFT
    python -m benchmarks.tiers --make-sample 32 --seed 7               # re-draw the sample from the molecules suite's data
    python -m benchmarks.tiers --verifiers pyscf-b3lyp:basis=sto-3g    # a tier with other params (key=value+...)

For each verifier: mean absolute error and Pearson correlation of its gap
against QM9's (B3LYP/6-31G(2df,p)), the MAE after a linear recalibration
(cheap tiers are biased; what the surrogate needs is correlation), and the
median cost (CPU-seconds of the worker) per molecule. Tiers run through the
same ``verify_batch`` the training flow uses.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import random
import statistics
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
from arl_flows.suites.molecules.datasets import QM9_GAP_CSV, load_qm9_gaps
from storage.records import Status
from verifiers import Closable, registry
from arl_flows.suites.molecules import (
    DFTGapVerifier,
    EHTGapVerifier,
    InvalidMolecule,
    ReferenceTableVerifier,
    XTBGapVerifier,
    check_molecule,
    make_candidate,
)
from benchmarks.provenance import format_provenance, with_provenance

SAMPLE_CSV = ROOT / "tests" / "data" / "qm9_sample.csv"
_LADDER = {c.name: c for c in (EHTGapVerifier, XTBGapVerifier, DFTGapVerifier, ReferenceTableVerifier)}
DEFAULT_VERIFIERS = ["rdkit-eht", "gfn2-xtb", "gfn2-xtb:optimize", "pyscf-b3lyp"]


def make_sample(n: int, seed: int, path: Path = SAMPLE_CSV) -> None:
    """Draw ``n`` molecules from the shipped QM9 table into ``path`` (with attribution)."""
    # A few QM9 SMILES carry charges from the original xyz->SMILES conversion
    # ("C[NH2+]C1CN=CN1"); they fail the suite's constraints, so draw only valid ones.
    rows = [(s, g) for s, g in load_qm9_gaps() if _valid(s)]
    picked = random.Random(seed).sample(rows, n)
    with open(path, "w", newline="") as fh:
        fh.write(
            f"# {n} molecules drawn with seed {seed} from {QM9_GAP_CSV.relative_to(ROOT)} (those passing the default "
            "constraints) by benchmarks/tiers.py --make-sample.\n"
            "# Source: QM9, Ramakrishnan et al., Sci. Data 1, 140022 (2014), DOI 10.1038/sdata.2014.22; "
            "license CC0. gap_ev: B3LYP/6-31G(2df,p) HOMO-LUMO gap in eV.\n"
        )
        writer = csv.writer(fh)
        writer.writerow(["smiles", "gap_ev"])
        writer.writerows(picked)


def _valid(smiles: str) -> bool:
    try:
        check_molecule(smiles)
    except InvalidMolecule:
        return False
    return True


def load_sample(path: Path = SAMPLE_CSV) -> list[tuple[str, float]]:
    with open(path, newline="") as fh:
        reader = csv.DictReader(line for line in fh if not line.startswith("#"))
        return [(row["smiles"], float(row["gap_ev"])) for row in reader]


def pearson(xs: list[float], ys: list[float]) -> float:
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else float("nan")


def calibrated_mae(xs: list[float], ys: list[float]) -> float:
    """MAE after the least-squares line y ~ a + b x (what a per-tier calibration would reach)."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0.0
    a = my - b * mx
    return statistics.fmean(abs(a + b * x - y) for x, y in zip(xs, ys))


def run_tier(spec: str, molecules: list[tuple[str, float]], threads: int) -> dict[str, Any]:
    name, _, variant = spec.partition(":")
    params: dict[str, Any] = {}
    # The ladder's own classes first: the benchmark should not depend on other suites importing cleanly.
    cls = _LADDER.get(name) or registry.get(name)
    if "threads" in cls.Params.model_fields:
        params["threads"] = threads
    if variant == "optimize":
        params["optimize"] = True
    elif variant:  # e.g. pyscf-b3lyp:basis=sto-3g+conv_tol=1e-6 (values are validated by the tier's Params)
        try:
            params |= dict(part.split("=", 1) for part in variant.split("+"))
        except ValueError:
            raise SystemExit(f"bad variant {variant!r}: use 'optimize' or key=value pairs joined by '+'") from None
    verifier = cls(params)
    candidates = [make_candidate(smiles) for smiles, _ in molecules]
    start = time.perf_counter()
    verdicts = verifier.verify_batch(candidates)
    wall = time.perf_counter() - start
    if isinstance(verifier, Closable):
        verifier.close()
    pairs = [(v.value, ref) for v, (_, ref) in zip(verdicts, molecules) if v.status == Status.ok and v.value is not None]
    preds, refs = [p for p, _ in pairs], [r for _, r in pairs]
    statuses: dict[str, int] = {}
    for v in verdicts:
        statuses[v.status.value] = statuses.get(v.status.value, 0) + 1
    return {
        "verifier": spec,
        "tier": verifier.tier.value,
        "n_ok": len(pairs),
        "statuses": statuses,
        "mae_ev": statistics.fmean(abs(p - r) for p, r in pairs) if pairs else float("nan"),
        "mean_error_ev": statistics.fmean(p - r for p, r in pairs) if pairs else float("nan"),
        "pearson_r": pearson(preds, refs) if len(pairs) > 2 else float("nan"),
        "calibrated_mae_ev": calibrated_mae(preds, refs) if len(pairs) > 2 else float("nan"),
        "median_cost_s": statistics.median(v.cost_s for v in verdicts),
        "total_wall_s": wall,
        "per_molecule": [
            {"smiles": s, "qm9_gap_ev": ref, "status": v.status.value, "gap_ev": v.value, "cost_s": v.cost_s,
             "feedback": v.feedback}
            for v, (s, ref) in zip(verdicts, molecules)
        ],
    }


def markdown_table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| verifier | tier | ok | MAE (eV) | mean error (eV) | Pearson r | MAE after linear calibration (eV) | median cost (CPU s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['verifier']} | {r['tier']} | {r['n_ok']} | {r['mae_ev']:.2f} | {r['mean_error_ev']:+.2f} | "
            f"{r['pearson_r']:.2f} | {r['calibrated_mae_ev']:.2f} | {r['median_cost_s']:.3g} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--verifiers", default=",".join(DEFAULT_VERIFIERS), help="comma-separated verifier names")
    parser.add_argument("--sample", type=Path, default=SAMPLE_CSV, help="CSV of smiles,gap_ev")
    parser.add_argument("--limit", type=int, default=None, help="only the first N molecules")
    parser.add_argument("--threads", type=int, default=1, help="threads per worker for xTB/DFT")
    parser.add_argument("--out", type=Path, default=None, help="write full results as JSON here")
    parser.add_argument("--make-sample", type=int, default=None, metavar="N", help="re-draw the sample and exit")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    if args.make_sample:
        make_sample(args.make_sample, args.seed, args.sample)
        print(f"wrote {args.make_sample} molecules to {args.sample}")
        return
    molecules = load_sample(args.sample)[: args.limit]
    results = []
    for spec in args.verifiers.split(","):
        result = run_tier(spec.strip(), molecules, args.threads)
        results.append(result)
        print(f"{spec}: {result['n_ok']}/{len(molecules)} ok, MAE {result['mae_ev']:.2f} eV, "
              f"r {result['pearson_r']:.2f}, median cost {result['median_cost_s']:.3g} s", flush=True)
    print()
    print(f"{len(molecules)} molecules from {args.sample.name}")
    print(markdown_table(results))
    print(f"provenance: {format_provenance()}")
    if args.out:
        args.out.write_text(json.dumps(with_provenance({"results": results}), indent=2))


if __name__ == "__main__":
    main()
