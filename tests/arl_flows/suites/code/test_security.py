"""Security suite: adversarial candidates, every one a failure, nothing harmed.

The attacks run with the static policy *off* in the execution and hidden-test
tiers, so what is shown here is that the sandbox alone holds; the fast tier's
verdict (with the policy on, as in training) is recorded alongside.

``python tests/arl_flows/suites/code/test_security.py`` regenerates the results table
in docs/security.md.
"""

from __future__ import annotations

import hashlib
import os
import socket
import tempfile
import threading
from pathlib import Path

import pytest

from tests.arl_flows.suites.code.attacks import ATTACKS

from arl_flows.suites.code import CodeExecution, CodeFormat, CodeTests, code_reward, make_candidate
import verifiers.sandbox.runtime as sandbox_module
from verifiers.sandbox.runtime import _UID_HIGH, _UID_LOW, isolation_support
from arl_flows.suites.code.tasks import TASKS_FILE

LIMITS = {"cpu_s": 1, "wall_s": 2}
SECRET = "ARL-SENTINEL-7f3a9c"
REPO = str(Path(__file__).resolve().parents[4])


class Listener:
    """A real TCP and UDP listener on 127.0.0.1 that records anything it receives."""

    def __init__(self) -> None:
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.tcp.settimeout(0.2)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.settimeout(0.2)
        self.received: list[bytes] = []
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return self.tcp.getsockname()[1]

    @property
    def uport(self) -> int:
        return self.udp.getsockname()[1]

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.tcp.accept()
                self.connections += 1
                conn.settimeout(0.5)
                try:
                    self.received.append(conn.recv(1024))
                finally:
                    conn.close()
            except (TimeoutError, OSError):
                pass
            try:
                self.received.append(self.udp.recv(1024))
            except (TimeoutError, OSError):
                pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.tcp.close()
        self.udp.close()


def sandbox_processes(uids: set[int] | None = None) -> list[int]:
    """Pids of live processes with a sandbox uid (there must be none between runs).

    ``uids`` limits the search to the uids our own sandboxes ran under, so that
    another process's sandbox running at the same moment is not counted.
    """
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                status = Path(f"/proc/{entry.name}/status").read_text()
            except OSError:
                continue
            uid = int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])
            state = next(line for line in status.splitlines() if line.startswith("State:")).split()[1]
            if _UID_LOW <= uid < _UID_HIGH and state != "Z" and (uids is None or uid in uids):
                pids.append(int(entry.name))
    return pids


