"""A simulated DFT cluster: the top tier answered from the QM9 table after a wall-clock wait.

This verifier models a *remote* queue (a DFT cluster, or a lab) on
:class:`verifiers.SimulatedQueue`: a call takes ``latency_s``
seconds of wall-clock time, at most ``slots`` calls run at once, nothing runs
on this machine while a call waits, and a job submitted before a crash is
continued after it, not paid for again. The answer is the QM9 reference value
of the molecule (the same table :class:`~arl_flows.suites.molecules.reference.ReferenceTableVerifier`
reads), and the budget is charged the declared ``cost_per_call``: what the
DFT call it stands for would cost. It is not a DFT calculation; it lets a
benchmark or a test measure what a pipeline does with an expensive, slow,
parallel source of truth without spending the CPU that DFT would.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field

from arl_flows.suites.molecules.chemistry import SUITE, InvalidMolecule, MoleculeConstraints, check_molecule
from arl_flows.suites.molecules.datasets import QM9_GAP_CSV
from arl_flows.suites.molecules.reference import load_reference_table
from storage.records import Status, Tier, Verdict
from verifiers.base import Candidate, CostModel
from verifiers.registry import register_verifier
from verifiers.simulated_queue import SimulatedQueue, SimulatedQueueParams

__all__ = ["SimulatedClusterParams", "SimulatedClusterVerifier"]


class SimulatedClusterParams(SimulatedQueueParams):
    """Parameters of the simulated cluster: its table, its latency, its parallel slots and its declared price."""

    constraints: MoleculeConstraints = Field(default_factory=MoleculeConstraints, description="Validity rules.")
    path: str = Field(default=str(QM9_GAP_CSV), description="CSV file of known values (default: shipped QM9 gaps).")
    smiles_column: str = Field(default="smiles", description="Column holding SMILES.")
    value_column: str = Field(default="gap_ev", description="Column holding the value (eV).")
    cost_per_call: float = Field(
        default=15.0,
        ge=0,
        description="CPU-seconds charged to the budget per call: what the DFT call it stands for costs "
        "(B3LYP/6-31G* on a QM9 molecule takes 10-20 CPU-seconds here).",
    )


@register_verifier
class SimulatedClusterVerifier(SimulatedQueue[SimulatedClusterParams]):
    """QM9 gap (eV) after a simulated remote-queue latency: a DFT cluster or a lab, modelled; no CPU used."""

    name: ClassVar[str] = "simulated-cluster"
    tier: ClassVar[Tier] = Tier.high_fidelity
    version: ClassVar[str] = "1"
    suite: ClassVar[str | None] = SUITE
    Params: ClassVar[type[BaseModel]] = SimulatedClusterParams
    cost_model: ClassVar[CostModel] = CostModel(base=15.0)
    closed_feedback: ClassVar[str] = "the cluster connection was closed before the job answered"

    def refusal(self, candidate: Candidate) -> str | None:
        """What cannot be a molecule is refused at the door; the table is read now, so a missing file fails at once."""
        try:
            check_molecule(candidate.payload, self.params.constraints)
        except InvalidMolecule as exc:
            return str(exc)
        self._table()
        return None

    def compute(self, candidate: Candidate) -> Verdict:
        p = self.params
        canonical = check_molecule(candidate.payload, p.constraints).canonical
        gap = self._table().get(canonical)
        if gap is None:
            return self.verdict(candidate, Status.failed, feedback="not in reference table", cost_s=p.cost_per_call)
        return self.verdict(
            candidate,
            Status.ok,
            value=gap,
            values={"gap_ev": gap, "canonical_smiles": canonical, "source": Path(p.path).name},
            cost_s=p.cost_per_call,
        )

    def _table(self) -> dict[str, float]:
        p = self.params
        return load_reference_table(p.path, p.smiles_column, p.value_column)
