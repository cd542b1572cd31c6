"""``arl prior`` (added by the molecules suite): the SMILES prior a run starts from (shipped, cached, or pretrained on a step budget)."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import typer

from arl_flows.cli._common import UserError, console, print_json, shown

# Command bodies import what they run (the ledger, the flows, Prefect, the suites' heavy parts) when they
# run, so that `arl --help` loads none of it.
prior_app = typer.Typer(help="The SMILES prior: where it comes from, and pretraining another one.", no_args_is_help=True)

CONFIG_OPTION = typer.Option(None, "--config", "-c", help="Run config (TOML) whose \\[options.prior] table to use; default: the built-in one.")


SPACE_OPTION = typer.Option(None, "--space", help="Chemistry space whose prior to use (qm9, druglike; default: the config's, else qm9).")


def _prior_config(config: Path | None, profile: str, steps: int | None = None, seed: int | None = None,  # noqa: ANN202
                  space: str | None = None, data: Path | None = None):
    from arl_flows.config import ConfigError, load_config
    from arl_flows.suites.molecules.spaces import get_space

    if space is not None:
        try:
            space = get_space(space).name
        except ValueError as exc:  # the space's own line, not the options model's validation dump
            raise UserError(f"--space: {exc}") from None
    overrides: dict[str, object] = {}
    if steps is not None:
        overrides["max_steps"] = steps
    if seed is not None:
        overrides["seed"] = seed
    if data is not None:
        overrides["data"] = str(data)
    try:
        run_config = load_config(config, profile)
        if run_config.suite != "molecules":
            raise UserError(f"{config}: suite {run_config.suite!r} has no SMILES prior; `arl prior` is the molecules suite's")
        prior = run_config.suite_options.prior
        if space is not None and space != prior.space:
            prior = _prior_of_space(prior, space)
        if overrides.get("data") and prior.space != "druglike":
            raise UserError(f"--data: the {prior.space} prior trains on the shipped QM9 table; --data is for --space druglike")
        return prior.model_validate(prior.model_dump() | overrides) if overrides else prior
    except (ConfigError, ValueError) as exc:
        raise UserError(" ".join(str(exc).split())) from None


def _prior_of_space(prior, space: str):  # noqa: ANN001, ANN202
    """The config's prior moved to ``space``: its fields that differ from its own space's defaults carry over."""
    from arl_flows.suites.molecules.options import MoleculeOptions, default_prior_config

    own = default_prior_config(prior.space).model_dump()
    changed = {k: v for k, v in prior.model_dump().items() if v != own[k] and k != "space"}
    return MoleculeOptions.model_validate({"space": space, "prior": changed}).prior


def _source(prior_config) -> tuple[str, Path | None]:  # noqa: ANN001
    from arl_flows.suites.molecules.prior import prior_dir, shipped_prior

    shipped = shipped_prior(prior_config)
    if shipped is not None:
        return "shipped with the package", shipped
    cached = prior_dir(prior_config)
    if (cached / "pretrain_report.json").is_file():
        return "cached", cached
    return "not trained yet (the first run pretrains it)", None


@prior_app.command("show")
def show(
    config: Path | None = CONFIG_OPTION,
    profile: str = typer.Option("default", "--profile", help="Config profile ('default' or 'quick')."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    space: str | None = SPACE_OPTION,
) -> None:
    """Where the prior of a config comes from, and its pretraining report."""
    from arl_flows.suites.molecules.prior import prior_cache_key

    prior_config = _prior_config(config, profile, space=space)
    source, directory = _source(prior_config)
    report = json.loads((directory / "pretrain_report.json").read_text()) if directory else None
    info = {"cache_key": prior_cache_key(prior_config), "space": prior_config.space, "source": source, "path": str(directory) if directory else None,
            "report": report}
    if as_json:
        print_json(info)
        return
    console.print(f"prior {info['cache_key']} ({prior_config.space} space): {source}" + (f" ({directory})" if directory else ""),
                  markup=False)
    if report:
        console.print(
            f"{report['steps']} of {report.get('max_steps') or report['steps']} steps, {report['parameters']:,} parameters, "
            f"validity {report['validity']:.1%}, uniqueness {report['uniqueness']:.1%}, novelty {report['novelty']:.1%} "
            f"on {report['samples']} samples", markup=False,
        )
        console.print(f"data: {report.get('molecules', '?')} molecules, sha256 {report.get('data_sha256') or 'not recorded'}",
                      markup=False)
        console.print(_moses_metrics_line(report), markup=False)
        if report.get("invalid_kinds"):
            console.print(_invalid_line(report["invalid_kinds"]), markup=False)
        if report.get("grammar"):
            console.print(_grammar_line(report["grammar"], report["samples"]), markup=False)
        for row in report.get("goal_steering") or []:
            console.print(f"goal {row['goal'][0]:g}-{row['goal'][1]:g} eV: {row['ok']}/{row['samples']} samples verified by the "
                          f"fast tier, median gap {row['median_gap_ev']} eV, {row['in_goal']:.0%} in the goal bin", markup=False)


def _moses_metrics_line(report: dict) -> str:
    """Internal diversity, scaffold novelty and FCD of a report, or how to measure them.

    Reports written before these metrics existed lack them; ``arl prior evaluate --update-report`` adds them.
    """
    if "internal_diversity" not in report:
        return "internal diversity, scaffold novelty, FCD: not measured (`arl prior evaluate --dir D --update-report`)"

    def value(key: str) -> str:
        return "n/a" if report.get(key) is None else f"{report[key]:.3f}"

    fcd = f"FCD {value('fcd')} vs {report['fcd_reference']}" if report.get("fcd_reference") else "FCD n/a (no reference for this space)"
    copies = f", copies of the goal-labeled molecules {value('goal_set_copies')}" if report.get("goal_set_copies") is not None else ""
    return f"internal diversity {value('internal_diversity')}, scaffold novelty {value('scaffold_novelty')}, {fcd}{copies}"


def _grammar_line(metrics: dict, samples: int) -> str:
    """The report's metrics under the SMILES grammar (how runs sample), beside the unconstrained ones above it."""
    invalid = _invalid_line(metrics["invalid_kinds"]) if metrics.get("invalid_kinds") else ""
    return (f"under the SMILES grammar (runs' default): validity {metrics['validity']:.1%}, uniqueness "
            f"{metrics['uniqueness']:.1%}, novelty {metrics['novelty']:.1%} on the same {samples} prompts and seeds"
            + (f"; {invalid}" if invalid else ""))