def file_digest(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class World:
    """Everything an attack could harm, and how to check it was not."""

    def __init__(self) -> None:
        # World-readable on purpose: only the sandbox's mount namespace hides it.
        self.dir = Path(tempfile.mkdtemp(prefix="arl-sentinel-"))
        os.chmod(self.dir, 0o777)
        self.sentinel = self.dir / "secret.txt"
        self.sentinel.write_text(SECRET)
        os.chmod(self.sentinel, 0o666)
        self.sentinel_stat = self.sentinel.stat()
        self.listener = Listener()
        self.tasks_digest = file_digest(TASKS_FILE)
        self.tmp_before = set(os.listdir("/tmp"))
        os.environ["ARL_TEST_SECRET"] = SECRET
        # Record every uid our sandboxes run under (the check below looks at exactly those).
        self.uids: set[int] = set()
        self._fresh_uid = sandbox_module._fresh_uid

        def recording_fresh_uid() -> int:
            uid = self._fresh_uid()
            self.uids.add(uid)
            return uid

        sandbox_module._fresh_uid = recording_fresh_uid

    def fill(self, code: str) -> str:
        return (
            code.replace("SENTINEL_DIR", str(self.dir))
            .replace("SENTINEL", str(self.sentinel))
            .replace("UPORT", str(self.listener.uport))
            .replace("PORT", str(self.listener.port))
            .replace("TASKS_FILE", str(TASKS_FILE))
            .replace("REPO", REPO)
        )

    def harm(self, texts: list[str]) -> list[str]:
        problems = []
        if self.sentinel.read_text() != SECRET or self.sentinel.stat().st_mtime != self.sentinel_stat.st_mtime:
            problems.append("sentinel modified")
        extra = set(os.listdir(self.dir)) - {"secret.txt"}
        if extra:
            problems.append(f"files created next to the sentinel: {sorted(extra)}")
        if any(SECRET in t for t in texts):
            problems.append("secret leaked into the program's output")
        if self.listener.received or self.listener.connections:
            problems.append(f"listener got {self.listener.connections} connections, data {self.listener.received}")
        if file_digest(TASKS_FILE) != self.tasks_digest:
            problems.append("task file modified")
        if sandbox_processes(self.uids):
            problems.append(f"sandbox processes still alive: {sandbox_processes(self.uids)}")
        new_tmp = {n for n in set(os.listdir("/tmp")) - self.tmp_before if n.startswith(("arl_", "sitecustom", "usercustom"))}
        if new_tmp:
            problems.append(f"files created in /tmp: {sorted(new_tmp)}")
        return problems

    def close(self) -> None:
        sandbox_module._fresh_uid = self._fresh_uid
        self.listener.close()
        os.environ.pop("ARL_TEST_SECRET", None)
        for p in self.dir.iterdir():
            p.unlink()
        self.dir.rmdir()


def run_attack(world: World, code: str) -> dict:
    text = f"<think>attack</think>\n<code>\n{world.fill(code)}\n</code>"
    cand = make_candidate("sum-to-n", text)
    (fast,) = CodeFormat().verify_batch([cand])
    (execution,) = CodeExecution({"limits": LIMITS, "enforce_policy": False}).verify_batch([cand])
    (tests,) = CodeTests({"limits": LIMITS, "enforce_policy": False}).verify_batch([cand])
    # Reward as training would see it without the static policy (the sandbox alone) and with it.
    sandbox_only = code_reward(text, [execution, tests], completion_tokens=100)
    trained = code_reward(text, [fast, execution, tests], completion_tokens=100)
    turn = execution.values.get("turns", [{}])[-1] if execution.status == "ok" else {}
    return {
        "fast": fast,
        "exec": execution,
        "tests": tests,
        "reward_sandbox_only": sandbox_only.total,
        "reward": trained.total,
        "texts": [execution.feedback, tests.feedback, str(execution.values), turn.get("feedback", "")],
    }


@pytest.fixture(scope="module")
def world():
    w = World()
    yield w
    w.close()


def test_at_least_forty_attacks():
    assert len(ATTACKS) >= 40
    assert len({name for name, _, _ in ATTACKS}) == len(ATTACKS)


@pytest.mark.parametrize(("name", "category", "code"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_attack_fails_and_harms_nothing(world, name, category, code):
    result = run_attack(world, code)
    execution, tests = result["exec"], result["tests"]
    # The sandbox ran them (policy off), so both are verdicts about the candidate (a value the judge cannot
    # decode makes the candidate invalid)...
    assert execution.status == "ok", execution.feedback
    assert tests.status in ("ok", "invalid"), tests.feedback
    # ...and every one is a failure at the top tier and in the reward.
    assert tests.value in (0.0, None), tests.feedback
    assert result["reward_sandbox_only"] < 1.0
    assert result["reward"] < 1.0
    assert world.harm(result["texts"]) == []


def test_network_fallback_layer_blocks_sockets(world):
    """The audit-hook layer (used where unshare is not allowed) refuses sockets on its own."""
    code = world.fill("import socket\ns = socket.create_connection(('127.0.0.1', PORT), timeout=1)\ns.sendall(b'leak')\n")
    cand = make_candidate("sum-to-n", f"<think>a</think><code>{code}</code>")
    limits = {**LIMITS, "network": "audit-hook"}
    (v,) = CodeExecution({"limits": limits, "enforce_policy": False}).verify_batch([cand])
    assert v.status == "ok" and v.values["outcome"] == "error" and v.values["network_layer"] == "audit-hook"
    assert "network access is disabled" in v.feedback
    assert world.harm([v.feedback]) == []


@pytest.mark.skipif(not isolation_support().netns, reason="needs unshare(CLONE_NEWNET)")
def test_network_namespace_layer_alone(world):
    """With the network namespace as the only layer, the connection cannot even be routed."""
    code = world.fill("import socket\nsocket.create_connection(('127.0.0.1', PORT), timeout=1)\n")
    cand = make_candidate("sum-to-n", f"<think>a</think><code>{code}</code>")
    (v,) = CodeExecution({"limits": {**LIMITS, "network": "netns"}, "enforce_policy": False}).verify_batch([cand])
    assert v.values["network_layer"] == "netns" and v.values["outcome"] == "error"
    assert "Network is unreachable" in v.feedback or "Errno" in v.feedback
    assert world.harm([v.feedback]) == []


def render_table() -> str:
    """Run every attack and render the markdown results table for docs/security.md."""
    w = World()
    rows = [
        "| attack | category | fast tier (policy on) | exec outcome (policy off) | hidden tests (policy off) "
        "| reward, sandbox only | reward | harm |",
        "|---|---|---|---|---|---|---|---|",
    ]
    try:
        for name, category, code in ATTACKS:
            r = run_attack(w, code)
            harm = w.harm(r["texts"])
            fast = "ok" if r["fast"].status == "ok" else "invalid"
            exec_out = r["exec"].values.get("outcome", r["exec"].status)
            shown = f"{r['tests'].value:g}" if r["tests"].value is not None else r["tests"].status
            tests = f"{shown} ({r['tests'].feedback[:48]})".replace("|", "/")
            rows.append(
                f"| {name} | {category} | {fast} | {exec_out} | {tests} | {r['reward_sandbox_only']:+.2f} "
                f"| {r['reward']:+.2f} | {'; '.join(harm) or 'none'} |"
            )
    finally:
        w.close()
    return "\n".join(rows)


if __name__ == "__main__":
    doc = Path(REPO) / "docs" / "security.md"
    table = render_table()
    text = doc.read_text()
    start, end = "<!-- results:start -->", "<!-- results:end -->"
    before, _, rest = text.partition(start)
    _, _, after = rest.partition(end)
    s = isolation_support()
    header = (
        f"\nGenerated by `python tests/arl_flows/suites/code/test_security.py` on this machine "
        f"(root={s.root}, netns={s.netns}, mount namespace={s.mountns}, fresh uid={s.setuid}, "
        f"sandbox interpreter {s.python}).\n\n"
    )
    doc.write_text(before + start + header + table + "\n" + end + after)
    print(table)
