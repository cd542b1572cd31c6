"""Reference pools of novel molecules with every tier, DFT included, computed by the project's own verifiers.

Benchmarks on QM9 measure memory: the shipped prior and surrogate were trained
on it. These pools hold molecules no shipped model has seen, with their gaps
computed here by the real ladder (``rdkit-eht``, ``gfn2-xtb``, ``pyscf-b3lyp``
at its default level of theory), one molecule at a time on one thread:

- ``qm9_novel``: QM9's size and elements (C, N, O, F; at most 9 heavy atoms)
  passing the suite's default constraints, whose canonical SMILES is in none of
  the QM9 tables we hold (the shipped subset, the surrogate's training table
  and ``/work/shared/data/qm9_gap.csv``, which are the same 24.7k molecules).
  Source: novel samples of the shipped SMILES prior (MOSES, filtered to that
  space, holds next to none).
- ``druglike_moses``: 12-20 heavy atoms of H C N O F S Cl Br from MOSES test,
  stratified over the heavy-atom count.

Every verdict goes to a ledger as it lands (``tier_tables`` of
:mod:`benchmarks.molecule_pool`, one molecule per call), so a killed
``compute`` resumes where it stopped; molecules already in an exported CSV are
skipped too, so a fresh machine with only the committed files resumes as well.

    python -m benchmarks.reference_pools select --pool qm9_novel
    python -m benchmarks.reference_pools compute --pool qm9_novel --then druglike_moses --ledger /abs/pools.db
    python -m benchmarks.reference_pools export --pool qm9_novel --ledger /abs/pools.db
    python -m benchmarks.reference_pools status --ledger /abs/pools.db
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import gzip
import json
import math
import os
import random
import statistics
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from benchmarks.provenance import format_provenance, provenance

__all__ = [
    "POOLS",
    "PoolSpec",
    "compute",
    "export",
    "geometry_text",
    "ladder",
    "load_selection",
    "novel_molecules",
    "qm9_smiles",
    "select",
    "status",
    "stratified_druglike",
]

ROOT = Path(__file__).resolve().parent.parent
POOL_DIR = ROOT / "benchmarks" / "data" / "pools"
SHARED_DATA = Path(os.environ.get("ARL_SHARED_DATA", "/work/shared/data"))
DEFAULT_LEDGER = POOL_DIR / "pools.db"
DRUGLIKE_ELEMENTS = ["H", "C", "N", "O", "F", "S", "Cl", "Br"]
TIER_COLUMNS = {"rdkit-eht": "eht_gap_ev", "gfn2-xtb": "xtb_gap_ev", "pyscf-b3lyp": "dft_gap_ev"}
CSV_COLUMNS = [
    "smiles", "source", "heavy_atoms", "eht_gap_ev", "xtb_gap_ev", "dft_gap_ev", "dft_status", "dft_cpu_s",
    "dft_wall_s", "xtb_cpu_s", "dft_level", "dft_geometry", "dft_n_basis", "dft_scf_cycles", "dft_energy_eh",
    "gap_ev",  # the DFT gap again, under the name benchmarks.molecule_pool.load_pool reads a pool's truth from
    # A pool first computed on the MMFF94 geometry and then moved to the xTB-relaxed one (benchmarks/geometry.py
    # --adopt) keeps its first DFT gap and cost here; empty otherwise.
    "dft_mmff_gap_ev", "dft_mmff_cpu_s",
]


@dataclass(frozen=True)
class PoolSpec:
    """One reference pool: its size, space (constraints given to every tier) and DFT limits."""

    name: str
    candidates: int  # how many the selection holds (more than the target: some fail)
    target: int  # how many with every tier ok the pool is meant to reach
    elements: tuple[str, ...]
    min_heavy_atoms: int
    max_heavy_atoms: int
    dft_timeout_s: float
    dft_memory_mb: int
    xtb_timeout_s: float


POOLS = {
    "qm9_novel": PoolSpec("qm9_novel", 500, 400, ("C", "N", "O", "F", "H"), 1, 9, 1800.0, 4096, 60.0),
    "druglike_moses": PoolSpec(
        "druglike_moses", 243, 200, tuple(DRUGLIKE_ELEMENTS), 12, 20, 1800.0, 6000, 300.0
    ),
}


class PoolsError(ValueError):
    """A problem the user fixes (the message says how)."""


def _spec(pool: str) -> PoolSpec:
    if pool not in POOLS:
        raise PoolsError(f"unknown pool {pool!r}; use one of {', '.join(POOLS)}")
    return POOLS[pool]


def _constraints(spec: PoolSpec) -> Any:
    from arl_flows.suites.molecules import MoleculeConstraints

    return MoleculeConstraints(elements=list(spec.elements), max_heavy_atoms=spec.max_heavy_atoms)


# ---------------------------------------------------------------------------------------------------- select


def qm9_smiles(paths: Iterable[Path] | None = None) -> set[str]:
    """Canonical SMILES (this RDKit's canonicalisation) of every QM9 table we hold: the exclusion set."""
    from arl_flows.suites.molecules import canonical_smiles
    from arl_flows.suites.molecules.datasets import QM9_GAP_CSV

    if paths is None:
        surrogate = QM9_GAP_CSV.parent / "surrogate" / "qm9_lower_tiers.csv.gz"
        paths = [QM9_GAP_CSV, surrogate, SHARED_DATA / "qm9_gap.csv"]
    seen: set[str] = set()
    for path in paths:
        path = Path(path)
        if not path.is_file():
            continue
        with (gzip.open(path, "rt") if path.suffix == ".gz" else open(path)) as fh:
            for row in csv.DictReader(fh):
                seen.add(row["smiles"])
                canonical = canonical_smiles(row["smiles"])
                if canonical:
                    seen.add(canonical)
    return seen


def novel_molecules(
    candidates: Iterable[tuple[str, str]], exclude: set[str], constraints: Any, limit: int
) -> list[dict[str, Any]]:
    """The first ``limit`` distinct (SMILES, source) pairs inside ``constraints`` whose canonical form is not excluded."""
    from arl_flows.suites.molecules import InvalidMolecule, check_molecule

    out: list[dict[str, Any]] = []
    taken: set[str] = set()
    for smiles, source in candidates:
        try:
            parsed = check_molecule(smiles, constraints)
        except InvalidMolecule:
            continue
        if parsed.canonical in exclude or parsed.canonical in taken:
            continue
        taken.add(parsed.canonical)
        out.append({"smiles": parsed.canonical, "source": source, "heavy_atoms": parsed.heavy_atoms})
        if len(out) >= limit:
            break
    return out


def prior_samples(seed: int, batches: int, batch_size: int = 250, policy: Any = None) -> Iterable[tuple[str, str]]:
    """Samples of the shipped SMILES prior (or ``policy``), each prompted with the gap bin of a random QM9 molecule."""
    import torch

    from arl_flows.suites.molecules.datasets import load_qm9_gaps
    from arl_flows.suites.molecules.prior import SHIPPED_PRIOR_DIR
    from arl_flows.suites.molecules.smiles import GAP_BIN_WIDTH, goal_prompt_ids
    from policies import Policy

    torch.set_num_threads(1)
    policy = policy or Policy.load(SHIPPED_PRIOR_DIR)
    policy.model.eval()
    gaps = [g for _, g in load_qm9_gaps()]
    rng = random.Random(seed)
    for b in range(batches):
        prompts = []
        for _ in range(batch_size):
            low = math.floor(rng.choice(gaps) / GAP_BIN_WIDTH) * GAP_BIN_WIDTH
            prompts.append(goal_prompt_ids(policy.tokenizer, low, low + GAP_BIN_WIDTH))
        rollout = policy.sample(prompts, temperature=1.0, max_new_tokens=56, seed=seed * 1000 + b)
        yield from ((text, "prior") for text in rollout.texts)


def small_moses(max_length: int = 16) -> Iterable[tuple[str, str]]:
    """MOSES train/test SMILES short enough to be of QM9's size (a string-length pre-filter; constraints decide)."""
    for name in ("train", "test"):
        path = SHARED_DATA / "moses" / f"{name}.csv.gz"
        if not path.is_file():
            continue
        with gzip.open(path, "rt") as fh:
            next(fh, None)
            for line in fh:
                smiles = line.strip().split(",")[0]
                if smiles and len(smiles) <= max_length:
                    yield smiles, f"moses-{name}"


def stratified_druglike(
    smiles: Iterable[str], constraints: Any, sizes: range, total: int, seed: int, round_size: int = 3
) -> list[dict[str, Any]]:
    """``total`` molecules spread evenly over the heavy-atom counts ``sizes`` (shuffled with ``seed``), in compute order.

    A size with too few molecules gives its share to the others. The order runs
    in rounds of ``round_size`` molecules per size, smallest size first within a
    round: the cheap ones come first, yet every size is present early on if the
    computation stops part-way.
    """
    rows = list(smiles)
    random.Random(seed).shuffle(rows)
    per_size = math.ceil(total / len(sizes))
    by_size = _by_size(rows, constraints, sizes, per_size)
    short = [n for n in sizes if len(by_size[n]) < per_size]
    deficit = total - sum(len(v) for v in by_size.values())
    if deficit > 0 and len(short) < len(sizes):
        # The shuffled order is the same, so the larger quota keeps every molecule of the first pass.
        by_size = _by_size(rows, constraints, sizes, per_size + math.ceil(deficit / (len(sizes) - len(short))))
    ordered = []
    for start in range(0, max(len(v) for v in by_size.values()), round_size):
        for n in sizes:
            ordered.extend(by_size[n][start : start + round_size])
    return ordered


def _by_size(rows: list[str], constraints: Any, sizes: range, per_size: int) -> dict[int, list[dict[str, Any]]]:
    """The first ``per_size`` distinct molecules of ``rows`` inside ``constraints`` of each heavy-atom count."""
    from arl_flows.suites.molecules import InvalidMolecule, check_molecule

    by_size: dict[int, list[dict[str, Any]]] = {n: [] for n in sizes}
    taken: set[str] = set()
    for s in rows:
        if all(len(v) >= per_size for v in by_size.values()):
            break
        try:
            parsed = check_molecule(s, constraints)
        except InvalidMolecule:
            continue
        bucket = by_size.get(parsed.heavy_atoms)
        if bucket is None or len(bucket) >= per_size or parsed.canonical in taken:
            continue
        taken.add(parsed.canonical)
        bucket.append({"smiles": parsed.canonical, "source": "moses-test", "heavy_atoms": parsed.heavy_atoms})
    return by_size


def select(pool: str, out_dir: Path = POOL_DIR, seed: int = 0, limit: int | None = None) -> Path:
    """Write the candidate list of ``pool`` (deterministic for a seed) and return its path."""
    spec = _spec(pool)
    constraints = _constraints(spec)
    want = limit or spec.candidates
    if pool == "qm9_novel":
        exclude = qm9_smiles()
        if not exclude:
            raise PoolsError("no QM9 table found to exclude; the shipped arl_flows/suites/molecules/data/qm9_gap.csv is missing")

        def sources() -> Iterable[tuple[str, str]]:
            yield from small_moses()
            yield from prior_samples(seed, batches=max(4, want // 40))

        rows = novel_molecules(sources(), exclude, constraints, want)
    else:
        path = SHARED_DATA / "moses" / "test.csv.gz"
        if not path.is_file():
            raise PoolsError(f"MOSES test set {path} not found; set ARL_SHARED_DATA to the folder holding moses/")
        with gzip.open(path, "rt") as fh:
            next(fh, None)
            smiles = [line.strip().split(",")[0] for line in fh if line.strip()]
        sizes = range(spec.min_heavy_atoms, spec.max_heavy_atoms + 1)
        rows = stratified_druglike(smiles, constraints, sizes, total=want, seed=seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{pool}.smiles.csv"
    with open(target, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["order", "smiles", "source", "heavy_atoms"])
        writer.writeheader()
        for i, row in enumerate(rows):
            writer.writerow({"order": i, **row})
    return target


def load_selection(pool: str, pool_dir: Path = POOL_DIR) -> list[dict[str, Any]]:
    """The candidate list that ``select`` wrote, in compute order."""
    path = pool_dir / f"{pool}.smiles.csv"
    if not path.is_file():
        raise PoolsError(f"{path} does not exist; run `python -m benchmarks.reference_pools select --pool {pool}` first")
    with open(path, newline="") as fh:
        return [{**r, "heavy_atoms": int(r["heavy_atoms"])} for r in csv.DictReader(fh)]


# ---------------------------------------------------------------------------------------------------- compute


def ladder(pool: str) -> list[Any]:
    """The live tiers of ``pool``: EHT, xTB and DFT at its default level of theory, one thread, the pool's space."""
    from arl_flows.suites.molecules import DFTGapVerifier, EHTGapVerifier, XTBGapVerifier

    spec = _spec(pool)
    constraints = _constraints(spec).model_dump()
    return [
        EHTGapVerifier({"constraints": constraints}),
        XTBGapVerifier({"constraints": constraints, "threads": 1, "timeout_s": spec.xtb_timeout_s}),
        # A reference converges if it can: the pre-sizing SCF (100 DIIS cycles, PySCF's 50 Newton ones) and the
        # pool's one timeout, not the drug-size ladder's bounded SCF and per-molecule limit (the pool runs niced).
        DFTGapVerifier(
            {"constraints": constraints, "threads": 1, "timeout_s": spec.dft_timeout_s, "memory_mb": spec.dft_memory_mb,
             "timeout_factor": None, "max_scf_cycles": 100, "newton_max_cycles": 50}
        ),
    ]


def _exported(pool: str, pool_dir: Path) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Rows of an exported ``<pool>.csv`` and the failures its ``<pool>.json`` lists, by SMILES."""
    rows, failures = {}, {}
    csv_path, json_path = pool_dir / f"{pool}.csv", pool_dir / f"{pool}.json"
    if csv_path.is_file():
        with open(csv_path, newline="") as fh:
            rows = {r["smiles"]: r for r in csv.DictReader(fh)}
    if json_path.is_file():
        failures = {f["smiles"]: f for f in json.loads(json_path.read_text()).get("failures", [])}
    return rows, failures


def compute(
    pool: str,
    ledger_url: str,
    pool_dir: Path = POOL_DIR,
    limit: int | None = None,
    progress: Callable[[str], None] = lambda _: None,
    shard: tuple[int, int] = (0, 1),
) -> dict[str, int]:
    """Compute every tier on ``pool``'s candidates not yet in the ledger or an exported file; returns counts.

    ``shard = (k, n)``: only every n-th of those, from the k-th (0-based), so that n processes on the same ledger
    (one core each) share the work without computing a molecule twice.
    """
    from arl_flows.suites.molecules import make_candidate
    from storage.ledger import Ledger
    from verifiers import Closable

    from benchmarks.molecule_pool import tier_tables

    rows = load_selection(pool, pool_dir)[:limit]
    exported, failed = _exported(pool, pool_dir)
    todo = [r for r in rows if r["smiles"] not in exported and r["smiles"] not in failed]
    progress(f"{pool}: {len(rows)} candidates, {len(rows) - len(todo)} already exported, {len(todo)} to compute or read")
    k, n = shard
    if n > 1:
        todo = todo[k::n]
        progress(f"{pool}: shard {k}/{n}: {len(todo)} of them")
    candidates = [make_candidate(r["smiles"]) for r in todo]
    live = ladder(pool)
    try:
        with Ledger(ledger_url) as ledger:
            tables = tier_tables(candidates, live, ledger, chunk=1, progress=progress)
    finally:
        for v in live:
            if isinstance(v, Closable):
                v.close()
    top = tables[-1]
    return {
        "candidates": len(rows),
        "exported": len(rows) - len(todo),
        "dft_ok": sum(1 for c in candidates if c.key in top and top[c.key].status.value == "ok"),
        "dft_done": sum(1 for c in candidates if c.key in top),
    }


def _shard(text: str) -> tuple[int, int]:
    """``"K/N"`` -> (K, N) with 0 <= K < N; a one-line error otherwise."""
    k, _, n = text.partition("/")
    try:
        got = int(k), int(n)
    except ValueError:
        raise PoolsError(f"--shard {text!r}: give K/N, e.g. 0/2 and 1/2 for two processes") from None
    if not 0 <= got[0] < got[1]:
        raise PoolsError(f"--shard {text!r}: K must be in 0..N-1 and N at least 1")
    return got


# ---------------------------------------------------------------------------------------------------- export


def _ledger_rows(pool: str, ledger_url: str, pool_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """(rows with every tier ok, failures, not yet computed) from the ledger, for the selection's molecules."""
    from arl_flows.suites.molecules import make_candidate
    from storage.ledger import Ledger

    selection = load_selection(pool, pool_dir)
    candidates = [make_candidate(r["smiles"]) for r in selection]
    live = ladder(pool)
    with Ledger(ledger_url) as ledger:
        tables = {v.name: ledger.lookup_verdicts([c.key for c in candidates], v.name, v.version, v.params_hash) for v in live}
    dft = live[-1].params
    level = f"{dft.xc}/{dft.basis}" + (" (density fitting)" if dft.density_fitting else "")
    ok_rows, failures, missing = [], [], 0
    for row, c in zip(selection, candidates, strict=True):
        verdicts = {name: table.get(c.key) for name, table in tables.items()}
        if verdicts["pyscf-b3lyp"] is None:
            missing += 1
            continue
        bad = [(n, v) for n, v in verdicts.items() if v is None or v.status.value != "ok"]
        if bad:
            name, v = bad[0]
            failures.append({
                "smiles": row["smiles"], "heavy_atoms": row["heavy_atoms"], "tier": name,
                "status": v.status.value if v else "missing", "feedback": (v.feedback if v else "")[:200],
                "cpu_s": round(sum(x.cost_s for x in verdicts.values() if x), 2),
            })
            continue
        top = verdicts["pyscf-b3lyp"]
        ok_rows.append({
            "smiles": row["smiles"], "source": row["source"], "heavy_atoms": row["heavy_atoms"],
            **{col: round(verdicts[name].value, 4) for name, col in TIER_COLUMNS.items()},
            "dft_status": top.status.value, "dft_cpu_s": round(top.cost_s, 2), "dft_wall_s": round(top.wall_s, 2),
            "xtb_cpu_s": round(verdicts["gfn2-xtb"].cost_s, 3), "dft_level": level,
            "dft_geometry": top.values.get("geometry", ""), "dft_n_basis": top.values.get("n_basis", ""),
            "dft_scf_cycles": top.values.get("scf_cycles", ""), "dft_energy_eh": round(top.values.get("energy_eh", 0.0), 6),
            "gap_ev": round(top.value, 4),
        })
    return ok_rows, failures, missing


def geometry_text(seed: int, source: str) -> str:
    """The DFT geometry in words, as a pool's JSON records it."""
    if source == "xtb":
        return f"ETKDG + MMFF94 (seed {seed}), then relaxed with GFN2-xTB (tblite), not re-optimised at the DFT level"
    return f"ETKDG + MMFF94 (seed {seed}), not re-optimised at the DFT level"


def summary(rows: list[dict[str, Any]], failures: list[dict[str, Any]]) -> dict[str, Any]:
    """CPU-s per DFT call by heavy-atom count, failure rate, and EHT/xTB vs DFT mean absolute error."""
    by_size: dict[int, list[float]] = {}
    for r in rows:
        by_size.setdefault(int(r["heavy_atoms"]), []).append(float(r["dft_cpu_s"]))
    done = len(rows) + len(failures)

    def mae(col: str) -> float | None:
        if not rows or not all(r.get(col) for r in rows):
            return None
        return round(statistics.fmean(abs(float(r[col]) - float(r["dft_gap_ev"])) for r in rows), 3)

    def offset(col: str) -> float | None:
        if not rows or not all(r.get(col) for r in rows):
            return None
        return round(statistics.fmean(float(r["dft_gap_ev"]) - float(r[col]) for r in rows), 3)

    def pearson(col: str) -> float | None:
        if len(rows) < 3 or not all(r.get(col) for r in rows):
            return None
        try:
            return round(statistics.correlation([float(r[col]) for r in rows], [float(r["dft_gap_ev"]) for r in rows]), 3)
        except statistics.StatisticsError:
            return None

    return {
        "dft_cpu_s_by_heavy_atoms": {
            str(n): {"n": len(v), "median": round(statistics.median(v), 1), "max": round(max(v), 1)}
            for n, v in sorted(by_size.items())
        },
        "dft_cpu_s_total": round(sum(float(r["dft_cpu_s"]) for r in rows), 1),
        "failure_rate": round(len(failures) / done, 4) if done else None,
        "mae_eht_vs_dft_ev": mae("eht_gap_ev"),
        "mae_xtb_vs_dft_ev": mae("xtb_gap_ev"),
        # The lower tiers' gaps sit below B3LYP's by a near-constant offset; what a surrogate can use is the rank.
        "mean_dft_minus_eht_ev": offset("eht_gap_ev"),
        "mean_dft_minus_xtb_ev": offset("xtb_gap_ev"),
        "pearson_eht_dft": pearson("eht_gap_ev"),
        "pearson_xtb_dft": pearson("xtb_gap_ev"),
    }


def export(pool: str, ledger_url: str, pool_dir: Path = POOL_DIR, command: str | None = None) -> dict[str, Any]:
    """Write ``<pool>.csv`` (molecules with every tier ok) and ``<pool>.json`` (provenance, counts, failures)."""
    rows, failures, missing = _ledger_rows(pool, ledger_url, pool_dir)
    old_rows, old_failures = _exported(pool, pool_dir)
    have = {r["smiles"] for r in rows} | {f["smiles"] for f in failures}
    # Molecules computed on another machine (only their exported rows travelled) stay in the pool.
    rows += [r for s, r in old_rows.items() if s not in have]
    failures += [f for s, f in old_failures.items() if s not in have]
    missing -= sum(1 for s in list(old_rows) + list(old_failures) if s not in have)
    order = {r["smiles"]: i for i, r in enumerate(load_selection(pool, pool_dir))}
    rows.sort(key=lambda r: order.get(r["smiles"], len(order)))
    with open(pool_dir / f"{pool}.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    spec = _spec(pool)
    dft = ladder(pool)[-1]
    where = provenance()
    record = {
        "pool": pool,
        "command": command or f"python -m benchmarks.reference_pools compute --pool {pool}; ... export --pool {pool}",
        "commit": where["commit"] or "unknown",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "packages": where["packages"],
        "machine": {"platform": where["machine"]["platform"], "cpu": where["machine"]["cpu_model"],
                    "cpu_count": where["machine"]["cpu_count"], "python": where["python"]},
        "level_of_theory": {
            "dft": f"{dft.params.xc}/{dft.params.basis}", "density_fitting": dft.params.density_fitting,
            "geometry": geometry_text(dft.params.geometry.seed, dft.params.geometry_source),
            "geometry_source": dft.params.geometry_source,
            "xtb": "GFN2-xTB (tblite) single point on the MMFF94 geometry", "eht": "RDKit extended Hueckel (YAeHMOP)",
            "verifier": f"{dft.name} v{dft.version} params_hash {dft.params_hash}", "threads": 1,
            "timeout_s": spec.dft_timeout_s, "memory_mb": spec.dft_memory_mb,
        },
        "space": {"elements": list(spec.elements), "heavy_atoms": [spec.min_heavy_atoms, spec.max_heavy_atoms]},
        "counts": {
            "candidates": len(order), "ok": len(rows), "failed": len(failures), "not_computed": max(missing, 0),
            "target": spec.target,
        },
        "summary": summary(rows, failures),
        "failures": sorted(failures, key=lambda f: order.get(f["smiles"], len(order))),
    }
    (pool_dir / f"{pool}.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


# ---------------------------------------------------------------------------------------------------- status


def status(ledger_url: str, pool_dir: Path = POOL_DIR) -> list[str]:
    """One line per pool: DFT verdicts done / candidates, ok, and CPU-seconds spent over the tiers."""
    from arl_flows.suites.molecules import make_candidate
    from storage.ledger import Ledger

    lines = []
    with Ledger(ledger_url) as ledger:
        for pool in POOLS:
            try:
                selection = load_selection(pool, pool_dir)
            except PoolsError:
                lines.append(f"{pool}: not selected yet")
                continue
            keys = [make_candidate(r["smiles"]).key for r in selection]
            spent, done, ok = 0.0, 0, 0
            for v in ladder(pool):
                table = ledger.lookup_verdicts(keys, v.name, v.version, v.params_hash)
                spent += sum(x.cost_s for x in table.values())
                if v.name == "pyscf-b3lyp":
                    done, ok = len(table), sum(1 for x in table.values() if x.status.value == "ok")
            exported, failed = _exported(pool, pool_dir)
            lines.append(
                f"{pool}: {done}/{len(selection)} DFT done in this ledger ({ok} ok), {spent:.0f} CPU-s; "
                f"exported {len(exported)} ok + {len(failed)} failed (target {POOLS[pool].target} ok)"
            )
    return lines


# ---------------------------------------------------------------------------------------------------- CLI


def _ledger_url(text: str) -> str:
    if "://" in text:
        return text
    path = Path(text).expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.reference_pools", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    for name, help_text in [
        ("select", "write the candidate list benchmarks/data/pools/<pool>.smiles.csv"),
        ("compute", "compute every tier on the candidates into the ledger (resumable)"),
        ("export", "write <pool>.csv and <pool>.json from the ledger"),
        ("status", "done/total per pool and CPU-seconds spent"),
    ]:
        p = sub.add_parser(name, help=help_text)
        if name != "status":
            p.add_argument("--pool", required=True, choices=list(POOLS), help="which reference pool")
        if name == "compute":
            p.add_argument("--then", nargs="*", default=[], choices=list(POOLS), help="pools to compute afterwards")
            p.add_argument("--limit", type=int, default=None, help="only the first N candidates (for a quick check)")
            p.add_argument("--shard", default="0/1", metavar="K/N",
                           help="only every N-th molecule still to compute, from the K-th (0-based): run N processes "
                                "with K = 0..N-1 on the same ledger to use N cores (default 0/1: all)")
        if name == "select":
            p.add_argument("--seed", type=int, default=0, help="seed of the sampling and shuffling")
            p.add_argument("--limit", type=int, default=None, help="candidates to select (default: the pool's size)")
        if name != "select":
            p.add_argument("--ledger", default=str(DEFAULT_LEDGER), help="ledger: a SQLite file path or a database URL")
        p.add_argument("--dir", type=Path, default=POOL_DIR, help="folder of the pool files")
    args = ap.parse_args(argv)
    say = lambda line: print(line, flush=True)  # noqa: E731
    try:
        if args.command == "select":
            path = select(args.pool, args.dir, args.seed, args.limit)
            say(f"wrote {path} ({len(load_selection(args.pool, args.dir))} candidates)")
        elif args.command == "compute":
            shard = _shard(args.shard)
            for pool in [args.pool, *args.then]:
                counts = compute(pool, _ledger_url(args.ledger), args.dir, args.limit, progress=say, shard=shard)
                say(f"{pool}: {json.dumps(counts)}")
        elif args.command == "export":
            command = "python -m benchmarks.reference_pools " + " ".join(sys.argv[1:] if argv is None else argv)
            info = export(args.pool, _ledger_url(args.ledger), args.dir, command=command)
            say(f"wrote {args.dir / (args.pool + '.csv')}: {json.dumps(info['counts'])}")
            say(json.dumps(info["summary"], indent=2))
            say(f"provenance: {format_provenance()}")
        else:
            for line in status(_ledger_url(args.ledger), args.dir):
                say(line)
    except PoolsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
