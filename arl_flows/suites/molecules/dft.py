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

**The geometry comes from the chemistry space** (``ChemistrySpace.dft_geometry``) unless the params name
one: ``xtb`` in both spaces (the ETKDG conformer relaxed with MMFF94, then with GFN2-xTB; on QM9 this halves
the error against QM9's B3LYP geometries, 0.21 to 0.10 eV, for a few per cent of a call; druglike moved on
2026-12-07, with its reference pool: docs/tiers.md). ``mmff`` keeps the force-field geometry. The geometry is part
of a verdict's cache key.

**Sized by the chemistry space.** A call costs ~``0.014 n^3`` CPU-s at n heavy
atoms (docs/tiers.md): 10 s at QM9's 9, minutes at drug size. What must be
fixed before any candidate exists comes from the run's space
(``MoleculeConstraints.space``) when it declares a typical size
(``ChemistrySpace.typical_heavy_atoms``; QM9 declares none and keeps the
defaults its ladder was measured with); a value the params give always wins:

- ``timeout_s``: ``TIMEOUT_FACTOR`` times the predicted wall time of the space's
  largest molecule on ``threads`` threads (druglike, 40 heavy atoms, 1 thread:
  an hour), the most any call may take;
- ``timeout_factor``: each call is killed at ``CALL_TIMEOUT_FACTOR`` times the
  predicted wall time of *its own* molecule (at least ``MIN_CALL_TIMEOUT_S``),
  never past ``timeout_s``: a 23-heavy-atom molecule predicted at 170 s gets
  17 minutes, not the hour a 40-atom one may need. Two 23-atom SCFs that had not
  converged after 25 CPU-minutes held both DFT jobs of a SLURM benchmark
  (docs/benchmarks.md, "Third run");
- ``max_scf_cycles`` and ``newton_max_cycles``: 30 DIIS cycles, then at most 5
  Newton macro iterations. The first 29 MOSES molecules of 12-20 heavy atoms in
  the druglike reference pool converged in 10-14 DIIS cycles, and all 147 of it
  computed so far converged; one still moving by a Hartree after 60 is not
  converging, and says so in minutes;
- ``memory_mb``: room for the density-fitted 3-index integrals of the largest
  molecule inside PySCF's budget (60% of the worker's limit; PySCF goes to disk
  beyond it rather than fail);
- ``latency_s``: a hint, the predicted wall time of one call at the typical
  size (druglike: 21 heavy atoms, ~2 minutes). It makes config resolution pick
  the async pipeline (``arl_flows.config.ASYNC_FROM_LATENCY_S``); it is not part
  of the verdict's cache key.
