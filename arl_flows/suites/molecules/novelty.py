"""Exact novelty: is a canonical SMILES in a chemistry space's training data or in QM9?

A training set of 1.58M SMILES (MOSES) would weigh 60 MB as text; the package ships
instead a sorted array of 64-bit hashes (the first 8 bytes of blake2b of the RDKit
canonical SMILES, as :func:`arl_flows.suites.molecules.chemistry.canonical_smiles`
writes it), 8 bytes a molecule, looked up by binary search. Two different SMILES
share a hash with probability n / 2**64 per lookup (8.6e-14 for n = 1.58M): a novel
molecule is called known that rarely, a known one is never called novel. QM9's set is
the suite's shipped table (``data/qm9_gap.csv``), held as text.

Scaffold novelty (a prior's report) uses the same machinery: a second index beside the
training set's, ``<index>_scaffolds.npy``, holds the hashes of its molecules' Bemis-Murcko
scaffolds (:func:`murcko_scaffold`).
"""

from __future__ import annotations

import csv
import functools
import hashlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np

__all__ = [
    "NOVELTY_DIR",
    "HashIndex",
    "build_hash_index",
    "is_novel",
    "murcko_scaffold",
    "scaffold_index_file",
    "scaffolds_of",
    "smiles_scaffold",
    "smiles_hash",
    "training_index",
]

NOVELTY_DIR = Path(__file__).parent / "data" / "novelty"


def smiles_hash(canonical: str) -> int:
    """64-bit hash of a canonical SMILES: blake2b's first 8 bytes, little-endian."""
    return int.from_bytes(hashlib.blake2b(canonical.encode("ascii"), digest_size=8).digest(), "little")


def build_hash_index(canonicals: Iterable[str]) -> np.ndarray:
    """The sorted, deduplicated uint64 hashes of ``canonicals`` (what a ``.npy`` index holds)."""
    hashes = np.fromiter((smiles_hash(s) for s in canonicals), dtype=np.uint64)
    return np.unique(hashes)


class HashIndex:
    """Membership of canonical SMILES in a sorted uint64 hash array."""

    def __init__(self, hashes: np.ndarray) -> None:
        if hashes.dtype != np.uint64 or hashes.ndim != 1:
            raise ValueError(f"a hash index is a 1-D uint64 array, got {hashes.ndim}-D {hashes.dtype}")
        self.hashes = hashes

    @classmethod
    def load(cls, path: Path | str) -> HashIndex:
        return cls(np.load(path, mmap_mode="r"))

    def __len__(self) -> int:
        return int(self.hashes.shape[0])

    def __contains__(self, canonical: object) -> bool:
        if not isinstance(canonical, str) or len(self) == 0:
            return False
        h = np.uint64(smiles_hash(canonical))
        i = int(np.searchsorted(self.hashes, h))
        return i < len(self) and self.hashes[i] == h


@functools.cache
def training_index(filename: str) -> HashIndex:
    """The shipped hash index ``data/novelty/<filename>`` (loaded once, memory-mapped)."""
    path = NOVELTY_DIR / filename
    if not path.is_file():
        raise FileNotFoundError(f"novelty index {path} is missing; build it with `python -m benchmarks.novelty_index`")
    return HashIndex.load(path)


def scaffold_index_file(index_file: str) -> str:
    """The scaffold index shipped beside a training index: ``moses_train.npy`` -> ``moses_train_scaffolds.npy``."""
    return index_file.removesuffix(".npy") + "_scaffolds.npy"


def murcko_scaffold(mol) -> str | None:  # noqa: ANN001 - an RDKit Mol; rdkit is imported by the caller
    """Canonical SMILES of ``mol``'s Bemis-Murcko scaffold (its ring systems and the linkers between them).

    Bemis & Murcko, J. Med. Chem. 39, 2887 (1996); RDKit's ``MurckoScaffold.GetScaffoldForMol`` as MOSES
    computes it. None for an acyclic molecule (its scaffold is empty) or one RDKit cannot reduce.
    """
    from rdkit import Chem
    from rdkit.Chem.Scaffolds import MurckoScaffold

    try:
        scaffold = Chem.MolToSmiles(MurckoScaffold.GetScaffoldForMol(mol))
    except (ValueError, RuntimeError):
        return None
    return scaffold or None


