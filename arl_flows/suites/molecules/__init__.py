"""Chemistry ladder for molecular design by HOMO-LUMO gap.

Tiers, cheapest first: ``rdkit-eht`` (fast), ``gfn2-xtb`` (simulation),
``pyscf-b3lyp`` (high_fidelity) or ``simulated-cluster`` (high_fidelity, a remote DFT
queue modelled by the QM9 table and a latency), ``lab`` and ``reference-table`` (lab tier).
Importing this package registers all of them.
"""

from arl_flows.suites.molecules.cluster import SimulatedClusterParams, SimulatedClusterVerifier
from arl_flows.suites.molecules.dft import DFTGapVerifier, DFTParams, dft_gap
from arl_flows.suites.molecules.fast import EHTGapVerifier, EHTParams
from arl_flows.suites.molecules.lab import LabParams, LabVerifier
from arl_flows.suites.molecules.reference import ReferenceTableParams, ReferenceTableVerifier, load_reference_table
from arl_flows.suites.molecules.chemistry import (
    SUITE,
    GeometryError,
    GeometryParams,
    InvalidMolecule,
    MoleculeConstraints,
    MoleculeJobParams,
    MoleculeJobVerifier,
    ParsedMolecule,
    canonical_smiles,
    check_molecule,
    embed_molecule,
    make_candidate,
    parse_smiles,
)
from arl_flows.suites.molecules.reference_or_dft import ReferenceOrDFTParams, ReferenceOrDFTVerifier  # noqa: F401 - registers it
from arl_flows.suites.molecules.xtb import XTBGapVerifier, XTBParams, xtb_gap

__all__ = [
    "SUITE",
    "SimulatedClusterParams",
    "SimulatedClusterVerifier",
    "DFTGapVerifier",
    "DFTParams",
    "EHTGapVerifier",
    "EHTParams",
    "GeometryError",
    "GeometryParams",
    "InvalidMolecule",
    "LabParams",
    "LabVerifier",
    "MoleculeConstraints",
    "MoleculeJobParams",
    "MoleculeJobVerifier",
    "ParsedMolecule",
    "ReferenceTableParams",
    "ReferenceTableVerifier",
    "XTBGapVerifier",
    "XTBParams",
    "canonical_smiles",
    "check_molecule",
    "dft_gap",
    "embed_molecule",
    "load_reference_table",
    "make_candidate",
    "parse_smiles",
    "xtb_gap",
]
