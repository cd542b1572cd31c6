"""Hindsight: failed trajectories become training signal instead of being thrown away.

Two ways, both driven by what the verifiers said about the attempt:

1. relabelling (hindsight experience replay, Andrychowicz et al. 2017, applied
   to goal-conditioned generation): a molecule asked for gap window A that
   actually has gap y is a correct answer to the goal "window containing y".
   The completion is kept and the prompt is rewritten; training is plain SFT.
   The rewriting is the suite's (e.g. ``arl_flows.suites.molecules.hindsight``);
   this module holds the example types and the suite-independent helpers.
   Goals are on the top tier's scale, so y must be too: a lower tier's raw
   value is not (the xTB gap of a QM9 molecule is ~2 eV below its DFT gap),
   and ``top_scale_value`` reads y from the scheduler's posterior instead.
2. ``hint_prompt`` (on-policy distillation with a privileged teacher): the
   teacher sees the original prompt plus a hint built from verifier feedback
   (achieved value, error message); the student sees the prompt alone. The
   loss is the reverse KL(student || teacher) on the student's own tokens
   (``losses.reverse_kl_distill_loss``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from storage.records import RewardEstimate, Status, Verdict, tier_rank


__all__ = [
    "HintedExample",
    "RelabeledExample",
    "achieved_value",
    "feedback_hint",
    "hint_prompt",
    "top_scale_value",
]


@dataclass
class RelabeledExample:
    """A supervised example: ``prompt_ids`` (the relabeled goal) followed by ``completion_ids``."""

    prompt_ids: list[int]
    completion_ids: list[int]
    goal: tuple[float, float] | None = None  # the relabelled goal when it is a window (for reports); None otherwise


@dataclass
class HintedExample:
    """One student completion with the student's and the hinted teacher's contexts."""

    student_prompt_ids: list[int]
    teacher_prompt_ids: list[int]
    completion_ids: list[int]


def achieved_value(verdicts: Iterable[Verdict]) -> float | None:
    """The value of the highest-fidelity ``ok`` verdict (ties: the newest), or None if none is ok."""
    ok = [v for v in verdicts if v.status == Status.ok and v.value is not None and math.isfinite(v.value)]
    if not ok:
        return None
    best = max(ok, key=lambda v: (tier_rank(v.tier), v.created_at))
    return float(best.value)  # type: ignore[arg-type]


def top_scale_value(estimate: RewardEstimate | None, max_std: float) -> float | None:
    """The scheduler's posterior mean of the top-tier value, if its posterior std is at most ``max_std``.

    A top-tier verdict makes the posterior exact (std 0); below the top tier
    the mean is the surrogate's calibrated prediction from the lower tiers, and
    ``max_std`` keeps only molecules it is sure enough about to name their bin.
    None when the estimate carries no posterior (an invalid molecule).
    """
    if estimate is None:
        return None
    mean, std = estimate.value_mean, estimate.value_std
    if mean is None or std is None or not (math.isfinite(mean) and math.isfinite(std)) or std > max_std:
        return None
    return float(mean)


def feedback_hint(achieved: float | None = None, error: str = "", unit: str = "") -> str:
    """Verifier feedback in words, for text policies (the hint a teacher reads)."""
    parts = []
    if achieved is not None:
        parts.append(f"Your previous answer achieved {achieved:.3g}{(' ' + unit) if unit else ''}.")
    if error:
        parts.append(f"The verifier reported: {error.strip()}")
    if not parts:
        raise ValueError("a hint needs an achieved value or an error message")
    return "Feedback: " + " ".join(parts)


def hint_prompt(prompt: str | Sequence[int], hint: str | Sequence[int]) -> str | list[int]:
    """The teacher's context: the original prompt with the hint added.

    Text prompts get the hint appended on its own line. Token prompts get the hint ids
    inserted before the prompt's last token (the separator after which the completion
    starts), so the completion still follows the same marker in both contexts.
    """
    if isinstance(prompt, str):
        if not isinstance(hint, str):
            raise TypeError("a text prompt needs a text hint")
        return f"{prompt}\n{hint}\n"
    if isinstance(hint, str):
        raise TypeError("a token prompt needs a token hint (ids)")
    prompt = list(prompt)
    if not prompt:
        raise ValueError("empty prompt")
    return prompt[:-1] + list(hint) + prompt[-1:]
