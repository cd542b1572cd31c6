"""Run configuration: one TOML file, validated by pydantic, one model per concern.

Sections reuse the models of the packages that own them, so every field is
documented once, where it is declared: ``[trainer]`` is
``policies.TrainerConfig``, ``[scheduler]`` is
``verifiers.scheduler.SchedulerConfig``, and ``[options]`` is the suite's own
``Options`` model. The suite (``suite = "NAME"``) fills in the sections a
config leaves out: its ladder, its scheduler settings, its hindsight.

Reading a config is two jobs kept apart: :func:`build_config` looks the suite
up and merges its defaults under the given data; the pydantic models then only
check the data they hold (no validator reaches into the suite registry). A bad
field gives one line naming the field and what is allowed (:func:`load_config`).
"""

from __future__ import annotations

import difflib
import re
import sys
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from arl_flows.suites import Suite, SuiteNotFound, get_suite
from arl_flows.suites.capabilities import suite_profiles
from policies import TrainerConfig
from verifiers.objectives import Objective
from verifiers.scheduler import SchedulerConfig

__all__ = [
    "ClusterConfig",
    "ConfigError",
    "EvalConfig",
    "HindsightConfig",
    "RolloutConfig",
    "RunConfig",
    "TierConfig",
    "build_config",
    "describe_errors",
    "load_config",
    "profiles",
    "stored_fields",
    "read_toml",
    "standalone_suite",
]