def _invalid_line(kinds: dict[str, float]) -> str:
    """Why the invalid samples failed, largest share first ("invalid: aromaticity 8.6%, unclosed_ring 5.9%")."""
    shares = sorted(((share, kind) for kind, share in kinds.items() if share > 0), reverse=True)
    return "invalid: " + (", ".join(f"{kind} {share:.1%}" for share, kind in shares) or "none")


@prior_app.command("evaluate")
def evaluate_command(
    config: Path | None = CONFIG_OPTION,
    profile: str = typer.Option("default", "--profile", help="Config profile ('default' or 'quick')."),
    space: str | None = SPACE_OPTION,
    directory: Path | None = typer.Option(
        None, "--dir", help="A prior's directory (written by `arl prior pretrain`); default: the config's shipped or cached prior."
    ),
    samples: int | None = typer.Option(None, "--samples", min=2, max=100_000, help="Samples to draw (default: the prior's eval_samples)."),
    update_report: bool = typer.Option(
        False, "--update-report",
        help="Write the metrics into the directory's pretrain_report.json (under --grammar: its 'grammar' block); "
        "the shipped prior's only with --dir naming it.",
    ),
    grammar: bool = typer.Option(
        True, "--grammar/--no-grammar", help="Sample under the space's SMILES grammar (as runs do) or unconstrained (as MOSES does)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Recompute a prior's sample metrics (validity ... FCD) from its directory, without retraining."""
    from arl_flows.suites.molecules.prior import PretrainReport, evaluate_prior, read_pretrain_config

    prior_config = _prior_config(config, profile, space=space)  # checks --config, --profile and --space first
    if directory is None:
        source, directory = _source(prior_config)
        if directory is None:
            raise UserError(f"the prior is {source}; pass --dir with a prior's directory, or pretrain it first")
        if update_report and source.startswith("shipped"):  # inside the installed package (a cached one is the user's)
            raise UserError(f"--update-report rewrites the report of the prior it evaluates: name that directory with --dir "
                            f"(the default, {shown(str(directory), 200)}, is the prior {source})")
    try:
        saved = read_pretrain_config(directory)
    except ValueError as exc:
        raise UserError(f"--dir: {' '.join(str(exc).split())}") from None
    if space is not None and saved.space != prior_config.space:
        raise UserError(f"--space {prior_config.space}: the prior in {directory} is a {saved.space} prior")
    report_file = directory / "pretrain_report.json"
    report: dict = {}
    if update_report:  # checked before sampling: a report that cannot be updated costs no evaluation
        try:
            report = json.loads(report_file.read_text())
            PretrainReport.model_validate(report)
        except (OSError, ValueError) as exc:
            raise UserError(f"--update-report: {report_file} is not a prior's report ({' '.join(str(exc).split())[:160]})") from None
    prior_config, metrics = evaluate_prior(directory, samples, grammar=grammar)
    if update_report:
        partial = report_file.with_name(report_file.name + ".partial")
        if grammar:  # the report's top level stays unconstrained (comparable with MOSES); the grammar's metrics are a block
            updated = report | {"grammar": {k: v for k, v in metrics.items() if k not in ("fcd_reference", "samples")}}
        else:
            updated = report | metrics  # the report's own keys, in its order, plus the metrics
        partial.write_text(json.dumps(updated, indent=2) + "\n")
        partial.replace(report_file)
    info = {"space": prior_config.space, "path": str(directory), "grammar": grammar,
            "updated": str(report_file) if update_report else None} | metrics
    if as_json:
        print_json(info)
        return
    console.print(
        f"{prior_config.space} prior ({directory}), {metrics['samples']} samples "
        f"{'under the SMILES grammar' if grammar else 'unconstrained'}: validity {metrics['validity']:.1%}, "
        f"uniqueness {metrics['uniqueness']:.1%}, novelty {metrics['novelty']:.1%}", markup=False,
    )
    console.print(_moses_metrics_line(metrics), markup=False)
    console.print(_invalid_line(metrics["invalid_kinds"]), markup=False)
    if update_report:
        console.print(f"written to {report_file}", markup=False)


@prior_app.command("pretrain")
def pretrain_command(
    config: Path | None = CONFIG_OPTION,
    profile: str = typer.Option("default", "--profile", help="Config profile ('default' or 'quick')."),
    steps: int | None = typer.Option(None, "--steps", min=1, max=10_000_000, help="Step budget (overrides \\[options.prior] max_steps)."),
    seed: int | None = typer.Option(None, "--seed", min=0, max=2**31 - 1, help="Seed (overrides \\[options.prior] seed)."),
    force: bool = typer.Option(False, "--force", help="Retrain even if the prior is shipped or cached."),
    ship: bool = typer.Option(False, "--ship", help="Write it into the package as the shipped default (for ARL's developers)."),
    as_json: bool = typer.Option(False, "--json", help="Print the pretraining report as JSON."),
    space: str | None = SPACE_OPTION,
    data: Path | None = typer.Option(
        None, "--data", help="druglike: MOSES train.csv(.gz) to pretrain on (not shipped; e.g. ../shared/data/moses/train.csv.gz)."
    ),
) -> None:
    """Pretrain the prior of a config on its step budget and cache it by config hash (if it passes the gate)."""
    from arl_flows.suites.molecules.prior import LowQualityPrior, load_or_pretrain, pretrain, prior_dir, save_prior, shipped_dir

    prior_config = _prior_config(config, profile, steps, seed, space, data)
    source, directory = _source(prior_config)
    if directory is not None and not force and not ship:
        console.print(f"the prior is already {source} ({directory}); --force retrains it", markup=False)
        return
    if force and directory is not None and source == "cached":
        shutil.rmtree(directory)
    if prior_config.space == "druglike" and not prior_config.data:
        raise UserError("the druglike prior trains on MOSES train, which is not shipped: pass --data path/to/moses/train.csv.gz")
    if not as_json:
        console.print(f"pretraining the SMILES prior: {prior_config.max_steps} steps, seed {prior_config.seed}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LowQualityPrior)
        try:
            if ship:
                _policy, report = pretrain(prior_config)
            else:
                _policy, report = load_or_pretrain(prior_config)
        except ValueError as exc:
            raise UserError(" ".join(str(exc).split())) from None
    problems = [str(w.message) for w in caught if issubclass(w.category, LowQualityPrior)]
    if ship:
        if not report.completed or report.validity < prior_config.min_validity:
            raise UserError(f"not shipped: {report.steps}/{report.max_steps} steps, validity {report.validity:.1%} "
                            f"(the gate is {prior_config.min_validity:.0%})")
        where = shipped_dir(prior_config.space)
        save_prior(_policy, report, prior_config, where)
    else:
        where = prior_dir(prior_config)
    if as_json:
        print_json(report.model_dump(mode="json") | {"path": str(where), "cached": not problems})
    else:
        console.print(
            f"{report.steps}/{report.max_steps} steps in {report.wall_minutes:.1f} min: validity {report.validity:.1%}, "
            f"uniqueness {report.uniqueness:.1%}, novelty {report.novelty:.1%}", markup=False,
        )
        console.print(_moses_metrics_line(report.model_dump()), markup=False)
        if report.invalid_kinds:
            console.print(_invalid_line(report.invalid_kinds), markup=False)
    for problem in problems:
        console.print(f"warning: {problem}", style="bold yellow", markup=False)
    if problems:
        raise typer.Exit(1)
    if not as_json:
        console.print(f"saved to {where}", markup=False)
