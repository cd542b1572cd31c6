"""Second security suite: exact judging, result decoding, cache keys, and a sandbox that shares nothing.

Every attack in ``attacks2.py`` runs against the real sandbox and tiers. The
sandbox classes run with the static policy *off* (the sandbox alone must
hold) and are also given to the fast tier with the policy *on*, which must
refuse the policy-bypass class. Each test asserts that no wrong answer is
judged correct, that nothing is left behind (processes, host IPC objects,
files next to the sentinel) and that nothing secret is read.

``python tests/arl_flows/suites/code/test_security2.py`` regenerates the results table
in docs/security.md.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.arl_flows.suites.code.attacks2 import ATTACKS2, CGROUP_BOUNDS, PIN_BOUNDS
from tests.arl_flows.suites.code.test_security import SECRET, World

from storage.ledger import Ledger
from arl_flows.suites.code import CodeExecution, CodeFormat, CodeTests, SandboxLimits, code_reward, make_candidate, run_python
from arl_flows.suites.code.format import normalise_code
from verifiers.sandbox.runtime import isolation_support

LIMITS = {"cpu_s": 1, "wall_s": 3}
SUPPORT = isolation_support()
needs_private = pytest.mark.skipif(
    not (SUPPORT.pidns and SUPPORT.setuid), reason="needs root: PID/IPC namespaces and a fresh uid"
)
needs_seccomp = pytest.mark.skipif(not SUPPORT.seccomp, reason="needs libseccomp for the socket-family filter")

_OLD_SEPARATOR = "\n# ---- next turn ----\n"


def by_category(category: str) -> list[tuple[str, str, str]]:
    return [(name, task, code) for name, cat, task, code in ATTACKS2 if cat == category]


def ids(category: str) -> list[str]:
    return [name for name, cat, _, _ in ATTACKS2 if cat == category]


class Decoy:
    """A live host process with the secret in its command line and environment (what /proc could leak)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            ["sh", "-c", "sleep 120", f"decoy-{SECRET}"], env={"PATH": "/usr/bin:/bin", "ARL_DECOY": SECRET}
        )

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def host_ipc() -> dict[str, list[str]]:
    """The host's IPC objects: SysV (from /proc/sysvipc) and POSIX message queues (if /dev/mqueue is mounted).

    A SysV object is named by its key and id (the first two columns): its attach count, last pid and times change
    whenever another host process (PostgreSQL's backends attach to its 56-byte segment) touches it.
    """
    out = {}
    for kind in ("shm", "msg", "sem"):
        try:
            lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]
            out[kind] = sorted(" ".join(line.split()[:2]) for line in lines)
        except OSError:
            out[kind] = []
    out["mqueue"] = sorted(os.listdir("/dev/mqueue")) if os.path.isdir("/dev/mqueue") else []
    return out


@pytest.fixture(scope="module")
def world():
    w = World()
    decoy = Decoy()
    w.hostpid = decoy.proc.pid
    w.ipc_before = host_ipc()
    yield w
    decoy.close()
    w.close()


def fill(world: World, code: str) -> str:
    return world.fill(code).replace("HOSTPID", str(world.hostpid))


def answer(code: str) -> str:
    return f"<think>attack</think>\n<code>\n{code}\n</code>"


def assert_nothing_left(world: World, texts: list[str]) -> None:
    assert world.harm(texts) == []
    assert all(f"decoy-{SECRET}" not in t for t in texts)
    assert host_ipc() == world.ipc_before, "an IPC object was left on the host"


def run_sandboxed(world: World, code: str, **limits) -> object:
    r = run_python(fill(world, code), SandboxLimits(**{**LIMITS, **limits}))
    assert r.leftover_after_cleanup == 0
    return r


# -- judging ---------------------------------------------------------------------------------------------------------


def judge(world: World, task: str, code: str, enforce_policy: bool) -> dict:
    text = answer(fill(world, code))
    cand = make_candidate(task, text)
    (fast,) = CodeFormat().verify_batch([cand])
    (execution,) = CodeExecution({"limits": LIMITS, "enforce_policy": enforce_policy}).verify_batch([cand])
    (tests,) = CodeTests({"limits": LIMITS, "enforce_policy": enforce_policy, "own_run": False}).verify_batch([cand])
    verdicts = [fast, execution, tests] if enforce_policy else [execution, tests]
    return {
        "fast": fast,
        "exec": execution,
        "tests": tests,
        "reward": code_reward(text, verdicts, completion_tokens=100),
        "texts": [execution.feedback, tests.feedback, json.dumps(execution.values), json.dumps(tests.values)],
    }


