"""Run configuration: one TOML file, validated by pydantic, one model per concern.

Sections reuse the models of the packages that own them, so every field is
documented once, where it is declared: ``[prior]`` is
``policies.PretrainConfig``, ``[trainer]`` is ``policies.TrainerConfig``,
``[scheduler]`` is ``verifiers.scheduler.SchedulerConfig``. A bad field gives
one line naming the field and what is allowed (:func:`load_config`).
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from policies import PretrainConfig, TrainerConfig
from verifiers.code import CodeTaskChoice, RewardWeights
from verifiers.objectives import Objective
from verifiers.scheduler import SchedulerConfig

__all__ = [
    "PROFILES",
    "ConfigError",
    "HindsightConfig",
    "RolloutConfig",
    "RunConfig",
    "TierConfig",
    "load_config",
    "read_toml",
]


class ConfigError(ValueError):
    """A run config the user must fix; the message names the field."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TierConfig(_Section):
    """One rung of the verifier ladder."""

    verifier: str = Field(description="Registered verifier name (see `arl tiers list`) or a 'module:Class' reference.")
    params: dict[str, Any] = Field(default_factory=dict, description="Params of the verifier (see `arl tiers show NAME`).")


# Upper bounds far above any sensible run and far below what breaks something (a SQL integer, a
# list of that many prompts in memory): a typo of a few extra zeros is an error, not a week of compute.
MAX_STEPS = 100_000
MAX_PROMPTS_PER_STEP = 10_000
MAX_GROUP_SIZE = 1_024
MAX_TIER_CONCURRENCY = 1_024
MAX_NAME_LENGTH = 200  # the runs.name column


class RolloutConfig(_Section):
    """What the policy is asked each step."""

    prompts_per_step: int = Field(
        default=4, ge=1, le=MAX_PROMPTS_PER_STEP, description="Goal prompts per step; each gets trainer.group_size samples."
    )
    goal_windows: list[tuple[float, float]] = Field(
        default_factory=list,
        max_length=1000,
        description="Goal windows (low, high) in eV to prompt with, cycled over prompts; empty: the scheduler's target window.",
    )

    @field_validator("goal_windows")
    @classmethod
    def _windows_are_finite_and_ordered(cls, windows: list[tuple[float, float]]) -> list[tuple[float, float]]:
        for i, (low, high) in enumerate(windows):
            if not (math.isfinite(low) and math.isfinite(high)):
                raise ValueError(f"window {i} ({low}, {high}) must be two finite numbers in eV, e.g. [3.0, 4.0]")
            if not low < high:
                raise ValueError(f"window {i} ({low}, {high}) needs low below high; write it as [{min(low, high)}, {max(low, high)}]")
        return windows


class HindsightConfig(_Section):
    """Hindsight distillation of failed trajectories (after each GRPO update)."""

    enabled: bool = Field(default=True, description="Run a distillation step after each GRPO step.")
    relabel: bool = Field(default=True, description="SFT on failed completions relabeled with the goal they achieved.")
    hint_teacher: bool = Field(
        default=False,
        description="Reverse KL to the policy given a hint built from verifier feedback. Off for the SMILES policy: "
        "its vocabulary has no words for feedback, so the hint would be a goal token and the update a relabel in disguise.",
    )
    threshold: float = Field(default=0.5, ge=0, le=1, description="Trajectories whose reward is below this count as failed.")
    max_examples: int = Field(default=16, ge=1, description="At most this many failed trajectories per distillation step.")
    min_fidelity: Literal["fast", "simulation", "high_fidelity", "lab"] = Field(
        default="simulation",
        description="Relabel only molecules a tier at least this faithful answered (a fast-tier proxy would teach the proxy).",
    )
    max_value_std: float = Field(
        default=0.5,
        gt=0,
        description="Relabel with the scheduler's posterior mean of the top-tier value only if its std is at most this "
        "(the goal's units, eV for the gap; one goal bin is 0.5 eV). A top-tier verdict makes it exact.",
    )


