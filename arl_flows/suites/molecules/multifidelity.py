"""The druglike space's shipped surrogate: a network pretrained on cheap labels, and a DFT correction from few.

At drug size the top tier (DFT) costs minutes a molecule, so there is no table of
thousands of DFT gaps to train a network on, as QM9 gives the ``qm9`` space
(``pretrained.py``). What is cheap at scale is the ladder's own lower tiers:
``benchmarks/moses_lower_tiers.py`` runs ``rdkit-eht`` and ``gfn2-xtb`` on 20,000
MOSES train molecules (a CPU-hour) and DFT, at the reference pools' level, on a
few of them (27, three per heavy-atom count 12-20). The surrogate is the
standard two-level multi-fidelity model (Kennedy & O'Hagan, Biometrika 87, 1
(2000): the expensive level is a scaled cheap level plus a discrepancy):

- a :class:`GraphModel` ensemble reads the molecule (and the EHT gap when shown)
  and predicts the **xTB** gap, trained on the many cheap labels; its std is
  scaled per pattern of tiers shown to cover 90% on a calibration split;
- the **DFT correction** ``dft = a + b * xtb + e``, ``e ~ N(0, sigma^2)``, is a
  least-squares fit on the few DFT labels, with its parameter covariance.

Given xTB the prediction is the correction alone; without it, the network's xTB
estimate goes through the correction and its variance (``b^2 s^2``) adds to the
correction's. The run then learns its own correction online: the scheduler's
residual stack refits offset, slope and noise on every DFT answer of the run
(``Surrogate._stack``; Δ-learning on the cheap tier, Ramakrishnan et al., JCTC
11, 2087 (2015)), and the blend with the run's cold Δ-model takes over if the
shipped start is worse. The split is :func:`pretrained.split_of` (a hash of the
canonical SMILES); the DFT-labelled molecules are never trained on by the network.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from arl_flows.suites.molecules.graph import GraphModel
from arl_flows.suites.molecules.pretrained import (
    LOWER_TIERS,
    _training_fingerprints,
    _nearest_distance,
    shift_reference_scale,
    split_of,
)

__all__ = [
    "DRUGLIKE_DIR",
    "MultiFidelitySurrogate",
    "load_druglike",
    "load_moses_lower_tiers",
]

DRUGLIKE_DIR = Path(__file__).parent / "data" / "surrogate_druglike"
LABELS_CSV = DRUGLIKE_DIR / "moses_lower_tiers.csv.gz"
WEIGHTS = DRUGLIKE_DIR / "xtb_ensemble.pt"
REPORT = DRUGLIKE_DIR / "report.json"
CHEAP = "gfn2-xtb"  # the level the network predicts
NET_TIERS = ("rdkit-eht",)  # what it reads besides the molecule
TOP = "pyscf-b3lyp"
_REFERENCE_SIZE = 300


def load_moses_lower_tiers(path: Path | None = None) -> list[dict[str, Any]]:
    """Rows of the shipped MOSES table: canonical ``smiles``, each lower tier's gap and the DFT gap (NaN: none)."""
    rows = []
    with gzip.open(path or LABELS_CSV, "rt", newline="") as fh:
        for row in csv.DictReader(fh):
            rows.append({"smiles": row["smiles"],
                         **{t: float(row[t]) if row.get(t) else math.nan for t in (*LOWER_TIERS, TOP)}})
    return rows


def pattern_name(pattern: Sequence[str]) -> str:
    return "+".join(pattern)


