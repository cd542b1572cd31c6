"""A fast-tier verifier: Crippen logP (Wildman & Crippen, J. Chem. Inf. Comput. Sci. 39, 868 (1999)).

Everything a tier needs: a params model, metadata class attributes, and a
batch method returning one verdict per candidate. It is registered by the
entry point in this package's pyproject.toml, not by a decorator.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field
from rdkit.Chem import Crippen

from storage.records import Status, Tier, Verdict
from verifiers import Candidate, CostModel, Verifier
from arl_flows.suites.molecules import InvalidMolecule, MoleculeConstraints, check_molecule


class LogPParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    constraints: MoleculeConstraints = Field(default_factory=MoleculeConstraints, description="Validity rules.")


class CrippenLogPVerifier(Verifier[LogPParams]):
    """Crippen logP of a molecule (RDKit), in milliseconds."""

    name: ClassVar[str] = "crippen-logp"
    tier: ClassVar[Tier] = Tier.fast
    version: ClassVar[str] = "1"
    suite: ClassVar[str | None] = "molecules"
    Params: ClassVar[type[BaseModel]] = LogPParams
    cost_model: ClassVar[CostModel] = CostModel(base=0.0002)
    # The keys of ``values`` it reports: an objective term on a property no tier of the ladder declares is then
    # caught by `arl run --dry-run` (a typo such as "logP" would otherwise count as met on every molecule).
    reports: ClassVar[frozenset[str] | None] = frozenset({"logp"})

    def verify_batch(self, candidates: Sequence[Candidate]) -> list[Verdict]:
        verdicts = []
        for candidate in candidates:
            with self.timed() as t:
                try:
                    parsed = check_molecule(candidate.payload, self.params.constraints)
                except InvalidMolecule as exc:
                    parsed, reason = None, str(exc)
                else:
                    logp = Crippen.MolLogP(parsed.mol)
            if parsed is None:
                verdicts.append(self.verdict(candidate, Status.invalid, feedback=reason, cost_s=t.cpu_s))
                continue
            verdicts.append(
                self.verdict(candidate, Status.ok, value=logp, values={"logp": logp}, cost_s=t.cpu_s)
            )
        return verdicts
