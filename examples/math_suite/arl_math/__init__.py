"""arl-math-suite: an ARL suite plugin for calculus answers (see README.md).

The suite (``suite.py``) and its three tiers (``fast.py``, ``symbolic.py``,
``numeric.py``) are registered by the entry points in ``pyproject.toml``;
nothing here is imported by ARL itself.
"""

from arl_math.expressions import InvalidAnswer, parse_answer

__all__ = ["InvalidAnswer", "parse_answer"]
