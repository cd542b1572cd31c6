"""Simulation tier of the code suite: run the program, compare its stdout (or its visible calls).

A task without an expected stdout (HumanEval, MBPP: a function, no printing)
is checked on its ``visible_tests`` instead, the examples its prompt shows,
through the hidden-test runner in a second fresh sandbox. A task with both
(the bundled ones: "print the output of `print(solve(100))`", and the call
``solve(100)`` as its visible test) passes only when the stdout matches *and*
the function returns the value of that call: a program that prints the
expected text without computing it is told apart from a solution here, not
only by the hidden tests a small budget may never reach.

What the verdict means (the reward engine depends on it):

* ``ok`` is a statement about the *candidate*. A program that crashes,
  loops until the CPU limit, floods stdout or prints the wrong thing gets an
  ``ok`` verdict with value 0.0 and ``values["outcome"]`` saying which
  (``error``, ``timeout``, ``output_limit``, ``wrong``); a correct one gets 1.0.
  If a program's own timeout were a ``timeout`` verdict ("could not
  verify"), the reward engine would treat it as unknown, and a policy could
  escape every penalty by looping forever: the cheapest reward hack there is.
* ``invalid``: there is no program to run (malformed trajectory) or it breaks
  the static policy.
* ``failed``: the sandbox itself could not run or could not clean up (an
  infrastructure problem; the candidate is not to blame and gets no reward
  from this tier).

Every code turn of a multi-turn trajectory is run, each in a fresh sandbox,
and its result is stored in ``values["turns"]`` so training can use
per-turn (process) rewards; the verdict's value is the final turn's.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from storage.records import Status, Tier, Verdict
from verifiers.base import Candidate, CostModel
from arl_flows.suites.code.fast import CodeFormatParams, CodeTier, gate_for_execution
from verifiers.sandbox.runtime import SandboxError, SandboxLimits, SandboxResult, run_python
from arl_flows.suites.code.feedback import run_feedback
from arl_flows.suites.code.tests_tier import run_hidden_tests
from verifiers.registry import register_verifier

__all__ = ["CodeExecution", "CodeExecutionParams", "normalise_stdout"]


class CodeExecutionParams(BaseModel):
    """Sandbox limits and checks of the execution tier."""

    model_config = ConfigDict(extra="forbid")

    limits: SandboxLimits = Field(default_factory=SandboxLimits, description="Sandbox limits per run.")
    enforce_policy: bool = Field(
        default=True,
        description="Refuse (invalid) programs that break the fast tier's static policy before running them. "
        "The sandbox holds without it; switching it off is for the security tests.",
    )
    all_turns: bool = Field(default=True, description="Run every code turn (process rewards), not only the final one.")
    policy: CodeFormatParams = Field(default_factory=CodeFormatParams, description="Static policy used when enforced.")


def normalise_stdout(text: str) -> list[str]:
    """Lines with edge whitespace stripped, inner runs of blanks collapsed, blank edge lines dropped."""
    lines = [" ".join(line.split()) for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


def _match_words(task: Any) -> str:
    return "stdout matches" if task.expected_stdout is not None else "visible tests passed"


def _compare(stdout: str, expected: str) -> str | None:
    """None if the outputs match; else where they first differ (what the program printed only)."""
    got, want = normalise_stdout(stdout), normalise_stdout(expected)
    if got == want:
        return None
    for i, (g, w) in enumerate(zip(got, want), 1):
        if g != w:
            return f"stdout differs from the expected output at line {i} (printed {g[:80]!r})"
    return f"stdout has {len(got)} lines, expected {len(want)}"


def _visible_calls(code: str, task: Any, limits: SandboxLimits) -> tuple[str | None, float]:
    """A function task's visible check: its ``visible_tests`` through the hidden-test runner in a fresh sandbox.

    Returns (None if every call returned the expected value, else why; what the run is charged).
    """
    report = run_hidden_tests(code, task, limits, task.visible_tests, label="visible")
    if report.leftover_after_cleanup:
        raise SandboxError("sandbox could not kill the visible tests' processes")
    good = report.completed and not report.undecodable and report.passed == report.total
    return (None if good else report.feedback), report.charged_s


@register_verifier
class CodeExecution(CodeTier[CodeExecutionParams]):
    """Runs each code turn in a fresh sandbox and compares stdout with the task's expected output."""

    name = "code-exec"
    tier = Tier.simulation
    version = "3"
    Params = CodeExecutionParams
    cost_model = CostModel(base=0.03, per_unit=1e-6)

    def _verify_one(self, cand: Candidate) -> Verdict:
        with self.timed() as t:
            gate = gate_for_execution(cand, self.params.enforce_policy, self.params.policy)
            if isinstance(gate, str):
                return self.verdict(cand, Status.invalid, feedback=gate)
            task, parsed = gate
            codes = parsed.codes if self.params.all_turns else parsed.codes[-1:]
            turns: list[dict[str, Any]] = []
            sandbox_charged = 0.0
            last: SandboxResult | None = None
            for code in codes:
                try:
                    last = run_python(code, self.params.limits)
                except SandboxError as exc:
                    return self.verdict(cand, Status.failed, feedback=f"sandbox failure: {exc}")
                sandbox_charged += last.charged_s  # max(CPU of all its processes, wall): see sandbox.py
                if last.leftover_after_cleanup:
                    return self.verdict(
                        cand, Status.failed, feedback=f"sandbox could not kill {last.leftover_after_cleanup} processes"
                    )
                if last.outcome != "success":
                    mismatch: str | None = "not run to completion"
                elif task.expected_stdout is not None:
                    mismatch = _compare(last.stdout, task.expected_stdout)
                    if mismatch is None and task.visible_tests:
                        # The output is that of a stated call (`print(solve(100))`): the function must return it
                        # too, so printing the expected text without computing it is no pass.
                        try:
                            mismatch, charged = _visible_calls(code, task, self.params.limits)
                        except SandboxError as exc:
                            return self.verdict(cand, Status.failed, feedback=f"sandbox failure: {exc}")
                        sandbox_charged += charged
                        if mismatch is not None:
                            mismatch = f"stdout matches, but the function does not return it: {mismatch}"
                else:
                    try:
                        mismatch, charged = _visible_calls(code, task, self.params.limits)
                    except SandboxError as exc:
                        return self.verdict(cand, Status.failed, feedback=f"sandbox failure: {exc}")
                    sandbox_charged += charged
                turns.append(
                    {
                        "outcome": last.outcome,
                        "correct": mismatch is None,
                        "returncode": last.returncode,
                        "feedback": run_feedback(last, self.params.limits) or (mismatch or _match_words(task)),
                        "cpu_s": round(last.cpu_s, 4),
                        "leftover_killed": last.leftover_killed,
                    }
                )
        assert last is not None
        final = turns[-1]
        correct = bool(final["correct"])
        return self.verdict(
            cand,
            Status.ok,
            value=1.0 if correct else 0.0,
            values={
                "outcome": final["outcome"] if final["outcome"] != "success" or correct else "wrong",
                "exit": final["outcome"],
                "correct": correct,
                "turns": turns,
                "network_layer": last.network_layer,
                "mount_layer": last.mount_layer,
                "process_layer": last.process_layer,
                "socket_layer": last.socket_layer,
                "uid_isolated": last.uid is not None,
            },
            feedback=final["feedback"],
            cost_s=t.cpu_s + sandbox_charged,
            wall_s=t.wall_s,
        )
