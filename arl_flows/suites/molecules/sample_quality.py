"""How good a prior's samples are, measured as MOSES measures molecule generators.

Polykovskiy et al., "Molecular Sets (MOSES): a benchmarking platform for molecular generation models",
Front. Pharmacol. 11, 565644 (2020). Every metric is computed on the *valid* samples (RDKit parses them),
duplicates kept, as MOSES's ``get_all_metrics`` does:

- ``validity``, ``uniqueness`` (distinct / valid) and ``novelty`` (distinct ones not in the training set);
- ``internal_diversity``: IntDiv1, one minus the mean Tanimoto similarity of every ordered pair of samples
  (the pair of a sample with itself included, as MOSES does) on Morgan fingerprints of radius 2, 1024 bits;
- ``scaffold_novelty``: the share of the samples' distinct Bemis-Murcko scaffolds that no training molecule has
  (against the shipped scaffold index, ``novelty.py``); acyclic samples have no scaffold and are not counted;
- ``invalid_kinds``: why the invalid samples fail, as shares of all samples (an unclosed ring, unbalanced
  branches, other syntax, a valence error, an aromatic system RDKit cannot kekulize, anything else), by the
  molecules suite's own parser (:func:`~arl_flows.suites.molecules.chemistry.parse_smiles`);
- ``fcd``: the Frechet ChemNet Distance (Preuer et al., J. Chem. Inf. Model. 58, 1736 (2018)) between the
  samples' ChemNet activations and shipped reference statistics of MOSES test (``fcd-torch``, whose wheel
  holds the ChemNet weights: nothing is downloaded). FCD is biased upwards on small samples: MOSES reports
  it on 30,000 samples, a 1,000-sample report is not comparable with its table.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Container, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from arl_flows.suites.molecules.novelty import murcko_scaffold, scaffold_index_file, scaffolds_of, training_index

__all__ = [
    "FCD_DIR",
    "FCDReference",
    "chemnet_statistics",
    "fcd",
    "fcd_reference",
    "internal_diversity",
    "invalid_kinds",
    "sample_metrics",
    "scaffold_novelty",
    "space_references",
]

FCD_DIR = Path(__file__).parent / "data" / "fcd"
# The shipped FCD reference of each space (benchmarks/prior_metrics.py writes them); qm9 has none.
_FCD_FILES = {"druglike": "moses_test.npz"}


def _valid_molecules(smiles: Sequence[str]) -> list:
    from rdkit import Chem, rdBase

    mols = []
    # Silenced here only: RDLogger.DisableLog is process-wide, and the chemistry
    # verifiers read their feedback ("unclosed ring") from RDKit's log.
    with rdBase.BlockLogs():
        for s in smiles:
            mol = Chem.MolFromSmiles(s) if s else None
            if mol is not None and mol.GetNumAtoms() > 0:
                mols.append(mol)
    return mols


# What an invalid sample broke, from the first words of the parser's one-line reason (checked in this order).
_INVALID_KINDS = (
    ("unclosed_ring", ("unclosed ring",)),
    ("unbalanced_branch", ("extra open parenthes", "extra close parenthes")),
    ("syntax", ("SMILES parse error", "empty SMILES", "SMILES must", "SMILES is", "no atoms")),
    ("valence", ("valence",)),
    ("aromaticity", ("aromaticity", "kekulize")),
)


def invalid_kinds(smiles: Sequence[str]) -> dict[str, float]:
    """Share of all ``smiles`` that fail for each kind of reason (``other``: none of the named ones); 0 when all parse."""
    from arl_flows.suites.molecules.chemistry import InvalidMolecule, parse_smiles

    counts = dict.fromkeys([kind for kind, _ in _INVALID_KINDS] + ["other"], 0)
    for text in smiles:
        try:
            parse_smiles(text)
        except InvalidMolecule as exc:
            reason = str(exc).lower()
            kind = next((k for k, words in _INVALID_KINDS if any(w.lower() in reason for w in words)), "other")
            counts[kind] += 1
    return {kind: round(n / max(len(smiles), 1), 4) for kind, n in counts.items()}


def internal_diversity(mols: Sequence, p: int = 1) -> float | None:
    """MOSES's IntDiv_p: ``1 - mean_i (mean_j T(i, j)^p)^(1/p)`` over Morgan r=2 1024-bit fingerprints; None if empty.

    T is the Tanimoto similarity; j runs over every sample, ``i`` itself included (MOSES's
    ``internal_diversity``), so n identical molecules give 0 and two molecules of similarity t give (1 - t) / 2.
    """
    from rdkit.Chem import rdFingerprintGenerator

    if not mols:
        return None
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=1024)
    bits = np.array([generator.GetFingerprintAsNumPy(m) for m in mols], dtype=np.float32)  # (n, 1024)
    counts = bits.sum(axis=1)  # (n,)
    per_molecule = []
    for start in range(0, len(bits), 1024):  # row blocks: an (n, n) matrix of 30k samples would be 3.6 GB
        both = bits[start : start + 1024] @ bits.T  # (b, n) shared on-bits
        union = counts[start : start + 1024, None] + counts[None, :] - both  # (b, n)
        tanimoto = np.divide(both, union, out=np.ones_like(both), where=union > 0)  # two empty fingerprints: 1
        per_molecule.append(np.mean(tanimoto.astype(np.float64) ** p, axis=1) ** (1.0 / p))  # (b,)
    return float(1.0 - np.concatenate(per_molecule).mean())


def scaffold_novelty(mols: Sequence, training_scaffolds: Container[str]) -> float | None:
    """Share of the distinct Bemis-Murcko scaffolds of ``mols`` not in ``training_scaffolds``; None if none has a ring."""
    scaffolds = {s for s in map(murcko_scaffold, mols) if s is not None}
    if not scaffolds:
        return None
    return sum(1 for s in scaffolds if s not in training_scaffolds) / len(scaffolds)


@dataclass(frozen=True)
class FCDReference:
    """Mean and covariance of ChemNet's penultimate activations over a reference set, and what the set was."""

    mu: np.ndarray  # (512,)
    sigma: np.ndarray  # (512, 512)
    source: str

    def save(self, path: Path) -> None:
        """float32, the covariance's upper triangle only (it is symmetric): 0.5 MB for ChemNet's 512 units."""
        rows, cols = np.triu_indices(self.mu.shape[0])
        np.savez_compressed(path, mu=self.mu.astype(np.float32), sigma_triu=self.sigma[rows, cols].astype(np.float32),
                            source=np.array(self.source))

    @classmethod
    def load(cls, path: Path) -> FCDReference:
        with np.load(path) as data:
            mu = data["mu"].astype(np.float64)
            rows, cols = np.triu_indices(mu.shape[0])
            sigma = np.zeros((mu.shape[0], mu.shape[0]))
            sigma[rows, cols] = data["sigma_triu"]
            sigma[cols, rows] = data["sigma_triu"]
            return cls(mu=mu, sigma=sigma, source=str(data["source"]))


