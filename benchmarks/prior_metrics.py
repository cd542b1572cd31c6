"""Build the FCD reference a prior's report compares against: ChemNet statistics of MOSES test, shipped.

    OMP_NUM_THREADS=1 python -m benchmarks.prior_metrics --data ../shared/data/moses/test.csv.gz

A seeded sample of ``--sample`` molecules of MOSES test (Polykovskiy et al., Front. Pharmacol. 2020; MIT)
is canonicalised as the suite keys molecules; the mean and covariance of their ChemNet activations
(``fcd-torch``) go to ``arl_flows/suites/molecules/data/fcd/moses_test.npz`` (float32, the covariance's upper
triangle) with a JSON record (and its provenance) beside it. The record also holds the small-sample floor: the FCD of
``--floor`` other MOSES test molecules (disjoint from the reference sample) to the reference, what a
generator indistinguishable from MOSES would score on a sample of that size.

``--baseline 1000,10000`` builds nothing: it scores that many other MOSES test molecules (outside the reference
sample and the floor) with every metric of a prior's report, against the shipped indexes and reference, i.e.
what MOSES itself scores at each sample size (docs/benchmarks.md, "Druglike prior"), one JSON line each after a
provenance line.

Recompute the metrics of an existing prior (no retraining) with ``arl prior evaluate --dir D``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import time
from pathlib import Path

from arl_flows.suites.molecules.chemistry import canonical_smiles
from arl_flows.suites.molecules.sample_quality import FCD_DIR, FCDReference, chemnet_statistics, fcd, sample_metrics, space_references
from benchmarks.novelty_index import _smiles_of
from benchmarks.provenance import format_provenance, with_provenance


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="MOSES test.csv(.gz), a CSV with a SMILES column.")
    parser.add_argument("--sample", type=int, default=10_000, help="Reference molecules drawn from it (default 10,000).")
    parser.add_argument("--floor", type=int, default=1_000, help="Other molecules whose FCD to the reference is recorded.")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the draw (random.Random(seed).sample).")
    parser.add_argument("--out", type=Path, default=FCD_DIR / "moses_test.npz", help="Output .npz (default: the shipped one).")
    parser.add_argument("--baseline", default=None, help="Comma-separated sample sizes to score MOSES test itself at (no build).")
    args = parser.parse_args(argv)
    data = args.data.resolve()
    if not data.is_file():
        raise SystemExit(f"--data {str(data)!r} is not a file; pass MOSES test, e.g. ../shared/data/moses/test.csv.gz")
    start = time.process_time()
    smiles = list(_smiles_of(data))
    if args.sample + args.floor > len(smiles) or args.sample < 2:
        raise SystemExit(f"--sample {args.sample} + --floor {args.floor} must be at least 2 and at most the {len(smiles)} molecules of {data.name}")
    drawn = random.Random(args.seed).sample(range(len(smiles)), args.sample + args.floor)
    if args.baseline:
        _baseline(smiles, set(drawn), [int(n) for n in args.baseline.split(",")], args)
        return
    canonicals = [c for c in (canonical_smiles(smiles[i]) for i in drawn) if c is not None]
    reference_set, floor_set = canonicals[: args.sample], canonicals[args.sample :]
    source = f"MOSES test ({data.name}: {len(reference_set):,} molecules, random.Random({args.seed}).sample)"
    reference = chemnet_statistics(reference_set, source)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    reference.save(args.out)
    record = with_provenance({
        "source": data.name,
        "source_sha256": hashlib.sha256(data.read_bytes()).hexdigest(),
        "rows": len(smiles),
        "sample": len(reference_set),
        "seed": args.seed,
        "unparsed": len(drawn) - len(canonicals),
        "floor_molecules": len(floor_set),
        "fcd_of_floor_molecules": round(fcd(floor_set, reference), 4) if len(floor_set) >= 2 else None,
        "model": "ChemNet v0.13 (fcd-torch 1.0.7)",
        "bytes": args.out.stat().st_size,
        "cpu_s": round(time.process_time() - start, 1),
    })
    args.out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record))


def _baseline(smiles: list[str], drawn: set[int], sizes: list[int], args: argparse.Namespace) -> None:
    """The report's metrics of ``sizes`` MOSES test molecules that are in neither the reference nor the floor."""
    training, scaffolds, _ = space_references("druglike")
    reference = FCDReference.load(args.out)
    others = [i for i in range(len(smiles)) if i not in drawn]
    print(f"provenance: {format_provenance()}")
    for size in sizes:
        start = time.process_time()
        picked = [smiles[i] for i in random.Random(args.seed + 1).sample(others, size)]
        metrics = {k: round(v, 4) if isinstance(v, float) else v for k, v in sample_metrics(picked, training, scaffolds, reference).items()}
        print(json.dumps({"molecules": size, "source": args.data.name} | metrics | {"cpu_s": round(time.process_time() - start, 1)}))


if __name__ == "__main__":
    main()
