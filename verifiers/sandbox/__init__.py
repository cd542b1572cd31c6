"""The sandbox runtime: run untrusted Python in a separate, locked-down process (see :mod:`.runtime`).

Suite-independent: a suite that executes generated programs (the built-in
``code`` suite, a user's own) builds its tiers on :func:`run_python`.
"""

from verifiers.sandbox import runtime as _runtime
from verifiers.sandbox.runtime import *  # noqa: F403 - the package is the runtime's public surface, runtime.__all__

__all__ = list(_runtime.__all__)
