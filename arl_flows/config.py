"""Run configuration: one TOML file, validated by pydantic, one model per concern.

Sections reuse the models of the packages that own them, so every field is
documented once, where it is declared: ``[trainer]`` is
``policies.TrainerConfig``, ``[scheduler]`` is
``verifiers.scheduler.SchedulerConfig``, and ``[options]`` is the suite's own
``Options`` model. The suite (``suite = "NAME"``) fills in the sections a
config leaves out: its ladder, its scheduler settings, its hindsight. A bad
field gives one line naming the field and what is allowed (:func:`load_config`).
"""

from __future__ import annotations

import difflib
import math
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from policies import TrainerConfig
from verifiers.objectives import Objective
from verifiers.scheduler import SchedulerConfig

__all__ = [
    "ConfigError",
    "HindsightConfig",
    "RolloutConfig",
    "RunConfig",
    "TierConfig",
    "load_config",
    "profiles",
    "stored_fields",
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
DEFAULT_SUITE = "molecules"  # what a bare `arl run` trains on: the built-in default job (one name, nothing else of it)


class RolloutConfig(_Section):
    """What the policy is asked each step."""

    prompts_per_step: int = Field(
        default=4, ge=1, le=MAX_PROMPTS_PER_STEP, description="Goal prompts per step; each gets trainer.group_size samples."
    )


class HindsightConfig(_Section):
    """Hindsight distillation of failed trajectories (after each GRPO update)."""

    enabled: bool = Field(default=True, description="Run a distillation step after each GRPO step.")
    relabel: bool = Field(default=True, description="SFT on failed completions relabeled with the goal they achieved.")
    hint_teacher: bool = Field(
        default=False,
        description="Reverse KL to the policy given a hint built from verifier feedback. Off for a policy whose "
        "vocabulary has no words for feedback (a hint would be a goal token and the update a relabel in disguise).",
    )
    threshold: float = Field(default=0.5, ge=0, le=1, description="Trajectories whose reward is below this count as failed.")
    max_examples: int = Field(default=16, ge=1, description="At most this many failed trajectories per distillation step.")
    min_fidelity: Literal["fast", "simulation", "high_fidelity", "lab"] = Field(
        default="simulation",
        description="Relabel only candidates a tier at least this faithful answered (a fast-tier proxy would teach the proxy).",
    )
    max_value_std: float = Field(
        default=0.5,
        gt=0,
        description="Relabel with the scheduler's posterior mean of the top-tier value only if its std is at most this "
        "(in the goal's units). A top-tier verdict makes it exact.",
    )


class StreamingConfig(_Section):
    """The asynchronous pipeline (``pipeline = "async"``): sampler, verification service and learner, decoupled."""

    max_ahead: int = Field(
        default=2, ge=1, le=64,
        description="Batches the sampler may have out (sampled, not yet learned) before it waits for the learner; "
        "bounds staleness and the budget held in reserve.",
    )
    settle_std: float | None = Field(
        default=None, gt=0,
        description="A group is settled, and the learner may take it, once every member's posterior std of the "
        "top-tier value is at most this (or it reached the top tier, or escalating it is not worth its cost). "
        "None: only the last two.",
    )
    max_group_wait_s: float | None = Field(
        default=None, gt=0,
        description="Seconds after which the learner takes a group as it stands; what arrives later is a late verdict.",
    )
    max_group_lag: int | None = Field(
        default=None, ge=0,
        description="Policy versions a group may wait to settle: once the learner is this many updates past the "
        "weights that sampled it, it is learned as it stands (what arrives later is a late verdict, for hindsight). "
        "Keeps groups within trainer.max_staleness instead of waiting for them and then dropping them; but the "
        "learner then never waits for verification (each step frees the next), so it learns mostly from estimates. "
        "None (default): no limit; prefer max_group_wait_s of a few top-tier latencies.",
    )
    slots: dict[str, int] = Field(
        default_factory=dict,
        description=f"Calls in flight per verifier (1 to {MAX_TIER_CONCURRENCY}); default: the verifier's own "
        "`slots` (a remote queue's), else tier_concurrency, else 1.",
    )
    learner_idle: Literal["wait", "hindsight"] = Field(
        default="hindsight",
        description="What the learner does while no group is settled: wait, or a hindsight distillation step on "
        "late verdicts and failures it has not distilled yet (never more than one per learned step).",
    )
    progress_every_s: float = Field(default=2.0, gt=0, description="Seconds between updates of the live progress report.")

    @field_validator("slots")
    @classmethod
    def _slots_are_positive(cls, slots: dict[str, int]) -> dict[str, int]:
        for verifier, n in slots.items():
            if not 1 <= n <= MAX_TIER_CONCURRENCY:
                raise ValueError(f"{verifier!r}: {n} calls in flight is not usable; give 1 to {MAX_TIER_CONCURRENCY}")
        return slots


class RunConfig(_Section):
    """Everything a training run needs; `arl run --config FILE.toml` reads it."""

    name: str = Field(
        default="gap-window",
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        description="Run name shown in `arl runs list` and the Prefect UI (printable text, one line).",
    )
    suite: str = Field(
        default=DEFAULT_SUITE,
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        description="The problem: a suite name (`arl suites list`: the built-in 'molecules' and 'code', or one a "
        "package registers) or a 'package.module:Class' reference. It supplies the defaults of the sections below.",
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="The suite's own options (`arl suites show NAME` lists them), validated by the suite.",
    )
    policy_path: str | None = Field(
        default=None,
        description="Local directory of a transformers causal LM (+ tokenizer) to train; never downloaded. "
        "None: the suite's own policy, if it ships one.",
    )
    steps: int = Field(
        default=6, ge=1, le=MAX_STEPS, description="Training steps (rollout -> verify -> GRPO -> hindsight -> checkpoint)."
    )
    seed: int = Field(default=0, description="Seeds sampling (per step) and the scheduler.")
    tiers: list[TierConfig] = Field(
        default_factory=list,
        description="The verifier ladder, cheapest first; the last is the top tier the rewards estimate "
        "(default: the suite's ladder).",
    )
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    trainer: TrainerConfig = Field(default_factory=lambda: TrainerConfig(group_size=8, lr=5e-5, max_new_tokens=48))
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig, description="Routing and budget (default: the suite's).")
    objective: Objective | None = Field(
        default=None,
        description="The reward over named properties ([objective] with [[objective.terms]], see verifiers.objectives "
        "and the README); None: the window [scheduler] target_low..target_high with window_softness on the top "
        "tier's value (the suite's default objective, if it declares one).",
    )
    hindsight: HindsightConfig = Field(default_factory=HindsightConfig)
    pipeline: Literal["sync", "async"] = Field(
        default="sync",
        description="'sync': each step samples, verifies, learns in turn. 'async': a sampler, the verification "
        "service and the learner run at once, so expensive verification never blocks learning ([streaming]).",
    )
    streaming: StreamingConfig = Field(default_factory=StreamingConfig)
    device: str = Field(default="cpu", description="Torch device of the policy ('cpu', 'cuda:0').")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(default="float32", description="Policy weight dtype.")
    task_runner: Literal["threads", "dask", "ray"] = Field(default="threads", description="Where verifier tier tasks run.")
    dask_address: str | None = Field(default=None, description="tcp://HOST:PORT of a Dask scheduler; None starts a LocalCluster.")
    tier_concurrency: dict[str, int] = Field(
        default_factory=dict,
        description="Global Prefect concurrency limit per expensive verifier (tasks tagged 'arl-tier:NAME'), "
        f"1 to {MAX_TIER_CONCURRENCY} (default: the suite's).",
    )
    _suite_options: BaseModel | None = PrivateAttr(default=None)

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
        """The suite fills in the sections a config leaves out (its ladder, scheduler, ...) and moves its old fields."""
        if not isinstance(data, dict):
            return data
        from arl_flows.suites import SuiteNotFound, get_suite

        name = data.get("suite", DEFAULT_SUITE)
        if not isinstance(name, str):
            return data  # the field's own check names the problem
        try:
            suite = get_suite(name)
        except SuiteNotFound as exc:
            raise ValueError(f"suite: {exc}") from None
        data = dict(data)
        for old, option in suite.legacy_fields.items():
            head, _, tail = old.partition(".")
            if tail and isinstance(data.get(head), dict) and tail in data[head]:
                data[head] = section = dict(data[head])
                value = section.pop(tail)
            elif not tail and head in data:
                value = data.pop(head)
            else:
                continue
            data["options"] = {option: value} | dict(data.get("options") or {})
        return _merge_over(cls, _merge_over(cls, _section_defaults(cls), suite.defaults), data)

    @model_validator(mode="after")
    def _options_are_the_suites(self) -> RunConfig:
        from arl_flows.suites import get_suite

        suite = get_suite(self.suite)
        try:
            self._suite_options = suite.Options.model_validate(self.options)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            if err["type"] == "extra_forbidden":
                path = list(err["loc"])
                msg = unknown_field_message(_model_at(suite.Options, path[:-1]), path[-1], f"`arl suites show {suite.name}` lists the options")
            else:
                msg = str(err["msg"]).removeprefix("Value error, ")
            raise ValueError(f"options.{loc}: {' '.join(msg.split())}" if loc else f"options: {msg}") from None
        if suite.needs_policy_path and not self.policy_path:
            raise ValueError(f"policy_path: the {suite.name} suite ships no policy; give a local transformers model directory to train")
        return self

    @property
    def suite_options(self) -> BaseModel:
        """The suite's validated options (its ``Options`` model)."""
        assert self._suite_options is not None
        return self._suite_options

    @model_validator(mode="after")
    def _ladder_is_usable(self) -> RunConfig:
        if not 2 <= self.trainer.group_size <= MAX_GROUP_SIZE:
            raise ValueError(f"trainer.group_size: {self.trainer.group_size} samples per prompt; use 2 to {MAX_GROUP_SIZE}")
        if len(self.tiers) < 2:
            raise ValueError("tiers: a ladder needs at least two verifiers (a fast one and a top one)")
        names = [t.verifier for t in self.tiers]
        if len(set(names)) != len(names):
            raise ValueError(f"tiers: verifier names repeat ({', '.join(names)}); list each verifier once")
        return self

    @model_validator(mode="after")
    def _objective_reaches_the_scheduler(self) -> RunConfig:
        """The scheduler computes the reward, so [objective] becomes its ``reward``; one place to declare it."""
        if self.objective is not None and self.scheduler.reward not in (None, self.objective):
            raise ValueError("objective: declare the reward once, in [objective]; remove [scheduler.reward]")
        if self.objective is not None and self.scheduler.reward is None:
            self.scheduler = self.scheduler.model_copy(update={"reward": self.objective})
        return self


