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
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from storage.ledger import Ledger  # noqa: E402
from storage.records import Status, ladder_order  # noqa: E402
from arl_flows.config import RunConfig, build_config, stored_fields  # noqa: E402
from arl_flows.suites import Lab, Suite, suite_for  # noqa: E402
from arl_flows.suites import Report as DrawsCandidates  # noqa: E402  (the capability; this module's Report is the document)
from verifiers import registry  # noqa: E402
from verifiers.objectives import Objective
from verifiers.scheduler import Observation, Surrogate  # noqa: E402

__all__ = ["Report", "best_candidates", "build_report", "hit_interval", "hits_line", "run_hits", "surrogate_calibration",
           "tier_disagreements", "top_verifier", "verified_by_step"]


# Every figure a report may write. One that this report has not, and that the folder's earlier report.md links, is
# removed from a reused folder, so that no figure of an earlier report sits beside this one's report.md; a file of the
# same name that no earlier report linked is the user's own and stays.
REPORT_IMAGES = ("reward.png", "spend.png", "tier_mix.png", "parity.png", "calibration.png", "best.png")


@dataclass
class Report:
    markdown: str
    images: dict[str, bytes] = field(default_factory=dict)

    def write(self, folder: str | Path) -> Path:
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        stale = _linked_images(out / "report.md") - set(self.images)
        for name, data in self.images.items():
            (out / name).write_bytes(data)
        for name in stale:
            if (out / name).is_file():
                (out / name).unlink()
        (out / "report.md").write_text(self.markdown, encoding="utf-8")
        return out / "report.md"


_TITLE = "# ARL run "  # how every report.md this module writes begins


def _linked_images(markdown: Path) -> set[str]:
    """The figures of :data:`REPORT_IMAGES` that an earlier ARL report.md links (``](name)``); none without one."""
    try:
        text = markdown.read_text(encoding="utf-8", errors="replace") if markdown.is_file() else ""
    except OSError:
        return set()
    if not text.startswith(_TITLE):  # a report.md of the user's own, not one this module wrote
        return set()
    return {name for name in REPORT_IMAGES if f"]({name})" in text}


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell and inline code."""
    return " ".join(str(text).split()).replace("|", "\\|").replace("`", "'")


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def surrogate_calibration(ledger: Ledger, ladder: list[str], suite: Suite, seed: int = 0,
                          identity: dict[str, tuple[str, str]] | None = None) -> dict[str, float] | None:
    """Coverage of the surrogate's 50%/90% intervals: fit on half the ledger's paired observations, test on the rest.

    The candidates are rebuilt from their keys by the run's suite (``capabilities.Lab``). ``identity`` (name ->
    version, params hash of the run's ladder) keeps each verifier's answers as the run configured it, as a run's own
    history does (``teach_from_ledger``); without it every version and setting of a name counts.
    """
    values = {name: ledger.ok_values(name, *(identity or {}).get(name, (None, None))) for name in ladder}
    top = values[ladder[-1]]
    obs = []
    for key in top:
        cand = suite.history_candidate(key) if isinstance(suite, Lab) else None
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


def _parity_png(ledger: Ledger, run_id: str, stored: dict[str, Any], unit: str) -> bytes | None:
    """Each lower verifier's value against the top tier's, over the run's candidates the top tier answered."""
    top = top_verifier(stored)
    lower = [t["verifier"] for t in (stored.get("tiers") or [])[:-1]]
    if top is None or not lower:
        return None
    keys = {t.candidate_key for t, _ in ledger.run_trajectories(run_id)}
    values: dict[str, dict[str, float]] = {}
    for v in ledger.verdicts_for(keys):
        if v.status == Status.ok and isinstance(v.value, (int, float)) and math.isfinite(v.value):
            values.setdefault(v.verifier, {})[v.candidate_key] = float(v.value)
    answered = values.get(top, {})
    series = [(name, [(values[name][k], y) for k, y in answered.items() if k in values.get(name, {})]) for name in lower]
    series = [(name, pts) for name, pts in series if pts]
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(4.8, 4.2))
    lo = min(min(x, y) for _, pts in series for x, y in pts)
    hi = max(max(x, y) for _, pts in series for x, y in pts)
    for name, pts in series:
        ax.scatter([x for x, _ in pts], [y for _, y in pts], s=14, alpha=0.7, label=f"{name} (n={len(pts)})")
    ax.plot([lo, hi], [lo, hi], color="black", lw=0.8)
    u = f" ({unit})" if unit else ""
    ax.set_xlabel(f"lower tier's value{u}")
    ax.set_ylabel(f"{top}{u}")
    ax.set_title("each tier against the top tier")
    ax.legend(fontsize=8)
    return _png(fig)