class RunConfig(_Section):
    """Everything a training run needs; `arl run --config FILE.toml` reads it."""

    name: str = Field(
        default="gap-window",
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        description="Run name shown in `arl runs list` and the Prefect UI (printable text, one line).",
    )
    suite: Literal["molecules", "code"] = Field(
        default="molecules",
        description="Task suite: 'molecules' (design by gap window, tiny SMILES policy) or 'code' (Python tasks; "
        "needs policy_path).",
    )
    policy_path: str | None = Field(
        default=None,
        description="Local directory of a transformers causal LM (+ tokenizer) to train; never downloaded. "
        "None: the suite's built-in policy (molecules: the pretrained SMILES prior).",
    )
    code_tasks: CodeTaskChoice = Field(
        default_factory=list,
        description="Code-suite tasks to prompt with: bundled task ids (empty: all bundled), or a source, "
        "{source = 'humaneval'} or {source = 'jsonl', path = 'FILE'} (HumanEval or MBPP records).",
    )
    code_reward: RewardWeights = Field(default_factory=RewardWeights, description="Weights of the code reward.")
    steps: int = Field(
        default=6, ge=1, le=MAX_STEPS, description="Training steps (rollout -> verify -> GRPO -> hindsight -> checkpoint)."
    )
    seed: int = Field(default=0, description="Seeds sampling (per step) and the scheduler.")
    tiers: list[TierConfig] = Field(
        default_factory=lambda: [
            TierConfig(verifier="rdkit-eht"),
            TierConfig(verifier="gfn2-xtb", params={"threads": 1}),
            TierConfig(verifier="pyscf-b3lyp", params={"basis": "6-31g", "threads": 1, "workers": 2}),
        ],
        description="The verifier ladder, cheapest first; the last is the top tier the rewards estimate.",
    )
    prior: PretrainConfig = Field(default_factory=PretrainConfig, description="The SMILES prior (pretrained once, cached).")
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    trainer: TrainerConfig = Field(default_factory=lambda: TrainerConfig(group_size=8, lr=5e-5, max_new_tokens=48))
    scheduler: SchedulerConfig = Field(
        default_factory=lambda: SchedulerConfig(
            policy="voi", objective="advantage", target_low=3.0, target_high=4.0, window_softness=0.5,
            budget_per_step=30.0, budget_per_run=160.0,
        )
    )
    objective: Objective | None = Field(
        default=None,
        description="The reward over named properties ([objective] with [[objective.terms]], see verifiers.objectives "
        "and the README); None: the window [scheduler] target_low..target_high with window_softness on the top "
        "tier's value.",
    )
    hindsight: HindsightConfig = Field(default_factory=HindsightConfig)
    device: str = Field(default="cpu", description="Torch device of the policy ('cpu', 'cuda:0').")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(default="float32", description="Policy weight dtype.")
    task_runner: Literal["threads", "dask", "ray"] = Field(default="threads", description="Where verifier tier tasks run.")
    dask_address: str | None = Field(default=None, description="tcp://HOST:PORT of a Dask scheduler; None starts a LocalCluster.")
    tier_concurrency: dict[str, int] = Field(
        default_factory=lambda: {"pyscf-b3lyp": 1, "gfn2-xtb": 2},
        description="Global Prefect concurrency limit per expensive verifier (tasks tagged 'arl-tier:NAME'), "
        f"1 to {MAX_TIER_CONCURRENCY}.",
    )

    @field_validator("name")
    @classmethod
    def _name_is_one_line(cls, name: str) -> str:
        if not name.isprintable():
            bad = next(ch for ch in name if not ch.isprintable())
            raise ValueError(f"a run name is printable text on one line; it holds {ascii(bad)}")
        return name

    @field_validator("seed")
    @classmethod
    def _seed_fits(cls, seed: int) -> int:
        if not 0 <= seed < 2**32:
            raise ValueError(f"a seed is an integer from 0 to {2**32 - 1}, got {seed}")
        return seed

    @field_validator("tier_concurrency")
    @classmethod
    def _concurrency_is_positive(cls, limits: dict[str, int]) -> dict[str, int]:
        for verifier, limit in limits.items():
            if not 1 <= limit <= MAX_TIER_CONCURRENCY:
                raise ValueError(
                    f"{verifier!r}: {limit} is not a usable limit; give 1 to {MAX_TIER_CONCURRENCY} concurrent "
                    "tasks (leave the verifier out for no limit)"
                )
        return limits

    @model_validator(mode="before")
    @classmethod
    def _suite_defaults(cls, data: Any) -> Any:
        """The code suite gets the code ladder and the 'all' policy unless the config says otherwise."""
        if isinstance(data, dict) and data.get("suite") == "code":
            data = dict(data)
            data.setdefault("tiers", [{"verifier": "code-format"}, {"verifier": "code-exec"}, {"verifier": "code-tests"}])
            data.setdefault("scheduler", {"policy": "all", "target_low": 0.5, "target_high": 1.0, "budget_per_step": 600.0})
            data.setdefault("hindsight", {"relabel": False, "hint_teacher": True})
            data.setdefault("tier_concurrency", {})
        return data

    @model_validator(mode="after")
    def _ladder_is_usable(self) -> RunConfig:
        if not 2 <= self.trainer.group_size <= MAX_GROUP_SIZE:
            raise ValueError(f"trainer.group_size: {self.trainer.group_size} samples per prompt; use 2 to {MAX_GROUP_SIZE}")
        if len(self.tiers) < 2:
            raise ValueError("tiers: a ladder needs at least two verifiers (a fast one and a top one)")
        names = [t.verifier for t in self.tiers]
        if len(set(names)) != len(names):
            raise ValueError(f"tiers: verifier names repeat ({', '.join(names)}); list each verifier once")
        if self.scheduler.policy in ("cascade", "oracle"):
            raise ValueError(
                f"scheduler.policy: {self.scheduler.policy!r} needs tuned thresholds or the true values, which a training "
                "run does not have; use 'voi', 'all', 'fast-only' or 'random' (the benchmarks compare the others)"
            )
        if self.suite == "code" and not self.policy_path:
            raise ValueError("policy_path: the code suite needs a local transformers model directory to train")
        return self

    @model_validator(mode="after")
    def _objective_reaches_the_scheduler(self) -> RunConfig:
        """The scheduler computes the reward, so [objective] becomes its ``reward``; one place to declare it."""
        if self.objective is not None and self.scheduler.reward not in (None, self.objective):
            raise ValueError("objective: declare the reward once, in [objective]; remove [scheduler.reward]")
        if self.objective is not None and self.scheduler.reward is None:
            self.scheduler = self.scheduler.model_copy(update={"reward": self.objective})
        return self

    def goal_windows(self) -> list[tuple[float, float]]:
        return self.rollout.goal_windows or [(self.scheduler.target_low, self.scheduler.target_high)]