# Old field names a section still accepts: given by its old name, a field replaces the default of its new name.
_RENAMED: dict[str, dict[str, str]] = {"scheduler": {"objective": "voi_target"}}


def _section_defaults(model: type[BaseModel]) -> dict[str, Any]:
    """What the model's own section defaults set explicitly (``trainer``'s lr and lengths), as TOML-like data."""
    out = {}
    for key, field in model.model_fields.items():
        default = field.get_default(call_default_factory=True)
        if isinstance(default, BaseModel) and (explicit := default.model_dump(mode="json", exclude_unset=True)):
            out[key] = explicit
    return out


def _merge_over(model: type[BaseModel], defaults: dict[str, Any], given: dict[str, Any], section: str = "") -> dict[str, Any]:
    """``given`` over ``defaults``: a section (a field whose type is one pydantic model) that both give is merged
    field by field, so a config's ``[scheduler]`` with budgets only keeps the suite's window; any other field
    (a ladder, a table of limits, an objective) is taken whole from ``given`` when it gives one."""
    merged = dict(defaults)
    for old, new in _RENAMED.get(section, {}).items():
        if old in given and new not in given:
            merged.pop(new, None)
    for key, value in given.items():
        field = model.model_fields.get(key) if isinstance(key, str) else None
        sub = field.annotation if field is not None else None
        if (isinstance(sub, type) and issubclass(sub, BaseModel) and isinstance(value, dict)
                and isinstance(merged.get(key), dict)):
            merged[key] = _merge_over(sub, merged[key], value, key if not section else f"{section}.{key}")
        else:
            merged[key] = value
    return merged


