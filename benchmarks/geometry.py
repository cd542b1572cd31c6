"""Which geometry for the DFT tier at drug size: MMFF94, or MMFF94 relaxed with GFN2-xTB first (issue 28).

The drug-sized reference pool (``benchmarks/data/pools/druglike_moses.csv``) holds B3LYPG/6-31G* gaps on the MMFF94
geometry (ETKDG seed 42). This script recomputes a size-spread subset of it on the same conformer relaxed with
GFN2-xTB (``pyscf-b3lyp`` with ``geometry_source = "xtb"``, and ``gfn2-xtb`` with ``optimize``), and reports how far
the relaxation moves each tier's gap and what it costs. There is no reference at this size (a B3LYP geometry
optimisation is hours a molecule here): the accuracy of each geometry against B3LYP geometries is measured on QM9 by
``python -m benchmarks.tiers --verifiers pyscf-b3lyp,pyscf-b3lyp:geometry_source=xtb`` (docs/tiers.md); this
measures whether the choice matters at drug size and what the relaxation adds to a call.

    OMP_NUM_THREADS=1 python -m benchmarks.geometry --molecules 10 --out docs/results/geometry_druglike.json

Rows are written to ``--out`` after each molecule; ``--resume`` reuses the answered ones and retries the rest.
``--also`` reuses other files' answers too, so that two size ranges can run side by side (one core each) and be
merged by a run over the whole range that computes nothing:

    python -m benchmarks.geometry --sizes 12-17 --molecules 246 --resume --out /tmp/a.json --also POOL_GEO.json &
    python -m benchmarks.geometry --sizes 18-20 --molecules 246 --resume --out /tmp/b.json --also POOL_GEO.json &
    wait; python -m benchmarks.geometry --sizes 12-20 --molecules 246 --resume --out POOL_GEO.json --also /tmp/a.json /tmp/b.json

``--adopt`` moves a pool to the relaxed geometry once every molecule of it has its answer in ``--out``: the
pool's DFT columns (``dft_gap_ev``, ``gap_ev``, ``dft_cpu_s``, ``dft_wall_s``, ``dft_geometry``) become the
relaxed-geometry call's, the MMFF94 gap and cost stay beside them (``dft_mmff_gap_ev``, ``dft_mmff_cpu_s``), and
the pool's JSON records the geometry (``level_of_theory.geometry_source``) and the command. It computes nothing:

    python -m benchmarks.geometry --pool benchmarks/data/pools/qm9_novel.csv \
        --out benchmarks/data/pools/qm9_novel_xtb_geometry.json --adopt
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from benchmarks.provenance import format_provenance, provenance, with_provenance
from benchmarks.tiers import make_verifier, run_tier_druglike, spearman, spread_by_size

__all__ = ["adopt", "compare", "main", "network_error", "pick"]

POOL = Path(__file__).resolve().parent / "data" / "pools" / "druglike_moses.csv"
SPECS = {"dft": "pyscf-b3lyp:geometry_source=xtb", "xtb": "gfn2-xtb:optimize"}


def _mmff_gap(row: dict[str, Any]) -> str:
    """A pool row's MMFF94-geometry DFT gap: its own column once the pool has moved to the relaxed geometry."""
    return row.get("dft_mmff_gap_ev") or row["dft_gap_ev"]


def _mmff_cost(row: dict[str, Any]) -> str:
    return row.get("dft_mmff_cpu_s") or row["dft_cpu_s"]


def pick(pool: Path, k: int, low: int = 12, high: int = 20) -> list[dict[str, Any]]:
    """``k`` pool molecules with a converged MMFF-geometry DFT gap, spread over ``low``-``high`` heavy atoms."""
    if not pool.is_file():
        raise SystemExit(f"--pool: no such file {pool}")
    with open(pool, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("dft_status") == "ok" and r.get("dft_gap_ev")]
    if not rows:
        raise SystemExit(f"--pool: {pool} has no rows with a converged DFT gap (columns dft_status, dft_gap_ev)")
    rows = [r for r in rows if low <= int(r["heavy_atoms"]) <= high]
    by_smiles = {r["smiles"]: r for r in rows}
    chosen = spread_by_size([(r["smiles"], int(r["heavy_atoms"])) for r in rows], k)
    return [by_smiles[s] for s, _ in chosen]


