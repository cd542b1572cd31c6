"""Crash-safety harness: kill `arl run` at a random moment, resume it, check the ledger.

    python -m benchmarks.crash [--trials 20] [--signals kill,term,int] [--steps 3] [--seed 0]
                              [--workdir DIR] [--keep] [--json OUT.json] [--pipeline async]

Each trial starts a small ``arl run`` (a tiny pretrained prior, the RDKit EHT
fast tier and a *counting* reference-table top tier, see
``benchmarks/counting_tier.py``) on its own SQLite ledger, waits for a
randomly chosen stage marker in the run's ``--verbose`` log (start of a
rollout, verification, the top tier, hindsight, checkpointing, between
steps), sleeps a random 0-250 ms more, snapshots the verdict rows and sends
the signal. SIGKILL models a crash; SIGTERM and SIGINT (Ctrl-C) must shut
down cleanly: exit code 130 and the run marked ``interrupted`` (read back
with ``arl runs show RUN --json``). Then ``arl run --resume RUN_ID`` runs the
run to completion, and the trial checks:

- **verdicts lost**: verdict rows in the snapshot before the signal, or in the
  ledger right after the process died, that are missing from the final ledger
  or changed (a ``pending`` verdict may only become final);
- **duplicate top-tier calls**: the counting tier's own invocation log (one
  line per candidate, written before the lookup) shows a candidate computed
  again although its verdict was already in the ledger (or twice by one
  process). A computation that was *in flight* when the process died (its
  batch had not been written yet) is redone on resume by design; those are
  reported separately as ``inflight_redone``;
- ``Ledger.integrity_problems()`` is empty right after the kill and at the end;
- the resumed run is ``completed`` with ``steps_done`` = steps, one training
  step row per step and exactly prompts x group trajectories per step, each
  with a reward estimate (the killed attempt left nothing behind).

**Async mode** (``--pipeline async``, :func:`run_chain` with
``pipeline="async"``): one ``pipeline = "async"`` run is signalled at each
kill point inside the pipeline in turn (:data:`ASYNC_KILLS`: the sampler a
batch ahead, top-tier calls in flight, between a step's GRPO update and its
checkpoint, just before a checkpoint, the service draining at the end;
SIGKILL, SIGTERM and Ctrl-C), resumed after each, and checked as above plus:
each top-tier call was recorded before it was sent and once, a call computed
again was one still recorded in flight (resumed, not sent again), the spend
is within the budget and billed once, and each step learned distinct groups
whose trajectories all have reward estimates (the async pipeline samples
ahead, so trajectories per step differ from sync).

One Prefect server is started for the whole harness (a temporary
``PREFECT_HOME``), so each ``arl run`` only pays for its imports. The tiny
prior is pretrained once into the harness's ``ARL_HOME`` (about a minute)
unless ``--arl-home`` points to one that has it.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.counting_tier import COUNT_HOLD_ENV, COUNT_LOG_ENV, read_count_log
from benchmarks.provenance import format_provenance, with_provenance

ROOT = Path(__file__).resolve().parents[1]

TOP_TIER = "counting-reference-table"
# A prior small enough to pretrain in about a minute on 2 cores (the same one tests/arl_flows uses).
# A copy trained with our own code ships in tests/data/tiny_prior (ensure_prior installs it instead of pretraining);
# it is below the default quality gate on purpose (min_validity 0), and max_minutes is only a safety cap.
TINY_PRIOR = {"n_layer": 2, "n_embd": 64, "n_head": 2, "max_steps": 400, "max_minutes": 60.0, "min_validity": 0.0,
              "eval_samples": 50, "batch_size": 64}
TINY_PRIOR_DIR = ROOT / "tests" / "data" / "tiny_prior"
PROMPTS_PER_STEP = 3
GROUP_SIZE = 4
# The asynchronous pipeline's settings in async mode: two top-tier calls out at once, groups taken after
# 12 s as they stand (so calls can still be in flight when a step is learned, and late verdicts and the
# final drain happen), two batches sampled ahead. At 1.5 s, and again at 4 s, a fresh-clone CI run at a high load
# (5 workers on 2 cores) handed both steps' groups out while the fast tier's worker processes were still starting
# (11 of 24 fast verdicts in the whole run): no top-tier call was ever sent, and the kill aimed at one found none.
# A group whose rewards settle is handed out at once, so the longer bound costs only a slow machine time.
ASYNC_STREAMING = {"max_ahead": 2, "max_group_wait_s": 12.0, "slots": {TOP_TIER: 2, "rdkit-eht": 2}, "progress_every_s": 0.5}
ASYNC_SECONDS_PER_CALL = 0.4  # each top-tier call: long enough for kills to find calls in flight
SIGNALS = {"kill": signal.SIGKILL, "term": signal.SIGTERM, "int": signal.SIGINT}

# Where to aim a kill: a marker line of the --verbose log and the stage that follows it.
# Each marker is matched only while the run is at the chosen step (counted by rollout lines).
MARKERS = {
    "rollout": r"Flow run .* - (run \w+ \(.*\): steps|step \d+: reward)",
    "verify": r"Task run 'rollout-\w+' - Finished",
    "top-tier": r"Task run 'rdkit-eht x\d+' - Finished",
    "hindsight": r"Task run 'grpo-update-\w+' - Finished",
    "checkpoint": r"Task run 'hindsight-distill-\w+' - Finished",
    "between-steps": r"Task run 'checkpoint-\w+' - Finished",
}

# Kill points inside the asynchronous pipeline (``pipeline = "async"``). Its log has no per-step rollout: the
# sampler's batches run ahead of the learner, so the step is counted by the learner's "step k: reward" lines.
ASYNC_MARKERS = {
    "sample-ahead": r"Task run 'rollout-\w+' - Finished",  # a second batch sampled before the first is learned
    "top-in-flight": r"",  # the counting tier's log holds a call started and not done (read from the log file)
    "grpo": r"Task run 'grpo-update-\w+' - Finished",  # between a step's GRPO update and its checkpoint
    "checkpoint": r"Task run 'hindsight-distill-\w+' - Finished",  # the checkpoint is next
    "drain": r"Flow run .* - step (\d+): reward",  # the last step is learned; the service lets the calls out land
}

# ---------------------------------------------------------------------- the environment of the harness
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrefectServer:
    """One Prefect server for every `arl run` the harness starts (each run then skips the 10-15 s start-up)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.port = free_port()
        self.api_url = f"http://127.0.0.1:{self.port}/api"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> PrefectServer:
        self.home.mkdir(parents=True, exist_ok=True)
        env = os.environ | {
            "PREFECT_HOME": str(self.home),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_API_URL": self.api_url,
        }
        log = open(self.home / "server.log", "wb")  # noqa: SIM115 - handed to the child
        prefect = Path(sys.executable).with_name("prefect")
        self.proc = subprocess.Popen(
            [str(prefect), "server", "start", "--host", "127.0.0.1", "--port", str(self.port)],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Prefect server exited ({self.proc.returncode}); see {self.home / 'server.log'}")
            try:
                with urllib.request.urlopen(f"{self.api_url}/health", timeout=2) as resp:  # noqa: S310 - loopback
                    if resp.status == 200:
                        return self
            except OSError:
                time.sleep(0.5)
        self.__exit__()
        raise RuntimeError(f"the Prefect server did not answer within 180 s; see {self.home / 'server.log'}")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def ensure_prior(arl_home: Path) -> None:
    """Put the tiny prior into ``arl_home/priors``: the shipped test copy, else pretrain it (a subprocess: keeps torch out of here).

    With ``ARL_CACHE_DIR`` set (the test suite sets one per session), the first call keeps the checked prior
    folder there and later calls copy it: the subprocess imports torch and transformers and loads the model,
    about 9 CPU-s a call. The kept copy is keyed by ``TINY_PRIOR``, the shipped copy's report and the prior
    module's source, so a change to any of them checks (or pretrains) again.
    """
    from storage.settings import settings

    cache_dir = settings().cache_dir
    if cache_dir is None:
        _check_prior(arl_home, None)
        return
    digest = hashlib.sha256(json.dumps(TINY_PRIOR, sort_keys=True).encode())
    for source in (TINY_PRIOR_DIR / "pretrain_report.json", ROOT / "arl_flows" / "suites" / "molecules" / "prior.py"):
        digest.update(source.read_bytes() if source.is_file() else b"-")
    kept = cache_dir / "harness_tiny_prior" / digest.hexdigest()[:24]
    if _copy_kept(kept, arl_home):
        return
    # One process fills the cache: the test workers start their harnesses at once, and each used to find it empty
    # and check the prior itself (about 9 CPU-s each); the others wait here and copy what it kept.
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        lock = open(cache_dir / "harness_tiny_prior.lock", "w")  # noqa: SIM115 - held across the check below
    except OSError:  # a cache we cannot write: check the prior here, keep nothing
        _check_prior(arl_home, None)
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _copy_kept(kept, arl_home):
            _check_prior(arl_home, kept)


def _copy_kept(kept: Path, arl_home: Path) -> bool:
    """Copy the one prior folder kept at ``kept`` into ``arl_home/priors``; False when there is none."""
    copies = [p for p in kept.iterdir() if p.is_dir()] if kept.is_dir() else []
    if len(copies) != 1:
        return False
    shutil.copytree(copies[0], arl_home / "priors" / copies[0].name, dirs_exist_ok=True)
    return True


def _check_prior(arl_home: Path, kept: Path | None) -> None:
    """Check (or pretrain) the tiny prior in ``arl_home`` in a subprocess; keep the checked folder at ``kept``."""
    from storage.cache import keep_folder

    code = (
        "import shutil; from arl_flows.suites.molecules.prior import PretrainConfig, load_or_pretrain, prior_cache_key, prior_dir; "
        f"config = PretrainConfig(**{TINY_PRIOR!r}); src = {str(TINY_PRIOR_DIR)!r}; "
        "import json, pathlib; shipped = pathlib.Path(src) / 'pretrain_report.json'; "
        "ok = shipped.is_file() and json.loads(shipped.read_text())['config_hash'] == prior_cache_key(config); "
        "ok and not prior_dir(config).exists() and shutil.copytree(src, prior_dir(config)); "
        "load_or_pretrain(config); print(prior_dir(config))"
    )
    env = os.environ | {"ARL_HOME": str(arl_home), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, check=True, timeout=900,
                          stdout=subprocess.PIPE, text=True)
    prior = Path(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else None
    if kept is not None and prior is not None and prior.is_dir():  # checked and loaded: keep it for the next call
        with tempfile.TemporaryDirectory() as staging:
            shutil.copytree(prior, Path(staging) / prior.name)
            keep_folder(kept, Path(staging))


def write_config(path: Path, *, name: str, steps: int, seed: int, seconds_per_call: float = 0.05,
                 extra_tiers: str = "", pipeline: str = "sync", task_runner: str = "threads",
                 budget_per_step: float = 1000.0, budget_per_run: float = 5000.0) -> Path:
    """A run small enough for dozens of trials: 3 prompts x 4 samples per step, a fast tier and the counting top tier.

    ``pipeline = "async"`` adds the [streaming] section of :data:`ASYNC_STREAMING`.
    """
    prior = "\n".join(f"{k} = {json.dumps(v)}" for k, v in TINY_PRIOR.items())
    streaming = ""
    if pipeline == "async":
        streaming = "\n[streaming]\n" + "\n".join(f"{k} = {_toml(v)}" for k, v in ASYNC_STREAMING.items()) + "\n"
    path.write_text(f"""name = "{name}"
steps = {steps}
seed = {seed}
pipeline = "{pipeline}"
task_runner = "{task_runner}"
tiers = [
  {{ verifier = "rdkit-eht" }},{extra_tiers}
  {{ verifier = "benchmarks.counting_tier:CountingReferenceTable", params = {{ cost_per_call = 5.0, seconds_per_call = {seconds_per_call} }} }},
]
tier_concurrency = {{}}

[prior]
{prior}

[rollout]
prompts_per_step = {PROMPTS_PER_STEP}

[trainer]
group_size = {GROUP_SIZE}
max_new_tokens = 32
temperature = 0.8

[scheduler]
policy = "all"
objective = "advantage"
target_low = 3.0
target_high = 8.0
window_softness = 0.5
budget_per_step = {budget_per_step}
budget_per_run = {budget_per_run}
{streaming}""")
    return path


def _toml(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f'"{k}" = {_toml(v)}' for k, v in value.items()) + " }"
    return json.dumps(value)


def arl_env(arl_home: Path, api_url: str, count_log: Path) -> dict[str, str]:
    # The runs import the counting tier from this checkout's benchmarks package.
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return os.environ | {
        "ARL_HOME": str(arl_home),
        "PREFECT_API_URL": api_url,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PYTHONPATH": pythonpath,
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": "1",
        "COLUMNS": "200",
        COUNT_LOG_ENV: str(count_log),
        COUNT_HOLD_ENV: str(hold_path(count_log)),
    }


def hold_path(count_log: Path) -> Path:
    """The counting tier's hold file for the runs that log to ``count_log`` (present: calls wait in flight)."""
    return count_log.with_name(count_log.name + ".hold")


# A terminal starts its foreground job with SIGINT at its default, and Ctrl-C reaches it. A process started
# from a background shell (`cmd &`, nohup, some CI runners) inherits SIGINT *ignored*, and Python then leaves it
# ignored: an `arl run` started that way rightly ignores Ctrl-C, as every Unix program does. The harness stands in
# for the terminal, so each run gets Python's Ctrl-C handler back, however the harness itself was started.
_AS_A_FOREGROUND_JOB = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "


def arl_command(*args: str) -> list[str]:
    return [sys.executable, "-c", _AS_A_FOREGROUND_JOB + "from arl_flows.cli import main; main()", *args]


class RunProcess:
    """An `arl run` subprocess in its own session, with its output read line by line on a thread."""

    def __init__(self, args: list[str], env: dict[str, str], log_path: Path) -> None:
        self.lines: list[tuple[float, str]] = []
        self.cond = threading.Condition()
        self.log = open(log_path, "a", encoding="utf-8")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen(
            arl_command(*args), env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True, text=True, errors="replace",
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                self.cond.notify_all()
            self.log.write(line)
        with self.cond:
            self.cond.notify_all()

    def wait_for(self, predicate: Any, timeout: float, poll: float = 0.5) -> bool:
        """Block until ``predicate(lines)`` is true (True) or the process ended / timed out (False); re-checked every ``poll`` s."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not predicate(self.lines):
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self.reader.is_alive()):
                    return predicate(self.lines)
                self.cond.wait(min(left, poll))
            return True

    def wait(self, timeout: float) -> int | None:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self.reader.join(10)
        self.log.flush()
        return rc

    def kill_group(self) -> int:
        """SIGKILL whatever is left in the run's session (worker processes); returns how many were alive."""
        try:
            os.killpg(self.proc.pid, 0)
        except ProcessLookupError:
            return 0
        alive = _session_members(self.proc.pid)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return len(alive)

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)


def _session_members(sid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid:  # fields after the name: state ppid pgrp session ...
                members.append(int(entry.name))
    return members


# ---------------------------------------------------------------------- reading the ledger
def sqlite_path(url: str) -> str:
    return url.removeprefix("sqlite:///")


def verdict_rows(db: str) -> dict[tuple[str, str, str, str], tuple[str, float | None]]:
    """Cache key -> (status, value) of every verdict row, read with sqlite3 (WAL lets us read while the run writes)."""
    if not Path(db).exists():
        return {}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        rows = conn.execute("SELECT candidate_key, verifier, version, params_hash, status, value FROM verdicts").fetchall()
    except sqlite3.OperationalError:  # migrations not applied yet
        rows = []
    finally:
        conn.close()
    return {(k, v, ver, ph): (st, val) for k, v, ver, ph, st, val in rows}


def lost_verdicts(before: dict[tuple[str, str, str, str], tuple[str, float | None]],
                  after: dict[tuple[str, str, str, str], tuple[str, float | None]]) -> list[str]:
    """Verdicts of ``before`` missing from ``after`` or changed (pending may only become final)."""
    lost = []
    for key, (status, value) in before.items():
        now = after.get(key)
        if now is None:
            lost.append(f"{key[1]} on {key[0]}: missing")
        elif status != "pending" and now != (status, value):
            lost.append(f"{key[1]} on {key[0]}: was {status} {value}, now {now[0]} {now[1]}")
    return lost


# ---------------------------------------------------------------------- one trial
@dataclass
class Trial:
    index: int
    signal: str
    target: str  # the stage marker the kill was aimed after
    target_step: int
    delay_s: float
    killed: bool = False  # False: the run finished before the moment came
    stage_at_kill: str = ""  # last marker seen before the signal
    exit_code: int | None = None
    status_after_kill: str = ""
    steps_done_after_kill: int = 0
    leftover_processes: int = 0
    verdicts_before_kill: int = 0
    verdicts_lost: int = 0
    top_calls: int = 0
    duplicate_top_calls: int = 0
    inflight_redone: int = 0
    unbilled_top_calls: int = 0  # top-tier calls made but charged to no step (the killed attempt's spend is dropped)
    integrity_after_kill: list[str] = field(default_factory=list)
    integrity_final: list[str] = field(default_factory=list)
    resume_exit_code: int | None = None
    final_status: str = ""
    final_steps: int = 0
    problems: list[str] = field(default_factory=list)
    exit_code_ok: bool = True  # SIGTERM/SIGINT: the process exited with 130 (kept apart from the ledger checks)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems and self.exit_code_ok


def _stage_of(line: str) -> str:
    for name, pattern in MARKERS.items():
        if re.search(pattern, line):
            return name
    return ""


def _reached(target: str, target_step: int, start_step: int = 0) -> Any:
    """Predicate over a process's output lines: has it reached ``target`` of step ``target_step``?

    ``start_step`` is the first step the process runs (a resumed run starts at its steps_done).
    """
    pattern = re.compile(MARKERS[target])

    def reached(lines: list[tuple[float, str]]) -> bool:
        step = start_step - 1
        for _, line in lines:
            if "Task run 'rollout-" in line and "Finished" in line:
                step += 1
            if not pattern.search(line):
                continue
            if target == "rollout":
                # the run's first line precedes its first step; "step k: reward" precedes step k+1
                m = re.search(r"step (\d+): reward", line)
                if (int(m.group(1)) + 1 if m else start_step) == target_step:
                    return True
            elif step == target_step:
                return True
        return False

    return reached


def _reached_async(target: str, target_step: int, start_step: int, steps: int, count_log: Path, calls_before: int) -> Any:
    """Predicate over an async run's output lines: has it reached ``target`` (of :data:`ASYNC_MARKERS`) at ``target_step``?

    The step is the one the learner is on: ``start_step`` plus the steps this process has learned.
    ``top-in-flight`` reads the counting tier's log (calls of this process: after its first ``calls_before`` lines).
    """
    pattern = re.compile(ASYNC_MARKERS[target])

    def reached(lines: list[tuple[float, str]]) -> bool:
        step, rollouts = start_step, 0
        for _, line in lines:
            learned = re.search(ASYNC_MARKERS["drain"], line)
            if target == "drain" and learned and int(learned.group(1)) == steps - 1:
                return True
            if learned:
                step = int(learned.group(1)) + 1
                continue
            if step != target_step or target in ("drain", "top-in-flight") or not pattern.search(line):
                continue
            rollouts += target == "sample-ahead"
            if target != "sample-ahead" or rollouts >= 2:
                return True
        if target == "top-in-flight" and step >= target_step:
            calls = read_count_log(count_log)[calls_before:]
            out = Counter(key for event, _, _, key in calls if event == "start")
            out.subtract(key for event, _, _, key in calls if event == "done")
            return any(n > 0 for n in out.values())
        return False

    return reached


def run_trial(index: int, sig: str, rng: random.Random, *, workdir: Path, arl_home: Path, api_url: str,
              steps: int = 3, max_delay: float = 0.25) -> Trial:
    """Start, signal at a random stage, resume to completion, check; problems are listed on the Trial."""
    t0 = time.monotonic()
    target = rng.choice(list(MARKERS))
    last_step = steps - 1 if target != "between-steps" else steps - 2  # there must be work after the marker
    trial = Trial(index=index, signal=sig, target=target, target_step=rng.randint(0, max(last_step, 0)),
                  delay_s=round(rng.uniform(0.0, max_delay), 3))
    tdir = workdir / f"trial-{index:03d}-{sig}"
    tdir.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{tdir / 'ledger.db'}"
    db = sqlite_path(url)
    count_log = tdir / "top_tier_calls.log"
    config = write_config(tdir / "run.toml", name=f"crash-{index}", steps=steps, seed=index)
    env = arl_env(arl_home, api_url, count_log)

    first = RunProcess(["run", "--config", str(config), "--url", url, "--verbose"], env, tdir / "run.log")
    hit = first.wait_for(_reached(target, trial.target_step), timeout=300)
    run_id = _run_id(first.text())
    if hit and first.proc.poll() is None:
        time.sleep(trial.delay_s)
        before = verdict_rows(db)
        with first.cond:
            trial.stage_at_kill = next((s for _, line in reversed(first.lines) if (s := _stage_of(line))), "start")
        first.proc.send_signal(SIGNALS[sig])
        trial.killed = True
    else:
        before = {}
    trial.exit_code = first.wait(timeout=120)
    if trial.exit_code is None:
        trial.problems.append(f"the run did not exit within 120 s of {sig.upper()}")
    trial.leftover_processes = first.kill_group()
    first.wait(10)
    run_id = run_id or _run_id(first.text())
    after_kill = verdict_rows(db)
    trial.verdicts_before_kill = len(after_kill)

    from storage.ledger import Ledger

    if run_id is None:
        trial.problems.append("no run id in the output of the killed run; see " + str(tdir / "run.log"))
        trial.seconds = time.monotonic() - t0
        return trial
    with Ledger(url) as ledger:
        trial.integrity_after_kill = ledger.integrity_problems()
        run = ledger.get_run(run_id)
        trial.status_after_kill, trial.steps_done_after_kill = run.status.value, run.steps_done
    if trial.integrity_after_kill:
        trial.problems.append(f"integrity right after the kill: {trial.integrity_after_kill}")
    if trial.killed and sig != "kill":
        shown = subprocess.run(arl_command("runs", "show", run_id, "--url", url, "--json"), env=env, cwd=ROOT,
                               capture_output=True, text=True, timeout=120)
        status = json.loads(shown.stdout)["status"] if shown.returncode == 0 else f"error {shown.stderr[-300:]}"
        trial.exit_code_ok = trial.exit_code == 130 or trial.status_after_kill == "completed"
        if status not in ("interrupted", "completed"):
            trial.problems.append(f"after {sig.upper()} `arl runs show` says status {status!r}, expected 'interrupted'")
    killed_calls = read_count_log(count_log)

    if trial.status_after_kill != "completed":
        resumed = RunProcess(["run", "--resume", run_id, "--url", url, "--verbose"], env, tdir / "resume.log")
        trial.resume_exit_code = resumed.wait(timeout=600)
        resumed.kill_group()
        if trial.resume_exit_code != 0:
            trial.problems.append(f"resume exited with {trial.resume_exit_code}; see {tdir / 'resume.log'}")
    final = verdict_rows(db)
    lost = lost_verdicts(before, final) + lost_verdicts(after_kill, final)
    trial.verdicts_lost = len(set(lost))
    if lost:
        trial.problems.append(f"verdicts lost: {sorted(set(lost))[:5]}")

    calls = read_count_log(count_log)
    _count_top_calls(trial, killed_calls, calls[len(killed_calls):], after_kill)
    if trial.duplicate_top_calls:
        trial.problems.append(f"{trial.duplicate_top_calls} top-tier verdicts computed twice")

    with Ledger(url) as ledger:
        trial.integrity_final = ledger.integrity_problems()
        run = ledger.get_run(run_id)
        trial.final_status, trial.final_steps = run.status.value, run.steps_done
        recorded = [s.step for s in ledger.training_steps(run_id)]
        per_step = {s: ledger.step_trajectories(run_id, s) for s in range(steps)}
        billed = sum(r[0] for r in _spend_calls(db, run_id, TOP_TIER))
    trial.unbilled_top_calls = trial.top_calls - billed
    if trial.integrity_final:
        trial.problems.append(f"integrity at the end: {trial.integrity_final}")
    if trial.final_status != "completed" or trial.final_steps != steps:
        trial.problems.append(f"final status {trial.final_status} with {trial.final_steps}/{steps} steps")
    if recorded != list(range(steps)):
        trial.problems.append(f"training steps recorded: {recorded}, expected 0..{steps - 1}")
    for s, rows in per_step.items():
        if len(rows) != PROMPTS_PER_STEP * GROUP_SIZE or any(est is None for _, est in rows):
            trial.problems.append(
                f"step {s} has {len(rows)} trajectories ({sum(e is None for _, e in rows)} without reward), "
                f"expected {PROMPTS_PER_STEP * GROUP_SIZE}, all rewarded"
            )
    if billed > trial.top_calls:
        trial.problems.append(f"spend bills {billed} top-tier calls but the tier was called {trial.top_calls} times")
    trial.seconds = round(time.monotonic() - t0, 1)
    return trial


def _run_id(text: str) -> str | None:
    m = re.search(r"run ([0-9a-f]{32}) \(", text)
    return m.group(1) if m else None


def _spend_calls(db: str, run_id: str, verifier: str) -> list[tuple[int, float]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return conn.execute("SELECT calls, cost_s FROM spend WHERE run_id = ? AND verifier = ?", (run_id, verifier)).fetchall()
    finally:
        conn.close()


def _count_top_calls(trial: Trial, killed: list[tuple[str, int, str, str]], resumed: list[tuple[str, int, str, str]],
                     after_kill: dict[tuple[str, str, str, str], tuple[str, float | None]]) -> None:
    """Classify every top-tier invocation: first computation, in-flight work redone, or a duplicate."""
    stored = {k[0] for k in after_kill if k[1] == TOP_TIER}
    killed_starts = Counter(key for event, _, _, key in killed if event == "start")
    resumed_starts = Counter(key for event, _, _, key in resumed if event == "start")
    trial.top_calls = sum(killed_starts.values()) + sum(resumed_starts.values())
    dup = sum(n - 1 for n in killed_starts.values() if n > 1) + sum(n - 1 for n in resumed_starts.values() if n > 1)
    for key in resumed_starts:
        if key in stored:
            dup += 1  # its verdict was already in the ledger: paid twice
        elif key in killed_starts:
            trial.inflight_redone += 1  # computed when the process died, never written: redone by design
    trial.duplicate_top_calls = dup


# ---------------------------------------------------------------------- one run, killed again and again
@dataclass
class Kill:
    """One signal of a chain: ``sig`` once the run reaches ``target`` of step ``step``, plus ``delay_s``."""

    sig: str
    target: str
    step: int
    delay_s: float = 0.0
    killed: bool = False
    stage_at_kill: str = ""
    exit_code: int | None = None
    status_after_kill: str = ""
    steps_done_after_kill: int = 0
    leftover_processes: int = 0
    skipped: bool = False  # the run had already done the step this kill aimed at, and no later step has its boundary
    problems: list[str] = field(default_factory=list)


# Every stage boundary of a step once, SIGTERM and Ctrl-C among them, then moments drawn at random.
STAGE_KILLS = [
    ("kill", "rollout", 0), ("kill", "verify", 0), ("term", "top-tier", 0), ("kill", "hindsight", 0),
    ("int", "checkpoint", 0), ("kill", "between-steps", 0),
]


# Kill points inside the asynchronous pipeline, in the order a 2-step run reaches them: while the sampler is a
# batch ahead, with top-tier calls in flight (SIGKILL, then Ctrl-C), between GRPO and the checkpoint (SIGTERM,
# then SIGKILL), just before a checkpoint, and while the service drains the calls out at the end.
ASYNC_KILLS = [
    ("kill", "sample-ahead", 0), ("kill", "top-in-flight", 0), ("term", "grpo", 0), ("int", "top-in-flight", 0),
    ("kill", "checkpoint", 0), ("kill", "grpo", 1), ("kill", "drain", 1),
]
ASYNC_BUDGET = {"budget_per_step": 20.0, "budget_per_run": 40.0}  # 5 CPU-s a top-tier call: the budget binds


def async_kills(targets: list[tuple[str, str, int]] | None = None) -> list[Kill]:
    """Kills of an async chain (default :data:`ASYNC_KILLS`)."""
    return [Kill(sig, target, step) for sig, target, step in (targets or ASYNC_KILLS)]


def stage_kills(random_kills: int = 2, steps: int = 2, seed: int = 0, max_delay: float = 0.25) -> list[Kill]:
    """The fixed stage-boundary kills in step 0, then ``random_kills`` at random stages and delays in later steps."""
    rng = random.Random(seed)
    kills = [Kill(sig, target, step) for sig, target, step in STAGE_KILLS]
    later = sorted(
        ((rng.randint(1, steps - 1), list(MARKERS).index(t), t) for t in rng.sample([m for m in MARKERS if m != "between-steps"], random_kills)),
    )
    kills += [Kill("kill", t, step, round(rng.uniform(0.0, max_delay), 3)) for step, _, t in later]
    return kills


def run_chain(kills: list[Kill], *, workdir: Path | None = None, arl_home: Path | None = None, steps: int = 2,
              seed: int = 0, log: Any = print, pipeline: str = "sync") -> dict[str, Any]:
    """One run signalled at each of ``kills`` in turn (each resume is the next victim), then resumed to completion.

    The checks are a trial's, over the whole chain: no verdict written before
    any signal is lost or changed; no top-tier verdict is computed again once
    stored; integrity holds after every signal and at the end; the run ends
    completed with every step's trajectories rewarded. Kills must be in the
    order the run reaches them.

    ``pipeline="async"`` runs the asynchronous pipeline (kill targets from
    :data:`ASYNC_MARKERS`, the budget of :data:`ASYNC_BUDGET`) and checks
    what it promises besides: every top-tier call was recorded (a lab
    request) before it was sent, once; a call computed again was one left in
    flight (its request still pending when the process started: resumed, not
    sent again); nothing is left in flight at the end; the run's spend is
    within its budget and no top-tier verdict is billed twice; each step
    learned ``prompts_per_step`` groups, no group twice, every learned
    trajectory with a reward estimate.
    """
    asynchronous = pipeline == "async"
    workdir = Path(workdir or tempfile.mkdtemp(prefix="arl-crash-chain-"))
    arl_home = Path(arl_home or workdir / "arl_home")
    ensure_prior(arl_home)
    url = f"sqlite:///{workdir / 'ledger.db'}"
    db = sqlite_path(url)
    count_log = workdir / "top_tier_calls.log"
    if asynchronous:
        config = write_config(workdir / "run.toml", name="crash-chain", steps=steps, seed=seed, pipeline="async",
                              seconds_per_call=ASYNC_SECONDS_PER_CALL, **ASYNC_BUDGET)
    else:
        config = write_config(workdir / "run.toml", name="crash-chain", steps=steps, seed=seed)
    problems: list[str] = []
    snapshots: list[dict[tuple[str, str, str, str], tuple[str, float | None]]] = []
    segments: list[list[tuple[str, int, str, str]]] = []
    stored_before: list[set[str]] = []
    pending_before: list[set[str]] = []
    run_id: str | None = None
    start_step = 0
    from storage.ledger import Ledger

    with PrefectServer(workdir / "prefect") as server:
        env = arl_env(arl_home, server.api_url, count_log)
        for i, kill in enumerate([*kills, None]):
            if kill is not None and kill.step < start_step:
                # A signal that landed late (a loaded machine) let the run finish the step this kill aims at:
                # aim at the same boundary of the next step the run will do, or skip it if there is none.
                last = steps - 2 if kill.target == "between-steps" else steps - 1
                if start_step > last:
                    kill.skipped = True
                    log(f"{kill.sig.upper():4s} at {kill.target}@{kill.step}: skipped, the run already did step {kill.step}")
                    continue
                kill.step = start_step
            args = ["run", "--config", str(config)] if run_id is None else ["run", "--resume", run_id]
            rows = verdict_rows(db)
            stored_before.append({k[0] for k, (status, _) in rows.items() if k[1] == TOP_TIER and status != "pending"})
            pending_before.append({k[0] for k, (status, _) in rows.items() if k[1] == TOP_TIER and status == "pending"})
            calls_before = len(read_count_log(count_log))
            hold = hold_path(count_log)
            if kill is not None and kill.target == "top-in-flight" and kill.step == start_step:
                hold.touch()  # the first call out waits in flight until the signal is sent
            proc = RunProcess([*args, "--url", url, "--verbose"], env, workdir / f"process-{i}.log")
            if kill is None:
                rc = proc.wait(timeout=600)
                proc.kill_group()
                if rc != 0:
                    problems.append(f"the final resume exited with {rc}; see {workdir / f'process-{i}.log'}")
                segments.append(read_count_log(count_log)[calls_before:])
                break
            if asynchronous:
                reached = _reached_async(kill.target, kill.step, start_step, steps, count_log, calls_before)
                hit = proc.wait_for(reached, timeout=300, poll=0.05)
            else:
                hit = proc.wait_for(_reached(kill.target, kill.step, start_step), timeout=300)
            if hit and proc.proc.poll() is None:
                time.sleep(kill.delay_s)
                snapshots.append(verdict_rows(db))
                with proc.cond:
                    kill.stage_at_kill = next((s for _, line in reversed(proc.lines) if (s := _stage_of(line))), "start")
                if asynchronous:
                    kill.stage_at_kill = kill.target
                proc.proc.send_signal(SIGNALS[kill.sig])
                kill.killed = True
            else:
                kill.problems.append(f"never reached {kill.target}@{kill.step}; see {workdir / f'process-{i}.log'}")
            hold.unlink(missing_ok=True)  # a Ctrl-C or SIGTERM lets the held call finish and drain
            kill.exit_code = proc.wait(timeout=120)
            kill.leftover_processes = proc.kill_group()
            proc.wait(10)
            run_id = run_id or _run_id(proc.text())
            segments.append(read_count_log(count_log)[calls_before:])
            snapshots.append(verdict_rows(db))
            if run_id is None:
                problems.append(f"no run id in {workdir / f'process-{i}.log'}")
                break
            with Ledger(url) as ledger:
                integrity = ledger.integrity_problems()
                run = ledger.get_run(run_id)
                kill.status_after_kill, kill.steps_done_after_kill = run.status.value, run.steps_done
            start_step = kill.steps_done_after_kill
            if integrity:
                kill.problems.append(f"integrity after {kill.sig.upper()}: {integrity}")
            if kill.killed and kill.sig != "kill" and kill.status_after_kill != "completed":
                if kill.exit_code != 130 or kill.status_after_kill != "interrupted":
                    kill.problems.append(f"after {kill.sig.upper()}: exit {kill.exit_code}, status {kill.status_after_kill!r}; "
                                         "expected 130 and 'interrupted'")
            log(f"{kill.sig.upper():4s} at {kill.target}@{kill.step}+{kill.delay_s:.2f}s (last stage seen: "
                f"{kill.stage_at_kill or '-'}): exit {kill.exit_code}, {kill.status_after_kill} at "
                f"{kill.steps_done_after_kill}/{steps} {'OK' if not kill.problems else 'FAIL: ' + '; '.join(kill.problems)}")
            if kill.status_after_kill == "completed":
                break

    final = verdict_rows(db)
    lost = sorted({x for snap in snapshots for x in lost_verdicts(snap, final)})
    if lost:
        problems.append(f"verdicts lost: {lost[:5]}")
    duplicates, redone = _chain_top_calls(segments, stored_before, pending_before if asynchronous else None)
    if duplicates:
        problems.append(f"{duplicates} top-tier verdicts computed twice")
    budget_spent = 0.0
    if run_id is not None:
        with Ledger(url) as ledger:
            integrity = ledger.integrity_problems()
            run = ledger.get_run(run_id)
            recorded = [s.step for s in ledger.training_steps(run_id)]
            per_step = {s: ledger.step_trajectories(run_id, s) for s in range(steps)}
        if integrity:
            problems.append(f"integrity at the end: {integrity}")
        if run.status.value != "completed" or run.steps_done != steps or recorded != list(range(steps)):
            problems.append(f"final status {run.status.value} with {run.steps_done}/{steps} steps, recorded {recorded}")
        if asynchronous:
            problems += _async_problems(url, run_id, segments)
            with Ledger(url) as ledger:
                budget_spent = sum(ledger.spend_by_tier(run_id).values())
        else:
            for s, rows in per_step.items():
                if len(rows) != PROMPTS_PER_STEP * GROUP_SIZE or any(est is None for _, est in rows):
                    problems.append(f"step {s} has {len(rows)} trajectories ({sum(e is None for _, e in rows)} without reward)")
    return {
        "kills": [asdict(k) for k in kills],
        "stages_hit": dict(Counter(k.stage_at_kill for k in kills if k.killed)),
        "verdicts_lost": len(lost),
        "duplicate_top_calls": duplicates,
        "inflight_redone": redone,
        "top_calls": sum(1 for seg in segments for e in seg if e[0] == "start"),
        "leftover_processes": sum(k.leftover_processes for k in kills),
        "spent": budget_spent,
        "problems": problems + [f"{k.sig}@{k.target}/{k.step}: {p}" for k in kills for p in k.problems],
    }


def _chain_top_calls(segments: list[list[tuple[str, int, str, str]]], stored_before: list[set[str]],
                     pending_before: list[set[str]] | None = None) -> tuple[int, int]:
    """(duplicates, in-flight redone) over the processes of a chain.

    A call is a duplicate when its candidate's top-tier verdict was already in
    the ledger (final) when its process started, or when one process starts it twice;
    a call whose earlier computation died with its process is in-flight work redone.
    With ``pending_before`` (the async pipeline records each call before it is
    sent) work redone must be a call still recorded in flight when its process
    started (resumed); any other is a duplicate.
    """
    duplicates = redone = 0
    started_earlier: set[str] = set()
    for k, (calls, stored) in enumerate(zip(segments, stored_before, strict=False)):
        starts = Counter(key for event, _, _, key in calls if event == "start")
        duplicates += sum(n - 1 for n in starts.values() if n > 1)
        for key in starts:
            if key in stored:
                duplicates += 1
            elif key in started_earlier:
                if pending_before is not None and key not in pending_before[k]:
                    duplicates += 1  # sent again as a new call, not resumed
                else:
                    redone += 1
        started_earlier |= set(starts)
    return duplicates, redone


def _async_problems(url: str, run_id: str, segments: list[list[tuple[str, int, str, str]]]) -> list[str]:
    """What an async chain must hold at the end besides a sync one's (see :func:`run_chain`)."""
    from storage.ledger import Ledger
    from storage.records import Status

    problems = []
    with Ledger(url) as ledger:
        run = ledger.get_run(run_id)
        budget = float(run.config.get("scheduler", {}).get("budget_per_run", ASYNC_BUDGET["budget_per_run"]))
        spent = sum(ledger.spend_by_tier(run_id).values())
        requests = [r for r in ledger.lab_requests(run_id=run_id) if r.verifier == TOP_TIER]
        rows = ledger.run_trajectories(run_id)
        learned = [(r.step, r.group_ids) for r in ledger.training_steps(run_id)]
        keys = {t.candidate_key for t, _ in rows}
        top = [v for v in ledger.verdicts_for(keys) if v.verifier == TOP_TIER]
    billed = sum(n for n, _ in _spend_calls(sqlite_path(url), run_id, TOP_TIER))
    if spent > budget + 1e-6:
        problems.append(f"spent {spent:.2f} CPU-s of a {budget:.0f} budget")
    final_top = [v for v in top if v.status != Status.pending]
    if billed > len(final_top):
        problems.append(f"{billed} top-tier calls billed for {len(final_top)} verdicts: some paid twice")
    if len(final_top) != len(top):
        problems.append(f"{len(top) - len(final_top)} top-tier verdicts still pending at the end")
    per_key = Counter(r.candidate_key for r in requests)
    started = {key for calls in segments for event, _, _, key in calls if event == "start"}
    if unrecorded := started - set(per_key):
        problems.append(f"{len(unrecorded)} top-tier calls were sent without an in-flight record")
    if resent := [k for k, n in per_key.items() if n > 1]:
        problems.append(f"{len(resent)} candidates sent to the top tier as new requests twice")
    if left := [r.id for r in requests if r.status == Status.pending]:
        problems.append(f"{len(left)} top-tier requests still in flight at the end")
    by_group: dict[str, list[Any]] = {}
    for traj, estimate in rows:
        by_group.setdefault(traj.group_id, []).append(estimate)
    groups = [g for _, gs in learned for g in gs]
    if len(set(groups)) != len(groups):
        problems.append(f"a group was learned twice: {[g for g, n in Counter(groups).items() if n > 1][:3]}")
    for step, gs in learned:
        if len(gs) != PROMPTS_PER_STEP:
            problems.append(f"step {step} learned {len(gs)} groups, expected {PROMPTS_PER_STEP}")
        for g in gs:
            if len(by_group.get(g, [])) != GROUP_SIZE or any(e is None for e in by_group[g]):
                problems.append(f"step {step}: group {g} has {len(by_group.get(g, []))} trajectories, not all rewarded")
    return problems


# ---------------------------------------------------------------------- many trials
def run_trials(n: int, signals: list[str], *, seed: int = 0, workdir: Path | None = None, arl_home: Path | None = None,
               steps: int = 3, log: Any = print) -> list[Trial]:
    """``n`` trials cycling over ``signals``, with one Prefect server and one pretrained prior for all of them."""
    rng = random.Random(seed)
    workdir = Path(workdir or tempfile.mkdtemp(prefix="arl-crash-"))
    arl_home = Path(arl_home or workdir / "arl_home")
    log(f"workdir {workdir}; pretraining/loading the tiny prior in {arl_home}")
    ensure_prior(arl_home)
    trials = []
    with PrefectServer(workdir / "prefect") as server:
        log(f"Prefect server at {server.api_url}")
        for i in range(n):
            sig = signals[i % len(signals)]
            trial = run_trial(i, sig, rng, workdir=workdir, arl_home=arl_home, api_url=server.api_url, steps=steps)
            trials.append(trial)
            log(
                f"trial {i:3d} {sig.upper():4s} aimed at {trial.target}@{trial.target_step}+{trial.delay_s:.2f}s "
                f"(last stage seen: {trial.stage_at_kill or '-'}): exit {trial.exit_code}, {trial.status_after_kill} at "
                f"{trial.steps_done_after_kill}/{steps}; top calls {trial.top_calls}, redone in flight {trial.inflight_redone}, "
                f"duplicates {trial.duplicate_top_calls}, lost {trial.verdicts_lost}; final {trial.final_status} "
                f"{trial.final_steps}/{steps}; {trial.seconds:.0f} s {'OK' if not trial.problems else 'FAIL: ' + '; '.join(trial.problems)}"
                + ("" if trial.exit_code_ok else f" (exit code {trial.exit_code}, expected 130)")
            )
    return trials


def summarize(trials: list[Trial]) -> dict[str, Any]:
    by_signal: dict[str, dict[str, int]] = {}
    for t in trials:
        row = by_signal.setdefault(t.signal, {"trials": 0, "killed": 0, "survived": 0, "exit_130": 0})
        row["trials"] += 1
        row["killed"] += t.killed
        row["survived"] += t.killed and not t.problems
        row["exit_130"] += t.killed and t.signal != "kill" and t.exit_code == 130
    return {
        "trials": len(trials),
        "kills": sum(t.killed for t in trials),
        "kills_survived": sum(t.killed and not t.problems for t in trials),  # ledger checks and resume passed
        "by_signal": by_signal,
        "kills_after_completion": sum(t.killed and t.status_after_kill == "completed" for t in trials),
        "stages_hit": dict(Counter(t.stage_at_kill for t in trials if t.killed and t.status_after_kill != "completed")),
        "verdicts_lost": sum(t.verdicts_lost for t in trials),
        "duplicate_top_calls": sum(t.duplicate_top_calls for t in trials),
        "top_calls": sum(t.top_calls for t in trials),
        "inflight_redone": sum(t.inflight_redone for t in trials),
        "unbilled_top_calls": sum(t.unbilled_top_calls for t in trials),
        "leftover_processes": sum(t.leftover_processes for t in trials),
        "failed_trials": [t.index for t in trials if t.problems],
        "wrong_exit_code_trials": [t.index for t in trials if not t.exit_code_ok],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--signals", default="kill", help="Comma-separated cycle of kill, term, int (default: kill).")
    parser.add_argument("--steps", type=int, default=3, help="Training steps per run.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None, help="Where ledgers and logs go (default: a temp dir).")
    parser.add_argument("--arl-home", type=Path, default=None, help="ARL_HOME holding the cached tiny prior.")
    parser.add_argument("--json", type=Path, default=None, help="Write every trial and the totals as JSON.")
    parser.add_argument("--pipeline", choices=["sync", "async"], default="sync",
                        help="async: --trials chains of the kill points inside the asynchronous pipeline (ASYNC_KILLS).")
    args = parser.parse_args(argv)
    if args.pipeline == "async":
        workdir = Path(args.workdir or tempfile.mkdtemp(prefix="arl-crash-async-"))
        reports = [run_chain(async_kills(), workdir=workdir / f"chain-{i:03d}", arl_home=args.arl_home or workdir / "arl_home",
                             steps=max(args.steps, 2), seed=args.seed + i, pipeline="async") for i in range(args.trials)]
        print(json.dumps([{k: v for k, v in r.items() if k != "kills"} for r in reports], indent=2))
        print(f"provenance: {format_provenance()}")
        if args.json:
            args.json.write_text(json.dumps(with_provenance({"reports": reports}), indent=2))
        return 0 if not any(r["problems"] for r in reports) else 1
    signals = [s.strip() for s in args.signals.split(",") if s.strip()]
    unknown = set(signals) - set(SIGNALS)
    if unknown or not signals:
        parser.error(f"--signals takes kill, term, int; got {args.signals!r}")
    trials = run_trials(args.trials, signals, seed=args.seed, workdir=args.workdir, arl_home=args.arl_home, steps=args.steps)
    totals = summarize(trials)
    print(json.dumps(totals, indent=2))
    print(f"provenance: {format_provenance()}")
    if args.json:
        args.json.write_text(json.dumps(with_provenance({"totals": totals, "trials": [asdict(t) for t in trials]}), indent=2))
    return 0 if not totals["failed_trials"] and not totals["wrong_exit_code_trials"] else 1


if __name__ == "__main__":
    sys.exit(main())
