"""The run report: markdown plus PNG plots, from the ledger alone.

``arl report RUN`` writes it to a folder; ``training_run`` publishes the same
markdown as a Prefect artifact (plots embedded as data URIs, since an artifact
cannot reference local files).
"""

from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from storage.ledger import Ledger  # noqa: E402
from storage.records import Status  # noqa: E402
from arl_flows.suites import Suite  # noqa: E402

__all__ = ["Report", "build_report", "surrogate_calibration", "tier_disagreements"]


@dataclass
class Report:
    markdown: str
    images: dict[str, bytes] = field(default_factory=dict)

    def write(self, folder: str | Path) -> Path:
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        for name, data in self.images.items():
            (out / name).write_bytes(data)
        (out / "report.md").write_text(self.markdown, encoding="utf-8")
        return out / "report.md"


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell and inline code."""
    return " ".join(str(text).split()).replace("|", "\\|").replace("`", "'")


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def surrogate_calibration(ledger: Ledger, ladder: list[str], suite: Suite, seed: int = 0) -> dict[str, float] | None:
    """Coverage of the surrogate's 50%/90% intervals: fit on half the ledger's paired observations, test on the rest.

    The candidates are rebuilt from their keys by the run's suite (``Suite.history_candidate``).
    """
    import numpy as np

    from verifiers.scheduler import Observation, Surrogate

    values = {name: ledger.ok_values(name) for name in ladder}
    top = values[ladder[-1]]
    obs = []
    for key in top:
        cand = suite.history_candidate(key)
        if cand is not None:
            obs.append(Observation(key, suite.featurize(cand), {n: v[key] for n, v in values.items() if key in v}))
    if len(obs) < 10:
        return None
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(obs))
    half = len(obs) // 2
    model = Surrogate(ladder[:-1], ladder[-1], int(np.size(obs[0].features)), seed=seed)
    model.add([obs[i] for i in order[:half]])
    return model.calibration([obs[i] for i in order[half:]])


def _suite_of(stored: dict[str, Any]) -> Suite | None:
    """The suite of a stored run config (None when it no longer loads: a suite uninstalled, a config from an older ARL)."""
    from arl_flows.config import RunConfig, stored_fields
    from arl_flows.suites import suite_for

    try:
        return suite_for(RunConfig.model_validate(stored_fields(stored)))
    except (ValueError, ImportError, LookupError):
        return None


def tier_disagreements(ledger: Ledger, run_id: str, steps: list[int]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per step, how many estimates were flagged for a disagreement between tiers; and the flagged candidates.

    A flagged candidate is listed once per step (several trajectories may share it), with the step, the
    prompt, the answer (shortened), the two tiers, the kind and the detail.
    """
    per_step, flagged = [], []
    for step in steps:
        rows = ledger.step_trajectories(run_id, step)
        estimates = [(t, e) for t, e in rows if e is not None]
        seen: set[str] = set()
        n_flagged = 0
        for traj, est in estimates:
            d = est.disagreement
            if d is None:
                continue
            n_flagged += 1
            if traj.candidate_key in seen:
                continue
            seen.add(traj.candidate_key)
            answer = " ".join(traj.final_answer.split())
            flagged.append({
                "step": step, "prompt": traj.prompt_id, "answer": answer[:80] + ("..." if len(answer) > 80 else ""),
                "lower": d.lower, "upper": d.upper, "kind": d.kind, "detail": d.detail[:200], "reward": round(est.mean, 4),
            })  # fmt: skip
        per_step.append({"step": step, "estimates": len(estimates), "flagged": n_flagged})
    return per_step, flagged