def compare(pool_rows: list[dict[str, Any]], dft: dict[str, Any], xtb: dict[str, Any]) -> dict[str, Any]:
    """Per molecule and in summary: the gaps on both geometries, their differences, and the costs."""
    relaxed_dft = {r["smiles"]: r for r in dft["per_molecule"]}
    relaxed_xtb = {r["smiles"]: r for r in xtb["per_molecule"]}
    rows = []
    for p in pool_rows:
        d, x = relaxed_dft.get(p["smiles"]), relaxed_xtb.get(p["smiles"])
        if d is None or x is None:
            continue
        row = {
            "smiles": p["smiles"], "heavy_atoms": int(p["heavy_atoms"]),
            "dft_mmff_ev": float(_mmff_gap(p)), "dft_xtb_geometry_ev": d["gap_ev"], "dft_status": d["status"],
            "dft_mmff_cpu_s": float(_mmff_cost(p)), "dft_xtb_geometry_cpu_s": d["cost_s"],
            "xtb_mmff_ev": float(p["xtb_gap_ev"]), "xtb_relaxed_ev": x["gap_ev"], "xtb_status": x["status"],
            "xtb_mmff_cpu_s": float(p["xtb_cpu_s"]), "xtb_relaxed_cpu_s": x["cost_s"],
        }
        rows.append(row)
    both = [r for r in rows if r["dft_status"] == "ok" and r["xtb_status"] == "ok"]

    def stats(a: str, b: str) -> dict[str, float]:
        diff = [r[b] - r[a] for r in both]
        if not diff:
            return {}
        return {"mean_shift_ev": statistics.fmean(diff), "mean_abs_shift_ev": statistics.fmean(abs(v) for v in diff),
                "max_abs_shift_ev": max(abs(v) for v in diff),
                "spearman": spearman([r[a] for r in both], [r[b] for r in both]) if len(both) > 2 else math.nan}

    summary = {
        "n": len(rows), "n_ok": len(both),
        "dft_xtb_geometry_vs_mmff": stats("dft_mmff_ev", "dft_xtb_geometry_ev"),
        "xtb_relaxed_vs_mmff": stats("xtb_mmff_ev", "xtb_relaxed_ev"),
        # What the xTB relaxation adds to a call, measured here: the relaxed xTB call minus the single point.
        "median_relaxation_cpu_s": statistics.median(r["xtb_relaxed_cpu_s"] - r["xtb_mmff_cpu_s"] for r in both) if both else math.nan,
        "median_dft_xtb_geometry_cpu_s": statistics.median(r["dft_xtb_geometry_cpu_s"] for r in both) if both else math.nan,
        # Does the correction the surrogate learns (DFT - xTB) move less on the relaxed geometry?
        "dft_minus_xtb_sd_mmff": statistics.pstdev(r["dft_mmff_ev"] - r["xtb_mmff_ev"] for r in both) if both else math.nan,
        "dft_minus_xtb_sd_relaxed": statistics.pstdev(r["dft_xtb_geometry_ev"] - r["xtb_relaxed_ev"] for r in both) if both else math.nan,
    }
    return {"summary": summary, "per_molecule": rows}


