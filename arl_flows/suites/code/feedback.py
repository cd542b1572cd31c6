"""What a sandbox run that did not succeed tells the policy, in words (shared by the execution and test tiers).

Feedback names the outcome and the program's own last error line; it never
quotes an expected output, so a policy cannot read the answer from it.
"""

from __future__ import annotations

from verifiers.sandbox.runtime import SandboxLimits, SandboxResult

__all__ = ["run_feedback"]


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip()[:300] if lines else ""


def run_feedback(result: SandboxResult, limits: SandboxLimits) -> str:
    """Why a run did not succeed, in words (never quoting expected output)."""
    if result.outcome == "timeout":
        return f"timed out (limits: {limits.cpu_s} s CPU, {limits.wall_s:g} s wall)"
    if result.outcome == "output_limit":
        return f"output exceeded {limits.output_bytes} bytes; the run was killed"
    if result.outcome == "error":
        if result.memory_limit_hit and result.returncode == -9:
            return f"killed at the run's memory limit ({limits.memory_mb} MiB for all its processes)"
        return _last_line(result.stderr) or f"exited with status {result.returncode}"
    return ""