class ConfigError(ValueError):
    """A run config the user must fix; the message names the field."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TierConfig(_Section):
    """One rung of the verifier ladder."""

    verifier: str = Field(description="Registered verifier name (see `arl tiers list`) or a 'module:Class' reference.")
    params: dict[str, Any] = Field(default_factory=dict, description="Params of the verifier (see `arl tiers show NAME`).")

    @model_validator(mode="before")
    @classmethod
    def _a_name_alone(cls, value: Any) -> Any:
        """``"rdkit-eht"`` is short for ``{ verifier = "rdkit-eht" }`` (its default params)."""
        if isinstance(value, str):
            return {"verifier": value}
        if not isinstance(value, Mapping):
            raise ValueError(f'write a tier as {{ verifier = "NAME", params = {{...}} }} or "NAME", got {value!r:.60}')
        return value


# Upper bounds far above any sensible run and far below what breaks something (a SQL integer, a
# list of that many prompts in memory): a typo of a few extra zeros is an error, not a week of compute.
MAX_STEPS = 100_000
MAX_PROMPTS_PER_STEP = 10_000
MAX_GROUP_SIZE = 1_024
MAX_TIER_CONCURRENCY = 1_024
MAX_NAME_LENGTH = 200  # the runs.name column
DEFAULT_SUITE = "molecules"  # what a bare `arl run` trains on: the built-in default job (one name, nothing else of it)
ASYNC_FROM_LATENCY_S = 1.0  # a top-tier call waiting longer than this makes async the default (docs/benchmarks.md)


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
        "None (default): a group waits until it is nearly trainer.max_staleness versions old, then it is learned "
        "as it stands.",
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
    lend_idle_slots: bool = Field(
        default=True,
        description="When a slot of an expensive tier (high-fidelity and up) is free and no open batch's plan wants "
        "it within its step budget, lend the newest batch up to one more step's budget from what the run has not "
        "committed (other batches' unspent step budgets included), so the slot takes the best candidate still worth "
        "its cost instead of waiting for the next batch (the run's budget still holds). False: each batch spends "
        "only its own step budget, as a sync step does.",
    )
    progress_every_s: float = Field(default=2.0, gt=0, description="Seconds between updates of the live progress report.")

    @field_validator("slots")
    @classmethod
    def _slots_are_positive(cls, slots: dict[str, int]) -> dict[str, int]:
        for verifier, n in slots.items():
            if not 1 <= n <= MAX_TIER_CONCURRENCY:
                raise ValueError(f"{verifier!r}: {n} calls in flight is not usable; give 1 to {MAX_TIER_CONCURRENCY}")
        return slots


MAX_EVAL_SAMPLES = 4_096


class EvalConfig(_Section):
    """The fixed evaluation set ``arl run`` ends with, and ``arl runs eval`` scores (``arl_flows.eval_set``).

    The run's starting policy and its last checkpoint each sample ``samples`` completions of the same prompts
    (the run's own goal prompts of its first steps) with the same sampling seed; both sets are scored in one
    call on the run's ladder and ledger, under one budget. The difference is the policy's, not the prompts'.
    """

    samples: int = Field(
        default=0, ge=0, le=MAX_EVAL_SAMPLES,
        description="Samples per side (before and after); 0: off (`arl runs eval RUN_ID` scores a finished run later). "
        "At least 2 when on.",
    )
    budget: float = Field(
        default=60.0, gt=0, description="CPU-seconds of verification for both sides together, in one call.",
    )
    seed: int = Field(
        default=7_777_777, ge=0, lt=2**32,
        description="Sampling seed of both sides; training steps sample with seed * 1_000_003 + step, so keep it "
        "off those values.",
    )

    @field_validator("samples")
    @classmethod
    def _two_or_none(cls, samples: int) -> int:
        if samples == 1:
            raise ValueError("one sample a side has no standard error; give 0 (off) or at least 2")
        return samples


# A batch job's memory ("4GB", "500 MiB") and walltime ("HH:MM:SS", "MM:SS", SLURM's "D-HH:MM:SS").
_MEMORY = re.compile(r"^\d+(\.\d+)?\s*([KMGTP]i?B?)$", re.IGNORECASE)  # '2G' as sbatch --mem and Dask read it
_WALLTIME = re.compile(r"^(\d+-)?(\d+:)?\d+:\d{2}$")


def _walltime_fields(walltime: str) -> tuple[int | None, int | None, int, int]:
    """(days, hours, minutes, seconds) of a walltime that matched ``_WALLTIME``; None for a part left out."""
    days, _, clock = walltime.rpartition("-")
    *hours, minutes, seconds = (int(p) for p in clock.split(":"))
    return (int(days) if days else None), (hours[0] if hours else None), minutes, seconds

MAX_JOBS = 1_000
_DASK_SCHEMES = ("tcp", "tls", "ucx", "inproc", "ws", "wss")


class ClusterConfig(_Section):
    """Where the tier tasks run: this machine, a Dask cluster, or Dask workers started as batch jobs.

    ``kind = "slurm"`` or ``"pbs"`` starts Dask workers as jobs of that scheduler (dask-jobqueue), one worker
    per job, and scales them between ``min_jobs`` and ``max_jobs`` with the queue of tier calls. The job
    settings below are ignored for ``local`` and ``dask``.
    """

    # What users of the batch schedulers call these fields (an unknown field's error names ours).
    FIELD_SYNONYMS: ClassVar[dict[str, str]] = {
        "partition": "queue", "account": "job_extra", "qos": "job_extra", "mem": "memory", "time": "walltime",
        "ntasks": "cores", "cpus_per_task": "cores", "cpus": "cores", "n_workers": "max_jobs", "jobs": "max_jobs",
        "scheduler_address": "address",
    }

    kind: Literal["local", "dask", "slurm", "pbs"] = Field(
        default="local",
        description="'local': threads here (or a LocalCluster with task_runner = 'dask'); 'dask': the Dask "
        "scheduler at `address`; 'slurm' / 'pbs': Dask workers submitted as batch jobs (needs dask-jobqueue: "
        "pip install 'arl[dask]').",
    )
    address: str | None = Field(default=None, description="tcp://HOST:PORT of the Dask scheduler (kind = 'dask' only).")
    queue: str | None = Field(default=None, description="SLURM partition or PBS queue of the jobs; None: the scheduler's default.")
    cores: int = Field(default=1, ge=1, le=MAX_TIER_CONCURRENCY, description="CPU cores per job; the worker runs one task per core.")
    memory: str = Field(default="2GB", description="Memory per job, e.g. '4GB' or '500MiB'.")
    walltime: str = Field(
        default="01:00:00",
        description="Time limit per job ('HH:MM:SS', SLURM also 'D-HH:MM:SS'). A worker retires a few minutes "
        "before it, so its jobs are replaced instead of killed mid-call.",
    )
    min_jobs: int = Field(default=0, ge=0, le=MAX_JOBS, description="Jobs kept running while the run is idle (adaptive lower bound).")
    max_jobs: int = Field(default=4, ge=1, le=MAX_JOBS, description="Jobs at most at once (adaptive upper bound).")
    job_extra: list[str] = Field(
        default_factory=list,
        description="Extra directives for each job script, without the '#SBATCH' / '#PBS' prefix "
        "(e.g. ['--account=chem', '--qos=short'] for SLURM, ['-l nodes=1:ppn=1'] for PBS).",
    )
    python: str | None = Field(
        default=None,
        description="The Python on the compute nodes that has ARL installed; None: the one running `arl run` "
        "(sys.executable), right where the nodes share this machine's file system.",
    )

    @field_validator("memory")
    @classmethod
    def _memory_has_a_unit(cls, memory: str) -> str:
        match = _MEMORY.match(memory.strip())
        if not match:
            raise ValueError(f"{memory!r} is not an amount of memory; write a number and a unit, e.g. '4GB' or '500MiB'")
        if float(memory.strip()[: match.start(2)]) <= 0:
            raise ValueError(f"{memory!r}: a job needs some memory; give more than 0, e.g. '4GB'")
        return memory.strip()

    @field_validator("walltime")
    @classmethod
    def _walltime_is_a_duration(cls, walltime: str) -> str:
        if not _WALLTIME.match(walltime.strip()):
            raise ValueError(f"{walltime!r} is not a time limit; write 'HH:MM:SS' (or 'D-HH:MM:SS' for SLURM)")
        days, hours, minutes, seconds = _walltime_fields(walltime.strip())
        if seconds > 59 or (minutes > 59 and hours is not None):  # 'MM:SS' may count minutes past 59
            raise ValueError(f"{walltime!r}: minutes and seconds go up to 59; write e.g. '02:30:00'")
        if days is not None and hours is not None and hours > 23:
            raise ValueError(f"{walltime!r}: with days, hours go up to 23; write e.g. '1-12:00:00'")
        return walltime.strip()

    @field_validator("job_extra")
    @classmethod
    def _directives_without_prefix(cls, directives: list[str]) -> list[str]:
        for d in directives:
            if d.lstrip().startswith("#"):
                raise ValueError(f"{d!r}: give the directive without its '#SBATCH' / '#PBS' prefix (it is added)")
        return directives

    @field_validator("address")
    @classmethod
    def _a_scheduler_address(cls, address: str | None) -> str | None:
        if address is None:
            return None
        scheme, sep, _ = address.partition("://")
        if sep and scheme.lower() not in _DASK_SCHEMES:
            hint = " (http:// is the dashboard's; the scheduler listens on tcp://HOST:8786)" if scheme.lower().startswith("http") else ""
            raise ValueError(f"{address[:80]!r} is not a Dask scheduler address{hint}; give e.g. 'tcp://10.0.0.5:8786'")
        rest = address.partition("://")[2] if sep else address
        if (not sep or scheme.lower() in ("tcp", "tls")) and not re.fullmatch(r"[^\s/]+:\d{1,5}", rest):
            raise ValueError(f"{address[:80]!r} names no scheduler port; give HOST:PORT, e.g. 'tcp://10.0.0.5:8786'")
        return address

    @model_validator(mode="after")
    def _address_and_bounds_fit_the_kind(self) -> ClusterConfig:
        if self.kind == "dask" and not self.address:
            raise ValueError("address: kind = 'dask' needs the scheduler's address, e.g. 'tcp://10.0.0.5:8786'")
        if self.kind == "pbs" and "-" in self.walltime:
            raise ValueError(f"walltime: PBS takes 'HH:MM:SS' (hours may pass 24), not SLURM's days: {self.walltime!r}")
        if self.kind != "dask" and self.address:
            raise ValueError(f"address: only kind = 'dask' connects to an address; remove it, or set kind = 'dask' (kind is {self.kind!r})")
        if self.walltime_s < 60:
            raise ValueError(f"walltime: {self.walltime!r} is under a minute, too short to start a worker; give at least '00:01:00'")
        if self.min_jobs > self.max_jobs:
            raise ValueError(f"min_jobs ({self.min_jobs}) is above max_jobs ({self.max_jobs}); lower min_jobs or raise max_jobs")
        return self

    @property
    def walltime_s(self) -> int:
        """The walltime in seconds."""
        days, hours, minutes, seconds = _walltime_fields(self.walltime)
        return (days or 0) * 86_400 + (hours or 0) * 3_600 + minutes * 60 + seconds

    @property
    def node_python(self) -> str:
        """The interpreter the jobs start their worker with."""
        return self.python or sys.executable


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
        "service and the learner run at once, so expensive verification never blocks learning ([streaming]). "
        f"Unset: 'async' when the top tier declares a call latency (latency_s) above {ASYNC_FROM_LATENCY_S:g} s, "
        "else 'sync'.",
    )
    streaming: StreamingConfig = Field(default_factory=StreamingConfig)
    device: str = Field(default="cpu", description="Torch device of the policy ('cpu', 'cuda', 'cuda:0', 'mps', 'xpu:0').")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(default="float32", description="Policy weight dtype.")

    @field_validator("device")
    @classmethod
    def _device_is_torchs(cls, device: str) -> str:
        if not re.fullmatch(r"cpu|(cuda|xpu|mps)(:\d{1,3})?", device):
            raise ValueError(f"{device[:40]!r} is not a torch device; write 'cpu', 'cuda', 'cuda:N', 'mps' or 'xpu:N'")
        return device
    task_runner: Literal["threads", "dask", "ray"] = Field(
        default="threads",
        description="Where verifier tier tasks run: threads here, Dask (a LocalCluster, or [cluster]), or Ray. "
        "A [cluster] of kind 'dask', 'slurm' or 'pbs' implies 'dask'.",
    )
    dask_address: str | None = Field(
        default=None,
        description="Deprecated: write [cluster] kind = 'dask' with address = 'tcp://HOST:PORT' (it still means that).",
    )
    cluster: ClusterConfig = Field(default_factory=ClusterConfig, description="Where tier tasks run ([cluster]).")
    eval: EvalConfig = Field(
        default_factory=EvalConfig,
        description="The fixed evaluation set scored on the starting policy and the last checkpoint ([eval]).",
    )
    tier_concurrency: dict[str, int] = Field(
        default_factory=dict,
        description="Global Prefect concurrency limit per expensive verifier (Prefect limits named 'arl-tier-NAME'), "
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

    @property
    def suite_options(self) -> BaseModel:
        """The suite's validated options (its ``Options`` model; :func:`build_config` checks them when it reads a config)."""
        if self._suite_options is None:
            self._suite_options = get_suite(self.suite).Options.model_validate(self.options)
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
    def _reward_declared_once(self) -> RunConfig:
        """The scheduler computes the reward: [objective] and [scheduler] reward, if both given, are one reward."""
        if self.objective is not None and self.scheduler.reward not in (None, self.objective):
            raise ValueError("objective: declare the reward once, in [objective]; remove [scheduler.reward]")
        return self

    @model_validator(mode="after")
    def _cluster_runs_on_dask(self) -> RunConfig:
        """The old ``dask_address`` names the [cluster] address; a [cluster] beyond this machine runs on Dask."""
        if self.dask_address and (self.cluster.kind != "dask" or self.cluster.address != self.dask_address):
            raise ValueError(
                f"dask_address (--dask-address): the config's [cluster] is kind {self.cluster.kind!r}"
                + (f" at {self.cluster.address!r}" if self.cluster.address else "")
                + "; give the scheduler's address once, in [cluster] address with kind = 'dask', or --dask-address "
                "with no other [cluster]")
        if self.cluster.kind != "local" and self.task_runner != "dask":
            raise ValueError(f"task_runner: a [cluster] of kind {self.cluster.kind!r} runs on Dask; set task_runner = 'dask' or drop [cluster]")
        return self


def _resolve_aliases(data: dict[str, Any]) -> dict[str, Any]:
    """Raw config data with each field that another implies filled in (the model's checks then see one meaning).

    The old ``dask_address`` is [cluster] kind = 'dask' at that address; a [cluster] beyond this machine runs its
    tier tasks on Dask unless ``task_runner`` is given. Data whose shapes are wrong, or that says two different
    things, is left as it is for the model's checks to name.
    """
    data = dict(data)
    cluster = data.get("cluster", {})
    address = data.get("dask_address")
    if isinstance(address, str) and address and isinstance(cluster, dict) and cluster.get("kind", "local") in ("local", "dask") and cluster.get("address") in (None, address):
        data["cluster"] = cluster = cluster | {"kind": "dask", "address": address}
    if isinstance(cluster, dict) and cluster.get("kind", "local") != "local" and "task_runner" not in data:
        data["task_runner"] = "dask"
    return data


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
    try:
        legacy = {k.partition(".")[0] for k in get_suite(str(stored.get("suite", DEFAULT_SUITE))).legacy_fields}
    except SuiteNotFound:
        legacy = set()
    return {k: v for k, v in stored.items() if k in RunConfig.model_fields or k in legacy}


def profiles(suite: str) -> dict[str, Any]:
    """The profiles a run of ``suite`` may name: 'default' and the suite's own (e.g. the molecules suite's 'quick')."""
    return {"default": lambda c: c} | suite_profiles(get_suite(suite))


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
        synonym = getattr(model, "FIELD_SYNONYMS", {}).get(field.lower())
        if synonym:
            return f"unknown field; ARL calls it {synonym!r}"
        close = difflib.get_close_matches(field, list(model.model_fields), n=1, cutoff=0.6)
        if close:
            return f"unknown field; did you mean {close[0]!r}?"
    return f"unknown field; check the spelling ({listing})"


def _describe(exc: ValidationError, source: str) -> str:
    return describe_errors(exc, source, RunConfig, "`arl config show` prints every field")


def describe_errors(exc: ValidationError, source: str, model: type[BaseModel], listing: str) -> str:
    """One line for a model's validation errors (the first three): each field's path and what to fix.

    ``source`` leads the line (a config file, a tier); an unknown field names the closest declared one, else
    ``listing`` (where the fields are listed).
    """
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(p[:60] if isinstance(p, str) and p.isprintable() and " " not in p else repr(p)[:60] for p in map(_loc_part, err["loc"]))
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            path = list(err["loc"])
            msg = unknown_field_message(_model_at(model, path[:-1]), path[-1] if path else None, listing)
        elif err["type"] == "literal_error":
            msg = msg.replace("Input should be", "allowed values are")
        elif err["type"].endswith(("_parsing", "_type")) and isinstance(err.get("input"), (str, int, float, bool)):
            msg = f"{msg.replace('Input should be', 'should be')} (got {err['input']!r:.60})"
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
            raise ConfigError(
                f"config file {p} does not exist; start one from examples/molecules.toml (every field, commented) "
                "or leave out --config for the built-in config"
            )
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


def _with_suite_defaults(suite: type[Suite], data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` over the suite's defaults (over the sections' own), the suite's old top-level fields moved into options."""
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
    return _merge_over(RunConfig, _merge_over(RunConfig, _section_defaults(RunConfig), suite.defaults), data)


def _suite_options(suite: type[Suite], options: dict[str, Any]) -> BaseModel:
    """The suite's ``Options`` model of ``options``; a bad option is one ValueError line naming it."""
    try:
        return suite.Options.model_validate(options)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            path = list(err["loc"])
            msg = unknown_field_message(_model_at(suite.Options, path[:-1]), path[-1], f"`arl suites show {suite.name}` lists the options")
        else:
            msg = str(err["msg"]).removeprefix("Value error, ")
        raise ValueError(f"options.{loc}: {' '.join(msg.split())}" if loc else f"options: {msg}") from None


def pipeline_reason(config: RunConfig) -> str:
    """Why ``config`` runs in its pipeline mode, in words (the dry run's line): named, or the top tier's latency."""
    from arl_flows.suites import get_suite

    try:
        default, latency = _default_pipeline_and_latency(config, get_suite(config.suite))
    except Exception:  # noqa: BLE001 - a suite that does not load is reported elsewhere
        return "as configured"
    if config.pipeline != default:
        return "named in the config or by --pipeline"
    if latency is None:
        return f"default: the top tier declares no call latency; async above {ASYNC_FROM_LATENCY_S:g} s"
    return f"default: top-tier calls of about {latency:g} s; async above {ASYNC_FROM_LATENCY_S:g} s"


def _default_pipeline(config: RunConfig, suite: type[Suite]) -> Literal["sync", "async"]:
    return _default_pipeline_and_latency(config, suite)[0]


def _default_pipeline_and_latency(config: RunConfig, suite: type[Suite]) -> tuple[Literal["sync", "async"], float | None]:
    """The mode a config that names none runs in: async once a top-tier call waits longer than ASYNC_FROM_LATENCY_S.

    The wait is the top tier's declared ``latency_s``: a remote queue's, or a local tier's hint from the run's
    options (the molecules suite's DFT declares one in a space with a typical size: minutes at drug size). The
    params are the ones the ladder will be built with (the suite's ``verifier_params``). A tier that declares
    none, or a ladder that does not resolve (the ladder's own check reports it), keeps sync.
    """
    from verifiers import registry

    top = config.tiers[-1]
    try:
        cls = registry.get(top.verifier)
        params = cls.Params.model_validate(suite(config).verifier_params(cls, dict(top.params)))
    except Exception:  # noqa: BLE001 - reported where the ladder is built, in the user's words
        return "sync", None
    latency = getattr(params, "latency_s", None)
    if not isinstance(latency, int | float):
        return "sync", None
    return ("async" if latency > ASYNC_FROM_LATENCY_S else "sync"), float(latency)


def build_config(data: Mapping[str, Any], source: str = "config") -> RunConfig:
    """The run config of TOML-shaped ``data``: the suite it names fills in what it leaves out, then all is checked.

    Raises ConfigError with one line, prefixed by ``source``, naming the field to fix.
    """
    name = data.get("suite", DEFAULT_SUITE)
    chosen = "pipeline" in data  # a pipeline the user names always wins
    suite: type[Suite] | None = None
    if isinstance(name, str):  # any other type: the field's own check names the problem
        try:
            suite = get_suite(name)
        except SuiteNotFound as exc:
            raise ConfigError(f"{source}: suite: {' '.join(str(exc).split())}") from None
        chosen = chosen or "pipeline" in suite.defaults
        data = _with_suite_defaults(suite, data)
    try:
        config = RunConfig.model_validate(_resolve_aliases(data))
    except ValidationError as exc:
        raise ConfigError(_describe(exc, source)) from None
    assert suite is not None  # a suite that is not a string failed the model's check
    if config.objective is not None and config.scheduler.reward is None:  # the scheduler computes the reward
        config.scheduler = config.scheduler.model_copy(update={"reward": config.objective})
    try:
        config._suite_options = _suite_options(suite, config.options)
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    if not chosen:
        config.pipeline = _default_pipeline(config, suite)
    if suite.needs_policy_path and not config.policy_path:
        raise ConfigError(
            f"{source}: policy_path: the {suite.name} suite ships no policy; give a local transformers model directory to train"
        )
    if config.scheduler.reward is None and config.scheduler.target_low is None:
        # The core has no default reward: the suite's defaults or the config name one.
        raise ConfigError(
            f"{source}: objective: the suite {config.suite!r} declares no reward; give [objective] or the "
            "window [scheduler] target_low and target_high"
        )
    return config


def standalone_suite(name: str, options: Mapping[str, Any] | None = None) -> Suite:
    """The suite ``name`` outside a training run (``arl verify``, ``arl rerank``): its defaults and ``options``, no policy of ARL's.

    Raises SuiteNotFound for an unknown name, ConfigError when the suite's defaults or the options do not validate.
    """
    cls = get_suite(name)
    data: dict[str, Any] = {"suite": name, "options": dict(options or {})}
    if cls.needs_policy_path:
        data["policy_path"] = "(owned by the caller)"
    return cls(build_config(data, f"suite {name!r}'s defaults"))


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
    config = build_config(data, source)
    allowed = profiles(config.suite)
    if profile not in allowed:
        raise ConfigError(f"unknown profile {profile!r} for suite {config.suite!r}; allowed: {', '.join(allowed)}")
    before = config.pipeline
    config = allowed[profile](config)
    set_by_profile = config.pipeline != before
    if overrides and profile != "default":
        config = build_config(config.model_dump() | overrides, source)
    suite = get_suite(config.suite)
    if profile != "default" and not ("pipeline" in data or "pipeline" in suite.defaults or set_by_profile):
        # The default mode follows the top tier, which a profile may change (the quick profile drops DFT).
        config.pipeline = _default_pipeline(config, suite)
    return config
