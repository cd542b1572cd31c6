"""Data files shipped with ARL (nothing is downloaded at run time)."""

from __future__ import annotations

import csv
import gzip
from collections.abc import Iterator
from pathlib import Path

__all__ = ["QM9_GAP_CSV", "load_qm9_gaps", "smiles_column"]

QM9_GAP_CSV = Path(__file__).parent / "data" / "qm9_gap.csv"


def load_qm9_gaps(path: Path | str | None = None) -> list[tuple[str, float]]:
    """(canonical SMILES, gap in eV) pairs from the shipped QM9 subset (see data/README.md)."""
    with open(path or QM9_GAP_CSV, newline="") as fh:
        return [(row["smiles"], float(row["gap_ev"])) for row in csv.DictReader(fh)]


def smiles_column(path: Path) -> Iterator[str]:
    """The non-empty entries of a CSV's SMILES column (optionally gzipped), e.g. MOSES ``train.csv.gz``, in file order."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as fh:
        reader = csv.DictReader(fh)
        column = next((c for c in reader.fieldnames or [] if c.lower() == "smiles"), None)
        if column is None:
            raise ValueError(f"{path}: no SMILES column (columns: {', '.join(reader.fieldnames or [])})")
        for row in reader:
            if row[column]:
                yield row[column]