def _ladder_identity(config: RunConfig | None) -> dict[str, tuple[str, str]] | None:
    """Name -> (version, params hash) of a run config's ladder (None when there is none, or it no longer builds)."""
    from arl_flows.ladder import build_ladder

    if config is None:
        return None
    try:
        return {v.name: (v.version, v.params_hash) for v in build_ladder(config)}
    except (ValueError, ImportError, LookupError):
        return None


def _stored_config(stored: dict[str, Any]) -> RunConfig | None:
    """A stored run config as this ARL reads it (None when it no longer loads: a suite uninstalled, a config from an
    older ARL)."""
    try:
        return build_config(stored_fields(stored), "stored config")
    except (ValueError, ImportError, LookupError):
        return None


def _suite_of(config: RunConfig | None) -> Suite | None:
    """The suite of a run config (None when there is none, or it no longer loads)."""
    if config is None:
        return None
    try:
        return suite_for(config)
    except (ValueError, ImportError, LookupError):
        return None


def top_verifier(stored: dict[str, Any]) -> str | None:
    """The name the top rung of a stored run config answers under (its verdicts' ``verifier``); None without tiers."""
    tiers = stored.get("tiers") or []
    if not tiers:
        return None
    ref = str(tiers[-1].get("verifier", ""))
    try:
        return registry.get(ref).name
    except Exception:  # noqa: BLE001 - a plugin uninstalled since the run: the configured name is the best guess
        return ref


def hit_interval(stored: dict[str, Any]) -> tuple[float, float]:
    """Where a top-tier value counts as a hit: the ``[objective]``'s range on the value, else the scheduler's target window."""
    if stored.get("objective"):
        return Objective.model_validate(stored["objective"]).hit_interval()
    scheduler = stored.get("scheduler") or {}
    return float(scheduler.get("target_low", -math.inf)), float(scheduler.get("target_high", math.inf))


def run_hits(ledger: Ledger, run_id: str) -> dict[str, Any]:
    """The run's distinct hits (a top-tier answer in :func:`hit_interval`) and how many of them are novel.

    A hit is novel when a verifier reported the exact property ``novel`` as 1 for it (the molecules
    suite's fast tier: in neither the chemistry space's training set nor QM9); ``novel_hits`` is None
    when no verdict of the run's hits reports novelty at all.
    """
    run = ledger.get_run(run_id)
    top = top_verifier(run.config)
    low, high = hit_interval(run.config)
    keys = {t.candidate_key for record in ledger.training_steps(run.id) for t, _ in ledger.step_trajectories(run.id, record.step)}
    hits = {v.candidate_key for v in ledger.verdicts_for(keys, verifiers=[top] if top else [])
            if v.status == Status.ok and v.value is not None and low <= v.value <= high}
    novelty = [v for v in ledger.verdicts_for(hits) if v.status == Status.ok and "novel" in v.values] if hits else []
    novel = {v.candidate_key for v in novelty if v.values["novel"] == 1.0}
    return {"hits": len(hits), "novel_hits": len(novel) if novelty else None, "low": low, "high": high}


