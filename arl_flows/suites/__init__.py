"""Suites: one plugin per problem, found by the ``arl.suites`` entry point.

A suite holds everything specific to one problem, so that the core (storage,
the generic verifiers and scheduler, policies, the flows) names none:

- its options, validated by its own ``Options`` model (``[options]`` in a run
  config), and the defaults it gives the run config's other sections (its
  verifier ladder, the scheduler's objective, hindsight);
- the prompts it asks and how a completion becomes a verifiable candidate;
- where its policy comes from (a shipped prior, or ``policy_path``);
- the scheduler's features of its candidates, and a learned model of them if
  it has one;
- how verdicts become rewards when the scheduler's estimate is not the
  reward, and what hindsight distillation learns from a failure;
- how reports show its candidates;
- outside a run (``arl verify``, ``arl rerank``, TRL and verl rewards): what
  a goal given by hand looks like (``goal``).

:class:`Suite` is the core every suite has: ``name``, ``prompts`` and
``completion`` are required, the rest has a default that fits any problem.
What only some problems have (hindsight relabelling, rebuilding a candidate
from its key for lab answers, sampling for rerank, a report picture, a
learned prior for the scheduler, calibration candidates, commands and
run-config profiles of its own, its own test of disagreeing tiers, goals
from a trainer's dataset and the objective window a goal implies) is an optional
capability in :mod:`arl_flows.suites.capabilities`: a suite defines its
methods or not, and a feature that needs one checks with ``isinstance``.

The built-in ``molecules`` and ``code`` suites live in this folder and are
registered by the same entry point as a user's (see ``pyproject.toml``); a
run config may also name a suite by ``"package.module:Class"``. An entry
point that does not load is warned about and listed as broken; only what
names it fails. A new suite
is one folder (or package) plus one entry point: README, "Add a suite".
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict

import policies
from policies import PolicyConfig
from storage.records import Prompt, RewardEstimate, Trajectory, Turn, Verdict
from verifiers import Candidate
from verifiers.plugins import BrokenPlugin, broken_message, broken_plugins, load_plugin
from arl_flows.suites.capabilities import Calibration, Hindsight, Lab, Prior, Report, Rerank

if TYPE_CHECKING:
    from policies import Policy

    from arl_flows.config import RunConfig

__all__ = [
    "ENTRY_POINT_GROUP",
    "Calibration",
    "Failure",
    "Hindsight",
    "Lab",
    "Prior",
    "Report",
    "Rerank",
    "NoOptions",
    "Suite",
    "SuiteNotFound",
    "broken_suites",
    "get_suite",
    "suite_classes",
    "suite_for",
    "suite_origin",
]

ENTRY_POINT_GROUP = "arl.suites"

@dataclass(frozen=True)
class Failure:
    """One failed trajectory handed to ``Hindsight.hindsight``, with what it was asked and how it was judged."""

    trajectory: Trajectory
    prompt: Prompt
    completion_ids: list[int]  # the policy's tokens of the completion (what a relabelled example trains on)
    verdicts: list[Verdict]  # every ladder verdict about its candidate, lab answers included
    estimate: RewardEstimate  # the scheduler's estimate the learner used


class NoOptions(BaseModel):
    """Options model of a suite that takes none."""

    model_config = ConfigDict(extra="forbid")


class SuiteNotFound(LookupError):
    """A suite name or reference that no entry point or module provides; the message lists the known ones."""


class Suite:
    """One problem's core. Subclass it, fill in the class attributes and override what differs from the defaults;
    add the methods of any capability the problem has (:mod:`arl_flows.suites.capabilities`)."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    Options: ClassVar[type[BaseModel]] = NoOptions
    """The suite's ``[options]`` table of a run config (pydantic, every field documented)."""
    defaults: ClassVar[dict[str, Any]] = {}
    """Run-config sections this suite fills in when a config leaves them out: ``tiers``, ``scheduler``, ``hindsight``, ..."""
    legacy_fields: ClassVar[dict[str, str]] = {}
    """Old top-level run-config fields that are now options: ``{"old_field": "option"}`` (still accepted)."""
    needs_policy_path: ClassVar[bool] = False
    """True when the suite ships no policy of its own, so a run must name a local model."""
    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.options = config.suite_options

    # -- what the suite is ----------------------------------------------------
    @classmethod
    def prompts_source(cls, options: BaseModel) -> str:
        """Where the prompts come from, in words (``arl suites show``)."""
        return "defined by the suite"

    def check(self) -> str | None:
        """Load and check what the options point at (a task file, a dataset) before any work; a line to show, or None.

        ``arl run --dry-run`` and ``arl verify --config`` call it: a problem is a ValueError naming the option, so a
        file that would fail at the first step fails there instead. The default checks nothing.
        """
        return None

    # -- the policy and its prompts ---------------------------------------------
    def load_policy(self, policy_config: PolicyConfig, on_pretrain: Callable[[str], None] | None = None) -> Policy:
        """The policy a run starts from: ``policy_path``, else the suite's own (``on_pretrain`` hears of a first training)."""
        if self.config.policy_path:
            return policies.Policy.load(self.config.policy_path, policy_config)
        raise ValueError(f"suite {self.name!r} needs policy_path (a local transformers model directory)")

    def prepare_policy(self) -> dict[str, Any]:
        """Make the starting policy ready (train it if the suite trains its own) and say what it is (the
        ``pretrain_prior`` flow's report). By default: load it and name it."""
        policy = self.load_policy(PolicyConfig())
        return {"suite": self.name, "policy": self.config.policy_path or type(policy.model).__name__}

    def prompts(self, step: int) -> list[Prompt]:
        raise NotImplementedError(f"suite {self.name!r} must define prompts(step)")

    def prompt_ids(self, policy: Policy, prompt: Prompt) -> list[int]:
        return policy.encode(prompt.text)

    def completion(self, prompt: Prompt, text: str) -> tuple[Candidate, str, list[Turn]]:
        """The candidate a completion proposes, the answer text to store, and the turns of the trajectory."""
        raise NotImplementedError(f"suite {self.name!r} must define completion(prompt, text)")

    def candidate(self, text: str, goal: dict[str, Any] | None = None) -> Candidate:
        """A candidate from text outside a run (``arl verify``, ``arl rerank``, a trainer's reward function)."""
        prompt = Prompt(id=f"{self.name}:adhoc", suite=self.name, text="", goal=dict(goal or {}))
        return self.completion(prompt, text)[0]

    def external_prompt(self, text: str, goal: dict[str, Any]) -> Prompt:
        """A prompt of another trainer's dataset (TRL, verl), with the goal its columns give (checked by ``goal``)."""
        goal = self.goal(goal)
        digest = hashlib.sha256(repr((text, sorted(goal.items()))).encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return Prompt(id=f"{self.name}:ext:{digest}", suite=self.name, text=text, goal=goal)

    # -- goals given from outside a run ---------------------------------------------
    @classmethod
    def goal(cls, given: Mapping[str, Any]) -> dict[str, Any]:
        """A goal given by hand (``arl verify --goal``, a rerank line, a dataset's columns), checked and completed.

        Raises ValueError with one line saying what to fix. By default the keys are taken as they are.
        """
        return dict(given)

    def verifier_params(self, verifier: type, params: dict[str, Any]) -> dict[str, Any]:
        """The params a verifier of this suite runs with: its configured ``params``, to which the options may add."""
        return params

    # -- what the scheduler and the rewards need ------------------------------------
    def featurize(self, candidate: Candidate) -> np.ndarray:
        """Cheap features of a candidate for the scheduler's surrogate (default: its size)."""
        from verifiers.scheduler import size_features  # scipy: loaded when a run scores, not to list suites

        return size_features(candidate)

    def rewards(
        self,
        trajectories: Sequence[Trajectory],
        candidates: Sequence[Candidate],
        verdicts: dict[str, list[Verdict]],
        estimates: list[RewardEstimate],
    ) -> list[RewardEstimate]:
        """The rewards GRPO uses; by default the scheduler's estimates."""
        return estimates

    # -- reports ----------------------------------------------------------------------
    def show_candidate(self, key: str, answer: str) -> str:
        """How a report names a candidate (default: its answer text)."""
        return answer

    value_unit: ClassVar[str] = ""
    """Unit of the verifiers' values, shown in reports next to them (the molecules suite's: eV); empty: none."""


@cache
def suite_classes() -> dict[str, type[Suite]]:
    """Every suite advertised in the ``arl.suites`` entry point group, by name."""
    found: dict[str, type[Suite]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        cls = load_plugin(ep, check=lambda cls, ep=ep: _check_entry_point(cls, ep))
        if cls is not None:
            found[ep.name] = cls
    return found


def broken_suites() -> list[BrokenPlugin]:
    """Entry points of the ``arl.suites`` group that did not load (``arl suites list`` shows them as broken)."""
    suite_classes()
    return broken_plugins(ENTRY_POINT_GROUP)


def _check_entry_point(cls: object, ep: EntryPoint) -> None:
    _check(cls, ep.value)
    if cls.name != ep.name:  # type: ignore[attr-defined]
        raise ValueError(f"suite entry point {ep.name!r} ({ep.value}) names a suite called {cls.name!r}; make them equal")  # type: ignore[attr-defined]


def get_suite(name: str) -> type[Suite]:
    """A suite class by registered name or ``"package.module:Class"`` reference."""
    known = suite_classes()
    if name in known:
        return known[name]
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            cls = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise SuiteNotFound(f"cannot load suite {name!r}: {exc}") from None
        _check(cls, name)
        return cls
    broken = broken_message(ENTRY_POINT_GROUP, name)
    if broken is not None:
        raise SuiteNotFound(f"suite {name!r} is broken: {broken}")
    listed = ", ".join(sorted(known)) or "none"
    raise SuiteNotFound(f"no suite named {name!r}; installed: {listed} (or give 'package.module:Class')")


def suite_origin(cls: type[Suite]) -> str:
    """'built-in', 'entry point' (another package's) or 'reference' (a module:Class in a config)."""
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.value == f"{cls.__module__}:{cls.__qualname__}":
            dist = getattr(ep, "dist", None)
            return "built-in" if dist is not None and dist.name == "arl" else "entry point"
    return "reference"


def suite_for(config: RunConfig) -> Suite:
    """The suite object of a run."""
    return get_suite(config.suite)(config)


def _check(cls: object, ref: str) -> None:
    if not (isinstance(cls, type) and issubclass(cls, Suite)):
        raise SuiteNotFound(f"{ref!r} is not a subclass of arl_flows.suites.Suite")
    if not cls.name:
        raise SuiteNotFound(f"suite class {ref!r} must set the class attribute 'name'")
