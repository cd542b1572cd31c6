"""Disagreement between two tiers that should agree, as a signal on a candidate's reward estimate.

Two rules, for the two shapes a pair of tiers can have:

- **pass/fail tiers** (code: the visible check ``code-exec`` and the hidden
  tests ``code-tests``): both answered ``ok`` and one passed while the other
  failed. Passing what the policy can see and failing what it cannot is the
  typical mark of output matching or test gaming; the reverse says the
  visible check is wrong.
- **valued tiers on different scales** (molecules: an xTB gap and the DFT
  gap): the scheduler's surrogate maps the lower tiers' values onto the top
  tier's scale with a predictive mean and std; the top tier's value lying
  more than ``z`` stds from that mean is a disagreement. The surrogate's
  intervals are calibrated (``docs/tiers.md``), so with ``z = 4`` a
  well-behaved candidate is flagged about once in 16,000.

A flag never changes a reward: it is a field of the estimate
(:class:`storage.records.TierDisagreement`) that the run report counts per
step and the run's Prefect artifact lists.
"""

from __future__ import annotations

import math

from storage.records import Status, TierDisagreement, Verdict

__all__ = ["DEFAULT_Z", "interval_disagreement", "pass_fail_disagreement"]

DEFAULT_Z = 4.0


def pass_fail_disagreement(lower: Verdict | None, upper: Verdict | None) -> TierDisagreement | None:
    """The disagreement of two pass/fail verdicts (``ok`` with value 1.0 is a pass), or None if they agree.

    A tier that did not answer ``ok`` (invalid, failed, timeout, pending) has no opinion to disagree with.
    """
    if lower is None or upper is None or lower.status != Status.ok or upper.status != Status.ok:
        return None
    low_pass, up_pass = lower.value == 1.0, upper.value == 1.0
    if low_pass == up_pass:
        return None
    kind = "lower_pass_upper_fail" if low_pass else "lower_fail_upper_pass"
    words = (
        f"passes {lower.verifier} but fails {upper.verifier}"
        if low_pass
        else f"fails {lower.verifier} but passes {upper.verifier}"
    )
    return TierDisagreement(
        kind=kind,
        lower=lower.verifier,
        upper=upper.verifier,
        lower_value=lower.value,
        upper_value=upper.value,
        detail=f"{words}: {upper.feedback[:160]}" if low_pass else words,
    )


def interval_disagreement(
    lower: Verdict, upper: Verdict, mean: float, std: float, z: float = DEFAULT_Z
) -> TierDisagreement | None:
    """The disagreement of a lower tier with the top tier's value, or None.

    ``mean`` and ``std`` are the surrogate's prediction of the top tier's value from the lower tiers alone.
    Flagged when ``|upper.value - mean| > z * std``.
    """
    if lower.status != Status.ok or upper.status != Status.ok or lower.value is None or upper.value is None:
        return None
    if not (math.isfinite(mean) and math.isfinite(std)) or std <= 0.0:
        return None
    distance = abs(upper.value - mean) / std
    if distance <= z:
        return None
    return TierDisagreement(
        kind="outside_interval",
        lower=lower.verifier,
        upper=upper.verifier,
        lower_value=lower.value,
        upper_value=upper.value,
        detail=(
            f"{upper.verifier} = {upper.value:.3f} is {distance:.1f} std from {mean:.3f} +- {std:.3f}, "
            f"the surrogate's prediction from {lower.verifier} = {lower.value:.3f}"
        ),
    )
