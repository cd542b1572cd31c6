"""A simulated remote queue: the mechanics of a tier whose calls wait elsewhere (a cluster, a lab), written once.

A call on a remote queue costs wall-clock time, not CPU here: it waits ``latency_s`` seconds
(``jitter`` spreads that per candidate, the same on every rerun), at most ``slots`` calls run at once
and the others queue for a slot, and the waiting thread sleeps. The budget is charged the declared
``cost_per_call``: what the remote job it stands for would cost. This lets a benchmark or a test
measure what a pipeline does with an expensive, slow, parallel source of truth without spending the
CPU the real job would.

A call is a job with a submission time. :meth:`SimulatedQueue.answer` takes that time, so a job sent
before a crash and resumed after it waits only for what is left of its latency: it is continued, not
submitted (and paid for) again. :meth:`SimulatedQueue.close` ends every wait: the jobs still out come
back ``failed`` (the run is ending; a resume continues them).

A tier built on it says only what the queue would answer: :meth:`SimulatedQueue.refusal` (its input
check, answered at once without a slot) and :meth:`SimulatedQueue.compute` (the job's verdict once its
latency has passed). It satisfies :class:`verifiers.RemoteVerifier` and :class:`verifiers.Closable`.
"""

from __future__ import annotations

import hashlib
import threading
import time
from abc import abstractmethod
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from storage.records import Status, Verdict, params_hash
from verifiers.base import Candidate, CostModel, Verifier

__all__ = ["QUEUE_FIELDS", "SimulatedQueue", "SimulatedQueueParams"]

# A tier's params may give these their own defaults (``latency_s: QueueLatency = 1.0``) and keep the bounds.
QueueLatency = Annotated[float, Field(ge=0, description="Wall-clock seconds one call takes once it has a slot.")]
QueueSlots = Annotated[int, Field(ge=1, description="Calls the queue runs at once; more wait for a slot.")]
QUEUE_FIELDS = frozenset({"latency_s", "jitter", "slots"})  # how long the queue takes, not what it answers


class SimulatedQueueParams(BaseModel):
    """How the queue behaves: latency, its spread, parallel slots, and the declared price of a call."""

    model_config = ConfigDict(extra="forbid")

    latency_s: QueueLatency = 10.0
    jitter: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="Spread of the latency: each call takes latency_s * (1 + jitter * u), u in [-1, 1] fixed per "
        "candidate (a hash of its key), so reruns wait the same; 0 makes every call take latency_s.",
    )
    slots: QueueSlots = 16
    cost_per_call: float = Field(default=15.0, ge=0, description="CPU-seconds charged to the budget per call.")


P = TypeVar("P", bound=SimulatedQueueParams)


class SimulatedQueue(Verifier[P]):
    """Base of a tier answered by a simulated remote queue; subclasses say what a job answers.

    Counters for a benchmark's report: ``calls`` (jobs answered), ``in_flight`` (holding a slot now),
    ``peak_in_flight`` and ``busy_slot_s`` (slot-seconds occupied: utilisation is
    ``busy_slot_s / (slots * wall)``).
    """

    closed_feedback: ClassVar[str] = "the queue was closed before the job answered"

    def __init__(self, params: P | dict[str, Any] | None = None) -> None:
        super().__init__(params)
        self.costs = CostModel(base=self.params.cost_per_call)
        self._slots = threading.BoundedSemaphore(self.params.slots)
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.busy_slot_s = 0.0
        self.calls = 0
        self.in_flight = 0
        self.peak_in_flight = 0

    @abstractmethod
    def refusal(self, candidate: Candidate) -> str | None:
        """Why the queue refuses ``candidate`` at once (its input check: an ``invalid`` verdict, no slot, no
        charge), or None to send the job."""

    @abstractmethod
    def compute(self, candidate: Candidate) -> Verdict:
        """The job's verdict once its latency has passed: the value and the cost charged (the queue stamps its wall time)."""

    @property
    def params_hash(self) -> str:
        """The cache identity: what decides the answer, not how long the queue takes (latency, jitter, slots)."""
        return params_hash(self.params.model_dump(mode="json", exclude=set(QUEUE_FIELDS)))

    def close(self) -> None:
        """Stop waiting: calls still out return ``failed`` at once (the run is ending; a resume continues them)."""
        self._closed.set()

    def latency(self, candidate: Candidate) -> float:
        """Wall-clock seconds a call on ``candidate`` takes (fixed per key)."""
        p = self.params
        if p.jitter == 0:
            return p.latency_s
        digest = hashlib.blake2b(candidate.key.encode(), digest_size=8).digest()
        u = int.from_bytes(digest, "big") / 2**64 * 2.0 - 1.0  # [-1, 1)
        return p.latency_s * (1.0 + p.jitter * u)

    def verify_batch(self, candidates: Sequence[Candidate]) -> list[Verdict]:
        """One verdict per candidate; the calls run side by side on the queue's slots.

        A call's latency starts when it gets a slot, as a queued job's run time does: a call that waited for a
        slot still runs its whole latency after it.
        """
        if not candidates:
            return []
        with ThreadPoolExecutor(max_workers=min(len(candidates), self.params.slots)) as pool:
            return list(pool.map(self.answer, candidates))

    def answer(self, candidate: Candidate, submitted_at: float | None = None) -> Verdict:
        """Wait for one remote job on ``candidate`` and return its verdict.

        ``submitted_at`` (``time.time()`` when the job was sent; default now) lets a job sent before a
        restart finish when it would have: it waits only for the rest of its latency.
        """
        t0 = time.perf_counter()
        reason = self.refusal(candidate)
        if reason is not None:  # refused at once, as a real queue's input check would
            return self.verdict(candidate, Status.invalid, feedback=reason, wall_s=time.perf_counter() - t0)
        with self._slots:
            started = time.perf_counter()
            with self._lock:
                self.in_flight += 1
                self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            due = (submitted_at if submitted_at is not None else time.time()) + self.latency(candidate)
            wait = due - time.time()
            if wait > 0:
                self._closed.wait(wait)  # a remote job: this thread waits, no CPU is spent here
            with self._lock:
                self.in_flight -= 1
                self.busy_slot_s += time.perf_counter() - started
                self.calls += 1
        wall = time.perf_counter() - t0
        if self._closed.is_set():
            return self.verdict(candidate, Status.failed, feedback=self.closed_feedback, wall_s=wall)
        return self.compute(candidate).model_copy(update={"wall_s": wall})