def adopt(pool: Path, report_path: Path, command: str) -> dict[str, Any]:
    """Move ``pool`` (CSV and JSON) to the relaxed geometry of ``report_path`` (this script's ``--out``)."""
    from arl_flows.suites.molecules.chemistry import GeometryParams
    from benchmarks.reference_pools import CSV_COLUMNS, geometry_text, summary

    if not report_path.is_file():
        raise SystemExit(f"--out: no such file {report_path}; compute it first (without --adopt, with --resume)")
    with open(pool, newline="") as fh:
        rows = list(csv.DictReader(fh))
    if rows and all(r.get("dft_mmff_gap_ev") for r in rows):
        raise SystemExit(f"--adopt: {pool.name} is already on the relaxed geometry (its dft_mmff_gap_ev is filled)")
    tiers = json.loads(report_path.read_text()).get("tiers", {})
    relaxed = {r["smiles"]: r for r in tiers.get("dft", {}).get("per_molecule", []) if r["status"] == "ok"}
    missing = [r["smiles"] for r in rows if r["smiles"] not in relaxed]
    if missing:
        raise SystemExit(
            f"--adopt: {len(missing)} of {len(rows)} molecules of {pool.name} have no relaxed-geometry DFT answer in "
            f"{report_path.name} (first: {missing[0]}); run it again with --resume first"
        )
    for r in rows:
        new = relaxed[r["smiles"]]
        r["dft_mmff_gap_ev"], r["dft_mmff_cpu_s"] = r["dft_gap_ev"], r["dft_cpu_s"]
        r["dft_gap_ev"] = r["gap_ev"] = round(float(new["gap_ev"]), 4)
        r["dft_cpu_s"], r["dft_wall_s"] = round(float(new["cost_s"]), 2), round(float(new["wall_s"]), 2)
        # The relaxed call's SCF cycles and energy were not kept: empty rather than the MMFF call's.
        r["dft_geometry"], r["dft_scf_cycles"], r["dft_energy_eh"] = "GFN2-xTB", "", ""
    with open(pool, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows({k: r.get(k, "") for k in CSV_COLUMNS} for r in rows)
    meta_path = pool.with_suffix(".json")
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    level = meta.setdefault("level_of_theory", {})
    level["geometry"] = geometry_text(GeometryParams().seed, "xtb")  # the script's tiers use the default conformer
    level["geometry_source"] = "xtb"
    level["xtb"] = "GFN2-xTB (tblite) single point on the MMFF94 geometry"
    dft = make_verifier(SPECS["dft"], 1, space="druglike")
    level["verifier"] = f"{dft.name} v{dft.version} params_hash {dft.params_hash} (benchmarks/geometry.py: {SPECS['dft']})"
    level["timeout_s"], level["memory_mb"] = dft.params.timeout_s, dft.params.memory_mb
    level["mmff_columns"] = "dft_mmff_gap_ev, dft_mmff_cpu_s: the same DFT on the MMFF94 geometry (the pool's first values)"
    meta["geometry_change"] = {"command": command, "from": report_path.name, "provenance": provenance()}
    meta["summary"] = summary(rows, meta.get("failures", []))
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def network_error(pool: Path) -> dict[str, Any]:
    """The shipped QM9 network's error against a pool's DFT on each geometry it holds (after ``--adopt``: both).

    Per pattern of lower tiers shown (none, EHT, EHT + xTB): mean absolute error, mean error (network minus DFT),
    rank correlation and the share of molecules inside the network's own 90% interval (no answers of a run: the
    start a run gets), against ``dft_mmff_gap_ev`` and ``dft_gap_ev``.
    """
    import numpy as np

    from arl_flows.suites.molecules.graph import GraphModelConfig
    from arl_flows.suites.molecules.pretrained import LOWER_TIERS, load_shipped

    with open(pool, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("dft_status", "ok") == "ok"]
    truths = {"mmff": "dft_mmff_gap_ev", "xtb": "dft_gap_ev"}
    if not rows or not all(r.get(col) for r in rows for col in truths.values()):
        raise SystemExit(f"--network: {pool.name} needs both geometries' DFT (dft_mmff_gap_ev, dft_gap_ev); --adopt it first")
    network = load_shipped(LOWER_TIERS, GraphModelConfig())
    if network is None:
        raise SystemExit("--network: the shipped network is not installed (arl_flows/suites/molecules/data/surrogate)")
    smiles = [r["smiles"] for r in rows]
    lower = np.array([[float(r["eht_gap_ev"]), float(r["xtb_gap_ev"])] for r in rows])
    shown = {"none": np.full_like(lower, np.nan), "rdkit-eht": np.c_[lower[:, 0], np.full(len(rows), np.nan)],
             "rdkit-eht+gfn2-xtb": lower}
    out: dict[str, Any] = {"n": len(rows)}
    for pattern, values in shown.items():
        mean, std = network.predict(smiles, values)
        for geometry, col in truths.items():
            truth = np.array([float(r[col]) for r in rows])
            err = mean - truth
            out[f"{pattern} vs {geometry}"] = {
                "mae_ev": float(np.mean(np.abs(err))), "mean_error_ev": float(np.mean(err)),
                "spearman": spearman(list(mean), list(truth)), "coverage_90": float(np.mean(np.abs(err) <= 1.6449 * std)),
            }
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", type=Path, default=POOL, help="reference pool CSV (MMFF-geometry DFT)")
    parser.add_argument("--molecules", type=int, default=10, help="molecules, spread over --sizes")
    parser.add_argument("--sizes", default="12-20", help="heavy-atom range LOW-HIGH of the molecules picked")
    parser.add_argument("--threads", type=int, default=1, help="threads per call")
    parser.add_argument("--out", type=Path, default=None, help="JSON written after each molecule")
    parser.add_argument("--resume", action="store_true", help="reuse the molecules already answered in --out")
    parser.add_argument("--also", type=Path, nargs="+", default=[], metavar="JSON",
                        help="reuse the answers of other runs of this script too (e.g. one per --sizes range, run "
                             "side by side: each on its own --out, then one run over the whole range with --also)")
    parser.add_argument("--adopt", action="store_true",
                        help="compute nothing: move --pool to the relaxed geometry of --out (every molecule answered)")
    parser.add_argument("--network", action="store_true",
                        help="compute nothing: the shipped network's error against --pool's DFT on both geometries")
    args = parser.parse_args(argv)
    if args.network:
        report = network_error(args.pool)
        for key, row in report.items():
            if key != "n":
                print(f"{key:<28} MAE {row['mae_ev']:.3f}  mean error {row['mean_error_ev']:+.3f}  spearman "
                      f"{row['spearman']:.3f}  90% interval covers {row['coverage_90']:.3f}  (n {report['n']})")
        if args.out:
            args.out.write_text(json.dumps(with_provenance(report), indent=2))
        return
    if args.adopt:
        if args.out is None:
            raise SystemExit("--adopt needs --out, the JSON this script wrote for the pool")
        if not args.pool.is_file():
            raise SystemExit(f"--pool: no such file {args.pool}")
        meta = adopt(args.pool, args.out, "python -m benchmarks.geometry " + " ".join(argv if argv is not None else sys.argv[1:]))
        print(f"{args.pool.name}: DFT on the xTB-relaxed geometry; {json.dumps(meta['summary'])}")
        return
    if args.molecules < 1:
        raise SystemExit(f"--molecules must be at least 1, got {args.molecules}")
    try:
        low, high = (int(v) for v in args.sizes.split("-"))
    except ValueError:
        raise SystemExit(f"--sizes must be LOW-HIGH heavy atoms, e.g. 12-20; got {args.sizes!r}") from None
    pool_rows = pick(args.pool, args.molecules, low, high)
    if not pool_rows:
        raise SystemExit(f"--pool: no molecule with a converged DFT gap has {low}-{high} heavy atoms")
    molecules = [(r["smiles"], int(r["heavy_atoms"])) for r in pool_rows]
    done: dict[str, list[dict[str, Any]]] = {"dft": [], "xtb": []}
    sources = [args.out] if args.resume and args.out and args.out.is_file() else []
    for path in args.also:
        if not path.is_file():
            raise SystemExit(f"--also: no such file {path}")
        sources.append(path)
    for path in sources:
        saved = json.loads(path.read_text())
        # Only answers are reused: a timeout or a failure (a starved worker, say) is tried again.
        for k in SPECS:
            have = {r["smiles"] for r in done[k]}
            done[k] += [r for r in saved.get("tiers", {}).get(k, {}).get("per_molecule", [])
                        if r["status"] == "ok" and r["smiles"] not in have]
    results: dict[str, dict[str, Any]] = {}

    def save(partial: dict[str, Any] | None = None, key: str | None = None) -> None:
        if not args.out:
            return
        # A tier not yet (re)started keeps the answers resumed from the file: the file never holds fewer than it
        # started with, even while xTB runs again before DFT (killed then, it used to lose every DFT answer).
        tiers = {k: {"per_molecule": rows} for k, rows in done.items() if rows} | results
        if partial is not None and key is not None:
            tiers[key] = partial
        report = {"tiers": tiers}
        if "dft" in tiers and "xtb" in tiers:
            report |= compare(pool_rows, tiers["dft"], tiers["xtb"])
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(with_provenance(report), indent=2))

    for key in ("xtb", "dft"):  # xTB first: seconds; then DFT, minutes a molecule
        results[key] = run_tier_druglike(SPECS[key], molecules, args.threads, chunk=1, done=done[key],
                                         progress=lambda partial, key=key: save(partial, key))
        save()
        print(f"{SPECS[key]}: {results[key]['n_ok']}/{len(molecules)} ok, median cost {results[key]['median_cost_s']:.3g} CPU-s",
              flush=True)
    report = compare(pool_rows, results["dft"], results["xtb"])
    print(json.dumps(report["summary"], indent=2))
    for r in report["per_molecule"]:
        print(f"{r['heavy_atoms']:>3} {r['smiles']:<40} DFT {r['dft_mmff_ev']:.3f} -> {r['dft_xtb_geometry_ev'] or float('nan'):.3f} eV,"
              f" xTB {r['xtb_mmff_ev']:.3f} -> {r['xtb_relaxed_ev'] or float('nan'):.3f} eV")
    print(f"provenance: {format_provenance()}")


if __name__ == "__main__":
    main()
