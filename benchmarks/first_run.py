"""A new user's first run: `make run` on a fresh clone, on an idle machine and beside CPU-burning neighbours.

    python -m benchmarks.first_run [--loads 0,4] [--seeds 0,1,2] [--venv .venv] [--json OUT.json] [--keep]

For each load (the number of busy-looping neighbour processes started
beside it; 4 on 2 cores is a load of about 4, as on a shared login node),
the script clones this repository into a temporary folder, times
``make setup`` (a fresh ``.venv``: torch CPU first, then ARL) and
``make run`` (``arl db upgrade`` + ``arl run`` with the default config) with
a fresh ``ARL_HOME``, and reads the finished run back with
``arl runs show --json``: per-step reward mean and max, validity, spend and
calls. It prints one row per load and seed and the loaded/idle ratios.

``--seeds`` runs the default config with other ``seed`` values (a config
file that differs from ``examples/molecules.toml`` in that line only), to
see how much of a first run's reward trend is sampling. ``--venv`` skips the
clone and ``make setup`` and runs this checkout with an installed
environment's ``arl`` (``setup_s`` is then 0): what a seed sweep needs, not
what a new user meets.

What it does not control: pip's download cache (``~/.cache/pip``) is the
machine's own, as it is for a user who has installed Python packages before;
say which it was when you report the numbers.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from benchmarks.provenance import format_provenance, with_provenance

ROOT = Path(__file__).resolve().parents[1]
EVAL_SAMPLES = 64  # per side: the fixed evaluation set (`arl runs eval`) of a run whose config has it off
EVAL_BUDGET = 60.0  # CPU-seconds of verification for both sides together, in one call


def _burn() -> None:
    while True:
        pass


def _seed_config(seed: int, workdir: Path) -> Path:
    """The default run config with another seed (only the ``seed =`` line of examples/molecules.toml changes)."""
    text = (ROOT / "examples" / "molecules.toml").read_text()
    changed, n = re.subn(r"(?m)^seed = \d+", f"seed = {seed}", text)
    if n != 1:
        raise SystemExit("examples/molecules.toml has no single 'seed = N' line to change")
    path = workdir / f"seed{seed}.toml"
    path.write_text(changed)
    return path


def first_run(load: int, workdir: Path, seed: int = 0, venv: Path | None = None) -> dict[str, Any]:
    """Clone, set up and run once beside ``load`` busy neighbours; the timings and the run's per-step metrics.

    With ``venv``, this checkout runs with that environment's ``arl`` instead (no clone, no setup).
    """
    tag = f"load{load}-seed{seed}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARL_", "PREFECT_", "VIRTUAL_ENV"))}
    env["ARL_HOME"] = str(workdir / f"home-{tag}")
    if venv is None:
        clone = workdir / f"clone-{tag}"
        shutil.rmtree(clone, ignore_errors=True)
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        arl = clone / ".venv" / "bin" / "arl"
    else:
        clone, arl = ROOT, venv / "bin" / "arl"
        env["PYTHONPATH"] = str(ROOT)  # this checkout's code, whatever the environment has installed
    config = [] if seed == 0 else ["--config", str(_seed_config(seed, workdir))]
    neighbours = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(load)]
    for p in neighbours:
        p.start()
    try:
        t0 = time.monotonic()
        if venv is None:
            subprocess.run(["make", "setup"], cwd=clone, env=env, check=True, capture_output=True)
        t1 = time.monotonic()
        if venv is None and not config:
            run = subprocess.run(["make", "run"], cwd=clone, env=env, capture_output=True, text=True)
        else:  # what `make run` does, with this environment and config
            subprocess.run([str(arl), "db", "upgrade"], cwd=clone, env=env, check=True, capture_output=True)
            run = subprocess.run([str(arl), "run", *config], cwd=clone, env=env, capture_output=True, text=True)
        t2 = time.monotonic()
    finally:
        for p in neighbours:
            p.terminate()
    log = run.stdout + run.stderr
    (workdir / f"make-run-{tag}.log").write_text(log)
    runs = json.loads(subprocess.run([str(arl), "runs", "list", "--json"], env=env, capture_output=True, text=True,
                                     check=True).stdout)
    runs = [r for r in runs if not r["name"].startswith("eval-")]  # the evaluation set's own ledger run is not the run
    shown = json.loads(subprocess.run([str(arl), "runs", "show", runs[0]["id"], "--json"], env=env, capture_output=True,
                                      text=True, check=True).stdout) if runs else {}
    steps = shown.get("steps", [])
    flat = " ".join(log.split())  # the summary wraps at the terminal's width
    trend = re.search(r"reward mean [-\d.]+ at step .*?(?= \S+ verified \d| spend: |$)", flat)
    top = shown.get("top_candidates", [])
    evaluation = shown.get("eval")  # scored by `arl run` itself when the config's [eval] is on
    if evaluation is None and runs and run.returncode == 0:
        evaluation = _evaluate(runs[0]["id"], env, arl)
    return {
        "load": load,
        "seed": seed,
        "exit_code": run.returncode,
        "setup_s": round(t1 - t0, 1),
        "run_s": round(t2 - t1, 1),
        "total_s": round(t2 - t0, 1),
        "status": shown.get("status"),
        "step0_validity": steps[0]["validity"] if steps else None,
        "reward_mean_by_step": [s["reward_mean"] for s in steps],
        "validity_by_step": [s["validity"] for s in steps],
        "spend_by_tier": shown.get("spend_by_tier"),
        "trend_line": trend.group(0) if trend else None,
        "within_noise": "within sampling noise" in flat,
        "steps_without_top_tier": [s["step"] for s in steps if not any(t in s["spend_by_tier"] for t in ("high_fidelity", "lab"))],
        "top_candidates_verified": sum(bool(c.get("verified")) for c in top),
        "tracebacks_on_terminal": log.count("Traceback"),
        "prefect_error_lines": sum("| ERROR" in line for line in log.splitlines()),
        "eval": evaluation,
    }


def _evaluate(run_id: str, env: dict[str, str], arl: Path) -> dict[str, Any] | None:
    """The fixed evaluation set (`arl runs eval`) on the run's first policy and last checkpoint."""
    env = env | {"OMP_NUM_THREADS": env.get("OMP_NUM_THREADS", "1")}
    done = subprocess.run([str(arl), "runs", "eval", run_id, "--samples", str(EVAL_SAMPLES), "--budget", str(EVAL_BUDGET),
                           "--json"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"  eval failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}", flush=True)
        return None
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loads", default="0,4", help="Comma-separated numbers of CPU-burning neighbours (default 0,4).")
    parser.add_argument("--seeds", default="0", help="Comma-separated run seeds (default 0: the default config as it ships).")
    parser.add_argument("--venv", type=Path, default=None,
                        help="Run this checkout with this environment's arl: no clone, no `make setup` (for seed sweeps).")
    parser.add_argument("--json", type=Path, default=None, help="Write the rows as JSON.")
    parser.add_argument("--keep", action="store_true", help="Keep the clones and logs (printed path).")
    args = parser.parse_args(argv)
    try:
        loads = [int(x) for x in args.loads.split(",") if x.strip()]
    except ValueError:
        parser.error(f"--loads takes integers, got {args.loads!r}")
    if not loads or any(n < 0 or n > 64 for n in loads):
        parser.error("--loads takes 0 to 64 neighbours per setting")
    try:
        seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    except ValueError:
        parser.error(f"--seeds takes integers, got {args.seeds!r}")
    if not seeds or any(s < 0 for s in seeds):
        parser.error("--seeds takes one or more integers >= 0")
    if args.venv is not None and not (args.venv / "bin" / "arl").is_file():
        parser.error(f"--venv {args.venv}: no bin/arl there; point it at an environment with ARL installed")
    workdir = Path(tempfile.mkdtemp(prefix="arl-first-run-"))
    rows = []
    for load in loads:
        for seed in seeds:
            row = first_run(load, workdir, seed, args.venv)
            rows.append(row)
            print(f"load {load} seed {seed}: setup {row['setup_s']:.0f} s + run {row['run_s']:.0f} s = "
                  f"{row['total_s'] / 60:.1f} min, exit {row['exit_code']}, {row['status']}, step-0 validity "
                  f"{row['step0_validity']}, reward by step {[round(r, 3) for r in row['reward_mean_by_step'] if r is not None]}, "
                  f"steps without a top-tier answer {row['steps_without_top_tier']}, tracebacks "
                  f"{row['tracebacks_on_terminal']}, Prefect error lines {row['prefect_error_lines']}", flush=True)
            print(f"  summary: {row['trend_line']}", flush=True)
            if (ev := row["eval"]) is not None:
                print(f"  eval set ({ev['samples']} samples a side, seed {ev['eval_seed']}): reward "
                      f"{ev['before']['reward_mean']:.3f} -> {ev['after']['reward_mean']:.3f} ({ev['difference']:+.3f}, "
                      f"2 SE {ev['two_se']:.3f} two-sample, {ev['paired_two_se']:.3f} paired), validity "
                      f"{ev['before']['validity']:.2f} -> {ev['after']['validity']:.2f}, top-tier answers "
                      f"{ev['before']['top_tier_answers']} / {ev['after']['top_tier_answers']}", flush=True)
    if len(rows) > 1 and len(loads) > 1:
        base = rows[0]
        for row in rows[1:]:
            if row["seed"] != base["seed"]:
                continue
            print(f"load {row['load']} / load {base['load']}: total {row['total_s'] / base['total_s']:.2f}x, "
                  f"run {row['run_s'] / base['run_s']:.2f}x")
    report = with_provenance({"rows": rows, "python": sys.version.split()[0]})
    print(f"provenance: {format_provenance(report['provenance'])}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    if args.keep:
        print(f"kept {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if all(r["exit_code"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