class MultiFidelitySurrogate:
    """The druglike shipped surrogate (a ``CalibratedModel``, ``EnsembleModel``, ``ShiftAwareModel`` and
    ``TrainingAwareModel`` as :class:`~arl_flows.suites.molecules.pretrained.ShippedSurrogate` is): see the module.

    ``report`` holds the correction (``a``, ``b``, ``sigma``, ``cov``), the network's per-pattern std scales
    (``net_patterns``) and the scheduler's per-pattern priors (``patterns``), all written by
    ``benchmarks/train_druglike_surrogate.py``.
    """

    def __init__(self, model: GraphModel, report: dict[str, Any]) -> None:
        self.model = model
        self.report = report
        self.tiers = list(LOWER_TIERS)
        corr = report["correction"]
        self._a, self._b, self._sigma = float(corr["a"]), float(corr["b"]), float(corr["sigma"])
        self._cov = np.asarray(corr["cov"], dtype=float)
        self._net_scale = {k: float(v["std_scale"]) for k, v in report["net_patterns"].items()}
        self._known: frozenset[str] | None = None
        self._reference: dict[str, Any] | None = None
        self._table: list[dict[str, Any]] | None = None

    def _rows(self) -> list[dict[str, Any]]:
        """The shipped table, read once (``seen`` and the shift reference both need it)."""
        if self._table is None:
            self._table = load_moses_lower_tiers()
        return self._table

    # -- prediction ---------------------------------------------------------
    def correction(self, xtb: np.ndarray, xtb_var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """DFT mean and std from an xTB gap (or estimate) and its variance."""
        design = np.stack([np.ones_like(xtb), xtb], axis=1)
        param_var = np.einsum("ij,jk,ik->i", design, self._cov, design)
        mean = self._a + self._b * xtb
        return mean, np.sqrt(self._b**2 * xtb_var + self._sigma**2 + param_var)

    def xtb_estimate(self, payloads: Sequence[str], values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The network's xTB mean, calibrated std and members' disagreement, given the EHT column where shown."""
        values = np.asarray(values, dtype=float).reshape(len(payloads), len(self.tiers))
        shown = values[:, : len(NET_TIERS)]
        mean, std, spread = self.model.predict_full(list(payloads), shown)
        scale = np.where(np.isfinite(shown[:, 0]), self._net_scale.get("rdkit-eht", 1.0), self._net_scale.get("", 1.0))
        return mean, std * scale, spread

    def predict_full(self, payloads: Sequence[str], values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        values = np.asarray(values, dtype=float).reshape(len(payloads), len(self.tiers))
        xtb = values[:, self.tiers.index(CHEAP)]
        given = np.isfinite(xtb)
        est = np.zeros(len(payloads))
        var = np.zeros(len(payloads))
        spread = np.zeros(len(payloads))
        need = ~given
        if need.any():
            idx = np.flatnonzero(need)
            m, s, d = self.xtb_estimate([payloads[i] for i in idx], values[idx])
            est[idx], var[idx], spread[idx] = m, s**2, abs(self._b) * d
        x = np.where(given, xtb, est)
        mean, std = self.correction(x, var)
        return mean, std, spread

    def predict(self, payloads: Sequence[str], values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean, std, _ = self.predict_full(payloads, values)
        return mean, std

    def pattern_prior(self, pattern: Sequence[str]) -> dict[str, float]:
        """``std_scale``, ``typical_std``, ``tail_rate``, ``tail_scale`` of a pattern of tiers shown."""
        got = self.report["patterns"].get(pattern_name(pattern))
        return dict(got) if got else {"std_scale": 1.0, "typical_std": self._sigma, "tail_rate": 0.0, "tail_scale": 1.0}

    # -- what it knows ------------------------------------------------------
    def seen(self, payload: str) -> bool:
        """Whether the molecule is in the shipped table (the network's data, or a DFT label of the correction)."""
        from arl_flows.suites.molecules.chemistry import canonical_smiles

        canonical = canonical_smiles(payload) if payload else None
        if canonical is None:
            return False
        if self._known is None:
            self._known = frozenset(
                r["smiles"] for r in self._rows() if split_of(r["smiles"]) != "test" or np.isfinite(r[TOP])
            )
        return canonical in self._known

    def shift_scores(self, payloads: Sequence[str], values: np.ndarray) -> np.ndarray:
        """Per molecule: [distance to the network's training molecules, members' disagreement], each / its
        90th percentile on a calibration-split sample (``SHIFT_REFERENCE_QUANTILE``; 1: as far out as the
        calibration vouches for). The disagreement column is NaN where xTB is given
        (the prediction is then the correction alone, which the network does not enter)."""
        values = np.asarray(values, dtype=float).reshape(len(payloads), len(self.tiers))
        ref = self._shift_reference()
        out = np.full((len(payloads), 2), np.nan)
        out[:, 0] = _nearest_distance(payloads, ref["fps"]) / ref["distance"]
        need = ~np.isfinite(values[:, self.tiers.index(CHEAP)])
        if need.any():
            idx = np.flatnonzero(need)
            _, _, spread = self.xtb_estimate([payloads[i] for i in idx], values[idx])
            eht_shown = np.isfinite(values[idx, 0])
            out[idx, 1] = spread / np.where(eht_shown, ref["spread_eht"], ref["spread_none"])
        return out

    def _shift_reference(self) -> dict[str, Any]:
        if self._reference is None:
            rows = self._rows()
            train = [r["smiles"] for r in rows if split_of(r["smiles"]) == "train" and not np.isfinite(r[TOP])]
            calibration = [r for r in rows if split_of(r["smiles"]) == "calibration" and not np.isfinite(r[TOP])]
            pick = np.random.default_rng(0).permutation(len(calibration))[:_REFERENCE_SIZE]
            sample = [calibration[i] for i in pick]
            fps = _training_fingerprints(train)
            smiles = [r["smiles"] for r in sample]
            distance = shift_reference_scale(_nearest_distance(smiles, fps), 1e-3)
            eht = np.array([[r["rdkit-eht"], math.nan] for r in sample])
            _, _, with_eht = self.xtb_estimate(smiles, eht)
            _, _, without = self.xtb_estimate(smiles, np.full_like(eht, math.nan))
            self._reference = {
                "fps": fps, "distance": distance,
                "spread_eht": shift_reference_scale(with_eht, 1e-6), "spread_none": shift_reference_scale(without, 1e-6),
            }
        return self._reference


_LOADED: dict[tuple, MultiFidelitySurrogate | None] = {}


def load_druglike(tiers: Sequence[str], config: Any) -> MultiFidelitySurrogate | None:
    """The shipped druglike surrogate if it fits these lower tiers and this network shape, else None."""
    key = (tuple(tiers), config.hidden, config.layers, config.members)
    if key in _LOADED:
        return _LOADED[key]
    got = None
    if tuple(tiers) == LOWER_TIERS and WEIGHTS.is_file() and REPORT.is_file() and LABELS_CSV.is_file():
        report = json.loads(REPORT.read_text())
        shape = report["config"]
        if (shape["hidden"], shape["layers"], shape["members"]) == (config.hidden, config.layers, config.members):
            model = GraphModel(list(NET_TIERS), config)
            if model.load(WEIGHTS):
                got = MultiFidelitySurrogate(model, report)
    _LOADED[key] = got
    return got