@functools.cache
def _chemnet():  # noqa: ANN202 - fcd_torch.FCD
    from fcd_torch import FCD

    return FCD(device="cpu", n_jobs=1)  # ChemNet on the CPU, in this process (no DataLoader workers): ms a molecule


def chemnet_statistics(canonicals: Sequence[str], source: str) -> FCDReference:
    """The :class:`FCDReference` of ``canonicals`` (at least 2 SMILES that RDKit parses)."""
    if len(canonicals) < 2:
        raise ValueError(f"FCD needs at least 2 valid molecules, got {len(canonicals)}")
    with warnings.catch_warnings():  # fcd-torch 1.0.7 calls numpy's row_stack and scipy's sqrtm(disp=...)
        warnings.simplefilter("ignore", DeprecationWarning)
        activations = _chemnet().get_predictions(list(canonicals))  # (n, 512)
    return FCDReference(mu=activations.mean(axis=0), sigma=np.cov(activations.T), source=source)


def fcd(canonicals: Sequence[str], reference: FCDReference) -> float | None:
    """Frechet ChemNet Distance of ``canonicals`` to ``reference``; None for fewer than 2 molecules."""
    from fcd_torch.utils import calculate_frechet_distance

    if len(canonicals) < 2:
        return None
    sample = chemnet_statistics(canonicals, "samples")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return float(calculate_frechet_distance(sample.mu, sample.sigma, reference.mu, reference.sigma))


@functools.cache
def fcd_reference(space: str) -> FCDReference | None:
    """The shipped FCD reference of ``space`` (druglike: MOSES test), or None where none ships."""
    name = _FCD_FILES.get(space)
    if name is None or not (FCD_DIR / name).is_file():
        return None
    return FCDReference.load(FCD_DIR / name)


@functools.lru_cache(maxsize=2)
def _scaffolds(smiles: tuple[str, ...]) -> frozenset[str]:
    return scaffolds_of(smiles)  # QM9's table: 24k molecules, computed once a process


def space_references(
    space: str, training_smiles: Sequence[str] = ()
) -> tuple[Container[str], Container[str], FCDReference | None]:
    """What a prior of ``space`` is measured against: (training molecules, their scaffolds, FCD reference).

    druglike: the shipped MOSES train indexes (molecules and scaffolds) and MOSES test's ChemNet statistics.
    qm9: ``training_smiles`` (the QM9 molecules the prior was trained on) and their scaffolds; no FCD reference.
    """
    from arl_flows.suites.molecules.spaces import get_space

    index = get_space(space).training_index
    if index is None:
        return set(training_smiles), _scaffolds(tuple(training_smiles)), fcd_reference(space)
    return training_index(index), training_index(scaffold_index_file(index)), fcd_reference(space)


def sample_metrics(
    smiles: Sequence[str],
    training_set: Container[str],
    training_scaffolds: Container[str] | None = None,
    reference: FCDReference | None = None,
    goal_set: Container[str] | None = None,
) -> dict[str, Any]:
    """Validity, uniqueness, novelty and internal diversity of sampled SMILES (canonicalised with RDKit).

    With ``training_scaffolds``, also scaffold novelty; with ``reference``, also FCD; with ``goal_set`` (canonical
    SMILES of the molecules whose goal prompts the prior was trained on), ``goal_set_copies``: the share of valid
    samples that repeat one of them, which is how a prior that memorised its goal labels shows (else those are None).
    """
    from rdkit import Chem

    mols = _valid_molecules(smiles)
    canon = [Chem.MolToSmiles(m) for m in mols]
    unique = set(canon)
    return {
        "validity": len(canon) / max(len(smiles), 1),
        "uniqueness": len(unique) / max(len(canon), 1),
        "novelty": sum(1 for s in unique if s not in training_set) / max(len(unique), 1),
        "internal_diversity": internal_diversity(mols),
        "scaffold_novelty": scaffold_novelty(mols, training_scaffolds) if training_scaffolds is not None else None,
        "fcd": fcd(canon, reference) if reference is not None else None,
        "invalid_kinds": invalid_kinds(smiles),
        "goal_set_copies": sum(1 for s in canon if s in goal_set) / max(len(canon), 1) if goal_set is not None else None,
    }

