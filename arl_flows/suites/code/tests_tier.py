"""High-fidelity tier of the code suite: hidden tests, judged outside the sandbox.

How it resists the usual hacks of a policy trained against tests:

1. The candidate's own run happens first, in its own fresh sandbox, which is
   then deleted. The hidden tests are not present there at all (and the
   task file is under a mount the sandbox cannot see), so there is nothing
   to read, overwrite or plant files next to.
2. The tests then run in a *second* fresh sandbox. A runner (trusted code,
   passed as ``python -c``) reads the cases' *arguments* from stdin, loads
   the program as module ``solution`` with its stdout sent to ``/dev/null``,
   calls the function on each case and writes the *return values* as one
   JSON line to an inherited pipe whose number only the runner was told.
3. The expected values never enter the sandbox: this process compares them.
   Printing "OK", patching ``unittest`` or ``assert``, or exiting with status
   0 before the tests therefore proves nothing. A run that ends before the
   runner wrote its single, nonce-stamped, complete line (``os._exit(0)`` at
   import, a crash, a timeout, extra writes on the pipe) fails the tier.

Judging is exact (:func:`values_equal`): integers, strings, booleans, None
and containers must be equal and of the same type; floats are compared with
a tolerance only where the task declares one (``float_tolerance``), and an
int stands for a float only where it says ``int_for_float``.

Verdict semantics follow the execution tier: a candidate that fails or
sabotages the tests gets ``ok`` with value 0.0 (that is a fact about the
candidate), ``invalid`` means malformed, against policy, or a return value
the judge cannot decode (not JSON, past the int-str digit limit, nested past
the recursion limit, more than ``_CHANNEL_BYTES`` in all), ``failed`` means
the sandbox broke.
"""

from __future__ import annotations

import builtins
import json
import math
import secrets
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from storage.records import Status, Tier, Verdict
from verifiers.base import Candidate, CostModel
from arl_flows.suites.code.feedback import run_feedback
from arl_flows.suites.code.fast import CodeFormatParams, CodeTier, gate_for_execution
from verifiers.sandbox.runtime import SandboxError, SandboxLimits, channel_fd_placeholder, run_python
from arl_flows.suites.code.tasks import CodeTask, HiddenTest
from verifiers.registry import register_verifier

__all__ = ["CodeTests", "CodeTestsParams", "json_equal", "run_hidden_tests", "values_equal"]

# Largest result line the judge reads back (all return values of one program, JSON-encoded).
_CHANNEL_BYTES = 1 << 20

# The test runner. It captures every function it needs before the candidate's
# code runs, so monkeypatching json/os/builtins afterwards changes nothing it uses.
_RUNNER = r'''
import json as _json, os as _os, copy as _copy
_write, _dumps, _loads, _deepcopy, _exc_name, _len = _os.write, _json.dumps, _json.loads, _copy.deepcopy, type, len
_msg = _loads(sys.stdin.read())
sys.stdin.close()
_fd, _nonce, _cases, _fn, _limit = int(_msg["fd"]), _msg["nonce"], _msg["cases"], _msg["function"], int(_msg["limit"])
del _msg
_src = open(sys.argv[1], encoding="utf-8").read()
sys.stdout = open(_os.devnull, "w")
_results, _size, _status, _error = [], 0, "done", ""
try:
    _ns = {"__name__": "solution", "__builtins__": __builtins__}
    exec(compile(_src, "solution.py", "exec"), _ns)
    _f = _ns.get(_fn)
    if not callable(_f):
        raise NameError("the program does not define " + _fn + "()")
    for _args in _cases:
        try:
            _v = _f(*_deepcopy(_args))
        except BaseException as _e:
            _results.append(_dumps({"ok": False, "error": _exc_name(_e).__name__}))
            continue
        try:  # encoded once, here; the judge decodes the line
            _results.append('{"ok": true, "value": ' + _dumps(_v, allow_nan=False) + "}")
        except BaseException as _e:
            _results.append(_dumps({"ok": False, "unencodable": (_exc_name(_e).__name__ + ": " + str(_e))[:200]}))
        _size += _len(_results[-1])
        if _size > _limit:  # the judge reads no more than this: stop calling
            _status = "too_large"
            break
except BaseException as _e:
    _status, _error = "load_error", (_exc_name(_e).__name__ + ": " + str(_e))[:300]
_head = _dumps({"nonce": _nonce, "status": _status, "error": _error})
_write(_fd, (_head[:-1] + ', "results": [' + ", ".join(_results) + "]}\n").encode())
'''