@pytest.mark.parametrize(("name", "task", "code"), by_category("exactness"), ids=ids("exactness"))
@pytest.mark.parametrize("enforce_policy", [False, True], ids=["policy-off", "policy-on"])
def test_inexact_answers_are_wrong(world, name, task, code, enforce_policy):
    r = judge(world, task, code, enforce_policy)
    tests = r["tests"]
    assert tests.status == "ok", tests.feedback  # a plain wrong answer: a fact about the candidate
    assert tests.value == 0.0 and tests.values["passed"] < tests.values["total"], tests.feedback
    # The attack prints the right stdout; only exact judging catches it: the hidden tests', or already the visible
    # call of the prompt's print statement, judged the same way.
    assert r["exec"].value == 1.0 or "the function does not return it" in r["exec"].feedback, r["exec"].feedback
    assert r["reward"].components["outcome"] < 0 and r["reward"].total < 1.0
    assert_nothing_left(world, r["texts"])


@pytest.mark.parametrize(("name", "task", "code"), by_category("decoding"), ids=ids("decoding"))
def test_undecodable_results_are_a_verdict(world, name, task, code):
    r = judge(world, task, code, enforce_policy=False)
    tests = r["tests"]
    assert tests.status in ("invalid", "ok"), tests.feedback
    assert tests.value in (None, 0.0)
    if tests.status == "invalid":
        assert "decode" in tests.feedback or "exceed" in tests.feedback, tests.feedback
    assert r["reward"].total < 1.0
    assert_nothing_left(world, r["texts"])


def test_one_bad_candidate_never_costs_the_batch(world):
    """Every decoding attack and two correct answers in one batch: each gets its own verdict, the good ones pass."""
    good = make_candidate("sum-to-n", answer("def solve(n):\n    return n * (n + 1) // 2\nprint(solve(100))"))
    bad = [make_candidate(task, answer(code)) for _, task, code in by_category("decoding")]
    batch = [good, *bad, good]
    verdicts = CodeTests({"limits": LIMITS, "enforce_policy": False, "own_run": False}).verify_batch(batch)
    assert [v.candidate_key for v in verdicts] == [c.key for c in batch]
    assert (verdicts[0].status, verdicts[0].value) == ("ok", 1.0)
    assert (verdicts[-1].status, verdicts[-1].value) == ("ok", 1.0)
    assert all(v.status in ("invalid", "ok") and v.value != 1.0 for v in verdicts[1:-1])
    assert sum(v.status == "invalid" for v in verdicts) >= 9  # every value built to reach the judge


def test_judge_error_in_one_candidate_is_that_candidates_verdict(world, monkeypatch):
    """Whatever trips the judge while deciding one candidate becomes its `failed` verdict; the rest are judged."""
    import arl_flows.suites.code.tests_tier as tier

    real = tier.values_equal

    def explode_on_marker(got, want, **kw):
        if got == 7777:
            raise OverflowError("judge tripped")
        return real(got, want, **kw)

    monkeypatch.setattr(tier, "values_equal", explode_on_marker)
    good = make_candidate("sum-to-n", answer("def solve(n):\n    return n * (n + 1) // 2"))
    tripping = make_candidate("sum-to-n", answer("def solve(n):\n    return 7777"))
    verdicts = CodeTests({"limits": LIMITS, "own_run": False}).verify_batch([tripping, good])
    assert verdicts[0].status == "failed" and "judge tripped" in verdicts[0].feedback
    assert (verdicts[1].status, verdicts[1].value) == ("ok", 1.0)