def _quick(config: RunConfig) -> RunConfig:
    """About two minutes on 2 cores once the prior is cached: 3 small steps, no DFT (same prior as the default)."""
    return config.model_copy(
        update={
            "name": config.name if config.name != "gap-window" else "gap-window-quick",
            "steps": 3,
            "rollout": config.rollout.model_copy(update={"prompts_per_step": 2}),
            "trainer": config.trainer.model_copy(update={"group_size": 6}),
            "tiers": [
                TierConfig(verifier="rdkit-eht"),
                TierConfig(verifier="gfn2-xtb", params={"threads": 1}),
                TierConfig(verifier="reference-table", params={"cost_per_call": 12.0}),
            ],
            "scheduler": config.scheduler.model_copy(update={"budget_per_step": 40.0, "budget_per_run": 120.0}),
        }
    )


PROFILES = {"default": lambda c: c, "quick": _quick}


def _loc_part(part: object) -> object:
    return str(part) if isinstance(part, int) else part


def _describe(exc: ValidationError, source: str) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(p[:60] if isinstance(p, str) and p.isprintable() and " " not in p else repr(p)[:60] for p in map(_loc_part, err["loc"]))
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field; check the spelling (see examples/*.toml for every field)"
        elif err["type"] == "literal_error":
            msg = msg.replace("Input should be", "allowed values are")
        msg = " ".join(msg.split())
        # A check of the whole config names its own field ("tiers: ..."); a field's check gets its path.
        parts.append(f"{loc}: {msg}" if loc else msg)
    more = f" (and {len(exc.errors()) - 3} more)" if len(exc.errors()) > 3 else ""
    return f"{source}: " + "; ".join(parts) + more


MAX_CONFIG_BYTES = 2**20  # a run config is a page of TOML; anything this large is the wrong file
MAX_CONFIG_DEPTH = 20  # tables and arrays nested deeper than any field of RunConfig goes


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of TOML data, counting no further than ``limit`` + 1 (iterative: no recursion limit)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > limit:
            break
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return deepest


def read_toml(p: Path) -> dict[str, Any]:
    """The TOML table in ``p``, or one ConfigError line saying why it cannot be read."""
    try:
        if not p.exists():
            raise ConfigError(f"config file {p} does not exist")
        if not p.is_file():
            raise ConfigError(f"config file {p} is not a regular file (a folder, device or pipe); give a .toml file")
        if p.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"config file {p} is {p.stat().st_size:,} bytes; a run config is under {MAX_CONFIG_BYTES:,}")
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p} is not UTF-8 text (byte {exc.start}); save it as UTF-8 TOML") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {p}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p} is not valid TOML: {' '.join(str(exc).split())}") from None
    except RecursionError:  # tomllib parses nested arrays and inline tables recursively
        raise ConfigError(f"{p} nests arrays or tables too deeply to read; a run config needs {MAX_CONFIG_DEPTH} levels at most") from None
    if _depth(data, MAX_CONFIG_DEPTH) > MAX_CONFIG_DEPTH:
        raise ConfigError(f"{p} nests arrays or tables more than {MAX_CONFIG_DEPTH} levels deep; no run config field needs that")
    return data


def load_config(path: str | Path | None = None, profile: str = "default", overrides: dict[str, Any] | None = None) -> RunConfig:
    """Read and validate a TOML run config (None: the built-in default), then apply a profile.

    ``overrides`` (the command line's ``--steps``, ``--name``, ...) win over the file and over the profile.
    """
    if profile not in PROFILES:
        raise ConfigError(f"unknown profile {profile!r}; allowed: {', '.join(PROFILES)}")
    data: dict[str, Any] = {}
    source = "default config"
    if path is not None:
        p = Path(path)
        source = str(p)
        data = read_toml(p)
    data.update(overrides or {})
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, source)) from None
    config = PROFILES[profile](config)
    if overrides and profile != "default":
        config = RunConfig.model_validate(config.model_dump() | overrides)
    return config
