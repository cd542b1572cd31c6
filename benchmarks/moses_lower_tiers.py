"""The cheap tiers on tens of thousands of MOSES train molecules: the druglike surrogate's pretraining data.

    OMP_NUM_THREADS=1 nice -n 19 python -m benchmarks.moses_lower_tiers compute \\
        --data ../shared/data/moses/train.csv.gz --n 20000 --ledger /abs/moses_tiers.db
    python -m benchmarks.moses_lower_tiers export --data ../shared/data/moses/train.csv.gz --n 20000 \\
        --ledger /abs/moses_tiers.db

MOSES (Polykovskiy et al., Front. Pharmacol. 11, 565644 (2020); MIT licence) has
no gap labels, and DFT at its size costs minutes a molecule. What is cheap at
scale is the suite's own lower tiers: ``rdkit-eht`` (ETKDG + MMFF geometry,
extended Hueckel) and ``gfn2-xtb`` (GFN2-xTB single point on the same geometry),
tens of CPU-milliseconds each. ``--dft-per-size K`` first adds the expensive label, DFT at the reference
pools' level, on K drawn molecules of each heavy-atom count 12-20 (a minute or two each): the few
expensive labels of a multi-fidelity fit, from which the druglike surrogate's DFT correction starts. ``compute`` draws ``--n`` molecules of MOSES train
with ``random.Random(--seed)`` (MOSES test, whose molecules the reference pools
hold, is a different set) and runs both tiers in the druglike space, chunk by
chunk; every verdict goes to the ledger as its chunk lands, so an interrupted
computation resumes where it stopped (the ledger is the cache: ``tier_tables``).
``export`` writes the answered molecules to
``arl_flows/suites/molecules/data/surrogate_druglike/moses_lower_tiers.csv.gz``
(canonical SMILES, each tier's gap in eV; empty where the tier gave no value)
with a JSON record beside it (source sha256, seed, counts, tier versions and
params hashes, CPU-seconds, provenance). ``export`` may run while ``compute``
goes on: it writes what the ledger holds.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Any

from benchmarks.novelty_index import _smiles_of
from benchmarks.provenance import format_provenance, with_provenance

DRUGLIKE_SURROGATE_DIR = Path(__file__).resolve().parent.parent / "arl_flows" / "suites" / "molecules" / "data" / "surrogate_druglike"
OUT_CSV = DRUGLIKE_SURROGATE_DIR / "moses_lower_tiers.csv.gz"
CHUNK = 200


def ladder() -> list[Any]:
    """The druglike space's two cheap tiers, one thread each."""
    from arl_flows.suites.molecules import EHTGapVerifier, XTBGapVerifier

    constraints = {"space": "druglike"}
    return [EHTGapVerifier({"constraints": constraints}), XTBGapVerifier({"constraints": constraints, "threads": 1})]


def dft_tier() -> Any:
    """The reference pools' DFT (B3LYP/6-31G*, converged SCF) on the MMFF94 geometry: the level of the multi-fidelity
    surrogate's 27 DFT labels. The pools and the druglike space moved to the xTB-relaxed geometry on 2026-12-07
    (docs/tiers.md); the shipped correction was fitted before, so its labels are looked up, and new ones computed, on
    MMFF94 until it is refitted."""
    from benchmarks.reference_pools import ladder as pool_ladder

    pool_dft = pool_ladder("druglike_moses")[-1]
    pool_dft.close()
    return type(pool_dft)(pool_dft.params.model_dump(mode="json") | {"geometry_source": "mmff"})


def dft_subset(candidates: list[Any], per_size: int, sizes: range = range(12, 21)) -> list[Any]:
    """The first ``per_size`` drawn molecules of each heavy-atom count in ``sizes``: the few expensive labels."""
    out: list[Any] = []
    taken = {n: 0 for n in sizes}
    for c in candidates:
        n = c.meta.get("heavy_atoms")
        if n in taken and taken[n] < per_size:
            taken[n] += 1
            out.append(c)
    return out


def draw(data: Path, n: int, seed: int) -> list[str]:
    """``n`` SMILES of ``data`` drawn with ``random.Random(seed)`` (the same list for the same file, n and seed)."""
    smiles = list(_smiles_of(data))
    return random.Random(seed).sample(smiles, min(n, len(smiles)))


def _candidates(smiles: list[str]) -> list[Any]:
    from arl_flows.suites.molecules import make_candidate

    out, seen = [], set()
    for s in smiles:
        c = make_candidate(s)
        if c.key not in seen:
            seen.add(c.key)
            out.append(c)
    return out


def compute(data: Path, n: int, seed: int, ledger_url: str, say=print, dft_per_size: int = 0,  # noqa: ANN001
            dft_only: bool = False) -> dict[str, int]:
    """Both tiers on the drawn molecules not yet in the ledger (and DFT on ``dft_subset``); returns counts.

    ``dft_only``: just the DFT subset (and its cheap tiers), e.g. in a second process beside a cheap-tier one on
    the same ledger; the counts are then the subset's.
    """
    from storage.ledger import Ledger
    from verifiers import Closable

    from benchmarks.molecule_pool import tier_tables

    candidates = _candidates(draw(data, n, seed))
    live = ladder()
    say(f"MOSES train: {len(candidates)} molecules drawn (seed {seed})")
    try:
        with Ledger(ledger_url) as ledger:
            if dft_per_size:
                # The few expensive labels first (their cheap tiers too): the DFT correction's prior fit.
                subset = dft_subset(candidates, dft_per_size)
                if dft_only:
                    candidates = subset
                top = dft_tier()
                try:
                    tier_tables(subset, [*live, top], ledger, chunk=1, progress=say)
                finally:
                    top.close()
            tables = tier_tables(candidates, live, ledger, chunk=CHUNK, progress=say)
    finally:
        for v in live:
            if isinstance(v, Closable):
                v.close()
    return {v.name: sum(1 for t in tables[i].values() if t.value is not None) for i, v in enumerate(live)}


