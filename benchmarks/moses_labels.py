"""Label a fixed subset of MOSES train with the suite's fast tier: the goal labels of the druglike prior.

    OMP_NUM_THREADS=1 nice -n 10 python -m benchmarks.moses_labels --data ../shared/data/moses/train.csv.gz

MOSES (Polykovskiy et al., Front. Pharmacol. 11, 565644 (2020); MIT licence) has
no gap labels. The druglike prior's goal tokens are trained on the gap the
suite's own fast tier computes (``rdkit-eht``: ETKDG + MMFF geometry, extended
Hueckel, about 60 CPU-ms a molecule at MOSES size) on ``--n`` molecules drawn
with ``random.Random(--seed)`` from the training set. The output is
``arl_flows/suites/molecules/data/druglike_prior_labels.csv.gz`` (canonical
SMILES as the suite writes them, raw EHT gap in eV) and a JSON record beside it
(source sha256, tier version and params hash, counts, CPU-seconds, provenance).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import json
import random
import time
from pathlib import Path

from arl_flows.suites.molecules.fast import EHTGapVerifier
from arl_flows.suites.molecules.prior import DRUGLIKE_LABELS
from benchmarks.novelty_index import _smiles_of
from benchmarks.provenance import with_provenance
from verifiers.base import Candidate


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="MOSES train.csv.gz (a CSV with a SMILES column).")
    parser.add_argument("--n", type=int, default=30000, help="Molecules to label (default 30000, the shipped labels).")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the subset draw (default 0).")
    parser.add_argument("--out", type=Path, default=DRUGLIKE_LABELS, help="Output .csv.gz.")
    args = parser.parse_args(argv)
    data = args.data.resolve()
    if not data.is_file():
        raise SystemExit(f"{data}: no such file; pass --data path/to/moses/train.csv.gz")
    smiles = list(_smiles_of(data))
    subset = random.Random(args.seed).sample(smiles, min(args.n, len(smiles)))
    tier = EHTGapVerifier({"constraints": {"space": "druglike"}})
    start = time.process_time()
    rows, failed = [], 0
    for b in range(0, len(subset), 200):
        candidates = [Candidate(key=str(b + i), suite="molecules", payload=s) for i, s in enumerate(subset[b : b + 200])]
        for verdict in tier.verify_batch(candidates):
            if verdict.value is None:
                failed += 1
            else:
                rows.append((verdict.values["canonical_smiles"], round(float(verdict.value), 4)))
        print(f"{b + len(candidates)}/{len(subset)} labeled, {time.process_time() - start:.0f} CPU-s", flush=True)
    cpu_s = time.process_time() - start
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    with gzip.open(tmp, "wt", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["smiles", "eht_gap_ev"])
        writer.writerows(rows)
    tmp.rename(args.out)
    record = with_provenance({
        "source": data.name,
        "source_sha256": hashlib.sha256(data.read_bytes()).hexdigest(),
        "seed": args.seed,
        "drawn": len(subset),
        "labeled": len(rows),
        "failed": failed,
        "tier": {"name": tier.name, "version": tier.version, "params_hash": tier.params_hash},
        "cpu_s": round(cpu_s, 1),
    })
    args.out.with_name(args.out.name.replace(".csv.gz", ".json")).write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
