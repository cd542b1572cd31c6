"""A minimal suite for the core's tests: words of lowercase letters, a cheap tier and a "costly" one.

The flows, the step, the scheduler and the ledger need *a* suite, not chemistry: this one has no data,
no native code and no shipped policy, so a core test that uses it fails only for the core's reasons.

- Prompts: "write a word with LOW to HIGH vowels", one per step and prompt slot.
- Candidates: the completion with spaces removed; valid when it is 1 to 24 lowercase ASCII letters;
  keyed ``toy:<word>`` (an invalid text: ``toy:invalid:<hash>``); the same word is one candidate for every
  prompt (goals do not change a verdict), and a key gives its candidate back (``history_candidate``, which a
  resumed run needs to continue the calls it left in flight).
- Ladder: ``toy-length`` (fast: the word's length, a cheap feature correlated with the top value) and
  ``toy-vowels`` (high fidelity: the number of vowels, charged ``cost_per_call`` CPU-seconds as an expensive
  simulation would be, though it computes in microseconds); ``toy-lab-vowels`` is the same count on the lab tier
  (a lab-tier tier that computes its answer, as a reference table of measurements does).
- Slow tops for the pipeline's tests: ``toy-cluster`` (the vowels as a *remote* queue answers them: each call
  waits ``latency_s`` of wall time on one of ``slots`` at once, no CPU spent; the core's
  :class:`verifiers.SimulatedQueue`, as ``simulated-cluster``'s) and ``toy-counting`` (the vowels *computed here*
  for ``seconds_per_call``, one ``start``/``done`` line per call in ``$ARL_COUNT_LOG`` through
  :mod:`benchmarks.call_log`, the crash harness's logger, which imports no suite, so a test counts what was paid
  for; :func:`read_calls` reads it).
- Hindsight: a failed word is relabelled with the one-vowel window its top-tier count falls in.
- Policy: a one-layer GPT-2 with one token per letter, freshly initialised from ``seed`` (nothing to
  download or pretrain), or ``policy_path``.

Runs name it by reference, ``suite = "tests.helpers.toy_suite:ToySuite"``, and its ladder names its tiers
by reference too (:func:`toy_overrides` gives a run config's fields).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from arl_flows.suites import Failure, Suite
from benchmarks.call_log import COUNT_LOG_ENV, counted_call
from benchmarks.call_log import read_count_log as read_calls
from storage.records import Prompt, Status, Tier, Turn, Verdict
from verifiers import Candidate, CostModel, Verifier, register_verifier
from verifiers.simulated_queue import QueueLatency, QueueSlots, SimulatedQueue, SimulatedQueueParams

if TYPE_CHECKING:
    from policies import Policy, PolicyConfig, RelabeledExample

__all__ = ["COUNT_LOG_ENV", "REFERENCE", "ToyCluster", "ToyCounting", "ToyLabVowels", "ToyLength", "ToyOptions", "ToySuite", "ToyVowels", "make_candidate",
           "read_calls", "toy_overrides"]

SUITE = "toy"
REFERENCE = "tests.helpers.toy_suite:ToySuite"
LETTERS = "abcdefghijklmnopqrstuvwxyz"
VOWELS = frozenset("aeiou")
MAX_LETTERS = 24


def _is_word(text: str) -> bool:
    return 0 < len(text) <= MAX_LETTERS and all(ch in LETTERS for ch in text)


def make_candidate(text: str, goal: dict[str, Any] | None = None) -> Candidate:
    """The candidate a completion proposes: the word without spaces, valid if it is 1-24 lowercase letters."""
    word = "".join(str(text).split())
    valid = _is_word(word)
    key = f"{SUITE}:{word}" if valid else f"{SUITE}:invalid:{hashlib.sha256(word.encode('utf-8', 'surrogatepass')).hexdigest()[:32]}"
    return Candidate(key=key, suite=SUITE, payload=word, goal=dict(goal or {}), valid=valid,
                     size=min(len(word), 10 * MAX_LETTERS))


def _reason(word: str) -> str:
    if not word:
        return "empty word"
    if len(word) > MAX_LETTERS:
        return f"{len(word)} characters; at most {MAX_LETTERS}"
    bad = next(ch for ch in word if ch not in LETTERS)
    return f"{bad!r} is not a lowercase letter"


class ToyLengthParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToyVowelsParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cost_per_call: float = Field(default=2.0, ge=0, description="CPU-seconds charged per word, as a costly tier would.")


def _verify(verifier: Verifier[Any], candidates: Sequence[Candidate], value: Callable[[str], float], cost: float) -> list[Verdict]:
    out = []
    for candidate in candidates:
        word = candidate.payload
        if not _is_word(word):
            out.append(verifier.verdict(candidate, Status.invalid, feedback=_reason(word)))
        else:
            out.append(verifier.verdict(candidate, Status.ok, value=value(word), cost_s=cost))
    return out


@register_verifier
class ToyLength(Verifier[ToyLengthParams]):
    """Length of the word (the toy suite's fast tier)."""

    name: ClassVar[str] = "toy-length"
    tier: ClassVar[Tier] = Tier.fast
    version: ClassVar[str] = "1"
    suite: ClassVar[str | None] = SUITE
    Params: ClassVar[type[BaseModel]] = ToyLengthParams
    cost_model: ClassVar[CostModel] = CostModel(base=0.0001)

    def verify_batch(self, candidates: Sequence[Candidate]) -> list[Verdict]:
        return _verify(self, candidates, lambda w: float(len(w)), 0.0001)


@register_verifier
class ToyVowels(Verifier[ToyVowelsParams]):
    """Number of vowels of the word (the toy suite's top tier, charged like a simulation)."""

    name: ClassVar[str] = "toy-vowels"
    tier: ClassVar[Tier] = Tier.high_fidelity
    version: ClassVar[str] = "1"
    suite: ClassVar[str | None] = SUITE
    Params: ClassVar[type[BaseModel]] = ToyVowelsParams
    cost_model: ClassVar[CostModel] = CostModel(base=2.0)

    def __init__(self, params: ToyVowelsParams | dict[str, Any] | None = None) -> None:
        super().__init__(params)
        self.costs = CostModel(base=self.params.cost_per_call)

    def verify_batch(self, candidates: Sequence[Candidate]) -> list[Verdict]:
        return _verify(self, candidates, _vowels, self.params.cost_per_call)


@register_verifier
class ToyLabVowels(ToyVowels):
    """The vowels on the lab tier, computed when called (as a table of past measurements is): never a lab request."""

    name: ClassVar[str] = "toy-lab-vowels"
    tier: ClassVar[Tier] = Tier.lab


def _vowels(word: str) -> float:
    return float(sum(ch in VOWELS for ch in word))


class ToyClusterParams(ToyVowelsParams, SimulatedQueueParams):
    latency_s: QueueLatency = 2.0  # above the 1 s past which a config that names no pipeline runs async
    slots: QueueSlots = 4


@register_verifier
class ToyCluster(SimulatedQueue[ToyClusterParams], ToyVowels):
    """The vowels from a remote queue: ``latency_s`` of waiting on one of ``slots``, charged ``cost_per_call``.

    The queue is :class:`verifiers.SimulatedQueue`, as the molecules suite's ``simulated-cluster``'s
    (``answer(candidate, submitted_at)``: a job sent before a stop waits only for what is left of its latency;
    ``close`` fails what is still out).
    """

    name: ClassVar[str] = "toy-cluster"
    Params: ClassVar[type[BaseModel]] = ToyClusterParams

    def refusal(self, candidate: Candidate) -> str | None:
        return None if _is_word(candidate.payload) else _reason(candidate.payload)

    def compute(self, candidate: Candidate) -> Verdict:
        return _verify(self, [candidate], _vowels, self.params.cost_per_call)[0]


class ToyCountingParams(ToyVowelsParams):
    seconds_per_call: float = Field(default=0.0, ge=0, le=10, description="Wall seconds each word takes (a sleep).")


@register_verifier
class ToyCounting(ToyVowels):
    """The vowels computed here, ``seconds_per_call`` each, logged per call to ``$ARL_COUNT_LOG``."""

    name: ClassVar[str] = "toy-counting"
    Params: ClassVar[type[BaseModel]] = ToyCountingParams

    def verify_batch(self, candidates: Sequence[Candidate]) -> list[Verdict]:
        count = super().verify_batch
        return [counted_call(c.key, self.params.seconds_per_call, lambda c=c: count([c])[0]) for c in candidates]


class ToyOptions(BaseModel):
    """``[options]`` of a toy run."""

    model_config = ConfigDict(extra="forbid")

    windows: list[tuple[float, float]] = Field(default_factory=lambda: [(2.0, 3.0), (1.0, 2.0)],
                                               description="Vowel-count windows the prompts ask for, cycled.")
    seed: int = Field(default=0, ge=0, description="Seed of the freshly initialised policy's weights.")


class ToySuite(Suite):
    name = SUITE
    description = "Write a word of lowercase letters with a number of vowels in a window (the core's test suite)."
    Options = ToyOptions
    defaults: ClassVar[dict[str, Any]] = {
        "name": "toy",
        # By reference: a worker process (a Dask worker, `arl` in a subprocess) imports this module to find them.
        "tiers": [{"verifier": f"{__name__}:ToyLength"}, {"verifier": f"{__name__}:ToyVowels"}],
        "scheduler": {"policy": "all", "target_low": 2.0, "target_high": 3.0, "budget_per_step": 100.0,
                      "budget_per_run": 1000.0},
        "trainer": {"group_size": 4, "max_new_tokens": 8},
        "rollout": {"prompts_per_step": 2},
        "tier_concurrency": {},
    }

    def load_policy(self, policy_config: PolicyConfig, on_pretrain: Callable[[str], None] | None = None) -> Policy:
        if self.config.policy_path:
            return super().load_policy(policy_config, on_pretrain)
        import torch
        from transformers import GPT2Config

        from policies import Policy

        tokenizer = _tokenizer()
        torch.manual_seed(self.options.seed)
        model_config = GPT2Config(vocab_size=len(tokenizer), n_positions=32, n_embd=16, n_layer=1, n_head=2,
                                  bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
        return Policy.from_config(model_config, tokenizer, policy_config)

    def prompts(self, step: int) -> list[Prompt]:
        windows = self.options.windows
        n = self.config.rollout.prompts_per_step
        out = []
        for i in range(n):
            low, high = windows[(step * n + i) % len(windows)]
            out.append(Prompt(id=f"{SUITE}:vowels:{low:g}-{high:g}", suite=SUITE,
                              text=f"Write a word with {low:g} to {high:g} vowels.", goal={"low": low, "high": high}))
        return out

    def prompt_ids(self, policy: Policy, prompt: Prompt) -> list[int]:
        return [policy.tokenizer.bos_token_id]  # the goal is in the reward, not the tokens: a policy of letters

    def completion(self, prompt: Prompt, text: str) -> tuple[Candidate, str, list[Turn]]:
        candidate = make_candidate(text, prompt.goal)
        return candidate, candidate.payload, [Turn(role="user", content=prompt.text), Turn(role="assistant", content=candidate.payload)]

    def candidate(self, text: str, goal: dict[str, Any] | None = None) -> Candidate:
        return make_candidate(text, goal)

    def history_candidate(self, key: str) -> Candidate | None:
        """The candidate of a valid word's key (``toy:<word>``); None for any other key."""
        prefix, _, word = key.partition(":")
        return make_candidate(word) if prefix == SUITE and _is_word(word) else None

    def hindsight(self, policy: Policy, failures: list[Failure]) -> tuple[list[RelabeledExample], list[Any]]:
        """Each failed word whose vowel count is known (std at most ``max_value_std``) answers the window holding it."""
        from policies import RelabeledExample
        from policies.hindsight import top_scale_value

        hcfg = self.config.hindsight
        if not hcfg.relabel:
            return [], []
        out = []
        for failure in failures:
            achieved = top_scale_value(failure.estimate, hcfg.max_value_std)
            if achieved is not None and failure.completion_ids:
                low = float(math.floor(achieved))
                out.append(RelabeledExample([policy.tokenizer.bos_token_id], list(failure.completion_ids), (low, low + 1.0)))
        return out, []


def _tokenizer() -> Any:
    """One token per letter, plus the special tokens a policy needs."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    special = {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>"}
    core = Tokenizer(models.WordLevel(vocab={t: i for i, t in enumerate([*special.values(), *LETTERS])}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=core, **special, padding_side="left")


def toy_overrides(**extra: Any) -> dict[str, Any]:
    """Run-config fields of a small toy run: 2 steps, 2 prompts of 4 samples, both tiers on every candidate."""
    return {"suite": REFERENCE, "name": "toy-run", "steps": 2} | extra