# -- cache keys ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "task", "code"), by_category("cache-key"), ids=ids("cache-key"))
def test_separator_in_code_never_shares_a_key(name, task, code):
    single = answer(code)
    turns = code.split(_OLD_SEPARATOR)
    multi = "".join(
        f"<think>t{i}</think><code>{c}</code>" + ("<observation>o</observation>" if i < len(turns) - 1 else "")
        for i, c in enumerate(turns)
    )
    # Under the old scheme (turns joined with the separator line) the two were the same string...
    assert normalise_code(code) == _OLD_SEPARATOR.join(normalise_code(c) for c in turns)
    # ...now they are different keys.
    assert make_candidate(task, single).key != make_candidate(task, multi).key
    # Sharing is kept where it is meant: the same code with other thinking and whitespace.
    respaced = single.replace("<think>attack</think>", "<think>other</think>\n\n")
    assert make_candidate(task, respaced).key == make_candidate(task, single).key


def test_colliding_trajectories_get_their_own_verdicts_in_a_real_ledger(tmp_path):
    """Right code in one turn vs the same text split into a correct turn and a final bare print: one passes, one fails."""
    good = "def solve(n):\n    return n * (n + 1) // 2\nprint(solve(100))\n"
    one_turn = answer(good + _OLD_SEPARATOR + "print(5050)\n")
    two_turns = f"<think>a</think><code>{good}</code><observation>5050</observation><think>b</think><code>print(5050)</code>"
    a, b = make_candidate("sum-to-n", one_turn), make_candidate("sum-to-n", two_turns)
    tier = CodeTests({"limits": LIMITS, "own_run": False})
    (va,) = tier.verify_batch([a])
    assert (va.status, va.value) == ("ok", 1.0)
    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        ledger.put_verdicts([va])
        assert ledger.lookup_verdicts([b.key], tier.name, tier.version, tier.params_hash) == {}
    (vb,) = tier.verify_batch([b])
    assert (vb.status, vb.value) == ("ok", 0.0)  # the final turn defines no solve(): the hidden tests fail


# -- the sandbox: host visibility, IPC, memory, sockets, CPU ---------------------------------------------------------


@needs_private
@pytest.mark.parametrize(("name", "task", "code"), by_category("host-visibility"), ids=ids("host-visibility"))
def test_proc_shows_only_the_sandbox(world, name, task, code):
    r = run_sandboxed(world, code, wall_s=5)
    texts = [r.stdout, r.stderr]
    assert SECRET not in r.stdout + r.stderr
    assert "ARL_DECOY" not in r.stdout and "firecracker" not in r.stdout and "pytest" not in r.stdout
    assert "killed 1" not in r.stdout and f"killed {world.hostpid}" not in r.stdout
    m = re.search(r"PIDS (\d+)", r.stdout)
    if m:
        assert int(m.group(1)) <= 2, r.stdout  # the program (and nothing else)
    if name == "proc-self-ns-pid":
        assert "pid 2 ppid 1" in r.stdout, r.stdout
    assert os.path.exists(f"/proc/{world.hostpid}"), "the decoy host process was killed"
    assert_nothing_left(world, texts)
    # With the policy on, none of these even runs.
    (fast,) = CodeFormat().verify_batch([make_candidate(task, answer(fill(world, code)))])
    assert fast.status == "invalid"


@needs_private
def test_old_layout_would_leak_the_host_command_line(world):
    """The same scan without the PID namespace finds the decoy: the check above can fail."""
    code = dict((n, c) for n, _, c in by_category("host-visibility"))["read-host-pid"]
    r = run_sandboxed(world, code, private_pids_ipc=False)
    assert f"decoy-{SECRET}" in r.stdout


@needs_private
@pytest.mark.parametrize(("name", "task", "code"), by_category("ipc-persistence"), ids=ids("ipc-persistence"))
def test_ipc_does_not_outlive_a_run(world, name, task, code):
    first = run_sandboxed(world, code)
    second = run_sandboxed(world, code)
    assert "LEFT" in first.stdout, first.stdout + first.stderr  # the first run did leave (or try to leave) something
    assert "FOUND" not in second.stdout, second.stdout
    assert "MARK" not in second.stdout
    assert_nothing_left(world, [first.stdout, second.stdout])


