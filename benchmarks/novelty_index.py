"""Build the novelty index of a chemistry space's training set, shipped in the package.

    OMP_NUM_THREADS=1 python -m benchmarks.novelty_index --data ../shared/data/moses/train.csv.gz  # -> druglike
    OMP_NUM_THREADS=1 python -m benchmarks.novelty_index --data ../shared/data/moses/train.csv.gz --scaffolds

Each SMILES of the training set (MOSES: Polykovskiy et al., "Molecular Sets (MOSES)",
Front. Pharmacol. 11, 565644 (2020); MIT licence) is canonicalised exactly as the
suite keys candidates (:func:`arl_flows.suites.molecules.chemistry.canonical_smiles`)
and hashed (:func:`arl_flows.suites.molecules.novelty.smiles_hash`); the sorted unique
hashes go to ``arl_flows/suites/molecules/data/novelty/`` with a JSON record of the
source's sha256, counts, CPU-seconds and provenance beside them. ``--scaffolds`` hashes each molecule's
Bemis-Murcko scaffold instead (:func:`arl_flows.suites.molecules.novelty.murcko_scaffold`;
acyclic molecules have none), into ``<index>_scaffolds.npy``: the prior's scaffold novelty.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from arl_flows.suites.molecules.chemistry import canonical_smiles
from arl_flows.suites.molecules.datasets import smiles_column
from arl_flows.suites.molecules.novelty import NOVELTY_DIR, build_hash_index, scaffold_index_file, smiles_scaffold
from arl_flows.suites.molecules.spaces import get_space
from benchmarks.provenance import with_provenance


def _smiles_of(path: Path) -> Iterator[str]:
    try:
        yield from smiles_column(path)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", default="druglike", help="The chemistry space whose index to build (default: druglike).")
    parser.add_argument("--data", type=Path, required=True, help="CSV (optionally .gz) with a SMILES column, e.g. MOSES train.csv.gz.")
    parser.add_argument("--out", type=Path, default=None, help="Output .npy (default: the space's shipped index file).")
    parser.add_argument("--scaffolds", action="store_true", help="Index the molecules' Bemis-Murcko scaffolds instead.")
    parser.add_argument("--limit", type=int, default=None, help="Read the first N rows only (a quick check).")
    args = parser.parse_args(argv)
    space = get_space(args.space)
    if space.training_index is None:
        raise SystemExit(f"space {space.name!r} has no training index: its training set is QM9's shipped table")
    out = args.out or NOVELTY_DIR / (scaffold_index_file(space.training_index) if args.scaffolds else space.training_index)
    key = smiles_scaffold if args.scaffolds else canonical_smiles
    data = args.data.resolve()
    start = time.process_time()
    rows, unparsed, canonicals = 0, 0, []  # unparsed: no canonical SMILES (or, with --scaffolds, no scaffold)
    for smiles in _smiles_of(data):
        if args.limit is not None and rows >= args.limit:
            break
        rows += 1
        canonical = key(smiles)
        if canonical is None:
            unparsed += 1
        else:
            canonicals.append(canonical)
    index = build_hash_index(canonicals)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.save(out, index)
    record = with_provenance({
        "space": space.name,
        "source": data.name,
        "source_sha256": hashlib.sha256(data.read_bytes()).hexdigest(),
        "rows": rows,
        "unparsed": unparsed,
        "unique_canonical": len(set(canonicals)),
        "hashes": int(index.shape[0]),
        "keys": "Bemis-Murcko scaffolds" if args.scaffolds else "molecules",
        "hash": "blake2b, first 8 bytes little-endian, of the RDKit canonical SMILES",
        "bytes": out.stat().st_size,
        "cpu_s": round(time.process_time() - start, 1),
    })
    out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
