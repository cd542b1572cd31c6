"""Exact novelty: is a canonical SMILES in a chemistry space's training data or in QM9?

A training set of 1.58M SMILES (MOSES) would weigh 60 MB as text; the package ships
instead a sorted array of 64-bit hashes (the first 8 bytes of blake2b of the RDKit
canonical SMILES, as :func:`arl_flows.suites.molecules.chemistry.canonical_smiles`
writes it), 8 bytes a molecule, looked up by binary search. Two different SMILES
share a hash with probability n / 2**64 per lookup (8.6e-14 for n = 1.58M): a novel
molecule is called known that rarely, a known one is never called novel. QM9's set is
the suite's shipped table (``data/qm9_gap.csv``), held as text.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np

__all__ = ["NOVELTY_DIR", "HashIndex", "build_hash_index", "is_novel", "smiles_hash", "training_index"]

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


@functools.cache
def _qm9_canonicals() -> frozenset[str]:
    from arl_flows.suites.molecules.datasets import load_qm9_gaps

    return frozenset(smiles for smiles, _gap in load_qm9_gaps())


def is_novel(canonical: str, index_file: str | None) -> bool:
    """True when ``canonical`` is in neither QM9's table nor the space's training index (``None``: QM9 only)."""
    if canonical in _qm9_canonicals():
        return False
    return index_file is None or canonical not in training_index(index_file)
