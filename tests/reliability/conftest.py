"""Reliability tests: fault injection inside verifiers and fuzzing of outside input.

``tests/helpers/fault_targets.py`` is imported as ``tests.helpers.fault_targets`` (the
repository root is on the import path, pyproject's ``pythonpath``), so worker
processes can unpickle its work function.

Hypothesis profiles: ``default`` keeps each property to a few dozen
examples; the slow tests raise the counts themselves (``SLOW_EXAMPLES`` in
``test_fuzz.py``) so that the slow suite tries >= 10,000 generated inputs.
``HYPOTHESIS_PROFILE=thorough`` multiplies every default-suite property too.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# The autouse ARL_HOME fixture of tests/conftest.py is function-scoped; it is
# harmless to share across examples, hence the suppressed health check.
_COMMON = {
    "deadline": None,  # a shared 2-core machine makes per-example timing meaningless
    "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    "derandomize": True,  # the default suite tries the same inputs every run; the slow variants explore
}
settings.register_profile("default", max_examples=60, **_COMMON)
settings.register_profile("thorough", max_examples=1000, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