"""

from __future__ import annotations

import functools
import math
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, Field, model_validator

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
from arl_flows.suites.molecules.spaces import DEFAULT_SPACE, ChemistrySpace, get_space
from arl_flows.suites.molecules.xtb import ANGSTROM_TO_BOHR, HARTREE_TO_EV, xtb_optimize
from verifiers.isolation import TaskOutcome
from verifiers.registry import register_verifier

# pyscf and rdkit are heavy: imported in the function that calls them (a worker process).
__all__ = ["DFT_COST_MODEL", "DFTGapVerifier", "DFTParams", "dft_gap", "dft_limits"]

# Worker CPU seconds, 1 thread, B3LYP/6-31G* with density fitting, MMFF geometry (docs/tiers.md):
# 0.3 s for water, 4.4 s for pyridine (6 heavy atoms), median 10.5 s (7-17 s) at 7-9.
DFT_COST_MODEL = CostModel(base=0.3, per_unit=0.014, exponent=3.0)
TIMEOUT_FACTOR = 4.0  # the hard limit: this multiple of the space's largest molecule's predicted wall time
# A call is killed at this multiple of its own molecule's predicted wall time: the cost model is for 6-31G (6-31G*
# costs 2-2.5x more at 18-20 heavy atoms, docs/tiers.md) and the machine may be shared (wall time above CPU time).
CALL_TIMEOUT_FACTOR = 6.0
MIN_CALL_TIMEOUT_S = 600.0
DRUG_SIZE_SCF = {"max_scf_cycles": 30, "newton_max_cycles": 5}  # MOSES molecules converge in 10-14 DIIS cycles
BASIS_PER_HEAVY_ATOM = 17  # 6-31G* functions per heavy atom, its hydrogens included (measured n_basis / n)
AUX_PER_BASIS = 3.5  # density-fitting auxiliary functions per basis function (PySCF's default auxbasis)
# 6-31G* basis functions of a heavy atom (PySCF, spherical d): DFT's cost grows with basis functions, not atoms.
HEAVY_ATOM_BASIS = {"C": 14, "N": 14, "O": 14, "F": 14, "S": 18, "Cl": 18, "Br": 32}
FIRST_ROW_BASIS = 14


@functools.lru_cache(maxsize=4096)
def basis_weight(canonical: str) -> float:
    """A molecule's heavy-atom basis functions over a first-row atom's as many times (1.0 for C, N, O and F only;
    C2Br6: 1.96), from its canonical SMILES; 1.0 when it does not parse."""
    from rdkit import Chem, rdBase

    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(canonical)
    heavy = [a.GetSymbol() for a in mol.GetAtoms() if a.GetAtomicNum() > 1] if mol is not None else []
    if not heavy:
        return 1.0
    return sum(HEAVY_ATOM_BASIS.get(symbol, FIRST_ROW_BASIS) for symbol in heavy) / (FIRST_ROW_BASIS * len(heavy))


def dft_limits(space: str, threads: int = 1) -> dict[str, float | int]:
    """Timeout, memory and latency hint of a DFT call in ``space`` (empty: the space declares no typical size)."""
    chem = get_space(space)
    if chem.typical_heavy_atoms is None:
        return {}
    largest = chem.max_heavy_atoms
    timeout = TIMEOUT_FACTOR * DFT_COST_MODEL.expected(float(largest)) / threads
    nao = BASIS_PER_HEAVY_ATOM * largest
    df_tensor_mb = AUX_PER_BASIS * nao * nao * (nao + 1) / 2 * 8 / 2**20
    memory = df_tensor_mb / 0.6 + 1024  # PySCF gets 60% of the worker's limit (job_settings); 1 GiB for the rest
    return {
        "timeout_s": max(900.0, 60.0 * math.ceil(timeout / 60.0)),
        "timeout_factor": CALL_TIMEOUT_FACTOR,
        "memory_mb": max(4096, 1024 * math.ceil(memory / 1024)),
        "latency_s": round(DFT_COST_MODEL.expected(float(chem.typical_heavy_atoms)) / threads, 1),
        **DRUG_SIZE_SCF,
    }


class DFTParams(MoleculeJobParams):
    """Parameters of the DFT tier."""

    xc: str = Field(default="B3LYPG", description="Exchange-correlation functional (PySCF name).")
    basis: str = Field(default="6-31G*", description="Gaussian basis set (PySCF name); runs: qm9 6-31G, druglike 6-31G*.")
    density_fitting: bool = Field(
        default=True, description="Density-fit the Coulomb/exchange integrals (~25% faster, gap changes < 1 meV)."
    )
    geometry_source: Literal["mmff", "xtb"] = Field(
        default="xtb",
        description="'mmff': the force-field geometry; 'xtb': relax it with GFN2-xTB first (default: the space's, "
        "xtb in qm9 and druglike; docs/tiers.md).",
    )
    conv_tol: float = Field(default=1e-8, gt=0, description="SCF energy convergence threshold (Hartree).")
    max_scf_cycles: int = Field(default=100, ge=1, description="SCF cycles before giving up.")
    newton_fallback: bool = Field(
        default=True, description="If the SCF does not converge, retry with second-order (Newton) SCF."
    )
    newton_max_cycles: int = Field(
        default=50, ge=1, description="Macro iterations of the Newton fallback (default: PySCF's 50; 5 at drug size)."
    )
    timeout_s: float = Field(
        default=900.0, gt=0,
        description="Hard wall-clock limit per candidate, in seconds (default: 900, or sized by the space, see dft_limits).",
    )
    timeout_factor: float | None = Field(
        default=None, gt=0,
        description="Kill each call at this multiple of its own molecule's predicted wall time (at least 600 s, "
        "never past timeout_s); none: timeout_s for every molecule (default; 6 in a space with a typical size).",
    )
    latency_s: float | None = Field(
        default=None, gt=0,
        description="Expected wall seconds of one call, a hint for choosing the pipeline (default: none, or the "
        "space's typical molecule's predicted time); not part of the cache key.",
    )

    @classmethod
    def space_geometry(cls, space: ChemistrySpace) -> str:
        """The ``geometry_source`` of a tier whose params name none: the space's."""
        return space.dft_geometry

    @model_validator(mode="before")
    @classmethod
    def _sized_by_the_space(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        constraints = data.get("constraints")
        space = getattr(constraints, "space", None) or (constraints.get("space") if isinstance(constraints, dict) else None)
        if not isinstance(space, str):
            space = DEFAULT_SPACE
        try:
            chem = get_space(space)
        except ValueError:
            return data  # the constraints' own check names the known spaces
        data = {"geometry_source": cls.space_geometry(chem)} | data
        if space == DEFAULT_SPACE:
            return data
        try:
            threads = int(data.get("threads", 1))
            limits = dft_limits(space, max(1, threads))
        except (TypeError, ValueError):
            return data  # the field checks name the problem (an unknown space, a bad thread count)
        return limits | data

    @model_validator(mode="after")
    def _basis_covers_the_elements(self) -> DFTParams:
        missing = basis_missing(self.basis, tuple(self.constraints.elements))
        if missing:
            raise ValueError(
                f"basis {self.basis!r} has no functions for {', '.join(missing)}, an element the constraints allow; "
                f"use a basis that covers it (e.g. basis = \"6-31G*\") or leave {', '.join(missing)} out of the "
                "constraints' elements"
            )
        return self


# Pairs of the shipped spaces' defaults that PySCF's library covers, known without importing PySCF (0.4 s): the
# registry builds the default params of every tier at start, `arl --help` included. Checked against the library by
# tests/arl_flows/suites/molecules/test_dft_sizing.py.
COVERED_DEFAULTS = frozenset({("6-31G*", frozenset({"H", "C", "N", "O", "F", "S", "Cl", "Br"})),
                              ("6-31G", frozenset({"H", "C", "N", "O", "F"}))})


@functools.lru_cache(maxsize=64)
def basis_missing(basis: str, elements: tuple[str, ...]) -> tuple[str, ...]:
    """The elements PySCF's basis library has no ``basis`` functions for (PySCF's 6-31G stops before Br)."""
    if any(basis == b and set(elements) <= covered for b, covered in COVERED_DEFAULTS):
        return ()
    import warnings

    from pyscf.gto import basis as library

    missing = []
    for element in elements:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "may be available in basis-set-exchange": not installed here
                library.load(basis, element)
        except Exception:  # noqa: BLE001 - BasisNotFoundError, or a name PySCF cannot parse: the SCF would fail too
            missing.append(element)
    return tuple(missing)


def dft_gap(job: dict[str, Any]) -> dict[str, Any]:
    """Worker function: embed ``job['smiles']``, run RKS DFT, return HOMO, LUMO, gap (eV) and energy."""
    from pyscf import dft, gto, lib
    from rdkit import Chem

    lib.num_threads(int(job.get("threads", 1)))
    mol = Chem.MolFromSmiles(job["smiles"])
    try:
        molh, force_field = embed_molecule(mol, GeometryParams(**job.get("geometry", {})))
    except UnrealisableStereo as exc:
        return {"invalid": str(exc)}  # the candidate's fault: MoleculeJobVerifier makes it an invalid verdict
    numbers, symbols, coords = xyz_of(molh)
    positions = np.asarray(coords)  # Angstrom
    if job.get("geometry_source") == "xtb":
        from tblite.exceptions import TBLiteRuntimeError

        try:
            relaxed, _, _ = xtb_optimize(np.asarray(numbers), positions * ANGSTROM_TO_BOHR, job)
        except TBLiteRuntimeError as exc:
            # xTB's SCF does not converge on some closed-shell molecules (near-degenerate frontier orbitals): the top
            # tier answers on the force-field geometry rather than fail, which would leave the molecule scored by the
            # surrogate for good (sixth attack pass: a 0.86 eV molecule kept a reward of 0.35).
            force_field = f"{force_field} (the GFN2-xTB relaxation failed: {str(exc).splitlines()[0][:80] if str(exc) else 'no reason'})"
        else:
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
        mf.max_cycle = int(job.get("newton_max_cycles", 50))
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
    cost_model: ClassVar[CostModel] = DFT_COST_MODEL
    reports: ClassVar[frozenset[str] | None] = frozenset({
        "converged", "scf_cycles", "scf_method", "gap_ev", "homo_ev", "lumo_ev", "energy_eh", "n_basis", "geometry"})
    # The latency hint does not change a verdict: like the worker count, it stays out of the cache key.
    execution_fields: ClassVar[frozenset[str]] = frozenset({"workers", "threads", "latency_s"})

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
            "newton_max_cycles": p.newton_max_cycles,
            "threads": p.threads,
            # PySCF's own budget for integrals, kept below the worker's address-space limit.
            "max_memory_mb": int((p.memory_mb or 8000) * 0.6),
        }

    def size(self, candidate: Candidate) -> float:
        """The heavy-atom count, weighted by the atoms' basis functions over a first-row atom's (:func:`basis_weight`):
        a molecule of C, N, O and F is its heavy-atom count, a bromine counts 2.3 (sixth attack pass: C2Br6 took 63
        CPU-s where its 8 heavy atoms predicted 7.5, and 57 with the weight)."""
        heavy = float(candidate.size or 0.0)
        canonical = candidate.meta.get("canonical") if candidate.meta else None
        return heavy * max(basis_weight(canonical), 1.0) if heavy and isinstance(canonical, str) else heavy

    def timeout_for(self, candidate: Candidate) -> float:
        """``timeout_factor`` times this molecule's predicted wall time (at least 600 s), within ``timeout_s``."""
        p = self.params
        if p.timeout_factor is None:
            return p.timeout_s
        predicted = self.expected_cost(candidate) / p.threads
        return min(p.timeout_s, max(MIN_CALL_TIMEOUT_S, p.timeout_factor * predicted))

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
