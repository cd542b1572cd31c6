"""A prior's samples with and without the SMILES grammar constraint, side by side in one run.

    OMP_NUM_THREADS=1 python -m benchmarks.grammar_decoding --space druglike --json docs/results/grammar_decoding_druglike.json

Both sides are the prior's own report evaluation (``prior._evaluate``): the config's ``eval_samples``
goal prompts drawn with its seed, sampled 250 a batch at its ``eval_temperature`` with the same seeds, and
measured by ``sample_metrics`` (validity, uniqueness, novelty, IntDiv, scaffold novelty, FCD, why invalid
samples fail). The unconstrained side reproduces the shipped report's figures; the other samples under the
space's grammar (``arl_flows/suites/molecules/grammar.py``), as runs do by default. MOSES's baselines
decode unconstrained, so only the unconstrained side compares with its table. ``--update-report`` writes
the grammar side into the prior's ``pretrain_report.json`` as its ``grammar`` block (what ``arl prior
show`` prints).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from benchmarks.provenance import format_provenance, with_provenance

__all__ = ["main"]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", default="druglike", help="whose shipped prior to measure (qm9, druglike)")
    parser.add_argument("--dir", type=Path, default=None, help="a prior's directory instead of the space's shipped one")
    parser.add_argument("--samples", type=int, default=None, help="samples per side (default: the prior's eval_samples)")
    parser.add_argument("--json", type=Path, default=None, help="write the report here")
    parser.add_argument("--update-report", action="store_true", help="write the grammar side into the prior's report")
    args = parser.parse_args(argv)

    from arl_flows.suites.molecules.prior import evaluate_prior, shipped_dir

    directory = args.dir or shipped_dir(args.space)
    sides = {}
    for name, grammar in (("unconstrained", False), ("grammar", True)):
        start = time.monotonic()
        config, metrics = evaluate_prior(directory, args.samples, grammar=grammar)
        sides[name] = metrics | {"seconds": round(time.monotonic() - start, 1)}
    report = with_provenance({
        "prior": str(directory), "space": config.space, "samples": sides["grammar"]["samples"], "seed": config.seed,
        "temperature": config.eval_temperature, "max_new_tokens": config.n_positions - 8, **sides,
    })
    keys = ("validity", "uniqueness", "novelty", "internal_diversity", "scaffold_novelty", "fcd")
    print(f"{config.space} prior {directory}, {report['samples']} samples, seed {config.seed}:")
    print(f"{'':>20} {'unconstrained':>14} {'grammar':>10}")
    for key in keys:
        shown = [sides[s][key] for s in ("unconstrained", "grammar")]
        print(f"{key:>20} " + " ".join(f"{'n/a' if v is None else f'{v:.4f}':>{w}}" for v, w in zip(shown, (14, 10))))
    for kind in sides["grammar"]["invalid_kinds"]:
        shown = [sides[s]["invalid_kinds"][kind] for s in ("unconstrained", "grammar")]
        print(f"{'invalid ' + kind:>20} {shown[0]:>14.4f} {shown[1]:>10.4f}")
    print(f"provenance: {format_provenance(report['provenance'])}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.update_report:
        report_file = directory / "pretrain_report.json"
        saved = json.loads(report_file.read_text())
        saved["grammar"] = {k: v for k, v in sides["grammar"].items() if k not in ("fcd_reference", "samples", "seconds")}
        partial = report_file.with_name(report_file.name + ".partial")
        partial.write_text(json.dumps(saved, indent=2) + "\n")
        partial.replace(report_file)
        print(f"written to {report_file}")
    return report


if __name__ == "__main__":
    main()
