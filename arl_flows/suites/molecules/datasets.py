"""Data files shipped with ARL (nothing is downloaded at run time)."""

from __future__ import annotations

import csv
from pathlib import Path

__all__ = ["QM9_GAP_CSV", "load_qm9_gaps"]

QM9_GAP_CSV = Path(__file__).parent / "data" / "qm9_gap.csv"


def load_qm9_gaps(path: Path | str | None = None) -> list[tuple[str, float]]:
    """(canonical SMILES, gap in eV) pairs from the shipped QM9 subset (see data/README.md)."""
    with open(path or QM9_GAP_CSV, newline="") as fh:
        return [(row["smiles"], float(row["gap_ev"])) for row in csv.DictReader(fh)]