def build_report(ledger: Ledger, run_id: str, *, embed_images: bool = False) -> Report:
    summary = ledger.run_summary(run_id)
    run = ledger.get_run(summary["id"])
    steps = ledger.training_steps(run.id)
    spend = ledger.spend_by_step(run.id)
    images: dict[str, bytes] = {}

    if steps:
        xs = [s.step for s in steps]
        fig, ax = plt.subplots(figsize=(6, 3.2))
        for key, label in (("reward/mean", "mean reward"), ("reward/max", "max reward"), ("reward/validity", "validity")):
            ys = [s.metrics.get(key) for s in steps]
            ax.plot(xs, [math.nan if y is None else y for y in ys], marker="o", label=label)
        ax.set_xlabel("step")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title("reward over steps")
        ax.legend(fontsize=8)
        images["reward.png"] = _png(fig)

    if spend:
        tiers = sorted({t for per in spend.values() for t in per})
        xs = sorted(spend)
        fig, ax = plt.subplots(figsize=(6, 3.2))
        bottom = [0.0] * len(xs)
        for tier in tiers:
            ys = [spend[x].get(tier, 0.0) for x in xs]
            ax.bar(xs, ys, bottom=bottom, label=tier)
            bottom = [b + y for b, y in zip(bottom, ys)]
        ax.set_xlabel("step")
        ax.set_ylabel("CPU-seconds")
        ax.set_title("verification spend per step, by tier")
        ax.legend(fontsize=8)
        images["spend.png"] = _png(fig)

        totals = summary["spend_by_tier"]
        fig, ax = plt.subplots(figsize=(4.5, 3.2))
        ax.bar(list(totals), list(totals.values()), color="tab:purple")
        ax.set_ylabel("CPU-seconds")
        ax.set_title("tier mix (total spend)")
        images["tier_mix.png"] = _png(fig)

    ladder = [t["verifier"] for t in run.config.get("tiers", [])]
    calibration = None
    suite = _suite_of(run.config)
    if len(ladder) >= 2 and suite is not None:
        try:
            calibration = surrogate_calibration(ledger, ladder, suite)
        except (ValueError, KeyError):
            calibration = None
    if calibration:
        fig, ax = plt.subplots(figsize=(4.5, 3.2))
        ax.bar(["50% interval", "90% interval"], [calibration["coverage_50"], calibration["coverage_90"]], color="tab:green", label="measured")
        ax.scatter(["50% interval", "90% interval"], [0.5, 0.9], color="black", zorder=3, label="nominal")
        ax.set_ylim(0, 1)
        ax.set_title(f"surrogate calibration (n={int(calibration['n'])} held-out)")
        ax.legend(fontsize=8)
        images["calibration.png"] = _png(fig)

    def img(name: str, alt: str) -> str:
        if name not in images:
            return ""
        if embed_images:
            return f"![{alt}](data:image/png;base64,{base64.b64encode(images[name]).decode()})\n"
        return f"![{alt}]({name})\n"

    lines = [
        f"# ARL run `{run.name}`",
        "",
        f"- run id: `{run.id}`",
        f"- status: **{summary['status']}**, steps {summary['steps_done']}/{summary['steps_total']}",
        f"- trajectories: {summary['trajectories']}, distinct candidates: {summary['candidates']}",
        f"- best reward: {summary['best_reward'] if summary['best_reward'] is None else round(summary['best_reward'], 4)}",
        f"- verdicts by status: {summary['verdicts_by_status']}",
        f"- pending lab requests: {summary['lab_pending']}",
        "",
        "## Spend by tier (CPU-seconds)",
        "",
        "| tier | CPU-s |",
        "|---|---|",
        *[f"| {t} | {c:.2f} |" for t, c in sorted(summary["spend_by_tier"].items())],
        "",
        "## Reward and spend",
        "",
        img("reward.png", "reward over steps"),
        img("spend.png", "spend per step by tier"),
        img("tier_mix.png", "tier mix"),
        "## Surrogate calibration",
        "",
    ]
    if calibration:
        lines += [
            f"Fitted on half of the ledger's paired observations, tested on the other {int(calibration['n'])}: "
            f"50% intervals cover {calibration['coverage_50']:.0%}, 90% intervals cover {calibration['coverage_90']:.0%} "
            f"(MAE {calibration['mean_abs_error']:.3f}, mean std {calibration['mean_std']:.3f}).",
            "",
            img("calibration.png", "calibration"),
        ]
    else:
        lines.append("Not enough top-tier observations yet to measure calibration (need 10).")
    down = [(s.step, s.metrics["tiers/unavailable"]) for s in steps if s.metrics.get("tiers/unavailable")]
    lines += ["", "## Tier health", ""]
    if down:
        lines += [f"- step {step}: `{', '.join(names)}` failed every recent call; rewards fell back to the other tiers" for step, names in down]
    else:
        lines.append("Every verifier answered in every step.")
    per_step, flagged = tier_disagreements(ledger, run.id, [s.step for s in steps])
    lines += ["", "## Disagreement between tiers", ""]
    if any(r["flagged"] for r in per_step):
        lines += [
            "Candidates two tiers judged differently: a pass/fail tier and the one above it disagree (e.g. passes "
            "the visible check but fails the hidden tests), or the top tier's value lies far outside the "
            "surrogate's interval predicted from the lower tiers.",
            "",
            "| step | estimates | flagged | share |",
            "|---|---|---|---|",
            *[f"| {r['step']} | {r['estimates']} | {r['flagged']} | {r['flagged'] / max(r['estimates'], 1):.1%} |" for r in per_step],
            "",
            "| step | prompt | answer | tiers | kind | detail |",
            "|---|---|---|---|---|---|",
            *[
                f"| {f['step']} | `{_cell(f['prompt'])}` | `{_cell(f['answer'])}` | {f['lower']} / {f['upper']} | {f['kind']} | {_cell(f['detail'])} |"
                for f in flagged[:50]
            ],
        ]
        if len(flagged) > 50:
            lines.append(f"\n({len(flagged) - 50} more flagged candidates not shown.)")
    else:
        lines.append(f"No candidate was flagged in {len(per_step)} steps.")
    top = ledger.top_candidates(run.id, n=10)
    if top:
        verifiers = sorted({k for c in top for k in c["values"]})
        lines += ["", "## Best candidates", "", "| answer | reward | " + " | ".join(verifiers) + " |", "|---|---|" + "---|" * len(verifiers)]
        for c in top:
            vals = [c["values"].get(v, "") for v in verifiers]
            cells = [f"{x:.3f}" if isinstance(x, float) else str(x) for x in vals]
            lines.append(f"| `{c['answer']}` | {c['reward']:.3f} | " + " | ".join(cells) + " |")
    pending = [r for r in ledger.lab_requests(Status.pending, run_id=run.id)]
    if pending:
        lines += ["", "## Pending lab requests", "", *[f"- `{r.id}`: {r.payload}" for r in pending[:20]]]
    return Report("\n".join(lines) + "\n", images)