def stored_fields(stored: dict[str, Any]) -> dict[str, Any]:
    """The run-config fields of a config stored with a run (older runs' moved fields included, see ``legacy_fields``)."""
    from arl_flows.suites import SuiteNotFound, get_suite

    try:
        legacy = {k.partition(".")[0] for k in get_suite(str(stored.get("suite", DEFAULT_SUITE))).legacy_fields}
    except SuiteNotFound:
        legacy = set()
    return {k: v for k, v in stored.items() if k in RunConfig.model_fields or k in legacy}


def profiles(suite: str) -> dict[str, Any]:
    """The profiles a run of ``suite`` may name: 'default' and the suite's own (e.g. the molecules suite's 'quick')."""
    from arl_flows.suites import get_suite

    return {"default": lambda c: c} | dict(get_suite(suite).profiles)


def _loc_part(part: object) -> object:
    return str(part) if isinstance(part, int) else part


def _model_at(model: type[BaseModel], path: Sequence[object]) -> type[BaseModel] | None:
    """The pydantic model that holds the field at ``path`` inside ``model`` (None: not a model's field)."""
    for part in path:
        if isinstance(part, int):  # an item of a list of models (``tiers.0``): the model found for the list
            continue
        if not isinstance(part, str) or part not in model.model_fields:
            return None
        found = [t for t in _models_in(model.model_fields[part].annotation)]
        if not found:
            return None
        model = found[0]
    return model


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation names: ``X``, ``X | None``, ``list[X]``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def unknown_field_message(model: type[BaseModel] | None, field: object, listing: str) -> str:
    """One line for a field no section declares: the closest declared field if one is close, else where to look."""
    if model is not None and isinstance(field, str):
        close = difflib.get_close_matches(field, list(model.model_fields), n=1, cutoff=0.6)
        if close:
            return f"unknown field; did you mean {close[0]!r}?"
    return f"unknown field; check the spelling ({listing})"


def _describe(exc: ValidationError, source: str) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(p[:60] if isinstance(p, str) and p.isprintable() and " " not in p else repr(p)[:60] for p in map(_loc_part, err["loc"]))
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            path = list(err["loc"])
            msg = unknown_field_message(_model_at(RunConfig, path[:-1]), path[-1] if path else None, "`arl config show` prints every field")
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
    allowed = profiles(config.suite)
    if profile not in allowed:
        raise ConfigError(f"unknown profile {profile!r} for suite {config.suite!r}; allowed: {', '.join(allowed)}")
    config = allowed[profile](config)
    if overrides and profile != "default":
        config = RunConfig.model_validate(config.model_dump() | overrides)
    return config
