"""The reward function over ARL's tiers that the adapters for other trainers and for inference share.

:class:`TieredReward` is a reward function of the shape TRL's ``GRPOTrainer``
calls (``reward(prompts, completions, **kwargs) -> list[float]``) around the
same pieces an ARL run uses, called rather than copied:

- the suite (:mod:`arl_flows.suites`) turns each completion and its goal into
  a candidate, and verdicts into its reward (its own, when it has one);
- the ladder comes from :func:`arl_flows.ladder.build_ladder`, so native
  tiers run in their worker processes with their timeouts, as in a flow;
- :func:`arl_flows.step.verify_candidates` routes the batch through the
  tiers with the scheduler under ``budget_per_call``, reads cached verdicts
  from the ledger first (never paying twice for one), and writes each tier
  batch's verdicts with their bill in one transaction;
- the ledger holds the calls as a run of their own: one step per call, with
  prompts, trajectories, reward estimates, spend and step metrics, so
  ``arl runs list/show`` and ``arl report`` show it like any run.

The reward is the scheduler's posterior mean (or the suite's own reward); the posterior std, the tier each completion reached, its spend
and whether its verdicts came from the cache are in ``last_details``, and
are handed to TRL's logging hooks (``log_metric``/``log_extra``) when the
trainer passes them.

Time: a call never starts a tier batch after ``max_wait_s`` wall seconds
(default: ``budget_per_call``); the rewards then come from the verdicts in
hand. :meth:`TieredReward.ascore` runs the call in a worker thread so an
event loop is never blocked; ``reward.as_async()`` is the async form TRL
runs on its own loop.

Best-of-N (:mod:`arl_flows.best_of_n`) and verl's reward shapes
(:mod:`arl_flows.verl`) call it; :mod:`arl_flows.integrations` is where users
import all three from.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from arl_flows.config import RunConfig, TierConfig, build_config, describe_errors
from arl_flows.suites import Calibration, Prior, Suite, SuiteNotFound, get_suite, suite_for
from arl_flows.suites.capabilities import goal_columns
from arl_flows.step import TierRunner, verify_candidates, verify_inline
from arl_flows.ladder import build_ladder, check_new_config, ladder_verdicts
from arl_flows.recording import Completion, record_batch, teach_from_ledger
from storage.ledger import Ledger, LedgerError, sqlite_file
from storage.records import RunStatus, Status, TrainingStepRecord
from verifiers import Closable
from verifiers.scheduler import Scheduler, VoiTarget, charge_one, spend_records

__all__ = ["CallSummary", "RewardDetail", "TieredReward", "Window", "verification_config"]

class Window(BaseModel):
    """An objective: a window on the top tier's value (in that tier's unit).

    The core has no default window: ``low`` and ``high`` are in the top tier's unit, which only the suite
    knows (the molecules suite's default is ``Window(low=3.0, high=4.0)``, a HOMO-LUMO gap in eV). To use a
    suite's own window, pass no objective at all. ``softness`` None: the suite's ``window_softness``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    low: float = Field(description="Lower edge of the target window, in the top tier's unit.")
    high: float = Field(description="Upper edge of the target window, in the top tier's unit.")
    softness: float | None = Field(
        default=None, ge=0.0, allow_inf_nan=False,
        description="Gaussian fall-off outside the window; 0 gives a hard 0/1 reward; None: the suite's window_softness.",
    )

    def __init__(self, **data: Any) -> None:
        _require_edges(data)
        try:
            super().__init__(**data)
        except ValidationError as exc:  # one line, without pydantic's type tags and links
            raise ValueError(describe_errors(exc, "Window", Window, "its fields are low, high and softness")) from None

    @model_validator(mode="before")
    @classmethod
    def _edges(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            _require_edges(data)
        return data

    @model_validator(mode="after")
    def _ordered(self) -> Window:
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low < self.high):
            raise ValueError(f"window ({self.low}, {self.high}) needs finite low < high, e.g. Window(low=3.0, high=4.0)")
        return self


def _require_edges(data: Mapping[str, Any]) -> None:
    missing = [k for k in ("low", "high") if k not in data]
    if missing:
        raise ValueError(
            f"Window needs {' and '.join(missing)}: the window's edges in the top tier's unit (the core has no default); "
            "pass no objective to use the suite's window"
        )


_UNPARSED = "the suite's validity rules refused the completion (no tier did)"


@dataclass
class RewardDetail:
    """What the verification layer knows about one completion after a call."""

    completion: str
    candidate_key: str
    reward: float  # posterior mean reward (what the trainer gets)
    std: float  # posterior std of the reward
    tier: str | None  # highest tier with an ok verdict (None: no tier could give a value)
    status: str  # 'ok', 'invalid' (a real 0), or 'unverified' (no ok verdict: could not verify)
    value_mean: float | None  # posterior mean of the top tier's value, when the scheduler estimates one
    value_std: float | None
    cached: int  # verdicts reused from the ledger (paid for before this call)
    new: int  # verdicts computed in this call
    spend_s: float  # CPU-seconds this call charged for this completion's candidate
    # Why an 'invalid' completion is, in words: the cheapest refusing tier's feedback ("rdkit-eht: 11 heavy atoms, ..."), or
    # that the suite could not parse it. None for 'ok' and 'unverified'.
    reason: str | None = None


@dataclass
class CallSummary:
    """One call of a :class:`TieredReward`: its step in the ledger run, spend and cache use."""

    step: int
    completions: int
    spend_s: float
    calls: dict[str, int]
    cache_hits: int  # completions whose verdicts all came from the ledger
    seconds: float
    stopped_by_deadline: bool


def _tier_configs(tiers: Sequence[str | Mapping[str, Any] | TierConfig | tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    if isinstance(tiers, (str, bytes)) or not isinstance(tiers, Sequence):
        raise ValueError(f"tiers is a list of rungs, cheapest first, e.g. tiers=['rdkit-eht', 'gfn2-xtb', 'pyscf-b3lyp']; "
                         f"got {tiers!r:.80}")
    out = []
    for i, t in enumerate(tiers):
        if isinstance(t, TierConfig):
            out.append(t.model_dump())
        elif isinstance(t, str):
            out.append({"verifier": t})
        elif isinstance(t, tuple) and len(t) == 2 and isinstance(t[0], str) and isinstance(t[1], Mapping):
            out.append({"verifier": t[0], "params": dict(t[1])})
        elif isinstance(t, Mapping):
            out.append(dict(t))
        else:
            raise ValueError(f"tiers[{i}] is {t!r:.80}; write a rung as a verifier name, (name, params) or "
                             "{'verifier': name, 'params': {...}}")
    return out


def verification_config(
    suite: str | None,
    *,
    objective: Window | tuple[float, float] | None = None,
    tiers: Sequence[Any] | None = None,
    budget_per_call: float = 60.0,
    budget_total: float = math.inf,
    policy: str = "voi",
    routing: VoiTarget | str = VoiTarget.advantage,
    name: str | None = None,
    options: Mapping[str, Any] | None = None,
    seed: int = 0,
) -> RunConfig:
    """The run config of a verification-only run (no policy is trained or loaded by ARL).

    The suite's defaults give the ladder and the objective; ``objective`` (a window on the top
    tier's value) replaces the suite's window; ``options`` are the suite's ``[options]`` (the
    molecules suite's ``space``).
    """
    suite = suite or str(RunConfig.model_fields["suite"].default)
    try:
        cls = get_suite(suite)
    except SuiteNotFound as exc:
        raise ValueError(str(exc)) from None
    if options is not None and not isinstance(options, Mapping):
        raise TypeError(f"options are the suite's [options] as a mapping, e.g. options={{'space': 'druglike'}}; "
                        f"got {options!r:.80}")
    data: dict[str, Any] = {"name": name or f"tiered-reward-{cls.name}", "suite": suite, "seed": seed, "options": dict(options or {})}
    if tiers is not None:
        data["tiers"] = _tier_configs(tiers)
    scheduler = dict(cls.defaults.get("scheduler", {})) | {
        "policy": policy,
        "voi_target": _routing(routing),
        "budget_per_step": budget_per_call,
        "budget_per_run": budget_total,
        "seed": seed,
    }
    if objective is not None:
        window = objective if isinstance(objective, Window) else _window_of(objective)
        softness = window.softness if window.softness is not None else scheduler.get("window_softness")
        scheduler |= {"target_low": window.low, "target_high": window.high}
        if softness is not None:  # None: neither the window nor the suite gives one, the core's hard window
            scheduler["window_softness"] = softness
    if cls.needs_policy_path:
        # The run check asks for a policy to train; here the trainer owns the policy.
        data["policy_path"] = "(owned by the calling trainer)"
    data["scheduler"] = scheduler
    return build_config(data, f"the {suite} suite's verification config")


def _routing(routing: Any) -> str:
    try:
        return VoiTarget(routing).value
    except ValueError:
        raise ValueError(f"routing {routing!r:.40} is not one of {', '.join(t.value for t in VoiTarget)}") from None


def _window_of(objective: Any) -> Window:
    """A ``(low, high)`` pair as a :class:`Window` (the suite's softness), or one line saying what to pass."""
    if isinstance(objective, Window):
        return objective
    if isinstance(objective, (str, bytes, Mapping)):  # a dict unpacks to its keys: "low: should be a valid number"
        raise ValueError(f"objective must be a Window or a (low, high) pair, got {objective!r:.80}; e.g. "
                         "objective=(3.0, 4.0) or Window(low=3.0, high=4.0)")
    try:
        low, high = objective
    except (TypeError, ValueError):
        raise ValueError(f"objective must be a Window or a (low, high) pair, got {objective!r:.80}") from None
    return Window(low=low, high=high)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _text(message: Any) -> str:
    """A TRL prompt or completion as text: a string, or the content of a conversation's messages.

    A lone surrogate (no UTF-8 encoding, so no ledger can store it) becomes U+FFFD: that one
    completion is then verified as written with a replacement character, and the batch goes on.
    """
    if isinstance(message, str):
        text = message
    elif isinstance(message, Mapping):  # a chat message; its content may be text or a list of content parts
        content = message.get("content")
        if content is None:
            text = ""
        elif isinstance(content, str):
            text = content
        elif isinstance(content, Sequence) and not isinstance(content, (bytes, bytearray)):
            text = "".join(str(part.get("text") or "") if isinstance(part, Mapping) else _text(part) for part in content)
        else:
            raise TypeError(f"a chat message's content is text or a list of parts, got {type(content).__name__}")
    elif isinstance(message, Sequence) and not isinstance(message, (bytes, bytearray)):
        text = "".join(_text(m) for m in message)
    else:
        raise TypeError(f"a prompt or completion is text or a list of chat messages, got {type(message).__name__} "
                        f"{message!r:.40}")
    return _LONE_SURROGATE.sub("\ufffd", text)


def _is_count(value: Any) -> bool:
    """A whole number >= 1 (not a bool, a float or a numeric string)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _check_settings(budget_per_call: Any, max_wait_s: Any, max_batch: Any, group_size: Any, ledger_url: Any) -> None:
    """A TieredReward's own settings, checked when it is made (a bad one used to fail each call after its rows were
    written to the ledger)."""
    if not _is_count(max_batch):
        raise ValueError(f"max_batch is the most candidates a tier batch holds: a whole number >= 1, got {max_batch!r:.60}")
    if group_size is not None and not _is_count(group_size):
        raise ValueError(f"group_size must be a whole number >= 1 (TRL's num_generations), got {group_size!r:.60}")
    if max_wait_s is not None and not (isinstance(max_wait_s, (int, float)) and not isinstance(max_wait_s, bool)
                                       and max_wait_s >= 0):  # NaN fails this too
        raise ValueError(f"max_wait_s is the seconds a call may start tier batches for (0: none, the prior answers; "
                         f"math.inf: no limit): a number >= 0, "
                         f"got {max_wait_s!r:.60}")
    if max_wait_s is None and isinstance(budget_per_call, (int, float)) and math.isinf(budget_per_call):
        raise ValueError("budget_per_call is unbounded, so a call would have no time limit; give max_wait_s (seconds, "
                         "or math.inf to mean it)")
    if isinstance(ledger_url, str):
        try:
            sqlite_file(ledger_url)  # an in-memory ledger is lost at exit and unseen by ascore's thread
        except LedgerError as exc:
            raise ValueError(f"ledger_url: {exc}") from None


class TieredReward:
    """A reward function that verifies completions through ARL's tiers, under a budget, into the ledger.

    ``suite``: a suite name (``arl suites list``; default: a run config's default); completions are what its
    policy writes, and the goal of each comes from ``goal`` (one mapping for
    every completion) and the suite's goal columns passed per completion, as
    TRL passes dataset columns (the code suite's ``task_id``).
    ``objective``: a :class:`Window` or ``(low, high)`` on the top tier's value
    (default: the suite's objective). ``budget_per_call``:
    CPU-seconds one call may spend across tiers. ``ledger_url``: the
    SQLAlchemy URL of the ledger (default: ``ARL_DATABASE_URL`` or
    ``$ARL_HOME/ledger.db``, ``~/.arl/ledger.db``). ``tiers``: the ladder, cheapest first (names,
    ``(name, params)`` pairs or ``{"verifier": ..., "params": ...}``; default:
    the suite's). ``policy``/``routing``: the scheduler's escalation policy
    and what ``voi`` maximises ('advantage' for training, 'discovery' for
    finding hits). ``max_wait_s``: wall seconds after which a call starts no
    new tier batch (default: ``budget_per_call``). ``group_size``: TRL's
    ``num_generations``, so that each run of that many completions is one
    GRPO group for the scheduler (default: completions of the same prompt
    text form one group). ``history``: teach the scheduler's surrogate from
    the ledger's paired verdicts first. ``options``: the suite's ``[options]``
    (the molecules suite's chemistry ``space``). ``config``: a whole run config instead (its suite, ladder,
    objective and scheduler, as a training run reads them; ``arl_flows.eval_set`` scores a run's evaluation set
    with the run's own), which the suite, objective, tier, budget, policy, routing, name, options and seed
    arguments then do not change.
    """

    def __init__(
        self,
        suite: str | None = None,
        objective: Window | tuple[float, float] | None = None,
        budget_per_call: float = 60.0,
        ledger_url: str | None = None,
        *,
        tiers: Sequence[Any] | None = None,
        budget_total: float = math.inf,
        policy: str = "voi",
        routing: VoiTarget | str = VoiTarget.advantage,
        max_wait_s: float | None = None,
        max_batch: int = 8,
        group_size: int | None = None,
        run_name: str | None = None,
        history: bool = True,
        seed: int = 0,
        ledger: Ledger | None = None,
        goal: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
        config: RunConfig | None = None,
    ) -> None:
        self.config = config if config is not None else verification_config(
            suite, objective=objective, tiers=tiers, budget_per_call=budget_per_call, budget_total=budget_total,
            policy=policy, routing=routing, name=run_name, seed=seed, options=options,
        )
        _check_settings(budget_per_call, max_wait_s, max_batch, group_size, ledger_url if ledger is None else None)
        if goal is not None and not isinstance(goal, Mapping):
            raise ValueError(f"goal is one mapping for every completion, e.g. goal={{'window': [3, 4]}}; got {goal!r:.80}")
        self.goal: dict[str, Any] = dict(goal or {})
        sched = self.config.scheduler
        self.window = None if sched.target_low is None else Window(  # None: the suite's reward is an objective
            low=sched.target_low, high=sched.target_high, softness=sched.window_softness,
        )
        self.budget_per_call = float(budget_per_call)
        self.max_wait_s = float(max_wait_s) if max_wait_s is not None else self.budget_per_call
        self.max_batch = max_batch
        self.group_size = group_size
        self.suite: Suite = suite_for(self.config)
        check_new_config(self.config)  # before the ledger opens: nothing to close on a bad config
        self.ledger = ledger if ledger is not None else Ledger(ledger_url)
        self.ladder = build_ladder(self.config)
        self.ledger.record_tiers([v.spec() for v in self.ladder])
        self.scheduler = Scheduler(
            self.ladder, self.config.scheduler, featurize=self.suite.featurize,
            learner=self.suite.surrogate_learner if isinstance(self.suite, Prior) else None,
        )
        if history:
            teach_from_ledger(self.scheduler, self.ledger, self.suite)
        self.run_id: str | None = None
        self.step = 0
        self.last_details: list[RewardDetail] = []
        self.last_call: CallSummary | None = None
        self._lock = threading.Lock()
        self._closed = False
        self.__name__ = f"arl_{self.suite.name}"  # TRL names a reward function's metrics after it

    # ------------------------------------------------------------------ the trainer-facing forms
    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        """TRL's reward-function shape: one float per completion (the posterior mean reward)."""
        details = self.score(prompts, completions, **kwargs)
        self._log_to_trainer(details, kwargs)
        return [d.reward for d in details]

    async def ascore(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[RewardDetail]:
        """:meth:`score` in a worker thread (the event loop stays free), bounded by ``max_wait_s``."""
        deadline = time.monotonic() + self.max_wait_s
        return await asyncio.to_thread(self.score, prompts, completions, deadline=deadline, **kwargs)

    def as_async(self) -> _AsyncReward:
        """The same reward as an ``async`` callable (TRL runs async reward functions on its own loop)."""
        return _AsyncReward(self)

    # ------------------------------------------------------------------ the work
    def score(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        *,
        goal: Sequence[Mapping[str, Any]] | None = None,
        completion_ids: Sequence[Sequence[int]] | None = None,
        deadline: float | None = None,
        run_tier: TierRunner | None = None,
        **columns: Any,
    ) -> list[RewardDetail]:
        """Verify one batch; return one :class:`RewardDetail` per completion (also kept in ``last_details``).

        ``run_tier`` runs one verifier on one batch (default: in this process,
        through the verifier's own isolation); :mod:`arl_flows.reward_flows`
        passes Prefect tasks here. ``goal``: one goal per completion (merged over the reward's own);
        the suite's goal columns (``capabilities.GoalColumns``) may come as keyword arrays instead.
        """
        self._check_open()
        for name, batch in (("prompts", prompts), ("completions", completions)):
            if isinstance(batch, (str, bytes, Mapping)) or not isinstance(batch, Sequence):
                raise TypeError(f"{name} must be a list with one entry per completion, got {type(batch).__name__}")
        if deadline is not None and not (isinstance(deadline, (int, float)) and not isinstance(deadline, bool)):
            raise TypeError(f"deadline is a time.monotonic() value in seconds, got {deadline!r:.60}")
        if len(prompts) != len(completions):
            raise ValueError(f"got {len(prompts)} prompts and {len(completions)} completions; pass one prompt per completion")
        if completion_ids is not None and len(completion_ids) != len(completions):
            raise ValueError(f"got {len(completion_ids)} completion_ids for {len(completions)} completions; "
                             "pass one list of token ids per completion, or none")
        goals = self._goals(len(completions), goal, columns)
        prompt_texts = [_text(p) for p in prompts]
        texts = [_text(c) for c in completions]  # before the ledger run: a completion that is not text writes nothing
        built = [self.suite.external_prompt(text, g) for text, g in zip(prompt_texts, goals)]
        with self._lock:
            t0 = time.monotonic()
            if deadline is None:
                deadline = t0 + self.max_wait_s
            run_id = self._ensure_run()
            step = self.step
            group_of: dict[str, int] = {}
            rows = []
            for i, (prompt, text) in enumerate(zip(built, texts)):
                group = i // self.group_size if self.group_size else group_of.setdefault(prompt.id, len(group_of))
                n_tokens = len(completion_ids[i]) if completion_ids is not None else len(text) // 4  # about 4 characters a token
                rows.append(Completion(prompt=prompt, group=group, text=text, completion_tokens=n_tokens))
            trajectories, candidates = record_batch(self.ledger, self.suite, run_id, step, rows)
            result = verify_candidates(
                self.ledger, self.scheduler, self.suite, run_id, step, trajectories, candidates,
                run_tier=run_tier, max_batch=self.max_batch, deadline=deadline,
            )
            stopped = time.monotonic() >= deadline
            new_keys = {v.cache_key for v in result.verdicts}
            spend_by_key: dict[str, float] = {}
            cand_of = {c.key: c for c in candidates}
            for v in result.verdicts:
                cost = charge_one(self.scheduler.verifier(v.verifier), cand_of[v.candidate_key], v)
                spend_by_key[v.candidate_key] = spend_by_key.get(v.candidate_key, 0.0) + cost
            statuses: dict[str, set[Status]] = {}
            rank = {v.name: i for i, v in enumerate(self.ladder)}
            refusals: dict[str, list[tuple[int, str]]] = {}
            for v in ladder_verdicts(self.ledger, {c.key for c in candidates}, self.ladder):
                statuses.setdefault(v.candidate_key, set()).add(v.status)
                if v.status == Status.invalid:
                    refusals.setdefault(v.candidate_key, []).append((rank.get(v.verifier, len(rank)), f"{v.verifier}: {v.feedback or 'invalid'}"))
            details = []
            for traj, cand, est in zip(trajectories, candidates, result.estimates, strict=True):
                used = result.verdicts_used.get(traj.id, [])
                new = sum(1 for k in used if k in new_keys)
                invalid = Status.invalid in statuses.get(cand.key, set()) or not cand.valid
                details.append(
                    RewardDetail(
                        completion=traj.final_answer,
                        candidate_key=cand.key,
                        reward=float(est.mean),
                        std=float(est.std),
                        tier=est.fidelity.value if est.fidelity else None,
                        status="invalid" if invalid else ("ok" if est.fidelity else "unverified"),
                        value_mean=est.value_mean,
                        value_std=est.value_std,
                        cached=len(used) - new,
                        new=new,
                        spend_s=spend_by_key.get(cand.key, 0.0),
                        reason=(min(refusals[cand.key])[1] if cand.key in refusals else _UNPARSED) if invalid else None,
                    )
                )
            rewards = [d.reward for d in details]
            seconds = time.monotonic() - t0
            hits = sum(1 for d in details if d.cached and not d.new)
            metrics = {
                "reward/mean": sum(rewards) / max(len(rewards), 1),
                "reward/max": max(rewards, default=math.nan),
                "reward/std_mean": sum(d.std for d in details) / max(len(details), 1),
                "reward/validity": sum(1 for d in details if d.status != "invalid") / max(len(details), 1),
                "reward/unique": len({c.key for c in candidates}) / max(len(candidates), 1),
                "verify/spend": result.total_spend,
                "verify/cache_hits": float(hits),
                "verify/stopped_by_deadline": float(stopped),
                "step/seconds": seconds,
            }
            self.ledger.record_step(TrainingStepRecord(run_id=run_id, step=step, metrics=_finite(metrics)))
            self.step += 1
            self.last_details = details
            self.last_call = CallSummary(
                step=step, completions=len(details), spend_s=result.total_spend, calls=dict(result.calls),
                cache_hits=hits, seconds=seconds, stopped_by_deadline=stopped,
            )
            return details

    def warm_start(self, n: int = 200, *, seed: int = 12345, exclude: Sequence[str] = ()) -> float:
        """Calibrate the scheduler on ``n`` of the suite's calibration candidates verified on every tier; returns the spend.

        With an empty ledger the surrogate knows nothing about how the lower
        tiers relate to the top one, so ``voi`` sees no escalation worth its
        cost. This verifies a random draw from ``capabilities.Calibration``
        (the molecules suite: its shipped QM9 subset; keys in ``exclude`` left
        out) on each tier, skipping verdicts the ledger already has, and writes
        them with their bill as one step of this reward's run: a later
        TieredReward on the same ledger learns from them for free (``history=True``).
        """
        if not _is_count(n):
            raise ValueError(f"warm_start's n is how many calibration candidates to verify: a whole number >= 1, got {n!r:.40}")
        offered = self.suite.calibration_candidates() if isinstance(self.suite, Calibration) else []
        pool = [c for c in offered if c.key not in set(exclude)]
        if not pool:
            raise ValueError(f"the {self.suite.name} suite offers no calibration candidates, so warm_start has nothing to verify")
        with self._lock:
            run_id = self._ensure_run()
            step = self.step
            picks = random.Random(seed).sample(pool, min(n, len(pool)))
            values: dict[str, dict[str, float]] = {c.key: {} for c in picks}
            spent = 0.0
            for verifier in self.ladder:
                known = {v.candidate_key: v for v in self.ledger.verdicts_for([c.key for c in picks], verifiers=[verifier.name])
                         if (v.version, v.params_hash) == (verifier.version, verifier.params_hash)}
                todo = [c for c in picks if c.key not in known]
                for i in range(0, len(todo), self.max_batch):
                    batch = todo[i : i + self.max_batch]
                    fresh = verify_inline(verifier, batch)
                    spend = spend_records(run_id, step, verifier, batch, fresh)
                    spent += sum(r.cost_s for r in spend)
                    for v in self.ledger.put_verdicts(fresh, spend=spend):
                        known[v.candidate_key] = v
                for key, v in known.items():
                    if key in values and v.status == Status.ok and v.value is not None:
                        values[key][verifier.name] = float(v.value)
            top = self.ladder[-1].name
            self.scheduler.add_history(
                [self.scheduler.observation(c, values[c.key]) for c in picks if top in values[c.key]]
            )
            metrics = {"calibration/candidates": float(len(picks)), "verify/spend": spent}
            self.ledger.record_step(TrainingStepRecord(run_id=run_id, step=step, metrics=metrics))
            self.step += 1
            return spent

    def _goals(self, n: int, goal: Sequence[Mapping[str, Any]] | None, columns: Mapping[str, Any]) -> list[dict[str, Any]]:
        """One goal per completion: the reward's own, then ``goal[i]``, then the suite's goal columns."""
        if goal is not None and (isinstance(goal, (str, Mapping)) or not isinstance(goal, Sequence)
                                 or not all(isinstance(g, Mapping) for g in goal)):
            raise ValueError("goal is a list with one mapping per completion (for one goal for every call, pass "
                             f"TieredReward(goal=...)); got {goal!r:.80}")
        if goal is not None and len(goal) != n:
            raise ValueError(f"goal has {len(goal)} entries for {n} completions; pass one per completion")
        goals = [self.goal | dict(goal[i] if goal is not None else {}) for i in range(n)]
        for name in goal_columns(self.suite):
            values = columns.get(name)
            if values is None:
                continue
            if isinstance(values, str) or len(values) != n:
                raise ValueError(f"{name} needs one entry per completion ({n}), a dataset column in TRL")
            for g, value in zip(goals, values):
                g[name] = value
        return goals

    def _ensure_run(self) -> str:
        if self.run_id is None:
            config = self.config.model_dump(mode="json") | {"steps": None, "source": "TieredReward"}
            self.run_id = self.ledger.create_run(self.config.name, config).id
        return self.run_id

    def _log_to_trainer(self, details: list[RewardDetail], kwargs: Mapping[str, Any]) -> None:
        """TRL (>= 0.2x) passes ``log_metric(name, value)`` and ``log_extra(column, values)`` to reward functions."""
        log_metric, log_extra = kwargs.get("log_metric"), kwargs.get("log_extra")
        top = self.ladder[-1].tier.value
        if callable(log_metric) and details and self.last_call is not None:
            log_metric("arl/reward_std", sum(d.std for d in details) / len(details))
            log_metric("arl/spend_s", self.last_call.spend_s)
            log_metric("arl/cache_hits", float(self.last_call.cache_hits))
            log_metric("arl/top_tier_share", sum(1 for d in details if d.tier == top) / len(details))
        if callable(log_extra) and details:
            log_extra("arl_tier", [d.tier or d.status for d in details])
            log_extra("arl_std", [round(d.std, 4) for d in details])

    # ------------------------------------------------------------------ end
    def close(self) -> None:
        """Mark the ledger run completed and stop the ladder's worker processes."""
        with self._lock:
            if self.run_id is not None and not self._closed:
                self.ledger.set_run_status(self.run_id, RunStatus.completed)
            self._closed = True
            for v in self.ladder:
                if isinstance(v, Closable):
                    v.close()

    def __enter__(self) -> TieredReward:
        self._check_open()
        return self

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this TieredReward is closed (its ledger run is marked completed); create a new one")

    def __exit__(self, *exc: object) -> None:
        self.close()


class _AsyncReward:
    """``async`` form of a :class:`TieredReward` (TRL detects it by its ``async __call__``)."""

    def __init__(self, reward: TieredReward) -> None:
        self.reward = reward
        self.__name__ = reward.__name__

    async def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        details = await self.reward.ascore(prompts, completions, **kwargs)
        self.reward._log_to_trainer(details, kwargs)
        return [d.reward for d in details]


def _finite(metrics: dict[str, float]) -> dict[str, float | None]:
    return {k: (v if math.isfinite(v) else None) for k, v in metrics.items()}
