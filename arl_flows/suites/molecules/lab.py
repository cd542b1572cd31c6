"""Lab tier: an asynchronous external measurement (the reference table standing in for one: ``reference.py``).

``lab`` never answers at once: it returns a ``pending`` verdict carrying a
fresh ``request_id``; the flow stores the matching :class:`LabRequest` (see
:meth:`LabVerifier.lab_requests`) and the answer arrives later through
``arl lab submit`` or a Prefect form, which turns the verdict ``ok``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from storage.records import LabRequest, Status, Tier, Verdict, new_id, params_hash
from verifiers.base import Candidate, CostModel, Verifier
from arl_flows.suites.molecules.chemistry import SUITE, InvalidMolecule, MoleculeConstraints, check_molecule
# Still importable from here, as the entry points of installs made before the move name them.
from arl_flows.suites.molecules.reference import ReferenceTableParams, ReferenceTableVerifier, load_reference_table
from verifiers.registry import register_verifier

__all__ = ["LabParams", "LabVerifier", "ReferenceTableParams", "ReferenceTableVerifier", "load_reference_table"]


_GAP = "HOMO-LUMO gap (eV)"
_GAP_RANGE = (0.0, 30.0)  # eV: any closed-shell molecule's gap lies far inside it


class LabParams(BaseModel):
    """Parameters of the external lab tier."""

    model_config = ConfigDict(extra="forbid")

    constraints: MoleculeConstraints = Field(default_factory=MoleculeConstraints, description="Validity rules.")
    cost_per_call: float = Field(
        default=3600.0, ge=0, description="Budget charged per request, in CPU-second equivalents."
    )
    measurement: str = Field(default=_GAP, description="What the lab is asked to measure.")
    value_range: tuple[float, float] | None = Field(
        default=None,
        description="The plausible range of a result, in the measurement's unit: `arl lab submit` refuses a value "
        "outside it (3500 typed for 3.5 eV). Default: [0, 30] for the default measurement (the gap in eV), none for "
        "another; [] takes any finite value. It checks submissions only: not part of the tier's params hash.",
    )

    @model_validator(mode="before")
    @classmethod
    def _gap_range_by_default(cls, data: Any) -> Any:
        if isinstance(data, dict):
            if "value_range" not in data and data.get("measurement", _GAP) == _GAP:
                data = {**data, "value_range": _GAP_RANGE}
            elif isinstance(data.get("value_range"), list | tuple) and not data["value_range"]:
                data = {**data, "value_range": None}
        return data

    @model_validator(mode="after")
    def _ordered(self) -> LabParams:
        if self.value_range is not None and not (
            math.isfinite(self.value_range[0]) and math.isfinite(self.value_range[1]) and self.value_range[0] < self.value_range[1]
        ):
            raise ValueError(f"value_range {list(self.value_range)} must be two finite numbers, low < high, e.g. [0, 30]")
        return self


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

    @property
    def params_hash(self) -> str:
        # value_range checks what a lab submits and changes no verdict: the requests and answers of a ledger written
        # before it existed keep their cache key.
        return params_hash(self.params.model_dump(mode="json", exclude={"value_range"}))

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
                    values={"canonical_smiles": parsed.canonical, "measurement": self.params.measurement}
                    | ({LabRequest.VALUE_RANGE: list(self.params.value_range)} if self.params.value_range else {}),
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
