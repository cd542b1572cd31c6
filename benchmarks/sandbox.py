"""Sandbox overhead: executions/s of a trivial program, bare vs the old isolation vs the current one.

    OMP_NUM_THREADS=1 python -m benchmarks.sandbox [--runs 50] [--rounds 3] [--parent-mb 0]

All sides run the interpreter the sandbox uses, with ``-I -S``, on
``print(1)``:

* ``bare``: ``subprocess.run``;
* ``old``: ``run_python`` with ``private_pids_ipc=False, socket_filter=False``
  (fresh uid, network and mount namespaces, tmpfs working directory,
  rlimits, capped reads, the /proc scan that kills leftovers);
* ``new-nocg``: ``run_python`` with every layer but the memory cgroup (adds
  PID and IPC namespaces, the fresh /proc and the reaping init, the IPC caps,
  the seccomp filter, the allow-list root and the run's own session keyring);
* ``deny-root``: every layer but the allow-list root and the refusal of
  uid-owned kernel objects (the deny-list of hidden folders instead);
* ``new``: every layer, the per-run memory cgroup included (where the
  machine has one).

Rounds interleave the sides so a change in the machine's load hits
them alike; the medians per side and the ratios are printed. ``--parent-mb``
first allocates and touches that much memory in this process, as a
training process holding a model would: the sandbox forks the verifier
(twice more with the PID namespace), and a fork copies page tables.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time

from verifiers.sandbox.runtime import SandboxLimits, isolation_support, run_python
from benchmarks.provenance import format_provenance

PROGRAM = "print(1)\n"
OLD = SandboxLimits(private_pids_ipc=False, socket_filter=False)
NEW_NO_CGROUP = SandboxLimits(memory_cgroup=False)
DENY_ROOT = SandboxLimits(allow_list_root=False, refuse_uid_objects=False)
NEW = SandboxLimits()


def bare(python: str, runs: int) -> float:
    start = time.perf_counter()
    for _ in range(runs):
        out = subprocess.run([python, "-I", "-S", "-c", PROGRAM], capture_output=True, check=True)
        assert out.stdout == b"1\n"
    return runs / (time.perf_counter() - start)


def sandboxed(runs: int, limits: SandboxLimits, layer: str) -> float:
    start = time.perf_counter()
    for _ in range(runs):
        r = run_python(PROGRAM, limits)
        assert r.outcome == "success" and r.stdout == "1\n" and r.process_layer == layer, r
    return runs / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="executions per side and round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are reported")
    parser.add_argument("--parent-mb", type=int, default=0, help="memory this process holds while forking")
    args = parser.parse_args()
    ballast = bytearray(args.parent_mb << 20)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    support = isolation_support()
    new_layer = "pidns+ipcns" if support.pidns else "none"
    bare(support.python, 3)  # warm the page cache
    sandboxed(3, OLD, "none")
    sandboxed(3, NEW, new_layer)
    sandboxed(3, NEW_NO_CGROUP, new_layer)
    sandboxed(3, DENY_ROOT, new_layer)
    rates: dict[str, list[float]] = {"bare": [], "old": [], "new-nocg": [], "deny-root": [], "new": []}
    for _ in range(args.rounds):
        rates["bare"].append(bare(support.python, args.runs))
        rates["old"].append(sandboxed(args.runs, OLD, "none"))
        rates["new-nocg"].append(sandboxed(args.runs, NEW_NO_CGROUP, new_layer))
        rates["deny-root"].append(sandboxed(args.runs, DENY_ROOT, new_layer))
        rates["new"].append(sandboxed(args.runs, NEW, new_layer))
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"provenance: {format_provenance()}")
    print(f"isolation: {support.model_dump()}")
    print(f"parent holds {args.parent_mb} MiB; {args.rounds} rounds x {args.runs} runs per side")
    print(f"{'runner':<42}{'executions/s':>14}{'ms/run':>10}   per round")
    names = {
        "bare": "bare subprocess.run",
        "old": "old sandbox (no pid/ipc ns, no filter)",
        "new-nocg": "new sandbox, no memory cgroup",
        "deny-root": "new sandbox, deny-list root, keys allowed",
        "new": "new sandbox (every layer)",
    }
    for k in names:
        rounds = " ".join(f"{r:.1f}" for r in rates[k])
        print(f"{names[k]:<42}{med[k]:>14.1f}{1000 / med[k]:>10.1f}   {rounds}")
    ms = {k: 1000 / v for k, v in med.items()}
    print(
        f"ratio old/bare: {ms['old'] / ms['bare']:.2f}x  new/old: {ms['new'] / ms['old']:.2f}x  "
        f"new-nocg/old: {ms['new-nocg'] / ms['old']:.2f}x  (new costs {ms['new'] - ms['old']:+.1f} ms/run over old, "
        f"of which the memory cgroup {ms['new'] - ms['new-nocg']:+.1f})"
    )
    print(
        f"allow-list root and uid-object refusal: {ms['new'] - ms['deny-root']:+.1f} ms/run "
        f"(new/deny-root {ms['new'] / ms['deny-root']:.2f}x)"
    )


if __name__ == "__main__":
    main()
