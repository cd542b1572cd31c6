"""A new user's first run: `make run` on a fresh clone, on an idle machine and beside CPU-burning neighbours.

    python -m benchmarks.first_run [--loads 0,4] [--json OUT.json] [--keep]

For each load (the number of busy-looping neighbour processes started
beside it; 4 on 2 cores is a load of about 4, as on a shared login node),
the script clones this repository into a temporary folder, times
``make setup`` (a fresh ``.venv``: torch CPU first, then ARL) and
``make run`` (``arl db upgrade`` + ``arl run`` with the default config) with
a fresh ``ARL_HOME``, and reads the finished run back with
``arl runs show --json``: per-step reward mean and max, validity, spend and
calls. It prints one row per load and the loaded/idle ratios.

What it does not control: pip's download cache (``~/.cache/pip``) is the
machine's own, as it is for a user who has installed Python packages before;
say which it was when you report the numbers.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _burn() -> None:
    while True:
        pass


def first_run(load: int, workdir: Path) -> dict[str, Any]:
    """Clone, set up and run once beside ``load`` busy neighbours; the timings and the run's per-step metrics."""
    clone = workdir / f"clone-load{load}"
    shutil.rmtree(clone, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARL_", "PREFECT_", "VIRTUAL_ENV"))}
    env["ARL_HOME"] = str(workdir / f"home-load{load}")
    neighbours = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(load)]
    for p in neighbours:
        p.start()
    try:
        t0 = time.monotonic()
        subprocess.run(["make", "setup"], cwd=clone, env=env, check=True, capture_output=True)
        t1 = time.monotonic()
        run = subprocess.run(["make", "run"], cwd=clone, env=env, capture_output=True, text=True)
        t2 = time.monotonic()
    finally:
        for p in neighbours:
            p.terminate()
    (workdir / f"make-run-load{load}.log").write_text(run.stdout + run.stderr)
    arl = clone / ".venv" / "bin" / "arl"
    runs = json.loads(subprocess.run([str(arl), "runs", "list", "--json"], env=env, capture_output=True, text=True,
                                     check=True).stdout)
    shown = json.loads(subprocess.run([str(arl), "runs", "show", runs[0]["id"], "--json"], env=env, capture_output=True,
                                      text=True, check=True).stdout) if runs else {}
    steps = shown.get("steps", [])
    return {
        "load": load,
        "exit_code": run.returncode,
        "setup_s": round(t1 - t0, 1),
        "run_s": round(t2 - t1, 1),
        "total_s": round(t2 - t0, 1),
        "status": shown.get("status"),
        "step0_validity": steps[0]["validity"] if steps else None,
        "reward_mean_by_step": [s["reward_mean"] for s in steps],
        "validity_by_step": [s["validity"] for s in steps],
        "spend_by_tier": shown.get("spend_by_tier"),
        "tracebacks_on_terminal": (run.stdout + run.stderr).count("Traceback"),
        "prefect_error_lines": sum("| ERROR" in line for line in (run.stdout + run.stderr).splitlines()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loads", default="0,4", help="Comma-separated numbers of CPU-burning neighbours (default 0,4).")
    parser.add_argument("--json", type=Path, default=None, help="Write the rows as JSON.")
    parser.add_argument("--keep", action="store_true", help="Keep the clones and logs (printed path).")
    args = parser.parse_args(argv)
    try:
        loads = [int(x) for x in args.loads.split(",") if x.strip()]
    except ValueError:
        parser.error(f"--loads takes integers, got {args.loads!r}")
    if not loads or any(n < 0 or n > 64 for n in loads):
        parser.error("--loads takes 0 to 64 neighbours per setting")
    workdir = Path(tempfile.mkdtemp(prefix="arl-first-run-"))
    rows = []
    for load in loads:
        row = first_run(load, workdir)
        rows.append(row)
        print(f"load {load}: setup {row['setup_s']:.0f} s + run {row['run_s']:.0f} s = {row['total_s'] / 60:.1f} min, "
              f"exit {row['exit_code']}, {row['status']}, step-0 validity {row['step0_validity']}, reward by step "
              f"{[round(r, 3) for r in row['reward_mean_by_step'] if r is not None]}, "
              f"tracebacks {row['tracebacks_on_terminal']}, Prefect error lines {row['prefect_error_lines']}", flush=True)
    if len(rows) > 1:
        base = rows[0]
        for row in rows[1:]:
            print(f"load {row['load']} / load {base['load']}: total {row['total_s'] / base['total_s']:.2f}x, "
                  f"run {row['run_s'] / base['run_s']:.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "python": sys.version.split()[0]}, indent=2))
    if args.keep:
        print(f"kept {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if all(r["exit_code"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