def smiles_scaffold(smiles: str) -> str | None:
    """:func:`murcko_scaffold` of a SMILES; None if RDKit cannot parse it."""
    from rdkit import Chem, rdBase

    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(smiles)
    return murcko_scaffold(mol) if mol is not None else None


def scaffolds_of(smiles: Iterable[str]) -> frozenset[str]:
    """The distinct scaffolds of a set of molecules (QM9's 24k shipped molecules: seconds)."""
    return frozenset(filter(None, map(smiles_scaffold, smiles)))


# QM9's rows drawn with charges (from 3D structures), each with the form a candidate is keyed by
# (chemistry.fewest_charges): shipped, since computing them costs every process about a second.
QM9_NEUTRAL_FORMS = Path(__file__).parent / "data" / "novelty" / "qm9_neutral_forms.csv"


def qm9_neutral_forms() -> dict[str, str]:
    """QM9's net-neutral rows drawn with charged atoms -> their drawing with the fewest charges, where it differs
    (``CC(=O)O[CH+][NH-]`` -> ``CC(=O)OC=N``); computed from the table (:data:`QM9_NEUTRAL_FORMS` ships it)."""
    from rdkit import Chem, rdBase

    from arl_flows.suites.molecules.chemistry import fewest_charges
    from arl_flows.suites.molecules.datasets import load_qm9_gaps

    forms = {}
    with rdBase.BlockLogs():
        for smiles, _gap in load_qm9_gaps():
            if "+" not in smiles and "-]" not in smiles:
                continue
            mol = Chem.MolFromSmiles(smiles)
            if mol is None or Chem.GetFormalCharge(mol) != 0:  # a net charge is no candidate's key
                continue
            neutral = Chem.MolToSmiles(fewest_charges(mol))
            if neutral != smiles:
                forms[smiles] = neutral
    return forms


@functools.cache
def _qm9_canonicals() -> frozenset[str]:
    from arl_flows.suites.molecules.datasets import load_qm9_gaps

    known = {smiles for smiles, _gap in load_qm9_gaps()}
    # The table draws some molecules as zwitterions (CC(=O)O[CH+][NH-]); a candidate is keyed by its form with the
    # fewest charges (CC(=O)OC=N), which is then not new either.
    with open(QM9_NEUTRAL_FORMS, newline="") as fh:
        known |= {row["neutral"] for row in csv.DictReader(fh)}
    return frozenset(known)


def _without_stereo(canonical: str) -> str:
    """``canonical`` with its stereo marks taken off (itself when it has none)."""
    if not any(mark in canonical for mark in "@/\\"):
        return canonical
    from rdkit import Chem, rdBase

    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(canonical)
    return Chem.MolToSmiles(mol, isomericSmiles=False) if mol is not None else canonical


def is_novel(canonical: str, index_file: str | None) -> bool:
    """True when ``canonical`` is in neither QM9's table nor the space's training index (``None``: QM9 only).

    Both training sets are written without stereo: a stereo mark on one of their molecules does not make it new, so
    the molecule is also looked up with its marks taken off.
    """
    forms = {canonical, _without_stereo(canonical)}
    if forms & _qm9_canonicals():
        return False
    return index_file is None or not any(form in training_index(index_file) for form in forms)


if __name__ == "__main__":  # python -m arl_flows.suites.molecules.novelty: write QM9_NEUTRAL_FORMS again
    with open(QM9_NEUTRAL_FORMS, "w", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["smiles", "neutral"])
        writer.writerows(sorted(qm9_neutral_forms().items()))
