"""High-fidelity tier: DFT (PySCF, B3LYP/6-31G* by default) in isolated worker processes.

QM9's own gaps are B3LYP/6-31G(2df,p) at B3LYP-relaxed geometries
(Ramakrishnan et al., Sci. Data 1, 140022 (2014)); the same functional with a
smaller basis on an MMFF (or GFN2-xTB-relaxed) geometry lands within a few
tenths of an eV of them, at seconds to a minute per molecule. The default
functional is ``B3LYPG``, the Gaussian definition (VWN-RPA correlation) that
QM9 used; PySCF's plain ``B3LYP`` uses VWN5 (the gap differs by ~0.01 eV).

The SCF runs in a worker process (PySCF is native code, and a large basis can
exhaust memory) with ``lib.num_threads`` set from the params. An SCF that does
not converge, even after the optional second-order (Newton) fallback, is a
``failed`` verdict with the reason: not a gap of 0.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, Field

from storage.records import Status, Tier, Verdict
from verifiers.base import Candidate, CostModel
from arl_flows.suites.molecules.chemistry import (
    GeometryParams,
    MoleculeJobParams,
    MoleculeJobVerifier,
    embed_molecule,
    xyz_of,
)
from arl_flows.suites.molecules.xtb import ANGSTROM_TO_BOHR, HARTREE_TO_EV, xtb_optimize
from verifiers.isolation import TaskOutcome
from verifiers.registry import register_verifier

# pyscf and rdkit are heavy: imported in the function that calls them (a worker process).
__all__ = ["DFTGapVerifier", "DFTParams", "dft_gap"]


class DFTParams(MoleculeJobParams):
    """Parameters of the DFT tier."""

    xc: str = Field(default="B3LYPG", description="Exchange-correlation functional (PySCF name).")
    basis: str = Field(default="6-31G*", description="Gaussian basis set (PySCF name).")
    density_fitting: bool = Field(
        default=True, description="Density-fit the Coulomb/exchange integrals (~25% faster, gap changes < 1 meV)."
    )
    geometry_source: Literal["mmff", "xtb"] = Field(
        default="mmff", description="'mmff': the force-field geometry; 'xtb': relax it with GFN2-xTB first."
    )
    conv_tol: float = Field(default=1e-8, gt=0, description="SCF energy convergence threshold (Hartree).")
    max_scf_cycles: int = Field(default=100, ge=1, description="SCF cycles before giving up.")
    newton_fallback: bool = Field(
        default=True, description="If the SCF does not converge, retry with second-order (Newton) SCF."
    )
    timeout_s: float = Field(default=900.0, gt=0, description="Hard wall-clock limit per candidate, in seconds.")


def dft_gap(job: dict[str, Any]) -> dict[str, Any]:
    """Worker function: embed ``job['smiles']``, run RKS DFT, return HOMO, LUMO, gap (eV) and energy."""
    from pyscf import dft, gto, lib
    from rdkit import Chem

    lib.num_threads(int(job.get("threads", 1)))
    mol = Chem.MolFromSmiles(job["smiles"])
    molh, force_field = embed_molecule(mol, GeometryParams(**job.get("geometry", {})))
    numbers, symbols, coords = xyz_of(molh)
    positions = np.asarray(coords)  # Angstrom
    if job.get("geometry_source") == "xtb":
        relaxed, _, _ = xtb_optimize(np.asarray(numbers), positions * ANGSTROM_TO_BOHR, job)
        positions = relaxed / ANGSTROM_TO_BOHR
        force_field = "GFN2-xTB"
    molecule = gto.M(
        atom=[(s, tuple(xyz)) for s, xyz in zip(symbols, positions.tolist(), strict=True)],
        basis=job.get("basis", "6-31G*"),
        charge=int(job.get("charge", 0)),
        spin=0,
        verbose=0,
        max_memory=int(job.get("max_memory_mb", 4000)),
    )
    mf = dft.RKS(molecule)
    mf.xc = job.get("xc", "B3LYPG")
    if job.get("density_fitting", True):
        mf = mf.density_fit()
    mf.conv_tol = float(job.get("conv_tol", 1e-8))
    mf.max_cycle = int(job.get("max_scf_cycles", 100))
    cycles = {"n": 0}
    mf.callback = lambda env: cycles.__setitem__("n", cycles["n"] + 1)
    energy = mf.kernel()
    method = "DIIS"
    if not mf.converged and job.get("newton_fallback", True):
        mf = mf.newton()
        energy = mf.kernel(mf.mo_coeff, mf.mo_occ)
        method = "DIIS then Newton"
    n_occupied = molecule.nelectron // 2
    homo = float(mf.mo_energy[n_occupied - 1]) * HARTREE_TO_EV
    lumo = float(mf.mo_energy[n_occupied]) * HARTREE_TO_EV
    return {
        "converged": bool(mf.converged),
        "scf_cycles": cycles["n"],
        "scf_method": method,
        "gap_ev": lumo - homo,
        "homo_ev": homo,
        "lumo_ev": lumo,
        "energy_eh": float(energy),
        "n_basis": int(molecule.nao),
        "geometry": force_field,
    }


@register_verifier
class DFTGapVerifier(MoleculeJobVerifier):
    """DFT (PySCF RKS, B3LYP/6-31G* by default) HOMO-LUMO gap (eV)."""

    name: ClassVar[str] = "pyscf-b3lyp"
    tier: ClassVar[Tier] = Tier.high_fidelity
    version: ClassVar[str] = "1"
    Params: ClassVar[type[BaseModel]] = DFTParams
    work_function = staticmethod(dft_gap)
    preload_modules: ClassVar[tuple[str, ...]] = ("pyscf.dft", "pyscf.df", "arl_flows.suites.molecules.dft")
    # Worker CPU seconds, 1 thread, B3LYP/6-31G* with density fitting (docs/tiers.md):
    # 0.3 s for water, 4.4 s for pyridine (6 heavy atoms), median 10.5 s (7-17 s) at 7-9.
    cost_model: ClassVar[CostModel] = CostModel(base=0.3, per_unit=0.014, exponent=3.0)

    def job_settings(self) -> dict[str, Any]:
        p = self.params
        return {
            "geometry_source": p.geometry_source,
            "xc": p.xc,
            "basis": p.basis,
            "density_fitting": p.density_fitting,
            "conv_tol": p.conv_tol,
            "max_scf_cycles": p.max_scf_cycles,
            "newton_fallback": p.newton_fallback,
            "threads": p.threads,
            # PySCF's own budget for integrals, kept below the worker's address-space limit.
            "max_memory_mb": int((p.memory_mb or 8000) * 0.6),
        }

    def interpret(self, candidate: Candidate, result: dict[str, Any], outcome: TaskOutcome) -> Verdict:
        costs = {"cost_s": outcome.cpu_s, "wall_s": outcome.wall_s}
        if not result["converged"]:
            return self.verdict(
                candidate,
                Status.failed,
                values={k: result[k] for k in ("scf_cycles", "scf_method", "n_basis")},
                feedback=f"SCF did not converge ({result['scf_method']}, {result['scf_cycles']} cycles)",
                **costs,
            )
        gap = result["gap_ev"]
        return self.verdict(candidate, Status.ok, value=gap, values=result, **costs)
