"""The graph-network surrogate that ships with the suite: its data split, its lower-tier inputs, its loader.

A run starts with a handful of top-tier answers at best, far too few to train
:class:`~arl_flows.suites.molecules.graph.GraphModel` (it needs thousands).
The shipped QM9 subset has the top tier's value (B3LYP gap) for 24.7k
molecules, so the network is trained on it once (``benchmarks/train_surrogate.py``)
and its weights ship in ``data/surrogate/``; every run's scheduler starts from
it and stacks a linear calibration on top with its own answers
(``Surrogate.attach_learned``).

The split is by a hash of the canonical SMILES (:func:`split_of`), not a
scaffold split: QM9 molecules are tiny and most have no ring or one, so
Murcko scaffolds put every acyclic molecule in one group (an empty scaffold)
and a scaffold split would be a split of ring systems, not of molecules. The
hash split is stable (a molecule's side never depends on the file's order or
on other molecules), and anyone can tell whether a molecule was trained on:

- ``test`` (25%): never seen by the network nor its calibration; benchmark
  pools and their histories are drawn from it;
- ``calibration`` (10%): not trained on; fits the shipped conformal scale of
  the network's std per pattern of lower tiers (the starting calibration of a
  run with no answers yet);
- ``train`` (65%): the network's training data.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from arl_flows.suites.molecules.graph import GraphModel

# rdkit (through chemistry) is heavy: imported where a SMILES is canonicalised.
__all__ = [
    "LOWER_TIERS",
    "SHIPPED_DIR",
    "ShippedSurrogate",
    "load_lower_tiers",
    "load_shipped",
    "split_of",
]

SHIPPED_DIR = Path(__file__).parent / "data" / "surrogate"
LOWER_TIERS_CSV = SHIPPED_DIR / "qm9_lower_tiers.csv.gz"
WEIGHTS = SHIPPED_DIR / "graph_ensemble.pt"
REPORT = SHIPPED_DIR / "report.json"
LOWER_TIERS = ("rdkit-eht", "gfn2-xtb")
_TEST_SHARE = 0.25
_CALIBRATION_SHARE = 0.10


def split_of(canonical_smiles: str) -> str:
    """``'test'``, ``'calibration'`` or ``'train'``: the shipped network's split, by a hash of the canonical SMILES."""
    share = int.from_bytes(hashlib.sha256(canonical_smiles.encode()).digest()[:8], "big") / 2.0**64
    if share < _TEST_SHARE:
        return "test"
    if share < _TEST_SHARE + _CALIBRATION_SHARE:
        return "calibration"
    return "train"


def load_lower_tiers(path: Path | None = None) -> list[dict[str, Any]]:
    """Rows of the shipped lower-tier table: canonical ``smiles``, ``gap_ev`` (top tier) and each lower tier's value (NaN: no answer)."""
    rows = []
    with gzip.open(path or LOWER_TIERS_CSV, "rt", newline="") as fh:
        for row in csv.DictReader(fh):
            rows.append(
                {
                    "smiles": row["smiles"],
                    "gap_ev": float(row["gap_ev"]),
                    **{t: float(row[t]) if row[t] else math.nan for t in LOWER_TIERS},
                }
            )
    return rows


