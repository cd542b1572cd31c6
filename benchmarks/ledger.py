"""Ledger throughput: bulk verdict writes and verdict-cache lookups, SQLite and PostgreSQL side by side.

    python -m benchmarks.ledger [--rows 100000] [--lookup 10000] [--postgres URL]

For each backend it measures, on a fresh database:
- ``Ledger.put_verdicts`` of N verdict rows (idempotent upsert, domain objects in),
- a plain DB-API ``executemany`` INSERT of the same rows into the same table
  (the baseline: no ORM, no conflict handling, no domain objects),
- the latency of ``Ledger.lookup_verdicts`` for a batch of 10k keys (median of 5).

Targets: >= 50k verdict rows/s on SQLite; a 10k-key lookup < 100 ms.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from storage.ledger import Ledger
from storage.records import Tier, Verdict
from benchmarks.provenance import format_provenance
from tests.helpers.postgres import create_database, drop_database

COLUMNS = (
    "candidate_key", "verifier", "version", "params_hash", "tier", "status", "value", "values",
    "uncertainty", "feedback", "cost_s", "wall_s", "request_id", "created_at",
)


def _verdicts(n: int, prefix: str) -> list[Verdict]:
    return [
        Verdict(
            candidate_key=f"molecules:{prefix}{i}", verifier="gfn2-xtb", version="1", params_hash="abcd",
            tier=Tier.simulation, status="ok", value=float(i % 97) / 10, values={"gap_ev": float(i % 97) / 10},
            cost_s=0.005, wall_s=0.006,
        )
        for i in range(n)
    ]


def _baseline(url: str, verdicts: list[Verdict]) -> float:
    """Plain executemany of the same rows into the verdicts table, timed."""
    import json

    rows = [
        (v.candidate_key + ":raw", v.verifier, v.version, v.params_hash, v.tier.value, v.status.value, v.value,
         json.dumps(v.values), v.uncertainty, v.feedback, v.cost_s, v.wall_s, v.request_id,
         v.created_at.isoformat())
        for v in verdicts
    ]
    cols = ", ".join(f'"{c}"' for c in COLUMNS)
    if url.startswith("sqlite"):
        import sqlite3

        conn = sqlite3.connect(url.split("///", 1)[1])
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        t0 = time.perf_counter()
        conn.executemany(f"INSERT INTO verdicts ({cols}) VALUES ({', '.join('?' * len(COLUMNS))})", rows)
        conn.commit()
        elapsed = time.perf_counter() - t0
        conn.close()
        return elapsed
    import psycopg

    conn = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"))
    t0 = time.perf_counter()
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO verdicts ({cols}) VALUES ({', '.join(['%s'] * len(COLUMNS))})", rows)
    conn.commit()
    elapsed = time.perf_counter() - t0
    conn.close()
    return elapsed


def measure(url: str, rows: int, lookup: int) -> dict[str, float]:
    ledger = Ledger(url)
    verdicts = _verdicts(rows, "B")
    t0 = time.perf_counter()
    ledger.put_verdicts(verdicts, return_stored=False)
    put_s = time.perf_counter() - t0
    base_s = _baseline(url, verdicts)
    keys = [v.candidate_key for v in verdicts[:: max(rows // lookup, 1)]][:lookup]
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        found = ledger.lookup_verdicts(keys, "gfn2-xtb", "1", "abcd")
        times.append(time.perf_counter() - t0)
        assert len(found) == len(keys)
    t0 = time.perf_counter()
    ledger.put_verdicts(verdicts[:lookup], return_stored=False)  # all cached: the idempotent re-write path
    rewrite_s = time.perf_counter() - t0
    ledger.close()
    return {
        "ledger_rows_per_s": rows / put_s,
        "executemany_rows_per_s": rows / base_s,
        "lookup_ms": statistics.median(times) * 1000,
        "rewrite_cached_rows_per_s": lookup / rewrite_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--lookup", type=int, default=10_000)
    ap.add_argument("--postgres", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
                    help="admin URL of a PostgreSQL server ('' to skip)")
    args = ap.parse_args()

    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        results["sqlite"] = measure(f"sqlite:///{Path(tmp) / 'bench.db'}", args.rows, args.lookup)
    if args.postgres:
        try:
            name, url = create_database(args.postgres, "arl_bench")
        except Exception as exc:  # noqa: BLE001
            print(f"PostgreSQL skipped: {exc}")
        else:
            try:
                results["postgresql"] = measure(url, args.rows, args.lookup)
            finally:
                drop_database(args.postgres, name)

    print(f"\nledger benchmark: {args.rows:,} verdict rows, {args.lookup:,}-key cache lookup")
    print(f"provenance: {format_provenance()}\n")
    print(f"{'backend':<12}{'ledger rows/s':>15}{'executemany rows/s':>20}{'ratio':>8}{'lookup ms':>11}{'cached rewrite rows/s':>23}")
    for backend, r in results.items():
        ratio = r["ledger_rows_per_s"] / r["executemany_rows_per_s"]
        print(f"{backend:<12}{r['ledger_rows_per_s']:>15,.0f}{r['executemany_rows_per_s']:>20,.0f}{ratio:>8.2f}"
              f"{r['lookup_ms']:>11.1f}{r['rewrite_cached_rows_per_s']:>23,.0f}")
    sq = results["sqlite"]
    print(f"\ntargets: SQLite >= 50,000 rows/s: {'met' if sq['ledger_rows_per_s'] >= 50_000 else 'NOT met'}; "
          f"10k lookup < 100 ms: {'met' if sq['lookup_ms'] < 100 else 'NOT met'}")


if __name__ == "__main__":
    main()
