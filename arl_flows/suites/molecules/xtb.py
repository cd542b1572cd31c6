"""Simulation tier: GFN2-xTB HOMO-LUMO gap with tblite, in isolated worker processes.

GFN2-xTB (Bannwarth, Ehlert, Grimme, J. Chem. Theory Comput. 15, 1652 (2019))
is a self-consistent tight-binding method: sub-second for QM9-sized molecules,
gaps well correlated with DFT but systematically smaller. The calculation runs
on the MMFF geometry, optionally relaxed with xTB first (``optimize``).

tblite is native code using OpenMP with every core by default, so it runs in
a :class:`~verifiers.isolation.WorkerPool` with the thread count set from the
params: on a 2-core machine two default-threaded workers made a single point
~200x slower.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, Field

from storage.records import Status, Tier, Verdict
from verifiers.base import Candidate, CostModel
from arl_flows.suites.molecules.chemistry import (
    GeometryParams,
    MoleculeJobParams,
    MoleculeJobVerifier,
    UnrealisableStereo,
    embed_molecule,
    xyz_of,
)
from verifiers.isolation import TaskOutcome
from verifiers.registry import register_verifier

# tblite, scipy.optimize and rdkit are heavy: imported in the functions that call them.
__all__ = ["HARTREE_TO_EV", "XTBGapVerifier", "XTBParams", "xtb_gap", "xtb_optimize"]

HARTREE_TO_EV = 27.211386245988  # CODATA 2018
ANGSTROM_TO_BOHR = 1.0 / 0.529177210903


class XTBParams(MoleculeJobParams):
    """Parameters of the GFN2-xTB tier."""

    optimize: bool = Field(default=False, description="Relax the MMFF geometry with GFN2-xTB before the gap.")
    max_opt_steps: int = Field(default=200, ge=1, description="L-BFGS steps of the xTB relaxation.")
    accuracy: float = Field(default=1.0, gt=0, description="tblite numerical accuracy (lower is tighter).")
    electronic_temperature: float = Field(default=300.0, gt=0, description="Fermi smearing temperature (K).")
    max_scf_iterations: int = Field(default=250, ge=1, description="SCF iterations before giving up.")
    timeout_s: float = Field(default=60.0, gt=0, description="Hard wall-clock limit per candidate, in seconds.")


def _calculator(numbers: np.ndarray, positions_bohr: np.ndarray, job: dict[str, Any]) -> Any:
    from tblite.interface import Calculator

    calc = Calculator("GFN2-xTB", numbers, positions_bohr, charge=float(job.get("charge", 0)))
    calc.set("verbosity", 0)
    calc.set("accuracy", float(job.get("accuracy", 1.0)))
    calc.set("temperature", float(job.get("electronic_temperature", 300.0)) * 3.166808578545117e-06)  # K -> Eh
    calc.set("max-iter", int(job.get("max_scf_iterations", 250)))
    return calc


def xtb_optimize(
    numbers: np.ndarray, positions_bohr: np.ndarray, job: dict[str, Any]
) -> tuple[np.ndarray, float, int]:
    """Relax a geometry on the GFN2-xTB surface (L-BFGS-B); returns (positions in Bohr, energy in Eh, steps)."""
    from scipy.optimize import minimize

    calc = _calculator(numbers, positions_bohr, job)

    def energy_and_gradient(flat: np.ndarray) -> tuple[float, np.ndarray]:
        calc.update(positions=flat.reshape(-1, 3))
        result = calc.singlepoint()
        return float(result.get("energy")), np.asarray(result.get("gradient")).ravel()

    fit = minimize(
        energy_and_gradient,
        positions_bohr.ravel(),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": int(job.get("max_opt_steps", 200)), "gtol": 1e-4},
    )
    return fit.x.reshape(-1, 3), float(fit.fun), int(fit.nit)


def xtb_gap(job: dict[str, Any]) -> dict[str, Any]:
    """Worker function: embed ``job['smiles']``, optionally relax with xTB, return the GFN2-xTB gap (eV)."""
    from rdkit import Chem

    mol = Chem.MolFromSmiles(job["smiles"])
    try:
        molh, force_field = embed_molecule(mol, GeometryParams(**job.get("geometry", {})))
    except UnrealisableStereo as exc:
        return {"invalid": str(exc)}  # the candidate's fault: MoleculeJobVerifier makes it an invalid verdict
    numbers, _, coords = xyz_of(molh)
    z = np.asarray(numbers)
    positions = np.asarray(coords) * ANGSTROM_TO_BOHR
    steps = 0
    if job.get("optimize"):
        positions, _, steps = xtb_optimize(z, positions, job)
    result = _calculator(z, positions, job).singlepoint()
    energies = np.asarray(result.get("orbital-energies"))  # Hartree, ascending
    occupations = np.asarray(result.get("orbital-occupations"))
    n_occupied = int(round(occupations.sum())) // 2
    homo, lumo = energies[n_occupied - 1] * HARTREE_TO_EV, energies[n_occupied] * HARTREE_TO_EV
    return {
        "gap_ev": float(lumo - homo),
        "homo_ev": float(homo),
        "lumo_ev": float(lumo),
        "energy_eh": float(result.get("energy")),
        "force_field": force_field,
        "xtb_opt_steps": steps,
        "positions_bohr": positions.tolist(),
        "numbers": numbers,
    }


@register_verifier
class XTBGapVerifier(MoleculeJobVerifier):
    """GFN2-xTB HOMO-LUMO gap (eV) with tblite on the MMFF (or xTB-relaxed) geometry."""

    name: ClassVar[str] = "gfn2-xtb"
    tier: ClassVar[Tier] = Tier.simulation
    version: ClassVar[str] = "1"
    Params: ClassVar[type[BaseModel]] = XTBParams
    work_function = staticmethod(xtb_gap)
    preload_modules: ClassVar[tuple[str, ...]] = ("tblite.interface", "scipy.optimize", "arl_flows.suites.molecules.xtb")
    # Worker CPU seconds measured with benchmarks/tiers.py (docs/tiers.md), embedding included:
    # single point 2 ms for water, median 9 ms at 7-9 heavy atoms; fitted to 300 MOSES test molecules
    # of 12-26 (``--space druglike``): 27 ms at 12, 105 ms at 26. With the xTB relaxation median
    # 0.19 s at QM9 size (see __init__).
    cost_model: ClassVar[CostModel] = CostModel(base=0.0014, per_unit=2.06e-4, exponent=1.95)
    reports: ClassVar[frozenset[str] | None] = frozenset({"gap_ev", "homo_ev", "lumo_ev", "energy_eh", "force_field", "xtb_opt_steps"})

    def __init__(self, params: XTBParams | dict[str, Any] | None = None) -> None:
        super().__init__(params)
        if self.params.optimize:
            self.costs = CostModel(base=0.01, per_unit=0.022, exponent=1.0)

    def job_settings(self) -> dict[str, Any]:
        p = self.params
        return {
            "optimize": p.optimize,
            "max_opt_steps": p.max_opt_steps,
            "accuracy": p.accuracy,
            "electronic_temperature": p.electronic_temperature,
            "max_scf_iterations": p.max_scf_iterations,
        }

    def interpret(self, candidate: Candidate, result: dict[str, Any], outcome: TaskOutcome) -> Verdict:
        gap = result["gap_ev"]
        values = {k: v for k, v in result.items() if k not in ("positions_bohr", "numbers")}
        return self.verdict(
            candidate,
            Status.ok,
            value=gap,
            values=values,
            cost_s=outcome.cpu_s,
            wall_s=outcome.wall_s,
        )
