"""Retrieval on a reference pool of novel molecules: voi (shipped start) against voi (cold start), the tuned cascade
and the oracle, side by side in one run.

The pool is one of ``benchmarks/data/pools/`` (molecules no shipped model trained on, their top-tier value computed
by the project's own DFT tier); each seed shuffles it into a history of at most 200 answers (every tier known: the
surrogate's history and the cascade's tuning data) and the evaluated rest. Per seed and policy it prints the
CPU-seconds to confirm 80% of the hits, and the ratios the issue's targets name: voi / oracle, voi / cascade and
shipped / cold (the shipped start mixed with the cold Δ-model by stacking, the default, and by pseudo-BMA
weights: ``shipped_pbma``; in the druglike space also ``shipped_multifidelity``, the multi-fidelity surrogate of
``[options] surrogate = "multifidelity"`` in the default QM9 network's place); then the coverage of the shipped and cold surrogates' 50% and 90% intervals on the evaluated
molecules (trained on the history only).

    PYTHONPATH=. python -m benchmarks.novel_retrieval --pool qm9_novel --history 49 --seeds 0 1 2 --minimize 0.1

Every tier's verdict is kept in ``--cache`` (a SQLite ledger), so a rerun computes nothing twice.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import molecule_pool as pools
from benchmarks import replay
from benchmarks.baselines import CascadePolicy
from benchmarks.provenance import format_provenance, with_provenance

__all__ = ["main", "run"]


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def run(pool: str, history: int, seeds: list[int], top_fraction: float, direction: str, cache: Path,
        top_cost: float = 10.5, space: str | None = None) -> dict[str, Any]:
    from arl_flows.cli._common import open_ledger
    from arl_flows.suites.molecules.features import molecule_features
    from arl_flows.suites.molecules.learner import learner_for
    from benchmarks.commands import _top_fraction
    from verifiers.scheduler.config import LearnedSurrogateConfig

    if not 0 <= history <= 200:
        raise ValueError(f"--history must be from 0 to 200, got {history}")
    path = pools.resolve_pool(pool)
    cache.parent.mkdir(parents=True, exist_ok=True)
    ledger = open_ledger(f"sqlite:///{cache}")
    rows = []
    try:
        for seed in seeds:
            data = pools.molecule_pool(path, limit=100_000, held_out=history, seed=seed, top_cost=top_cost,
                                       ledger=ledger, low=-math.inf, high=math.inf, space=space)
            low, high, objective, target = _top_fraction(data.truth, direction, top_fraction)
            common = dict(low=low, high=high, featurize=molecule_features, step_budget=10 * top_cost, seed=seed,
                          objective=objective)
            row: dict[str, Any] = {"seed": seed, "pool": len(data.pool), "history": len(data.held_out)}
            starts = [("shipped", True, ["voi", "cascade", "oracle"], "stacking", "qm9"),
                      ("cold", False, ["voi"], "stacking", "qm9"),
                      ("shipped_pbma", True, ["voi"], "pseudo-bma", "qm9")]
            if data.space == "druglike":  # the druglike multi-fidelity surrogate beside the default, side by side
                starts.append(("shipped_multifidelity", True, ["voi"], "stacking", "multifidelity"))
            # The cascade is tuned on the history's hits; a small history can hold none (a top 10% of a pool is
            # about 5 of 49 answers). That seed has no cascade; every other policy still runs.
            untuned = CascadePolicy.untunable(data.held_out, [v.name for v in data.ladder[:-1]], data.ladder[-1].name,
                                              low, high)
            if untuned is not None:
                row["cascade"], row["cascade_untuned"] = None, untuned
            for label, shipped, policies, blend, model in starts:
                config = LearnedSurrogateConfig(enabled=True, shipped=shipped, blend=blend)
                if untuned is not None:
                    policies = [p for p in policies if p != "cascade"]
                report = replay.retrieval_benchmark(data.ladder, data.pool, data.truth, data.held_out,
                                                    policies=policies, learned=config,
                                                    learner=learner_for(model), **common)
                row["hits"] = report["hits"]
                for name in policies:
                    key = f"voi_{label}" if name == "voi" else name
                    row[key] = report["policies"][name]["cost_to_recall"]["0.8"]
                cal, _ = pools.calibration(data, seed, config, model=model)
                kept = ("coverage_50", "coverage_90", "mean_abs_error")
                row[f"calibration_{label}"] = {p: {k: round(c[k], 3) for k in kept} for p, c in cal.items()}
            row["ratios"] = {
                "shipped_x_oracle": _ratio(row["voi_shipped"], row["oracle"]),
                "cold_x_oracle": _ratio(row["voi_cold"], row["oracle"]),
                "shipped_x_cascade": _ratio(row["voi_shipped"], row["cascade"]),
                "shipped_x_cold": _ratio(row["voi_shipped"], row["voi_cold"]),
                "shipped_pbma_x_cold": _ratio(row["voi_shipped_pbma"], row["voi_cold"]),
                "shipped_pbma_x_oracle": _ratio(row["voi_shipped_pbma"], row["oracle"]),
                "cascade_x_oracle": _ratio(row["cascade"], row["oracle"]),
            }
            if "voi_shipped_multifidelity" in row:
                row["ratios"]["multifidelity_x_oracle"] = _ratio(row["voi_shipped_multifidelity"], row["oracle"])
                row["ratios"]["multifidelity_x_cold"] = _ratio(row["voi_shipped_multifidelity"], row["voi_cold"])
                row["ratios"]["multifidelity_x_shipped"] = _ratio(row["voi_shipped_multifidelity"], row["voi_shipped"])
            rows.append(row)
            print(json.dumps(row))
    finally:
        ledger.close()
    keys = rows[0]["ratios"].keys()
    known = {k: [r["ratios"][k] for r in rows if r["ratios"][k] is not None] for k in keys}
    mean = {k: float(np.mean(v)) if v else None for k, v in known.items()}  # None: no seed had it (e.g. no cascade)
    cover = {}
    for label in ("shipped", "cold", "shipped_pbma", "shipped_multifidelity"):
        if f"calibration_{label}" not in rows[0]:
            continue
        for p in rows[0][f"calibration_{label}"]:
            cover[f"{label} {p}"] = float(np.mean([r[f"calibration_{label}"][p]["coverage_90"] for r in rows]))
    return {"pool": pool, "history": history, "target": {direction: top_fraction}, "seeds": rows,
            "mean_ratios": mean, "mean_coverage_90": cover}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", default="qm9_novel", help="reference pool name or CSV path")
    parser.add_argument("--history", type=int, default=50, help="answers of history (at most 200)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--space", default=None, help="chemistry space (qm9, druglike)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--minimize", type=float, default=None, help="hits: the pool's bottom FRACTION of the value")
    group.add_argument("--maximize", type=float, default=None, help="hits: the pool's top FRACTION of the value")
    parser.add_argument("--cache", type=Path, default=Path("artifacts/bench/novel_verdicts.db"))
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--top-cost", type=float, default=None,
                        help="CPU-s charged per top-tier call (default: the space's DFT call, as arl bench scheduler)")
    args = parser.parse_args(argv)
    if args.maximize is not None:
        direction, fraction = "maximize", args.maximize
    else:
        direction, fraction = "minimize", args.minimize or 0.1
    from benchmarks.commands import _space_defaults

    try:
        _, top_cost = _space_defaults(args.space or "qm9", None, args.top_cost)
        out = with_provenance(run(args.pool, args.history, args.seeds, fraction, direction, args.cache,
                                  top_cost=top_cost, space=args.space))
    except ValueError as exc:
        parser.exit(2, f"error: {exc}\n")
    print("mean ratios at 80% recall:", {k: round(v, 2) for k, v in out["mean_ratios"].items()})
    print("mean coverage of the 90% interval:", {k: round(v, 3) for k, v in out["mean_coverage_90"].items()})
    print(f"provenance: {format_provenance(out['provenance'])}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
