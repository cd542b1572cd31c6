"""The scheduler from the first step: pool retrieval with the shipped surrogate, against cold starts.

    OMP_NUM_THREADS=1 python -m benchmarks.scheduler_day_one --seed 0 --json artifacts/bench/day_one_s0.json

Pool and history are drawn (``--seed``) from the **test split** of the shipped
surrogate (:func:`arl_flows.suites.molecules.pretrained.split_of`): molecules
its network never trained on, nor calibrated on. The pool is ``--pool``
molecules, the history the next ``--history`` (disjoint from the pool); the
tiers are computed live once and cached (``--cache``), the top tier answers
from the QM9 table at ``--top-cost`` CPU-s a call, exactly as ``arl bench
scheduler`` does (:func:`benchmarks.molecule_pool.molecule_pool`). Side by side, in one run:

- ``shipped h=N``: the default scheduler (the shipped network from step 0,
  a residual stack refitted on every answer, value of learning in VOI) with
  the first N molecules of the history;
- ``shipped-exploit h=N``: the same with ``learning_value = 0`` (pure exploitation);
- ``shipped-frozen h=N``: the same without fine-tuning the network on the history;
- ``cold h=N``: without the shipped network (``learned.shipped = false``):
  the linear surrogate, the network only once the history reaches
  ``min_pairs``;
- ``cold-net500 h=N``: a cold start that trains the network on the history
  from 500 answers on instead of ``min_pairs``' default;
- ``oracle``: the top tier on the true hits only.

For each: CPU-seconds to 50/80/95% recall of the window's hits, the ratio to
the oracle, and the coverage of the surrogate's 90% interval on the pool
before any online answer (given EHT, and EHT + xTB). The one-time training
cost of the shipped network (its ``report.json``) is printed beside the
results, not charged to them.
"""

from __future__ import annotations

import argparse
import csv
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from arl_flows.suites.molecules.features import molecule_features
from arl_flows.suites.molecules.pretrained import REPORT, load_lower_tiers, split_of
from arl_flows.suites.molecules.learner import learner_for
from storage.ledger import Ledger
from verifiers.scheduler import Scheduler, SchedulerConfig, SurrogatePrior
from verifiers.scheduler.config import LearnedSurrogateConfig

from benchmarks.molecule_pool import molecule_pool, molecules_window
from benchmarks.replay import RECALL_LEVELS, retrieval_benchmark
from benchmarks.provenance import format_provenance, with_provenance

DEFAULT_TOP_COST = 10.5  # median CPU-s of one pyscf-b3lyp call on QM9 (docs/tiers.md), as `arl bench scheduler`

SETTINGS = {
    "shipped": ({"shipped": True}, {}),
    "shipped-exploit": ({"shipped": True}, {"learning_value": 0.0}),
    "shipped-frozen": ({"shipped": True, "finetune_pairs": 10**9}, {}),
    "cold": ({"shipped": False}, {}),
    "cold-net500": ({"shipped": False, "min_pairs": 500}, {}),
}


def _test_split_csv(path: Path) -> int:
    """The shipped table's test-split molecules (those the suite accepts) as a (smiles, gap_ev) pool file."""
    rows = [r for r in load_lower_tiers() if split_of(r["smiles"]) == "test" and r["rdkit-eht"] == r["rdkit-eht"]]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["smiles", "gap_ev"])
        for r in rows:
            w.writerow([r["smiles"], f"{r['gap_ev']:.4f}"])
    return len(rows)


def _coverage(data: Any, history: list[Any], learned: LearnedSurrogateConfig, overrides: dict[str, Any], seed: int,
              prior: SurrogatePrior | None = None) -> dict[str, float]:
    """Coverage of the 90% interval on the pool, the surrogate taught only the history (before the run's answers)."""
    config = SchedulerConfig(seed=seed, learned=learned, **{**molecules_window(), **overrides})
    scheduler = Scheduler(data.ladder, config, featurize=molecule_features, learner=learner_for(), surrogate_prior=prior)
    scheduler.add_history(history)
    names = [v.name for v in data.ladder]
    out = {}
    for k in range(len(names) - 1):
        cal = scheduler.surrogate.calibration(data.pool_observations, pattern=names[: k + 1])
        out["+".join(names[: k + 1])] = {key: round(cal[key], 4) for key in ("coverage_50", "coverage_90", "mean_abs_error", "mean_std")}
    return out


