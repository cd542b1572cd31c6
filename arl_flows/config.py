"""Run configuration: one TOML file, validated by pydantic, one model per concern.

Sections reuse the models of the packages that own them, so every field is
documented once, where it is declared: ``[prior]`` is
``policies.PretrainConfig``, ``[trainer]`` is ``policies.TrainerConfig``,
``[scheduler]`` is ``verifiers.scheduler.SchedulerConfig``. A bad field gives
one line naming the field and what is allowed (:func:`load_config`).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from policies import PretrainConfig, TrainerConfig
from verifiers.code import RewardWeights
from verifiers.scheduler import SchedulerConfig

__all__ = [
    "PROFILES",
    "ConfigError",
    "HindsightConfig",
    "RolloutConfig",
    "RunConfig",
    "TierConfig",
    "load_config",
]


class ConfigError(ValueError):
    """A run config the user must fix; the message names the field."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TierConfig(_Section):
    """One rung of the verifier ladder."""

    verifier: str = Field(description="Registered verifier name (see `arl tiers list`) or a 'module:Class' reference.")
    params: dict[str, Any] = Field(default_factory=dict, description="Params of the verifier (see `arl tiers show NAME`).")


class RolloutConfig(_Section):
    """What the policy is asked each step."""

    prompts_per_step: int = Field(default=4, ge=1, description="Goal prompts per step; each gets trainer.group_size samples.")
    goal_windows: list[tuple[float, float]] = Field(
        default_factory=list,
        description="Goal windows (low, high) in eV to prompt with, cycled over prompts; empty: the scheduler's target window.",
    )


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

    name: str = Field(default="gap-window", description="Run name shown in `arl runs list` and the Prefect UI.")
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
    code_tasks: list[str] = Field(default_factory=list, description="Code-suite task ids to prompt with (empty: all).")
    code_reward: RewardWeights = Field(default_factory=RewardWeights, description="Weights of the code reward.")
    steps: int = Field(default=6, ge=1, description="Training steps (rollout -> verify -> GRPO -> hindsight -> checkpoint).")
    seed: int = Field(default=0, description="Seeds sampling (per step) and the scheduler.")
    tiers: list[TierConfig] = Field(
        default_factory=lambda: [
            TierConfig(verifier="rdkit-eht"),
            TierConfig(verifier="gfn2-xtb", params={"threads": 1}),
            TierConfig(verifier="pyscf-b3lyp", params={"basis": "6-31g", "threads": 1}),
        ],
        description="The verifier ladder, cheapest first; the last is the top tier the rewards estimate.",
    )
    prior: PretrainConfig = Field(default_factory=PretrainConfig, description="The SMILES prior (pretrained once, cached).")
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    trainer: TrainerConfig = Field(default_factory=lambda: TrainerConfig(group_size=8, lr=5e-5, max_new_tokens=48))
    scheduler: SchedulerConfig = Field(
        default_factory=lambda: SchedulerConfig(
            policy="voi", objective="advantage", target_low=3.0, target_high=4.0, window_softness=0.5,
            budget_per_step=40.0, budget_per_run=240.0,
        )
    )
    hindsight: HindsightConfig = Field(default_factory=HindsightConfig)
    device: str = Field(default="cpu", description="Torch device of the policy ('cpu', 'cuda:0').")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(default="float32", description="Policy weight dtype.")
    task_runner: Literal["threads", "dask", "ray"] = Field(default="threads", description="Where verifier tier tasks run.")
    dask_address: str | None = Field(default=None, description="tcp://HOST:PORT of a Dask scheduler; None starts a LocalCluster.")
    tier_concurrency: dict[str, int] = Field(
        default_factory=lambda: {"pyscf-b3lyp": 1, "gfn2-xtb": 2},
        description="Global Prefect concurrency limit per expensive verifier (tasks tagged 'arl-tier:NAME').",
    )

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
        loc = ".".join(p if isinstance(p, str) and p.isprintable() and " " not in p else repr(p) for p in map(_loc_part, err["loc"])) or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown field; check the spelling (see examples/*.toml for every field)"
        elif err["type"] == "literal_error":
            msg = msg.replace("Input should be", "allowed values are")
        parts.append(f"{loc}: {' '.join(str(msg).split())}")
    more = f" (and {len(exc.errors()) - 3} more)" if len(exc.errors()) > 3 else ""
    return f"{source}: " + "; ".join(parts) + more


def load_config(path: str | Path | None = None, profile: str = "default", overrides: dict[str, Any] | None = None) -> RunConfig:
    """Read and validate a TOML run config (None: the built-in default), then apply a profile."""
    if profile not in PROFILES:
        raise ConfigError(f"unknown profile {profile!r}; allowed: {', '.join(PROFILES)}")
    data: dict[str, Any] = {}
    source = "default config"
    if path is not None:
        p = Path(path)
        source = str(p)
        if not p.is_file():
            raise ConfigError(f"config file {p} does not exist")
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{p} is not valid TOML: {exc}") from None
    data.update(overrides or {})
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, source)) from None
    return PROFILES[profile](config)
