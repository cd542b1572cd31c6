"""A cheap isolated verifier for the fault-injection tests (not registered).

Its physics is trivial on purpose (RDKit's monoisotopic mass of a molecule):
the 2,000-candidate fault test is about the worker pool, and every crash or
hang costs a fresh worker whose start-up is the dominant cost, so the
wrapped verifier should not add xTB's import time on top. The tests also
wrap the real xTB tier on a smaller batch.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from storage.records import Status, Tier, Verdict
from verifiers.base import Candidate
from verifiers.isolation import IsolatedVerifier, IsolationParams, TaskOutcome


def exact_mass(smiles: str) -> dict[str, Any]:
    """Worker function: monoisotopic mass (Da) and formula of a SMILES."""
    from rdkit import Chem
    from rdkit.Chem import rdMolDescriptors

    mol = Chem.MolFromSmiles(smiles)
    return {"mass_da": rdMolDescriptors.CalcExactMolWt(mol), "formula": rdMolDescriptors.CalcMolFormula(mol)}


class ExactMassVerifier(IsolatedVerifier):
    """Monoisotopic mass in a worker process; rejects malformed results as a careful tier should."""

    name: ClassVar[str] = "test-exact-mass"
    tier: ClassVar[Tier] = Tier.simulation
    version: ClassVar[str] = "1"
    suite: ClassVar[str | None] = "molecules"
    Params = IsolationParams
    work_function = staticmethod(exact_mass)
    preload_modules: ClassVar[tuple[str, ...]] = ("rdkit.Chem.rdMolDescriptors",)

    def prepare(self, candidate: Candidate) -> Any:
        if not candidate.valid:
            return self.verdict(candidate, Status.invalid, feedback=candidate.meta.get("reason", "not a molecule"))
        return candidate.meta["canonical"]

    def interpret(self, candidate: Candidate, result: dict[str, Any], outcome: TaskOutcome) -> Verdict:
        mass = result["mass_da"]
        if not isinstance(mass, float) or not math.isfinite(mass):
            raise ValueError(f"mass must be a finite float, got {mass!r}")
        return self.verdict(candidate, Status.ok, value=mass, values=result, cost_s=outcome.cpu_s, wall_s=outcome.wall_s)