def _surrogate_prior(settings: list[str]) -> SurrogatePrior | None:
    """``FIELD=VALUE`` pairs as a SurrogatePrior (None: the default); a bad one exits with one line."""
    if not settings:
        return None
    fields = {}
    for item in settings:
        name, sep, value = item.partition("=")
        if not sep or name not in SurrogatePrior.model_fields:
            raise SystemExit(f"--surrogate-prior {item!r}: use FIELD=VALUE with FIELD one of {', '.join(SurrogatePrior.model_fields)}")
        fields[name] = value
    try:
        return SurrogatePrior(**fields)
    except ValueError as exc:  # pydantic's ValidationError: the first error on one line
        raise SystemExit(f"--surrogate-prior: {' '.join(str(exc).splitlines()[1:3])}") from None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pool", type=int, default=4000, help="Pool size (test split).")
    ap.add_argument("--history", type=int, default=1000, help="History molecules drawn after the pool (test split).")
    ap.add_argument("--runs", default="shipped:1000,shipped-exploit:1000,shipped-frozen:1000,cold:1000,cold:200,cold:0,shipped:0",
                    help="Comma list of SETTING:HISTORY (settings: " + ", ".join(SETTINGS) + ").")
    ap.add_argument("--top-cost", type=float, default=DEFAULT_TOP_COST)
    ap.add_argument("--cache", type=Path, default=Path("artifacts/bench/tier_cache_test_split.sqlite"),
                    help="SQLite ledger file keeping the tiers' verdicts on the pool (computed live once).")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--surrogate-prior", action="append", default=[], metavar="FIELD=VALUE",
                    help="A SurrogatePrior setting for every run (repeatable), e.g. shift_widen=0: an ablation.")
    args = ap.parse_args(argv)
    prior = _surrogate_prior(args.surrogate_prior)

    low, high = 3.0, 4.0
    runs = [(name, int(h)) for name, h in (r.split(":") for r in args.runs.split(","))]
    for name, h in runs:
        if name not in SETTINGS or h > args.history:
            raise SystemExit(f"bad run {name}:{h} (settings: {', '.join(SETTINGS)}; history at most --history)")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        pool_csv = Path(tmp) / "qm9_test_split.csv"
        n_test = _test_split_csv(pool_csv)
        print(f"test split: {n_test} molecules the suite accepts; pool {args.pool}, history {args.history} (seed {args.seed})", flush=True)
        args.cache.parent.mkdir(parents=True, exist_ok=True)
        ledger = Ledger(f"sqlite:///{args.cache}")
        try:
            data = molecule_pool(pool_csv, args.pool, args.history, args.seed, args.top_cost, ledger, low, high, progress=print)
        finally:
            ledger.close()
        results: dict[str, Any] = {}
        oracle: dict[str, float | None] = {}
        for i, (name, h) in enumerate(runs):
            learned_kw, overrides = SETTINGS[name]
            learned = LearnedSurrogateConfig(**learned_kw)
            label = f"{name} h={h}"
            history = data.held_out[:h]
            c0 = time.process_time()
            report = retrieval_benchmark(
                data.ladder, data.pool, data.truth, history, low=low, high=high,
                policies=["voi", "oracle"] if i == 0 else ["voi"], featurize=molecule_features,
                step_budget=10 * args.top_cost, seed=args.seed, learned=learned,
                learner=learner_for(), config_overrides=overrides, surrogate_prior=prior,
            )
            if i == 0:
                oracle = report["policies"]["oracle"]["cost_to_recall"]
                results["oracle"] = {"cost_to_recall": oracle, "hits": report["hits"], "pool": report["pool"]}
            voi = report["policies"]["voi"]
            ctr = voi["cost_to_recall"]
            results[label] = {
                "cost_to_recall": ctr,
                "ratio_to_oracle": {k: (c / oracle[k] if c is not None and oracle.get(k) else None) for k, c in ctr.items()},
                "calls": voi["calls"],
                "calibration_before_run": _coverage(data, history, learned, overrides, args.seed, prior),
                "cpu_s": round(time.process_time() - c0, 1),
            }
            r = results[label]["ratio_to_oracle"]
            cov = results[label]["calibration_before_run"]
            print(f"{label:24s} x oracle @50/80/95%: " + " / ".join(f"{r[f'{x:g}']:.2f}" if r[f"{x:g}"] else "-" for x in RECALL_LEVELS)
                  + "  90% covers " + ", ".join(f"{p}: {c['coverage_90']:.3f}" for p, c in cov.items())
                  + f"  ({time.perf_counter() - t0:.0f}s)", flush=True)
            _write(args, results)  # after every run: a long benchmark cut short keeps what it measured
    shipped = json.loads(REPORT.read_text()) if REPORT.is_file() else {}
    print(f"shipped surrogate's one-time training (not charged): {shipped.get('training', {}).get('cpu_s')} CPU-s")
    print(f"provenance: {format_provenance()}")


def _write(args: argparse.Namespace, results: dict[str, Any]) -> None:
    if not args.json:
        return
    shipped = json.loads(REPORT.read_text()) if REPORT.is_file() else {}
    out = {
        "command": f"python -m benchmarks.scheduler_day_one --seed {args.seed} --pool {args.pool} --history {args.history} "
                   f"--runs {args.runs}" + "".join(f" --surrogate-prior {x}" for x in args.surrogate_prior),
        "seed": args.seed, "pool": args.pool, "history": args.history, "window": [3.0, 4.0], "top_cost": args.top_cost,
        "shipped_training": shipped.get("training"), "shipped_split": shipped.get("split", {}).get("sizes"),
        "results": results,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(with_provenance(out), indent=2) + "\n")


if __name__ == "__main__":
    main()
