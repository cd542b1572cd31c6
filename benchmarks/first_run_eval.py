"""The fixed evaluation set of a finished run, as the first-run benchmark records it.

    python -m benchmarks.first_run_eval RUN_ID [--samples 64] [--budget 60] [--json OUT.json]

(with ``ARL_HOME`` or ``ARL_DATABASE_URL`` naming the run's ledger). The product scores it:
:func:`arl_flows.eval_set.evaluate`, what ``arl runs eval RUN_ID`` and ``arl run`` with ``[eval] samples`` > 0
call (its docstring says what the set holds fixed and how the noise is judged). This script prints the
product's summary line, then the result as one JSON line, with its provenance (:mod:`benchmarks.provenance`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.provenance import with_provenance


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_id", help="A finished run in the ledger of $ARL_HOME (or $ARL_DATABASE_URL).")
    parser.add_argument("--samples", type=int, default=64, help="Samples per side (default 64).")
    parser.add_argument("--budget", type=float, default=60.0, help="CPU-seconds of verification for both sides together.")
    parser.add_argument("--json", type=Path, default=None, help="Write the result as JSON.")
    args = parser.parse_args(argv)
    if args.samples < 2:
        parser.error("--samples needs at least 2 per side")
    if not args.budget > 0:
        parser.error("--budget takes a positive number of CPU-seconds")
    from arl_flows.eval_set import EvalError, evaluate, summary_line
    from storage.ledger import Ledger, LedgerError

    try:
        result = evaluate(Ledger(), args.run_id, args.samples, args.budget)
    except (EvalError, LedgerError) as exc:
        parser.error(str(exc))
    out = with_provenance(result.model_dump(mode="json"))
    print(summary_line(result))
    print(json.dumps(out))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
