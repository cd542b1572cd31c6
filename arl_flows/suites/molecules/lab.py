"""Lab tier: an asynchronous external measurement, and a reference table standing in for one.

``lab`` never answers at once: it returns a ``pending`` verdict carrying a
fresh ``request_id``; the flow stores the matching :class:`LabRequest` (see
:meth:`LabVerifier.lab_requests`) and the answer arrives later through
``arl lab submit`` or a Prefect form, which turns the verdict ``ok``.

``reference-table`` answers from a CSV of known values (by default the QM9
gaps shipped in ``data/``) and charges a declared cost per call, so the
benchmarks can treat it as an expensive source of truth without a lab.
"""

from __future__ import annotations

import csv
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field
from rdkit import Chem

from arl_flows.suites.molecules.datasets import QM9_GAP_CSV
from storage.records import LabRequest, Status, Tier, Verdict, new_id
from verifiers.base import Candidate, CostModel, Verifier
from arl_flows.suites.molecules.chemistry import SUITE, InvalidMolecule, MoleculeConstraints, check_molecule
from verifiers.registry import register_verifier

__all__ = ["LabParams", "LabVerifier", "ReferenceTableParams", "ReferenceTableVerifier", "load_reference_table"]


class LabParams(BaseModel):
    """Parameters of the external lab tier."""

    model_config = ConfigDict(extra="forbid")

    constraints: MoleculeConstraints = Field(default_factory=MoleculeConstraints, description="Validity rules.")
    cost_per_call: float = Field(
        default=3600.0, ge=0, description="Budget charged per request, in CPU-second equivalents."
    )
    measurement: str = Field(default="HOMO-LUMO gap (eV)", description="What the lab is asked to measure.")


@register_verifier
class LabVerifier(Verifier[LabParams]):
    """External lab measurement of the gap: records a pending request, answered later."""

    name: ClassVar[str] = "lab"
    tier: ClassVar[Tier] = Tier.lab
    version: ClassVar[str] = "1"
    suite: ClassVar[str | None] = SUITE
    Params: ClassVar[type[BaseModel]] = LabParams
    cost_model: ClassVar[CostModel] = CostModel(base=3600.0)

    def __init__(self, params: LabParams | dict | None = None) -> None:
        super().__init__(params)
        self.costs = CostModel(base=self.params.cost_per_call)

    def verify_batch(self, candidates: Sequence[Candidate]) -> list[Verdict]:
        verdicts = []
        for candidate in candidates:
            try:
                parsed = check_molecule(candidate.payload, self.params.constraints)
            except InvalidMolecule as exc:
                verdicts.append(self.verdict(candidate, Status.invalid, feedback=str(exc)))
                continue
            verdicts.append(
                self.verdict(
                    candidate,
                    Status.pending,
                    values={"canonical_smiles": parsed.canonical, "measurement": self.params.measurement},
                    feedback=f"lab measurement of {self.params.measurement} requested",
                    cost_s=self.params.cost_per_call,
                    request_id=new_id(),
                )
            )
        return verdicts

    def lab_requests(
        self, candidates: Sequence[Candidate], verdicts: Sequence[Verdict], run_id: str | None = None
    ) -> list[LabRequest]:
        """The :class:`LabRequest` rows to store for the pending verdicts of one ``verify_batch`` call."""
        requests = []
        for candidate, verdict in zip(candidates, verdicts, strict=True):
            if verdict.status != Status.pending or verdict.request_id is None:
                continue
            requests.append(
                LabRequest(
                    id=verdict.request_id,
                    run_id=run_id,
                    candidate_key=candidate.key,
                    payload=str(verdict.values.get("canonical_smiles", candidate.payload)),
                    verifier=self.name,
                    version=self.version,
                    params_hash=self.params_hash,
                    notes=f"measure {self.params.measurement}",
                )
            )
        return requests


class ReferenceTableParams(BaseModel):
    """Parameters of the reference-table tier."""

    model_config = ConfigDict(extra="forbid")

    constraints: MoleculeConstraints = Field(default_factory=MoleculeConstraints, description="Validity rules.")
    path: str = Field(default=str(QM9_GAP_CSV), description="CSV file of known values (default: shipped QM9 gaps).")
    smiles_column: str = Field(default="smiles", description="Column holding SMILES.")
    value_column: str = Field(default="gap_ev", description="Column holding the value (eV).")
    cost_per_call: float = Field(
        default=300.0,
        ge=0,
        description="Declared CPU-seconds charged per lookup: what the truth it stands in for would cost.",
    )


@functools.lru_cache(maxsize=4)
def _cached_table(path: str, smiles_column: str, value_column: str, mtime: float) -> dict[str, float]:
    table: dict[str, float] = {}
    with open(path, newline="") as fh:
        reader = csv.DictReader(line for line in fh if not line.startswith("#"))
        missing = {smiles_column, value_column} - set(reader.fieldnames or [])
        if missing:
            raise ValueError(f"reference table {path} has no column(s) {', '.join(sorted(missing))}")
        for row in reader:
            mol = Chem.MolFromSmiles(row[smiles_column])
            if mol is not None:
                # Re-canonicalise with this RDKit version, so keys match our candidates.
                table[Chem.MolToSmiles(mol)] = float(row[value_column])
    return table


def load_reference_table(path: str | Path, smiles_column: str = "smiles", value_column: str = "gap_ev") -> dict[str, float]:
    """Canonical SMILES -> value from a CSV (cached per file version; '#' lines are comments)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"reference table {p} does not exist")
    return _cached_table(str(p.resolve()), smiles_column, value_column, p.stat().st_mtime)


@register_verifier
class ReferenceTableVerifier(Verifier[ReferenceTableParams]):
    """Known gap (eV) from a reference CSV (QM9 by default), charged a declared cost per call."""

    name: ClassVar[str] = "reference-table"
    tier: ClassVar[Tier] = Tier.lab
    version: ClassVar[str] = "1"
    suite: ClassVar[str | None] = SUITE
    Params: ClassVar[type[BaseModel]] = ReferenceTableParams
    cost_model: ClassVar[CostModel] = CostModel(base=300.0)

    def __init__(self, params: ReferenceTableParams | dict | None = None) -> None:
        super().__init__(params)
        # The declared price is the cost model: the budget sees what the stand-in stands for.
        self.costs = CostModel(base=self.params.cost_per_call)

    def verify_batch(self, candidates: Sequence[Candidate]) -> list[Verdict]:
        p = self.params
        table = load_reference_table(p.path, p.smiles_column, p.value_column)
        verdicts = []
        for candidate in candidates:
            with self.timed() as t:
                try:
                    parsed = check_molecule(candidate.payload, p.constraints)
                except InvalidMolecule as exc:
                    parsed, reason = None, str(exc)
            if parsed is None:
                verdicts.append(self.verdict(candidate, Status.invalid, feedback=reason, wall_s=t.wall_s))
            elif parsed.canonical not in table:
                verdicts.append(
                    self.verdict(
                        candidate,
                        Status.failed,
                        feedback="not in reference table",
                        cost_s=p.cost_per_call,
                        wall_s=t.wall_s,
                    )
                )
            else:
                gap = table[parsed.canonical]
                verdicts.append(
                    self.verdict(
                        candidate,
                        Status.ok,
                        value=gap,
                        values={"gap_ev": gap, "canonical_smiles": parsed.canonical, "source": Path(p.path).name},
                        cost_s=p.cost_per_call,
                        wall_s=t.wall_s,
                    )
                )
        return verdicts