def export(data: Path, n: int, seed: int, ledger_url: str, out: Path = OUT_CSV, command: str | None = None) -> dict[str, Any]:
    """Write the molecules every tier has answered (value or not) to ``out`` and a JSON record beside it."""
    from storage.ledger import Ledger

    candidates = _candidates(draw(data, n, seed))
    live = ladder()
    keys = [c.key for c in candidates]
    dft = dft_tier()
    with Ledger(ledger_url) as ledger:
        tables = [ledger.lookup_verdicts(keys, v.name, v.version, v.params_hash) for v in live]
        dft_table = ledger.lookup_verdicts(keys, dft.name, dft.version, dft.params_hash)
    dft.close()
    dft_info = {"version": dft.version, "params_hash": dft.params_hash, "ok": 0, "failed": 0, "cpu_s": 0.0,
                "level": f"B3LYP/6-31G* (density fitting), {dft.params.geometry_source} geometry: the reference pools' level"}
    rows, tiers = [], {v.name: {"version": v.version, "params_hash": v.params_hash, "ok": 0, "cpu_s": 0.0} for v in live}
    for c in candidates:
        if not all(c.key in t for t in tables):
            continue
        values = []
        for v, t in zip(live, tables):
            verdict = t[c.key]
            tiers[v.name]["cpu_s"] += float(verdict.cost_s or 0.0)
            if verdict.value is None:
                values.append("")
            else:
                tiers[v.name]["ok"] += 1
                values.append(f"{float(verdict.value):.4f}")
        top = dft_table.get(c.key)
        if top is not None:
            dft_info["cpu_s"] += float(top.cost_s or 0.0)
            dft_info["ok" if top.value is not None else "failed"] += 1
        values.append("" if top is None or top.value is None else f"{float(top.value):.4f}")
        rows.append([c.meta.get("canonical") or c.payload, *values])
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with gzip.open(tmp, "wt", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["smiles", *(v.name for v in live), dft.name])
        writer.writerows(rows)
    tmp.replace(out)
    for info in tiers.values():
        info["cpu_s"] = round(info["cpu_s"], 1)
    dft_info["cpu_s"] = round(dft_info["cpu_s"], 1)
    record = with_provenance({
        "source": data.name,
        "source_sha256": hashlib.sha256(data.read_bytes()).hexdigest(),
        "seed": seed,
        "drawn": len(candidates),
        "answered": len(rows),
        "space": "druglike",
        "tiers": tiers,
        "dft": dft_info,
        "command": command,
    })
    out.with_name(out.name.replace(".csv.gz", ".json")).write_text(json.dumps(record, indent=2) + "\n")
    return record


def _ledger_url(text: str) -> str:
    return text if "://" in text else f"sqlite:///{Path(text).resolve()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (("compute", "run both tiers into the ledger (resumable)"), ("export", "write the CSV from the ledger")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--data", type=Path, required=True, help="MOSES train.csv.gz (a CSV with a SMILES column).")
        p.add_argument("--n", type=int, default=20000, help="Molecules to draw (default 20000).")
        p.add_argument("--seed", type=int, default=0, help="Seed of the draw (default 0).")
        p.add_argument("--ledger", required=True, help="Ledger: a SQLite file path or a database URL.")
        if name == "compute":
            p.add_argument("--dft-per-size", type=int, default=0,
                           help="Also DFT on this many drawn molecules per heavy-atom count 12-20, first (default 0).")
            p.add_argument("--dft-only", action="store_true",
                           help="Only the --dft-per-size subset (to run beside a cheap-tier compute on the same ledger).")
        if name == "export":
            p.add_argument("--out", type=Path, default=OUT_CSV, help="Output .csv.gz.")
    args = parser.parse_args(argv)
    data = args.data.resolve()
    if not data.is_file():
        raise SystemExit(f"{data}: no such file; pass --data path/to/moses/train.csv.gz")
    if args.n < 1:
        raise SystemExit(f"--n must be at least 1, got {args.n}")
    if args.command == "compute" and args.dft_only and args.dft_per_size < 1:
        raise SystemExit("--dft-only needs --dft-per-size K (K >= 1): the DFT molecules per heavy-atom count")
    if args.command == "compute":
        print(json.dumps(compute(data, args.n, args.seed, _ledger_url(args.ledger), say=lambda m: print(m, flush=True),
                                 dft_per_size=args.dft_per_size, dft_only=args.dft_only)))
        print(f"provenance: {format_provenance()}")
    else:
        command = "python -m benchmarks.moses_lower_tiers " + " ".join(sys.argv[1:] if argv is None else argv)
        record = export(data, args.n, args.seed, _ledger_url(args.ledger), args.out, command=command)
        print(json.dumps({k: record[k] for k in ("drawn", "answered", "tiers")}))
        print(f"provenance: {format_provenance(record['provenance'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