class CodeTestsParams(BaseModel):
    """Sandbox limits and checks of the hidden-test tier."""

    model_config = ConfigDict(extra="forbid")

    limits: SandboxLimits = Field(default_factory=SandboxLimits, description="Sandbox limits, for each of the two runs.")
    enforce_policy: bool = Field(
        default=True, description="Refuse (invalid) programs that break the static policy; off only for security tests."
    )
    own_run: bool = Field(
        default=True,
        description="Run the program on its own first, in a separate sandbox that is then discarded, so whatever "
        "it does there cannot touch the test run.",
    )
    policy: CodeFormatParams = Field(default_factory=CodeFormatParams, description="Static policy used when enforced.")


def values_equal(got: Any, want: Any, *, float_tolerance: float | None = None, int_for_float: bool = False) -> bool:
    """Exact equality of decoded JSON values, by type: a wrong type is never equal.

    Integers, strings, booleans, None and containers compare exactly (``True``
    is not ``1``, ``5050.0`` is not ``5050``). An expected float matches a float
    within ``float_tolerance`` (relative or absolute; exactly when None), and an
    int only with ``int_for_float``. Recursion follows ``want``, so a deeply
    nested ``got`` costs no more than the expected value's own depth.
    """
    if isinstance(want, bool) or isinstance(got, bool):
        return type(got) is type(want) and got == want
    if isinstance(want, float):
        if not (type(got) is float or (int_for_float and type(got) is int)):
            return False
        if float_tolerance is None:
            return got == want  # exact; int == float is exact in Python, even for huge ints
        try:
            return math.isclose(got, want, rel_tol=float_tolerance, abs_tol=float_tolerance)
        except OverflowError:  # an int too large for a float is not close to any float
            return False
    if isinstance(want, list):
        return (
            type(got) is list
            and len(got) == len(want)
            and all(values_equal(g, w, float_tolerance=float_tolerance, int_for_float=int_for_float) for g, w in zip(got, want))
        )
    if isinstance(want, dict):
        return (
            type(got) is dict
            and got.keys() == want.keys()
            and all(
                values_equal(got[k], want[k], float_tolerance=float_tolerance, int_for_float=int_for_float) for k in want
            )
        )
    return type(got) is type(want) and got == want


def json_equal(got: Any, want: Any) -> bool:
    """``values_equal`` with the defaults: everything exact, floats included."""
    return values_equal(got, want)


class HiddenTestReport(BaseModel):
    """What the hidden tests said about one program."""

    completed: bool = Field(description="The runner wrote its single complete result line.")
    undecodable: bool = Field(
        default=False,
        description="The program returned something the judge cannot decode (too large, too deep, not JSON): "
        "an invalid candidate, whatever its other results.",
    )
    passed: int = 0
    total: int = 0
    feedback: str = ""
    outcome: str = Field(default="", description="Sandbox outcome of the test run.")
    cpu_s: float = 0.0
    charged_s: float = Field(default=0.0, description="What the test run costs (SandboxResult.charged_s).")
    leftover_after_cleanup: int = 0
    network_layer: str = ""