@needs_private
def test_old_layout_would_pass_shared_memory_to_the_next_run(world):
    """Without the IPC namespace the second run finds the first one's segment: the check above can fail."""
    code = dict((n, c) for n, _, c in by_category("ipc-persistence"))["sysv-shm-left"]
    try:
        first = run_sandboxed(world, code, private_pids_ipc=False)
        second = run_sandboxed(world, code, private_pids_ipc=False)
        assert "LEFT" in first.stdout and "FOUND" in second.stdout and "MARK-shm" in second.stdout
    finally:
        subprocess.run(["ipcrm", "-M", "0x41524c01"], capture_output=True)
    assert host_ipc() == world.ipc_before


@needs_private
@pytest.mark.parametrize(("name", "task", "code"), by_category("memory-pinning"), ids=ids("memory-pinning"))
def test_pinned_memory_is_bounded_and_released(world, name, task, code):
    if name in CGROUP_BOUNDS and not SUPPORT.memcg:
        pytest.skip("needs a cgroup v1 memory controller for one memory total per run")
    r = run_sandboxed(world, code, wall_s=10)
    pinned = [int(n) for n in re.findall(r"PINNED (\d+)", r.stdout)]
    assert pinned, r.stdout + r.stderr
    assert max(pinned) <= {**PIN_BOUNDS, **CGROUP_BOUNDS}[name], r.stdout
    if name in CGROUP_BOUNDS:
        assert r.memory_layer == "cgroup" and r.memory_peak_mb <= 256 + 1
    assert_nothing_left(world, [r.stdout])


@needs_private
@pytest.mark.skipif(not SUPPORT.memcg, reason="needs a cgroup v1 memory controller")
def test_without_the_cgroup_processes_pin_past_the_limit_together(world):
    """The check above can fail: with per-process limits only, six children hold 900 MiB at once."""
    code = dict((n, c) for n, _, c in by_category("memory-pinning"))["fork-allocate-total"]
    r = run_sandboxed(world, code, wall_s=60, memory_cgroup=False)  # 10 s was too short at a load of 12
    pinned = [int(n) for n in re.findall(r"PINNED (\d+)", r.stdout)]
    assert pinned and max(pinned) > 256 << 20, (r.outcome, r.stdout[-2000:], r.stderr[-2000:])


@needs_seccomp
@pytest.mark.parametrize(("name", "task", "code"), by_category("socket-family"), ids=ids("socket-family"))
def test_unconfined_socket_families_are_refused(world, name, task, code):
    r = run_sandboxed(world, code)
    assert r.outcome == "success", r.stderr
    assert "CREATED" not in r.stdout, r.stdout
    assert "refused" in r.stdout
    assert r.socket_layer == "seccomp"
    assert_nothing_left(world, [r.stdout])


def test_without_the_filter_vsock_opens_where_the_kernel_has_it(world):
    """The check above can fail: with the filter off, a kernel with vsock hands out the socket."""
    r = run_sandboxed(world, dict((n, c) for n, _, c in by_category("socket-family"))["ctypes-vsock"], socket_filter=False)
    if "CREATED" not in r.stdout:
        pytest.skip(f"this kernel has no AF_VSOCK ({r.stdout.strip()})")
    assert r.socket_layer == "none"


@needs_private
@pytest.mark.parametrize(("name", "task", "code"), by_category("cpu-accounting"), ids=ids("cpu-accounting"))
def test_every_process_and_the_wall_are_charged(world, name, task, code):
    r = run_sandboxed(world, code, wall_s=10)
    assert r.outcome == "success", r.stderr
    cpu = re.search(r"EXPECT_CPU ([\d.]+)", r.stdout)
    charged = re.search(r"EXPECT_CHARGED ([\d.]+)", r.stdout)
    assert cpu or charged, r.stdout
    if cpu:
        assert r.cpu_s >= float(cpu.group(1)) - 0.02, (r.cpu_s, r.stdout)
    if charged:
        assert r.charged_s >= float(charged.group(1)), r.charged_s
    assert r.charged_s >= max(r.cpu_s, r.wall_s) - 1e-9
    assert_nothing_left(world, [r.stdout])


