"""Chemistry spaces of the molecules suite: which molecules a run may propose, and what they are novel against.

A space is one typed definition: its elements, its largest molecule, its
charge, radical and fragment rules, and the shipped index of its training set
(``novelty.py``). Every tier checks a candidate against its run's space
(``MoleculeConstraints.space``), so a molecule outside it is an ``invalid``
verdict naming the broken rule. Add a space by adding one entry to ``SPACES``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["DEFAULT_SPACE", "SPACES", "ChemistrySpace", "get_space"]


@dataclass(frozen=True)
class ChemistrySpace:
    """One chemistry space: its constraints and its training set.

    Every space is closed-shell (radicals are rejected): the tiers compute closed-shell gaps.
    """

    name: str
    description: str
    elements: tuple[str, ...]
    max_heavy_atoms: int
    formal_charge: int = 0
    single_fragment: bool = True  # dot-separated mixtures ('CC.O') are rejected
    training_index: str | None = None  # file under data/novelty/; None: the training set is QM9's shipped table
    training_set: str = "QM9 (data/qm9_gap.csv)"
    # The heavy-atom count of a typical molecule of the space, for what must be sized before any candidate exists:
    # the DFT tier's timeout, memory and latency hint (dft.py), hence the default pipeline. None: the tiers keep
    # their own defaults (QM9's: the ladder and its published runs were measured that way).
    typical_heavy_atoms: int | None = None
    # The basis a ``pyscf-b3lyp`` tier of the suite gets when its params name none (the default ladder's): one that
    # covers every element of the space. qm9: 6-31G, as every published qm9 run.
    dft_basis: str = "6-31g"
    # The geometry a ``pyscf-b3lyp`` tier gets when its params name none (docs/tiers.md, "MMFF94 or a GFN2-xTB
    # relaxation"): "xtb" relaxes the MMFF94 conformer with GFN2-xTB before the single point. On QM9 it halves DFT's
    # error against QM9's B3LYP geometries and removes its bias, for a few per cent of a call.
    dft_geometry: Literal["mmff", "xtb"] = "xtb"


SPACES: dict[str, ChemistrySpace] = {
    space.name: space
    for space in (
        ChemistrySpace(
            name="qm9",
            description="QM9 chemistry: neutral closed-shell molecules of C, N, O, F (and H), at most 9 heavy atoms",
            elements=("C", "N", "O", "F", "H"),
            max_heavy_atoms=9,
        ),
        ChemistrySpace(
            name="druglike",
            description="drug-like molecules: neutral, closed-shell, one fragment of H, C, N, O, F, S, Cl, Br, at most 40 heavy atoms",
            elements=("H", "C", "N", "O", "F", "S", "Cl", "Br"),
            max_heavy_atoms=40,
            training_index="moses_train.npy",
            training_set="MOSES train (Polykovskiy et al., Front. Pharmacol. 2020; MIT)",
            dft_basis="6-31g*",  # PySCF's 6-31G has no Br; 6-31G* is the reference pools' level
            # The relaxed geometry, as in qm9, since its reference pool (the truth its runs are scored on and the
            # history they start from) was recomputed on it (201 of 201, docs/tiers.md).
            typical_heavy_atoms=21,  # the median of MOSES test (first 5,000 molecules: 17-26 hold 97%; docs/tiers.md)
        ),
    )
}

DEFAULT_SPACE = "qm9"


def get_space(name: str) -> ChemistrySpace:
    """The space called ``name``; an unknown name is one ValueError line listing the known ones."""
    space = SPACES.get(name) if isinstance(name, str) else None
    if space is None:
        raise ValueError(f"unknown chemistry space {str(name)[:40]!r}; known spaces: {', '.join(sorted(SPACES))}")
    return space
