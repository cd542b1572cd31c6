"""The sandbox runtime: run untrusted Python in a separate, locked-down process (see :mod:`.runtime`).

Suite-independent: a suite that executes generated programs (the built-in
``code`` suite, a user's own) builds its tiers on :func:`run_python`.
"""

from verifiers.sandbox.runtime import (
    IsolationSupport,
    SandboxError,
    SandboxLimits,
    SandboxResult,
    channel_fd_placeholder,
    describe_support,
    isolation_support,
    run_python,
)

__all__ = [
    "IsolationSupport",
    "SandboxError",
    "SandboxLimits",
    "SandboxResult",
    "channel_fd_placeholder",
    "describe_support",
    "isolation_support",
    "run_python",
]