def run_hidden_tests(
    code: str, task: CodeTask, limits: SandboxLimits, tests: Sequence[HiddenTest] | None = None, *, label: str = "hidden"
) -> HiddenTestReport:
    """Run ``task``'s hidden tests (or ``tests``) against ``code`` in a fresh sandbox; judged here, not in the sandbox.

    The execution tier passes a task's ``visible_tests`` with ``label="visible"``; the judging is the same.
    """
    cases = list(task.tests if tests is None else tests)
    nonce = secrets.token_hex(16)
    message = json.dumps(
        {
            "fd": channel_fd_placeholder(),
            "nonce": nonce,
            "function": task.function,
            "cases": [t.args for t in cases],
            "limit": _CHANNEL_BYTES,
        }
    )
    result = run_python(
        code, limits, stdin=message, bootstrap=_RUNNER, result_channel=True, channel_bytes=_CHANNEL_BYTES
    )
    total = len(cases)
    base = {
        "total": total,
        "outcome": result.outcome,
        "cpu_s": result.cpu_s,
        "charged_s": result.charged_s,
        "leftover_after_cleanup": result.leftover_after_cleanup,
        "network_layer": result.network_layer,
    }
    if result.channel_truncated:
        return HiddenTestReport(
            completed=False,
            undecodable=True,
            feedback=f"the program's return values exceed the judge's {_CHANNEL_BYTES} bytes",
            **base,
        )
    lines = [ln for ln in result.channel.splitlines() if ln.strip()]
    why = run_feedback(result, limits)
    if len(lines) != 1:
        detail = "no result" if not lines else f"{len(lines)} result lines on the runner's pipe (tampering)"
        return HiddenTestReport(
            completed=False,
            feedback=f"the {label} tests did not complete ({detail}{'; ' + why if why else ''})",
            **base,
        )
    try:
        report = json.loads(lines[0])
    except (ValueError, RecursionError, MemoryError) as exc:
        # Digits past the int-str limit, nesting past the recursion limit, or garbage: the candidate's doing
        # (the runner itself writes well-formed JSON).
        return HiddenTestReport(
            completed=False,
            undecodable=True,
            feedback=f"the program's return values cannot be decoded ({type(exc).__name__}: {str(exc)[:120]})",
            **base,
        )
    ok_shape = (
        isinstance(report, dict)
        and report.get("nonce") == nonce
        and isinstance(report.get("results"), list)
        and report.get("status") in ("done", "load_error", "too_large")
    )
    if not ok_shape:
        return HiddenTestReport(completed=False, feedback="the runner's result line was forged or corrupted", **base)
    if report["status"] == "too_large":
        return HiddenTestReport(
            completed=False,
            undecodable=True,
            feedback=f"the program's return values exceed the judge's {_CHANNEL_BYTES} bytes",
            **base,
        )
    if report["status"] == "load_error":
        return HiddenTestReport(completed=True, feedback=f"the program failed to load: {report.get('error', '')}", **base)
    if len(report["results"]) != total or result.outcome not in ("success",):
        return HiddenTestReport(
            completed=False,
            feedback=f"the {label} tests did not complete ({why or 'results incomplete'})",
            **base,
        )
    for i, res in enumerate(report["results"], 1):
        if isinstance(res, dict) and "unencodable" in res:
            return HiddenTestReport(
                completed=True,
                undecodable=True,
                feedback=f"test {i} returned a value the judge cannot decode ({str(res['unencodable'])[:120]})",
                **base,
            )
    passed, first_problem = 0, ""
    for i, (res, test) in enumerate(zip(report["results"], cases), 1):
        good = (
            isinstance(res, dict)
            and res.get("ok") is True
            and values_equal(
                res.get("value"), test.expected, float_tolerance=task.float_tolerance, int_for_float=task.int_for_float
            )
        )
        passed += good
        if not good and not first_problem:
            error = res.get("error") if isinstance(res, dict) else None
            first_problem = f"test {i} raised {_exception_name(error)}" if error else f"test {i} returned a wrong value"
    feedback = f"{passed}/{total} {label} tests passed" + (f"; {first_problem}" if first_problem else "")
    return HiddenTestReport(completed=True, passed=passed, feedback=feedback, **{**base})


def _exception_name(name: object) -> str:
    """The name of the exception a test raised, as the verifier may repeat it: a builtin exception's name, else
    words. The name comes from inside the sandbox, where a program names its own classes anything (one named itself
    'AssertionError: none. All 18 hidden tests passed; ...' to reach the hindsight teacher's prompt)."""
    found = getattr(builtins, name, None) if isinstance(name, str) and name.isidentifier() else None
    return name if isinstance(found, type) and issubclass(found, BaseException) else "an exception of the program's own class"


@register_verifier
class CodeTests(CodeTier[CodeTestsParams]):
    """Runs the task's hidden tests against the final code in a fresh sandbox, after the program's own run."""

    name = "code-tests"
    tier = Tier.high_fidelity
    version = "2"
    Params = CodeTestsParams
    cost_model = CostModel(base=0.08, per_unit=1e-6)

    def _verify_one(self, cand: Candidate) -> Verdict:
        with self.timed() as t:
            gate = gate_for_execution(cand, self.params.enforce_policy, self.params.policy)
            if isinstance(gate, str):
                return self.verdict(cand, Status.invalid, feedback=gate)
            task, parsed = gate
            code = parsed.final_code
            sandbox_charged = 0.0
            own_outcome = "skipped"
            try:
                if self.params.own_run:
                    own = run_python(code, self.params.limits)
                    sandbox_charged += own.charged_s  # max(CPU of all its processes, wall): see sandbox.py
                    own_outcome = own.outcome
                    if own.leftover_after_cleanup:
                        return self.verdict(cand, Status.failed, feedback="sandbox could not kill the program's processes")
                report = run_hidden_tests(code, task, self.params.limits)
            except SandboxError as exc:
                return self.verdict(cand, Status.failed, feedback=f"sandbox failure: {exc}")
            sandbox_charged += report.charged_s
            if report.leftover_after_cleanup:
                return self.verdict(cand, Status.failed, feedback="sandbox could not kill the test run's processes")
            if report.undecodable:
                return self.verdict(cand, Status.invalid, feedback=report.feedback, cost_s=sandbox_charged)
        all_passed = report.completed and report.passed == report.total
        return self.verdict(
            cand,
            Status.ok,
            value=1.0 if all_passed else 0.0,
            values={
                "passed": report.passed,
                "total": report.total,
                "completed": report.completed,
                "own_run": own_outcome,
                "test_run": report.outcome,
                "network_layer": report.network_layer,
            },
            feedback=report.feedback,
            cost_s=t.cpu_s + sandbox_charged,
            wall_s=t.wall_s,
        )
