"""The verifier ladder of a run: its configured tiers as verifier instances, cheapest first.

A training run (:class:`arl_flows.training.RunSession`), a :class:`~arl_flows.tiered_reward.TieredReward`
and the benchmarks build it from a run config the same way: the suite adjusts each tier's params
(``Suite.verifier_params``) and the ladder must climb from the cheapest tier to the dearest.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import ValidationError

from arl_flows.config import RunConfig, describe_errors, unknown_field_message
from arl_flows.suites import suite_for
from storage.records import Tier, Verdict, tier_rank
from verifiers import Verifier, VerifierNotFound, registry

__all__ = ["build_ladder", "check_new_config", "ladder_verdicts"]


def build_ladder(config: RunConfig) -> list[Verifier]:
    """Instantiate the configured verifiers (names or 'module:Class' references), cheapest first.

    A verifier of another suite, or params its model refuses, is one ValueError line naming the rung.
    """
    suite = suite_for(config)
    ladder = []
    for index, rung in enumerate(config.tiers):
        try:
            cls = registry.get(rung.verifier)
        except VerifierNotFound as exc:
            if ":" not in config.suite or ":" in rung.verifier:
                raise
            # A suite named by reference is imported, but its tiers' entry points exist only once it is installed.
            raise VerifierNotFound(
                f"tiers[{index}]: no verifier named {rung.verifier!r}: the suite {config.suite[:80]!r} is named by "
                "reference, and its tiers are found by name only once its package is installed (pip install -e "
                "PATH, which declares them as arl.verifiers entry points); or name each one 'package.module:Class' "
                "in [tiers]"
            ) from None
        where = f"tiers[{index}] ({cls.name})"
        if cls.suite not in (None, suite.name):
            raise ValueError(
                f"{where}: the verifier belongs to suite {cls.suite!r}, not {suite.name!r}; "
                f"`arl tiers list --suite {suite.name}` lists this suite's"
            )
        try:
            ladder.append(cls(suite.verifier_params(cls, dict(rung.params))))
        except ValidationError as exc:
            raise ValueError(describe_errors(exc, where, cls.Params, f"`arl tiers show {cls.name}` lists its params")) from None
        except ValueError as exc:  # the suite refuses these params for this run (e.g. another chemistry space)
            raise ValueError(f"{where}: {exc}") from None
    ranks = [tier_rank(v.tier) for v in ladder]
    if ranks != sorted(ranks):
        order = ", ".join(f"{v.name} ({v.tier.value})" for v in ladder)
        raise ValueError(f"tiers must be listed cheapest first (fast, simulation, high_fidelity, lab); got {order}")
    return ladder


def check_new_config(config: RunConfig) -> None:
    """What a config written now must not say, though a stored one that says it still resumes (ValueError, one line).

    A params key the tier's ``Params`` would ignore (a model without ``extra="forbid"`` drops a misspelled key
    silently), and a ``tier_concurrency`` key that names no verifier. ``arl run`` (not ``--resume``), its dry run and
    ``TieredReward`` call it; :func:`build_ladder` does not, so a run stored before these checks resumes as it ran.
    """
    ladder = []
    for index, rung in enumerate(config.tiers):
        cls = registry.get(rung.verifier)
        ladder.append(cls)
        if cls.Params.model_config.get("extra") in ("forbid", "allow"):
            continue
        declared = set()
        for name, field in cls.Params.model_fields.items():
            declared |= {name, field.alias} | _alias_names(field.validation_alias)
        unknown = [key for key in rung.params if key not in declared]
        if unknown:
            message = unknown_field_message(cls.Params, unknown[0], f"`arl tiers show {rung.verifier}` lists its params")
            raise ValueError(f"tiers[{index}] ({cls.name}): params.{str(unknown[0])[:60]}: {message}")
    _check_concurrency_keys(config, ladder)
    _check_objective_properties(config, ladder)


def _check_objective_properties(config: RunConfig, ladder: list[type[Verifier]]) -> None:
    """An objective term on a property no tier reports counts as 1: a slip ('QED', 'sa', 'gap') would drop the term
    silently. Refused when every tier of the ladder declares what it reports (``Verifier.reports``) and the name is
    none of those (with the name it probably meant, when one is close); a ladder with a tier that declares nothing
    (a user's own) is not checked."""
    objective = config.objective or config.scheduler.reward
    if objective is None or any(cls.reports is None for cls in ladder):
        return  # a tier that does not say what it reports may report any name
    declared = set().union(*(cls.reports for cls in ladder))
    for term in objective.terms:
        name = term.property
        if name == "value" or name in declared:
            continue
        close = ([d for d in sorted(declared) if d.lower() == name.lower() or d.lower().startswith(name.lower() + "_")]
                 or difflib.get_close_matches(name, sorted(declared), n=1, cutoff=0.6))
        # Not even a near miss ('logp' on the default ladder): the term would count as met on every candidate.
        hint = f"did you mean {close[0]!r}? " if close else "add a tier that reports it "
        raise ValueError(f"objective: property {name[:60]!r} is reported by no tier of the ladder; {hint}(reported: "
                         f"{', '.join(sorted(declared))}; 'value' is the top tier's value)")


def unchecked_objective_properties(config: RunConfig) -> str | None:
    """A note when the objective reads a property that no tier declares and some tier declares nothing: the check
    above is then off, and a misspelled property would count as met on every candidate (newcomer pass); or None."""
    objective = config.objective or config.scheduler.reward
    if objective is None:
        return None
    ladder = [registry.get(rung.verifier) for rung in config.tiers]
    silent = [cls.name for cls in ladder if cls.reports is None]
    if not silent:
        return None
    declared = set().union(*(cls.reports for cls in ladder if cls.reports is not None))
    unknown = [term.property for term in objective.terms if term.property != "value" and term.property not in declared]
    if not unknown:
        return None
    return (f"objective propert{'ies' if len(unknown) > 1 else 'y'} {', '.join(repr(u[:60]) for u in unknown)} "
            f"declared by no tier, and {', '.join(silent)} declare{'s' if len(silent) == 1 else ''} nothing "
            "(`reports`), so the name is not checked; a property no verdict reports counts as met")


def _alias_names(alias: Any) -> set[str]:
    """The plain key names a ``validation_alias`` accepts (a str, or an AliasChoices of them)."""
    if isinstance(alias, str):
        return {alias}
    choices = getattr(alias, "choices", None)
    return {c for c in choices if isinstance(c, str)} if choices else set()


def _check_concurrency_keys(config: RunConfig, ladder: Sequence[Any]) -> None:
    """A ``tier_concurrency`` key that names no verifier would limit nothing, silently: one line instead.

    Keys are verifier names (a suite's defaults may name a registered verifier its ladder does not use: fine).
    """
    names = [v.name for v in ladder]
    by_reference = {rung.verifier: v.name for rung, v in zip(config.tiers, ladder)}
    for key in config.tier_concurrency:
        if key in names or key in registry:
            continue
        where = f"tier_concurrency.{key[:60]!r}"
        if key in by_reference:
            raise ValueError(f"{where}: key the limit by the verifier's name, {by_reference[key]!r}, not its class reference")
        if key in {t.value for t in Tier}:
            raise ValueError(f"{where}: limits are per verifier, not per tier; use a verifier name of the ladder "
                             f"({', '.join(names)})")
        close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}?" if close else f"the ladder's verifiers are {', '.join(names)}"
        raise ValueError(f"{where}: no verifier of that name, so it would limit nothing; {hint}")


def ladder_verdicts(ledger: Any, keys: Iterable[str], ladder: Sequence[Verifier]) -> list[Verdict]:
    """The ledger's verdicts on ``keys`` by the ladder's verifiers as they are configured now.

    The same name is not enough: a tier with other params (another chemistry space's rules, another basis or
    geometry) answers another question, so its verdicts count only with the same version and params hash, as
    they do in the scheduler's cache (``Scheduler.plan_step``).
    """
    identity = {(v.name, v.version, v.params_hash) for v in ladder}
    return [v for v in ledger.verdicts_for(keys, verifiers=[v.name for v in ladder])
            if (v.verifier, v.version, v.params_hash) in identity]