@needs_private
def test_verdict_cost_includes_orphans_and_sleep(world):
    code = dict((n, c) for n, _, c in by_category("cpu-accounting"))["orphans-burn-cpu"]
    cand = make_candidate("sum-to-n", answer(code))
    (v,) = CodeExecution({"limits": {**LIMITS, "wall_s": 10}, "enforce_policy": False}).verify_batch([cand])
    assert v.status == "ok" and v.cost_s >= 0.45 - 0.02
    assert v.values["process_layer"] == "pidns+ipcns"
    sleeper = make_candidate("sum-to-n", answer("import time\ntime.sleep(0.5)\nprint(5050)"))
    (v,) = CodeExecution({"limits": LIMITS, "enforce_policy": False}).verify_batch([sleeper])
    assert v.cost_s >= 0.5


# -- static policy -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "task", "code"), by_category("policy-bypass"), ids=ids("policy-bypass"))
def test_policy_bypasses_are_refused_and_harmless(world, name, task, code):
    (fast,) = CodeFormat().verify_batch([make_candidate(task, answer(fill(world, code)))])
    assert fast.status == "invalid", f"the static policy let {name} through"
    r = judge(world, task, code, enforce_policy=False)  # the sandbox alone
    assert r["tests"].value in (0.0, None) and r["reward"].total < 1.0
    on = judge(world, task, code, enforce_policy=True)
    assert on["exec"].status == "invalid" and on["tests"].status == "invalid"
    assert_nothing_left(world, r["texts"])


@needs_private
def test_program_cannot_pass_for_a_sandbox_failure(world):
    """Mimicking the init's failure line (exit 125, 'arl-sandbox ...:') is the program's own error, not `failed`."""
    code = "import sys\nsys.stderr.write('arl-sandbox probe: mount /proc: gone\\n')\nsys.exit(125)\n"
    (v,) = CodeExecution({"limits": LIMITS, "enforce_policy": False}).verify_batch([make_candidate("sum-to-n", answer(code))])
    assert v.status == "ok" and v.values["outcome"] == "error" and v.value == 0.0


def test_at_least_forty_new_attacks():
    assert len(ATTACKS2) >= 40
    assert len({a[0] for a in ATTACKS2}) == len(ATTACKS2)


def render_table() -> str:
    """One row per attack: what stopped it (for docs/security.md)."""
    w = World()
    decoy = Decoy()
    w.hostpid = decoy.proc.pid
    rows = ["| attack | class | fast tier (policy on) | result with the policy off |", "|---|---|---|---|"]
    try:
        for name, category, task, code in ATTACKS2:
            filled = fill(w, code)
            (fast,) = CodeFormat().verify_batch([make_candidate(task, answer(filled))])
            if category in ("exactness", "decoding", "policy-bypass"):
                r = judge(w, task, code, enforce_policy=False)
                t = r["tests"]
                result = f"hidden tests {t.status} {t.value if t.value is not None else ''}: {t.feedback[:60]}"
            elif category == "cache-key":
                result = "distinct key from the multi-turn split"
            else:
                runs = [run_python(filled, SandboxLimits(**{**LIMITS, "wall_s": 10}))]
                if category == "ipc-persistence":
                    runs.append(run_python(filled, SandboxLimits(**LIMITS)))
                out = runs[-1].stdout.strip().splitlines()
                result = (out[0] if out else runs[-1].outcome)[:70]
                pinned = [int(n) for n in re.findall(r"PINNED (\d+)", runs[-1].stdout)]
                if pinned:
                    result = f"pinned at most {max(pinned) / (1 << 20):.1f} MiB (memory: {runs[-1].memory_layer})"
                if category == "cpu-accounting":
                    result += f" (charged CPU {runs[-1].cpu_s:.2f} s, charged {runs[-1].charged_s:.2f} s)"
            result = result.replace("|", "/").replace("\n", " ")
            rows.append(f"| {name} | {category} | {fast.status} | {result} |")
    finally:
        decoy.close()
        w.close()
    return "\n".join(rows)


if __name__ == "__main__":
    doc = Path(__file__).resolve().parents[4] / "docs" / "security.md"
    table = render_table()
    text = doc.read_text()
    start, end = "<!-- results2:start -->", "<!-- results2:end -->"
    before, _, rest = text.partition(start)
    _, _, after = rest.partition(end)
    header = f"\nGenerated by `python tests/arl_flows/suites/code/test_security2.py` on this machine ({SUPPORT.model_dump()}).\n\n"
    doc.write_text(before + start + header + table + "\n" + end + after)
    print(table)