class ShippedSurrogate:
    """The shipped ensemble as a learned surrogate model, with what it was trained on.

    ``predict_full(payloads, values)`` is the network's mean, std and the
    members' disagreement, its std scaled by the conformal factor measured
    on the calibration split for the pattern of tiers shown, so that with no
    answers of its own a run's 90% intervals are calibrated (it is a
    ``CalibratedModel``, and so tells the surrogate). ``pattern_prior(pattern)`` gives the typical
    std and the gross-error tail measured there. ``shift_scores(payloads, values)``
    says how far each molecule lies from what the network knows (its Tanimoto
    distance to the nearest training molecule, and the members' disagreement),
    each as a ratio to the median over a sample of the calibration split: the
    scheduler's surrogate widens the std beyond 1 (``Surrogate.shift``). ``seen(payload)`` says
    whether a molecule was in the network's training or calibration data:
    the scheduler never fits its stack on those (the network would grade its
    own homework).
    """

    def __init__(self, model: Any, report: dict[str, Any]) -> None:
        self.model = model
        self.report = report
        self.tiers = list(model.tiers)
        self._patterns = {tuple(k.split("+")) if k else (): v for k, v in report["patterns"].items()}
        self._known: frozenset[str] | None = None
        self._reference: _ShiftReference | None = None

    def pattern_prior(self, pattern: Sequence[str]) -> dict[str, float]:
        """``std_scale``, ``typical_std``, ``tail_rate``, ``tail_scale`` of a pattern, measured on the calibration split."""
        return self._patterns.get(tuple(pattern), {"std_scale": 1.0, "typical_std": 0.3, "tail_rate": 0.0, "tail_scale": 1.0})

    def predict_full(self, payloads: Sequence[str], values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        values = np.asarray(values, dtype=float).reshape(len(payloads), len(self.tiers))
        mean, std, spread = self.model.predict_full(payloads, values)
        known = np.isfinite(values)
        scale = np.array(
            [self.pattern_prior(tuple(t for t, k in zip(self.tiers, row) if k))["std_scale"] for row in known]
        )
        return mean, std * scale, spread

    def predict(self, payloads: Sequence[str], values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean, std, _ = self.predict_full(payloads, values)
        return mean, std

    def fine_tuned(self, payloads: Sequence[str], values: np.ndarray, target: np.ndarray, epochs: int = 10) -> ShippedSurrogate:
        """A copy whose network has trained ``epochs`` more on a run's own answers (see ``GraphModel.fine_tuned``)."""
        out = ShippedSurrogate(self.model.fine_tuned(payloads, values, target, epochs=epochs), self.report)
        out._known = self._known
        ref = self._reference  # the distance to the training data is unchanged; the spreads are re-measured
        if ref is not None:
            out._reference = _ShiftReference(ref.train_fps, ref.sample, ref.distance, {})
        return out

    def shift_scores(self, payloads: Sequence[str], values: np.ndarray) -> np.ndarray:
        """Per molecule: [distance to the training data, members' disagreement], each / its calibration-split
        90th percentile (``SHIFT_REFERENCE_QUANTILE``).

        The distance is 1 - the largest Tanimoto similarity (Morgan radius 2, 2,048 bits) to a molecule the
        network trained on; the disagreement is the std of the members' means with the same tiers shown.
        An unreadable SMILES scores NaN (the surrogate then leaves its std as it is).
        """
        values = np.asarray(values, dtype=float).reshape(len(payloads), len(self.tiers))
        ref = self._shift_reference()
        out = np.full((len(payloads), 2), np.nan)
        out[:, 0] = _nearest_distance(payloads, ref.train_fps) / ref.distance
        _, _, spread = self.model.predict_full(list(payloads), values)
        known = np.isfinite(values)
        for pattern in {tuple(row) for row in known}:
            rows = np.all(known == np.array(pattern), axis=1)
            out[rows, 1] = spread[rows] / ref.spread_for(self, pattern)
        return out

    def _shift_reference(self) -> _ShiftReference:
        if self._reference is None:
            rows = load_lower_tiers()
            train = [r["smiles"] for r in rows if split_of(r["smiles"]) == "train"]
            calibration = [r for r in rows if split_of(r["smiles"]) == "calibration"]
            sample = [calibration[i] for i in np.random.default_rng(0).permutation(len(calibration))[:_REFERENCE_SIZE]]
            fps = _training_fingerprints(train)
            distance = shift_reference_scale(_nearest_distance([r["smiles"] for r in sample], fps), 1e-3)
            self._reference = _ShiftReference(fps, sample, distance, {})
        return self._reference

    def seen(self, payload: str) -> bool:
        from arl_flows.suites.molecules.chemistry import canonical_smiles

        canonical = canonical_smiles(payload) if payload else None
        if canonical is None or split_of(canonical) == "test":
            return False
        if self._known is None:
            self._known = frozenset(r["smiles"] for r in load_lower_tiers())
        return canonical in self._known


_REFERENCE_SIZE = 300  # calibration-split molecules whose upper quantile makes a shift score of 1
# The quantile of the calibration sample's scores that a shift score is a ratio to. The network's stds were
# conformally calibrated at 90% on that split, so they already hold for a molecule as far out as 90% of its
# molecules; only one further out than that is beyond what the calibration vouches for. (The median, used
# before, widened half of the in-distribution molecules: on QM9's test split voi then paid 1.6-1.8x as much
# for the last 5% of the hits; docs/benchmarks.md.)
SHIFT_REFERENCE_QUANTILE = 0.9


def shift_reference_scale(values: Any, floor: float) -> float:
    """What a shift score of 1 is for one signal: its calibration sample's ``SHIFT_REFERENCE_QUANTILE`` (NaNs
    skipped), at least ``floor``."""
    return max(float(np.nanquantile(values, SHIFT_REFERENCE_QUANTILE)), floor)


@dataclass
class _ShiftReference:
    """What 'as usual' is for the shift scores: the training fingerprints and a calibration-split sample."""

    train_fps: list[Any]
    sample: list[dict[str, Any]]
    distance: float  # the sample's nearest-neighbour distance to the training set at SHIFT_REFERENCE_QUANTILE
    spreads: dict[tuple[bool, ...], float]  # the sample's members' disagreement at that quantile, per pattern shown

    def spread_for(self, surrogate: ShippedSurrogate, pattern: tuple[bool, ...]) -> float:
        if pattern not in self.spreads:
            values = np.array(
                [[r[t] if shown else np.nan for t, shown in zip(surrogate.tiers, pattern)] for r in self.sample]
            )
            _, _, spread = surrogate.model.predict_full([r["smiles"] for r in self.sample], values)
            self.spreads[pattern] = shift_reference_scale(spread, 1e-6)
        return self.spreads[pattern]


# The fingerprint of the shift scores: Morgan, radius 2, 2,048 bits (also the fingerprint cache's key).
_MORGAN = {"radius": 2, "fpSize": 2048}


def _fingerprints(smiles: Sequence[str]) -> list[Any]:
    from rdkit import Chem, rdBase
    from rdkit.Chem import rdFingerprintGenerator

    from arl_flows.suites.molecules.chemistry import KEY_PARSE_LIMIT

    gen = rdFingerprintGenerator.GetMorganGenerator(**_MORGAN)
    out = []
    with rdBase.BlockLogs():  # an invalid candidate has no fingerprint; the fast tier says why, not the terminal
        for s in smiles:
            mol = Chem.MolFromSmiles(s) if s and len(s) <= KEY_PARSE_LIMIT else None  # longer: never a candidate's
            out.append(gen.GetFingerprint(mol) if mol is not None else None)
    return out


def _training_fingerprints(smiles: Sequence[str]) -> list[Any]:
    """``_fingerprints`` of a shipped training set, kept on disk under ``settings().cache / "fingerprints"``.

    Every process whose scheduler asks the shift scores fingerprints the 16k-30k training molecules again:
    about 1.4 CPU-s, where reading RDKit's own binary form back is about 0.1 (the cache is keyed by the SMILES,
    the fingerprint's parameters and the RDKit version). A copy that cannot be read or written is ignored.
    """
    from rdkit import rdBase

    from storage.cache import keep_file
    from storage.settings import settings

    digest = hashlib.sha256(json.dumps(["morgan", _MORGAN, rdBase.rdkitVersion]).encode())
    for s in smiles:
        digest.update(s.encode() + b"\n")
    cached = settings().cache / "fingerprints" / f"{digest.hexdigest()[:24]}.npz"
    try:
        fps = _read_fingerprints(cached, len(smiles))
    except Exception:  # noqa: BLE001 - a damaged copy (empty, truncated, foreign) is recomputed, whatever it raises
        fps = None
    if fps is not None:
        return fps
    fps = _fingerprints(smiles)
    blobs = [fp.ToBinary() if fp is not None else b"" for fp in fps]

    def write(path: Path) -> None:
        with open(path, "wb") as fh:
            np.savez(fh, data=np.frombuffer(b"".join(blobs), dtype=np.uint8),
                     ends=np.cumsum([len(b) for b in blobs], dtype=np.int64))

    keep_file(cached, write)
    return fps


def _read_fingerprints(path: Path, n: int) -> list[Any] | None:
    """The ``n`` fingerprints kept in ``path``, or None if it holds something else."""
    from rdkit import DataStructs

    with np.load(path, allow_pickle=False) as got:
        data, ends = got["data"], got["ends"]
    fits = data.dtype == np.uint8 and data.ndim == 1 and ends.ndim == 1 and ends.dtype.kind in "iu" and len(ends) == n
    if not fits or (n and (ends[0] < 0 or ends[-1] != len(data) or np.any(np.diff(ends) < 0))):
        return None
    starts = np.concatenate([[0], ends[:-1]]).astype(np.int64)
    return [DataStructs.ExplicitBitVect(data[a:b].tobytes()) if b > a else None for a, b in zip(starts, ends)]


def _nearest_distance(smiles: Sequence[str], train_fps: list[Any]) -> np.ndarray:
    """1 - the largest Tanimoto similarity of each molecule to the training fingerprints (NaN: unreadable)."""
    from rdkit import DataStructs

    train = [f for f in train_fps if f is not None]
    out = np.full(len(smiles), np.nan)
    for i, fp in enumerate(_fingerprints(smiles)):
        if fp is not None:
            out[i] = 1.0 - max(DataStructs.BulkTanimotoSimilarity(fp, train))
    return out


_LOADED: dict[tuple, ShippedSurrogate | None] = {}


def load_shipped(tiers: Sequence[str], config: Any) -> ShippedSurrogate | None:
    """The shipped ensemble if it fits these lower tiers and this network shape (``GraphModelConfig``), else None."""
    key = (tuple(tiers), config.hidden, config.layers, config.members)
    if key in _LOADED:
        return _LOADED[key]
    got = None
    if tuple(tiers) == LOWER_TIERS and WEIGHTS.is_file() and REPORT.is_file():
        report = json.loads(REPORT.read_text())
        shape = report["config"]
        if (shape["hidden"], shape["layers"], shape["members"]) == (config.hidden, config.layers, config.members):
            model = GraphModel(list(tiers), replace(config, threads=config.threads))
            if model.load(WEIGHTS):
                got = ShippedSurrogate(model, report)
    _LOADED[key] = got
    return got
