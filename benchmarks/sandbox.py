"""Sandbox overhead: sandboxed executions/s of a trivial program vs a bare subprocess.run.

    OMP_NUM_THREADS=1 python benchmarks/sandbox.py [--runs 50]

Both sides run the same interpreter the sandbox uses, with ``-I -S``, on
``print(1)``. The sandbox side adds everything the code tiers pay per run:
temp directory, uid switch, namespaces and mounts, rlimits, capped reads and
the /proc scan that kills leftovers.
"""

from __future__ import annotations

import argparse
import subprocess
import time

from verifiers.code.sandbox import SandboxLimits, isolation_support, run_python

PROGRAM = "print(1)\n"


def bare(python: str, runs: int) -> float:
    start = time.perf_counter()
    for _ in range(runs):
        out = subprocess.run([python, "-I", "-S", "-c", PROGRAM], capture_output=True, check=True)
        assert out.stdout == b"1\n"
    return runs / (time.perf_counter() - start)


def sandboxed(runs: int) -> float:
    limits = SandboxLimits()
    start = time.perf_counter()
    for _ in range(runs):
        r = run_python(PROGRAM, limits)
        assert r.outcome == "success" and r.stdout == "1\n", r
    return runs / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    support = isolation_support()
    bare(support.python, 3)  # warm the page cache
    sandboxed(3)
    b = bare(support.python, args.runs)
    s = sandboxed(args.runs)
    print(f"isolation: {support.model_dump()}")
    print(f"{'runner':<22}{'executions/s':>14}{'ms/run':>10}")
    print(f"{'bare subprocess.run':<22}{b:>14.1f}{1000 / b:>10.1f}")
    print(f"{'sandbox (run_python)':<22}{s:>14.1f}{1000 / s:>10.1f}")
    print(f"ratio bare/sandbox: {b / s:.2f}x")


if __name__ == "__main__":
    main()