def best_candidates(ledger: Ledger, run_id: str, n: int = 10) -> list[dict[str, Any]]:
    """The run's best candidates by reward, each marked ``verified`` when the top tier answered it (else an estimate).

    Rows are :meth:`Ledger.top_candidates`' plus ``verified`` and ``top_value`` (the top tier's value, or None).
    """
    run = ledger.get_run(run_id)
    top = top_verifier(run.config)
    rows = ledger.top_candidates(run.id, n=n)
    for row in rows:
        value = row["values"].get(top) if top else None
        row["verified"] = isinstance(value, float)
        row["top_value"] = value if isinstance(value, float) else None
    return rows


def verified_by_step(ledger: Ledger, run_id: str) -> list[dict[str, Any]]:
    """Per step: how many distinct candidates the top tier answered, and the best of them (answer, value, reward);
    how many it failed or timed out on, with one of their reasons.

    A step whose best reward has no top-tier answer behind it holds estimates only; this separates what the
    run verified from what its surrogate believed.
    """
    run = ledger.get_run(run_id)
    top = top_verifier(run.config)
    out = []
    for record in ledger.training_steps(run.id):
        rows = [(t, e) for t, e in ledger.step_trajectories(run.id, record.step) if e is not None]
        verdicts = ledger.verdicts_for({t.candidate_key for t, _ in rows}, verifiers=[top] if top else [])
        answered = {v.candidate_key: v.value for v in verdicts if v.status == Status.ok and v.value is not None}
        failed = {v.candidate_key: v.feedback for v in verdicts if v.status in (Status.failed, Status.timeout)}
        best: dict[str, Any] | None = None
        for traj, est in rows:
            if traj.candidate_key in answered and (best is None or est.mean > best["reward"]):
                best = {"answer": traj.final_answer, "value": answered[traj.candidate_key], "reward": est.mean}
        out.append({"step": record.step, "verified": len(answered), "candidates": len({t.candidate_key for t, _ in rows}),
                    "best": best, "failed": len(failed), "failure": next(iter(failed.values()), None)})
    return out


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


def hits_line(hits: dict[str, Any], unit: str = "") -> str:
    """One line: the run's hits in their interval, and how many are novel (when a tier reports novelty)."""
    where = f"{hits['low']:g} to {hits['high']:g}{' ' + unit if unit else ''}"
    novel = "" if hits["novel_hits"] is None else f", {hits['novel_hits']} of them novel"
    return f"hits (top-tier value {where}): {hits['hits']}{novel}"


