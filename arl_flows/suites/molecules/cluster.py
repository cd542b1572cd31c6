"""A simulated DFT cluster: the top tier answered from the QM9 table after a wall-clock wait.

This verifier models a *remote* queue (a DFT cluster, or a lab): a call takes
``latency_s`` seconds of wall-clock time, at most ``slots`` calls run at
once (the others queue for a slot), and nothing runs on this machine while a
call waits: the waiting thread sleeps. The answer is the QM9 reference value
of the molecule (the same table :class:`~arl_flows.suites.molecules.reference.ReferenceTableVerifier`
reads), and the budget is charged the declared ``cost_per_call``: what the
DFT call it stands for would cost. It is not a DFT calculation; it lets a
benchmark or a test measure what a pipeline does with an expensive, slow,
parallel source of truth without spending the CPU that DFT would.

A call is a remote job with a submission time. :meth:`SimulatedClusterVerifier.answer`
takes that time, so a job submitted before a crash and resumed after it
waits only for what is left of its latency: it is continued, not submitted
(and paid for) again.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from arl_flows.suites.molecules.chemistry import SUITE, InvalidMolecule, MoleculeConstraints, check_molecule
from arl_flows.suites.molecules.datasets import QM9_GAP_CSV
from arl_flows.suites.molecules.reference import load_reference_table
from storage.records import Status, Tier, Verdict, params_hash
from verifiers.base import Candidate, CostModel, Verifier
from verifiers.registry import register_verifier

__all__ = ["SimulatedClusterParams", "SimulatedClusterVerifier"]


class SimulatedClusterParams(BaseModel):
    """Parameters of the simulated cluster: its latency, its parallel slots and its declared price."""

    model_config = ConfigDict(extra="forbid")

    constraints: MoleculeConstraints = Field(default_factory=MoleculeConstraints, description="Validity rules.")
    path: str = Field(default=str(QM9_GAP_CSV), description="CSV file of known values (default: shipped QM9 gaps).")
    smiles_column: str = Field(default="smiles", description="Column holding SMILES.")
    value_column: str = Field(default="gap_ev", description="Column holding the value (eV).")
    latency_s: float = Field(default=10.0, ge=0, description="Wall-clock seconds one call takes once it has a slot.")
    jitter: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="Spread of the latency: each call takes latency_s * (1 + jitter * u), u in [-1, 1] fixed per "
        "molecule (a hash of its key), so reruns wait the same; 0 makes every call take latency_s.",
    )
    slots: int = Field(default=16, ge=1, description="Calls the cluster runs at once; more wait in its queue.")
    cost_per_call: float = Field(
        default=15.0,
        ge=0,
        description="CPU-seconds charged to the budget per call: what the DFT call it stands for costs "
        "(B3LYP/6-31G* on a QM9 molecule takes 10-20 CPU-seconds here).",
    )


@register_verifier
class SimulatedClusterVerifier(Verifier[SimulatedClusterParams]):
    """QM9 gap (eV) after a simulated remote-queue latency: a DFT cluster or a lab, modelled; no CPU used."""

    name: ClassVar[str] = "simulated-cluster"
    tier: ClassVar[Tier] = Tier.high_fidelity
    version: ClassVar[str] = "1"
    suite: ClassVar[str | None] = SUITE
    Params: ClassVar[type[BaseModel]] = SimulatedClusterParams
    cost_model: ClassVar[CostModel] = CostModel(base=15.0)

    def __init__(self, params: SimulatedClusterParams | dict | None = None) -> None:
        super().__init__(params)
        self.costs = CostModel(base=self.params.cost_per_call)
        self._slots = threading.BoundedSemaphore(self.params.slots)
        self._lock = threading.Lock()
        self.busy_slot_s = 0.0  # slot-seconds occupied so far (utilisation = busy_slot_s / (slots * wall))
        self.calls = 0
        self.in_flight = 0  # calls holding a slot now
        self._closed = threading.Event()
        self.peak_in_flight = 0

    @property
    def params_hash(self) -> str:
        """The cache identity: what decides the answer, not how long the queue takes (latency, jitter, slots)."""
        return params_hash(self.params.model_dump(mode="json", exclude={"latency_s", "jitter", "slots"}))

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
        """One verdict per candidate; the calls run side by side on the cluster's slots."""
        if not candidates:
            return []
        now = time.time()
        with ThreadPoolExecutor(max_workers=min(len(candidates), self.params.slots)) as pool:
            return list(pool.map(lambda c: self.answer(c, submitted_at=now), candidates))

    def answer(self, candidate: Candidate, submitted_at: float | None = None) -> Verdict:
        """Wait for one remote job on ``candidate`` and return its verdict.

        ``submitted_at`` (``time.time()`` when the job was sent; default now)
        lets a job sent before a restart finish when it would have: it waits
        only for the rest of its latency.
        """
        p = self.params
        t0 = time.perf_counter()
        try:
            parsed = check_molecule(candidate.payload, p.constraints)
        except InvalidMolecule as exc:
            # The cluster refuses what cannot be a molecule at once, as a real queue's input check would.
            return self.verdict(candidate, Status.invalid, feedback=str(exc), wall_s=time.perf_counter() - t0)
        table = load_reference_table(p.path, p.smiles_column, p.value_column)
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
            return self.verdict(candidate, Status.failed, feedback="the cluster connection was closed before the job answered", wall_s=wall)
        gap = table.get(parsed.canonical)
        if gap is None:
            return self.verdict(
                candidate, Status.failed, feedback="not in reference table", cost_s=p.cost_per_call, wall_s=wall
            )
        return self.verdict(
            candidate,
            Status.ok,
            value=gap,
            values={"gap_ev": gap, "canonical_smiles": parsed.canonical, "source": Path(p.path).name},
            cost_s=p.cost_per_call,
            wall_s=wall,
        )
