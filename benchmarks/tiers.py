"""Accuracy and cost of each molecules tier against QM9 gaps.

    OMP_NUM_THREADS=1 python -m benchmarks.tiers                       # all tiers on tests/data/qm9_sample.csv
    python -m benchmarks.tiers --verifiers rdkit-eht,gfn2-xtb          # skip DFT
    python -m benchmarks.tiers --make-sample 32 --seed 7               # re-draw the sample from the molecules suite's data
    python -m benchmarks.tiers --verifiers pyscf-b3lyp:basis=sto-3g    # a tier with other params (key=value+...)
    OMP_NUM_THREADS=1 python -m benchmarks.tiers --space druglike --dft-limit 8 --out druglike.json
    python -m benchmarks.tiers --space druglike --pool benchmarks/data/pools/druglike_moses.csv  # from a DFT pool
    python -m benchmarks.tiers --space druglike --make-sample 300 --seed 7  # re-draw the drug-like sample from MOSES test

``--space druglike`` measures the ladder at drug size: MOSES test molecules of
12-26 heavy atoms, stratified over the heavy-atom count. There is no reference
table there; the reference is this run's own DFT, which is minutes per call, so
the high-fidelity tiers run only on ``--dft-limit`` molecules spread over the
sizes (the cheap tiers on all). Reported per tier: failure rate, cost per call
(median and by size), and agreement: Spearman rank correlation of the gaps with
every other tier on the molecules both answered, and MAE against DFT after a
linear calibration. ``--pool`` reads a reference pool instead (``benchmarks/data/pools``:
every tier already computed here, DFT included, one molecule at a time): the same
tables over its hundreds of DFT calls, and a DFT cost model whose exponent is fitted.

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
from arl_flows.suites.molecules.datasets import QM9_GAP_CSV, load_qm9_gaps, smiles_column
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
from benchmarks.reference_pools import SHARED_DATA, stratified_druglike

SAMPLE_CSV = ROOT / "tests" / "data" / "qm9_sample.csv"
DRUGLIKE_SAMPLE_CSV = ROOT / "benchmarks" / "data" / "tiers_druglike.csv"
MOSES_TEST = SHARED_DATA / "moses" / "test.csv.gz"
DRUGLIKE_SIZES = range(12, 27)  # MOSES test holds next to nothing outside 12-26 heavy atoms
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


def make_druglike_sample(n: int, seed: int, path: Path = DRUGLIKE_SAMPLE_CSV, source: Path = MOSES_TEST) -> None:
    """Draw ``n`` MOSES test molecules of the druglike space, stratified over ``DRUGLIKE_SIZES``, into ``path``."""
    from arl_flows.suites.molecules import MoleculeConstraints

    if not source.is_file():
        raise SystemExit(f"MOSES test set not found at {source}; set ARL_SHARED_DATA to the folder holding moses/")
    smiles = list(smiles_column(source))
    rows = stratified_druglike(smiles, MoleculeConstraints(space="druglike"), DRUGLIKE_SIZES, n, seed, round_size=1)
    with open(path, "w", newline="") as fh:
        fh.write(
            f"# {len(rows)} molecules drawn with seed {seed} from MOSES test (test.csv.gz), stratified over "
            f"{DRUGLIKE_SIZES.start}-{DRUGLIKE_SIZES.stop - 1} heavy atoms, inside the druglike space, by "
            "benchmarks/tiers.py --space druglike --make-sample.\n"
            "# Source: MOSES, Polykovskiy et al., Front. Pharmacol. 11, 565644 (2020); MIT licence. No reference gap: "
            "the benchmark computes DFT here.\n"
        )
        writer = csv.writer(fh)
        writer.writerow(["smiles", "heavy_atoms"])
        writer.writerows((r["smiles"], r["heavy_atoms"]) for r in rows)


def load_druglike_sample(path: Path = DRUGLIKE_SAMPLE_CSV) -> list[tuple[str, int]]:
    if not path.is_file():
        raise SystemExit(f"no drug-like sample at {path}; draw one with --space druglike --make-sample 300")
    with open(path, newline="") as fh:
        reader = csv.DictReader(line for line in fh if not line.startswith("#"))
        return [(row["smiles"], int(row["heavy_atoms"])) for row in reader]


def spread_by_size(molecules: list[tuple[str, int]], k: int) -> list[tuple[str, int]]:
    """``k`` molecules whose heavy-atom counts spread evenly over the sample's range (the first of each size)."""
    first: dict[int, tuple[str, int]] = {}
    for smiles, heavy in molecules:
        first.setdefault(heavy, (smiles, heavy))
    sizes = sorted(first)
    if k >= len(sizes):
        picked = list(sizes)
        rest = [m for m in molecules if m not in first.values()]
        return [first[n] for n in picked] + rest[: k - len(picked)]
    if k == 1:
        return [first[sizes[len(sizes) // 2]]]
    chosen = sorted({sizes[round(i * (len(sizes) - 1) / (k - 1))] for i in range(k)})
    return [first[n] for n in chosen]


def spearman(xs: list[float], ys: list[float]) -> float:
    """Spearman rank correlation (ties share their mean rank); NaN under 3 points or for a constant side."""
    import warnings

    from scipy.stats import spearmanr

    if len(xs) <= 2:
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a constant input: scipy warns and returns NaN, which is the answer here
        return float(spearmanr(xs, ys).statistic)


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


def make_verifier(spec: str, threads: int, space: str | None = None) -> Any:
    """The verifier named by ``spec`` (``name[:optimize|key=value+...]``), its constraints those of ``space``."""
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
    if space is not None and "constraints" in cls.Params.model_fields:
        params["constraints"] = {"space": space}
    return cls(params)


def run_tier(spec: str, molecules: list[tuple[str, float]], threads: int) -> dict[str, Any]:
    verifier = make_verifier(spec, threads)
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


def run_tier_druglike(
    spec: str, molecules: list[tuple[str, int]], threads: int, chunk: int | None = None,
    done: list[dict[str, Any]] | None = None, progress: Any = None, done_params: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One tier on drug-like molecules: statuses, failure rate, cost per call overall and by size, per molecule.

    ``chunk``: verify that many molecules at a time and call ``progress(partial result)`` after each chunk (a DFT
    tier at drug size is minutes per call); ``done``: per-molecule rows of an earlier, interrupted run, reused
    unless ``done_params`` (the params they were computed with) differ from the tier's now.
    """
    verifier = make_verifier(spec, threads, space="druglike")
    if done and done_params is not None and done_params != verifier.params.model_dump(mode="json"):
        # Another default since (e.g. the druglike DFT geometry, MMFF94 until 2026-12-07): other verdicts.
        print(f"  {spec}: the saved rows were computed with other params; computing again", flush=True)
        done = None
    previous = {row["smiles"]: row for row in done or []}
    rows: list[dict[str, Any]] = []
    start = time.perf_counter()
    try:
        todo = [m for m in molecules if m[0] not in previous]
        size = chunk or max(len(todo), 1)
        for first in range(0, len(todo), size):
            part = todo[first : first + size]
            verdicts = verifier.verify_batch([make_candidate(smiles) for smiles, _ in part])
            rows += [
                {"smiles": s, "heavy_atoms": heavy, "status": v.status.value, "gap_ev": v.value, "cost_s": v.cost_s,
                 "wall_s": v.wall_s, "feedback": v.feedback}
                for v, (s, heavy) in zip(verdicts, part)
            ]
            if progress is not None and first + size < len(todo):
                progress(_druglike_result(spec, verifier, molecules, rows + list(previous.values()), time.perf_counter() - start))
    finally:
        if isinstance(verifier, Closable):
            verifier.close()
    return _druglike_result(spec, verifier, molecules, rows + list(previous.values()), time.perf_counter() - start)


def _druglike_result(
    spec: str, verifier: Any, molecules: list[tuple[str, int]], rows: list[dict[str, Any]], wall: float
) -> dict[str, Any]:
    order = {smiles: i for i, (smiles, _) in enumerate(molecules)}
    rows = sorted((r for r in rows if r["smiles"] in order), key=lambda r: order[r["smiles"]])
    statuses: dict[str, int] = {}
    for r in rows:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    by_size: dict[int, list[float]] = {}
    for r in rows:
        by_size.setdefault(r["heavy_atoms"], []).append(r["cost_s"])
    return {
        "verifier": spec,
        "tier": verifier.tier.value,
        "n": len(rows),
        "n_planned": len(molecules),
        "n_ok": statuses.get("ok", 0),
        "statuses": statuses,
        "failure_rate": 1.0 - statuses.get("ok", 0) / len(rows) if rows else float("nan"),
        "median_cost_s": statistics.median(r["cost_s"] for r in rows) if rows else float("nan"),
        "max_cost_s": max((r["cost_s"] for r in rows), default=float("nan")),
        "median_cost_by_size": {str(n): statistics.median(c) for n, c in sorted(by_size.items())},
        "cost_model": type(verifier).cost_model.model_dump(),
        "params": verifier.params.model_dump(mode="json"),
        "total_wall_s": wall,
        "per_molecule": rows,
    }


def fit_cost_model(rows: list[dict[str, Any]], exponent: float | None = None) -> dict[str, float]:
    """A ``CostModel`` (base + per_unit * n^exponent, n heavy atoms) fitted to measured per-molecule CPU costs.

    The exponent, unless given, is the slope of log(median cost) against log(n) over the sizes; base and per_unit
    are then least squares (``CostModel.refine``), which may set base to 0.
    """
    from verifiers.base import CostModel

    pairs = [(float(r["heavy_atoms"]), float(r["cost_s"])) for r in rows if r["cost_s"] > 0]
    if exponent is None:
        by_size: dict[float, list[float]] = {}
        for n, c in pairs:
            by_size.setdefault(n, []).append(c)
        points = [(math.log(n), math.log(statistics.median(c))) for n, c in by_size.items()]
        if len(points) >= 2:
            mx, my = statistics.fmean(x for x, _ in points), statistics.fmean(y for _, y in points)
            sxx = sum((x - mx) ** 2 for x, _ in points)
            exponent = round(sum((x - mx) * (y - my) for x, y in points) / sxx, 2) if sxx > 0 else 1.0
        else:
            exponent = 1.0
    fitted = CostModel(base=0.0, per_unit=1.0, exponent=max(exponent, 0.1)).refine(*zip(*pairs)) if pairs else None
    return fitted.model_dump() if fitted else {}


def agreement(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For every pair of tiers: how many molecules both answered, and the Spearman correlation of their gaps."""
    gaps = [
        {m["smiles"]: m["gap_ev"] for m in r["per_molecule"] if m["status"] == "ok" and m["gap_ev"] is not None}
        for r in results
    ]
    rows = []
    for i in range(len(results)):
        for j in range(i + 1, len(results)):
            both = [s for s in gaps[i] if s in gaps[j]]
            xs, ys = [gaps[i][s] for s in both], [gaps[j][s] for s in both]
            rows.append({
                "a": results[i]["verifier"], "b": results[j]["verifier"], "n": len(both),
                "spearman": spearman(xs, ys), "pearson": pearson(xs, ys) if len(both) > 2 else float("nan"),
                # b predicted from a by a least-squares line (what a calibration of the cheaper tier reaches)
                "calibrated_mae_ev": calibrated_mae(xs, ys) if len(both) > 2 else float("nan"),
                "mean_difference_ev": statistics.fmean(y - x for x, y in zip(xs, ys)) if both else float("nan"),
            })
    return rows


def druglike_tables(results: list[dict[str, Any]], pairs: list[dict[str, Any]]) -> str:
    lines = [
        "| verifier | tier | molecules | ok | failure rate | median cost (CPU s) | max cost (CPU s) | median cost by heavy atoms (CPU s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        sizes = ", ".join(f"{n}: {c:.3g}" for n, c in r["median_cost_by_size"].items())
        median, most = (f"{c:.3g}" if math.isfinite(c) else "not kept" for c in (r["median_cost_s"], r["max_cost_s"]))
        lines.append(
            f"| {r['verifier']} | {r['tier']} | {r['n']} | {r['n_ok']} | {r['failure_rate']:.1%} | "
            f"{median} | {most} | {sizes or 'not kept'} |"
        )
    lines += ["", "| tier A | tier B | both ok | Spearman | Pearson | MAE of B from A after linear calibration (eV) | mean B - A (eV) |",
              "|---|---|---|---|---|---|---|"]
    for q in pairs:
        lines.append(
            f"| {q['a']} | {q['b']} | {q['n']} | {q['spearman']:.2f} | {q['pearson']:.2f} | "
            f"{q['calibrated_mae_ev']:.2f} | {q['mean_difference_ev']:+.2f} |"
        )
    return "\n".join(lines)


_POOL_TIERS = (("rdkit-eht", "fast", "eht_gap_ev", None), ("gfn2-xtb", "simulation", "xtb_gap_ev", "xtb_cpu_s"),
               ("pyscf-b3lyp", "high_fidelity", "dft_gap_ev", "dft_cpu_s"))


def pool_results(path: Path) -> list[dict[str, Any]]:
    """Per-tier results (as ``run_tier_druglike`` gives) read from a reference pool CSV: every row has each tier ok.

    A pool keeps no EHT cost, so that tier's cost fields are NaN and it gets no fitted model.
    """
    if not path.is_file():
        raise SystemExit(f"--pool: no such file {path}")
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    needed = {"smiles", "heavy_atoms", *(gap for _, _, gap, _ in _POOL_TIERS)}
    if not rows or not needed <= set(rows[0]):
        raise SystemExit(f"--pool: {path} is not a reference pool (needs the columns {', '.join(sorted(needed))})")
    results = []
    for name, tier, gap, cost in _POOL_TIERS:
        per = [{"smiles": r["smiles"], "heavy_atoms": int(r["heavy_atoms"]), "status": "ok", "gap_ev": float(r[gap]),
                "cost_s": float(r[cost]) if cost and r.get(cost) else math.nan} for r in rows]
        costs = [m["cost_s"] for m in per if math.isfinite(m["cost_s"])]
        by_size: dict[int, list[float]] = {}
        for m in per:
            if math.isfinite(m["cost_s"]):
                by_size.setdefault(m["heavy_atoms"], []).append(m["cost_s"])
        declared = _LADDER[name].cost_model.model_dump()
        results.append({
            "verifier": name, "tier": tier, "n": len(per), "n_planned": len(per), "n_ok": len(per),
            "statuses": {"ok": len(per)}, "failure_rate": 0.0,
            "median_cost_s": statistics.median(costs) if costs else math.nan,
            "max_cost_s": max(costs, default=math.nan),
            "median_cost_by_size": {str(n): statistics.median(c) for n, c in sorted(by_size.items())},
            "cost_model": declared, "per_molecule": per,
        })
    return results


def print_druglike(results: list[dict[str, Any]], header: str, fit_dft_exponent: bool = False) -> list[dict[str, Any]]:
    """The report's tables and the fitted cost models; returns the agreement rows.

    DFT keeps the n^3 of its declared model unless ``fit_dft_exponent`` (a pool's calls over many sizes can pin one;
    a handful cannot); the cheap tiers' exponents are always fitted.
    """
    pairs = agreement(results)
    for r in results:
        costly = r["tier"] in ("high_fidelity", "lab") and not fit_dft_exponent
        measured = [m for m in r["per_molecule"] if math.isfinite(m["cost_s"])]
        r["fitted_cost_model"] = fit_cost_model(measured, 3.0 if costly else None) if measured else {}
    print()
    print(header)
    print(druglike_tables(results, pairs))
    print()
    for r in results:
        m = r["fitted_cost_model"]
        if m:
            print(f"{r['verifier']}: fitted cost model {m['base']:.3g} + {m['per_unit']:.3g} * n^{m['exponent']:g} CPU-s "
                  f"({m['measured']} calls); declared {r['cost_model']['base']:g} + {r['cost_model']['per_unit']:g} * "
                  f"n^{r['cost_model']['exponent']:g}")
    return pairs


def main_druglike(args: argparse.Namespace) -> None:
    if args.pool:  # a reference pool: every tier computed already, DFT included
        results = pool_results(args.pool)
        sizes = sorted({m["heavy_atoms"] for m in results[0]["per_molecule"]})
        pairs = print_druglike(results, f"reference pool {args.pool.name}: {results[0]['n']} molecules, heavy atoms "
                                        f"{sizes[0]}-{sizes[-1]}, every tier computed here", fit_dft_exponent=True)
        print(f"provenance: {format_provenance()}")
        if args.out:
            args.out.write_text(json.dumps(with_provenance({"space": "druglike", "pool": args.pool.name,
                                                             "results": results, "agreement": pairs}), indent=2))
        return
    if args.report:  # the tables of a saved (possibly interrupted) run, computing nothing
        if not args.report.is_file():
            raise SystemExit(f"--report: no such file {args.report}")
        saved = json.loads(args.report.read_text())
        results = saved.get("results", [])
        if not results:
            raise SystemExit(f"--report: {args.report} holds no tier results")
        done = ", ".join(f"{r['verifier']} {r['n']}/{r.get('n_planned', r['n'])}" for r in results)
        print_druglike(results, f"saved run {args.report.name} ({done} molecules measured)")
        print(f"provenance of the run: {format_provenance(saved.get('provenance'))}")
        return
    sample = args.sample or DRUGLIKE_SAMPLE_CSV
    if args.make_sample:
        make_druglike_sample(args.make_sample, args.seed, sample)
        print(f"wrote {args.make_sample} molecules to {sample}")
        return
    molecules = load_druglike_sample(sample)[: args.limit]
    # Minutes per DFT call: the expensive tiers run on a subset spread over the sizes (listed first in every tier's
    # run, so the agreement with DFT is on the same molecules).
    expensive = spread_by_size(molecules, args.dft_limit)
    cheap_order = expensive + [m for m in molecules if m not in expensive]
    previous = {}
    if args.resume and args.out and args.out.is_file():
        previous = {r["verifier"]: r for r in json.loads(args.out.read_text()).get("results", [])}
    results: list[dict[str, Any]] = []

    def save(partial: dict[str, Any] | None = None) -> None:
        # After every tier, and after every molecule of an expensive one: what a long DFT run measured survives.
        if args.out:
            done = results + ([partial] if partial else [])
            args.out.write_text(json.dumps(with_provenance({"space": "druglike", "results": done}), indent=2))
        if partial:
            print(f"  {partial['verifier']}: {partial['n']}/{partial['n_planned']} done", flush=True)

    for spec in (s.strip() for s in args.verifiers.split(",")):
        cls = _LADDER.get(spec.partition(":")[0]) or registry.get(spec.partition(":")[0])
        expensive_tier = cls.tier.value in ("high_fidelity", "lab")
        subset = expensive if expensive_tier else cheap_order
        saved = previous.get(spec, {})
        result = run_tier_druglike(spec, subset, args.threads, chunk=1 if expensive_tier else None,
                                   done=saved.get("per_molecule"), done_params=saved.get("params"), progress=save)
        results.append(result)
        print(f"{spec}: {result['n_ok']}/{result['n']} ok, failure rate {result['failure_rate']:.1%}, "
              f"median cost {result['median_cost_s']:.3g} s", flush=True)
        save()
    pairs = print_druglike(
        results,
        f"{len(molecules)} drug-like molecules from {sample.name} ({len(expensive)} for the high-fidelity tiers, "
        f"heavy atoms {', '.join(str(h) for _, h in expensive)})",
    )
    print(f"provenance: {format_provenance()}")
    if args.out:
        args.out.write_text(json.dumps(with_provenance({"space": "druglike", "results": results, "agreement": pairs}), indent=2))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--verifiers", default=",".join(DEFAULT_VERIFIERS), help="comma-separated verifier names")
    parser.add_argument("--space", choices=["qm9", "druglike"], default="qm9",
                        help="qm9: against QM9's gaps; druglike: MOSES test molecules against DFT computed here")
    parser.add_argument("--sample", type=Path, default=None,
                        help="CSV of smiles,gap_ev (qm9) or smiles,heavy_atoms (druglike)")
    parser.add_argument("--dft-limit", type=int, default=8,
                        help="druglike: molecules (spread over the sizes) the high-fidelity tiers run on")
    parser.add_argument("--resume", action="store_true", help="druglike: reuse the molecules already measured in --out")
    parser.add_argument("--report", type=Path, default=None, help="druglike: print the tables of a saved --out JSON and exit")
    parser.add_argument("--pool", type=Path, default=None,
                        help="druglike: the tables from a reference pool CSV (benchmarks/data/pools), computing nothing")
    parser.add_argument("--limit", type=int, default=None, help="only the first N molecules")
    parser.add_argument("--threads", type=int, default=1, help="threads per worker for xTB/DFT")
    parser.add_argument("--out", type=Path, default=None, help="write full results as JSON here")
    parser.add_argument("--make-sample", type=int, default=None, metavar="N", help="re-draw the sample and exit")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    if args.space == "druglike":
        if args.verifiers == ",".join(DEFAULT_VERIFIERS):
            args.verifiers = "rdkit-eht,gfn2-xtb,pyscf-b3lyp"
        main_druglike(args)
        return
    args.sample = args.sample or SAMPLE_CSV
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