def build_report(ledger: Ledger, run_id: str, *, embed_images: bool = False) -> Report:
    summary = ledger.run_summary(run_id)
    run = ledger.get_run(summary["id"])
    steps = ledger.training_steps(run.id)
    spend = ledger.spend_by_step(run.id)
    images: dict[str, bytes] = {}

    config = _stored_config(run.config)
    suite = _suite_of(config)
    unit = suite.value_unit if suite is not None else ""
    in_unit = f" ({unit})" if unit else ""
    if steps:
        xs = [s.step for s in steps]
        fig, ax = plt.subplots(figsize=(6, 3.2))
        for key, label in (("reward/mean", "mean reward"), ("reward/max", "max reward"), ("reward/validity", "validity")):
            ys = [s.metrics.get(key) for s in steps]
            ax.plot(xs, [math.nan if y is None else y for y in ys], marker="o", label=label)
        # Error bars: two standard errors of each step's mean reward (its samples' spread over the square root of their number).
        errs = []
        for record in steps:
            std, n = record.metrics.get("reward/std"), len(ledger.step_trajectories(run.id, record.step))
            errs.append(2.0 * std / math.sqrt(n) if isinstance(std, (int, float)) and n else math.nan)
        means = [math.nan if s.metrics.get("reward/mean") is None else s.metrics["reward/mean"] for s in steps]
        ax.errorbar(xs, means, yerr=errs, fmt="none", ecolor="tab:blue", capsize=3, label="±2 s.e. of the mean")
        ax.set_xlabel("step")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title("reward over steps")
        ax.legend(fontsize=8)
        images["reward.png"] = _png(fig)

    if spend:
        tiers = sorted({t for per in spend.values() for t in per}, key=ladder_order)
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
    parity = _parity_png(ledger, run.id, run.config, unit)
    if parity is not None:
        images["parity.png"] = parity
    calibration = None
    if len(ladder) >= 2 and suite is not None:
        try:
            calibration = surrogate_calibration(ledger, ladder, suite, identity=_ladder_identity(config))
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
        f"{_TITLE}`{run.name}`",
        "",
        f"- run id: `{run.id}`",
        f"- status: **{summary['status']}**, steps {summary['steps_done']}/{summary['steps_total']}",
        f"- trajectories: {summary['trajectories']}, distinct candidates: {summary['candidates']}",
        f"- best reward: {summary['best_reward'] if summary['best_reward'] is None else round(summary['best_reward'], 4)}",
        f"- {hits_line(run_hits(ledger, run.id), unit)}",
        "- verdicts by status: " + (", ".join(f"{n} {status}" for status, n in sorted(summary["verdicts_by_status"].items()))
                                    or "none"),
        f"- pending lab requests: {summary['lab_pending']}",
        "",
        "## Spend by tier (CPU-seconds)",
        "",
        "In ladder order, cheapest first; each tier names the verifier that answered at it.",
        "",
        "| tier | verifier | CPU-s | calls |",
        "|---|---|---|---|",
        *[f"| {r['tier']} | `{_cell(r['verifier'])}` | {r['cost_s']:.2f} | {r['calls']} |" for r in summary["spend_by_verifier"]],
        "",
        "## Reward and spend",
        "",
        "Rewards are in [0, 1]; error bars are two standard errors of each step's mean.",
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
        lines.append(f"No candidate was flagged in {len(per_step)} step{'' if len(per_step) == 1 else 's'}.")
    if parity is not None:
        lines += ["", "## Each tier against the top tier", "",
                  f"Values{in_unit} of the run's candidates that the top tier answered, against each lower tier's "
                  "value of the same candidate; the line is where they would agree.", "", img("parity.png", "parity")]
    top = best_candidates(ledger, run.id, n=10)
    if top:
        order = {name: i for i, name in enumerate(ladder)}
        verifiers = sorted({k for c in top for k in c["values"]}, key=lambda v: (order.get(v, len(order)), v))
        names = [suite.show_candidate(c["candidate_key"], c["answer"]) if suite is not None else c["answer"] for c in top]
        lines += [
            "", "## Best candidates", "",
            f"Reward ± its std; **estimate** marks a reward with no top-tier answer behind it (the surrogate's "
            f"posterior from the lower tiers). Values{in_unit} per verifier, in ladder order.", "",
            "| answer | reward | " + " | ".join(f"{_cell(v)}{in_unit}" for v in verifiers) + " |",
            "|---|---|" + "---|" * len(verifiers),
        ]
        for name, c in zip(names, top):
            vals = [c["values"].get(v, "") for v in verifiers]
            cells = [f"{x:.3f}" if isinstance(x, float) else _cell(x) for x in vals]
            reward = f"{c['reward']:.3f} ± {c['std']:.3f}" + ("" if c["verified"] else " **estimate**")
            lines.append(f"| `{_cell(name)}` | {reward} | " + " | ".join(cells) + " |")
        picture = suite.draw_candidates(names, [f"{c['reward']:.2f}" + ("" if c["verified"] else " (est.)") for c in top]) if isinstance(suite, DrawsCandidates) else None
        if picture:
            images["best.png"] = picture
            lines += ["", "Structures of the best candidates (legend: reward; est.: an estimate only):", "", img("best.png", "best candidates")]
    pending = [r for r in ledger.lab_requests(Status.pending, run_id=run.id)]
    if pending:
        lines += ["", "## Pending lab requests", "", *[f"- `{r.id}`: {r.payload}" for r in pending[:20]]]
    return Report("\n".join(lines) + "\n", images)
