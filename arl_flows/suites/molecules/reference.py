"""Reference-table tier: known values from a CSV, standing in for a lab or a costly computation.

``reference-table`` answers from a CSV of known values (by default the QM9
gaps shipped in ``data/``) and charges a declared cost per call, so the
benchmarks can treat it as an expensive source of truth without a lab.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field
from rdkit import Chem, rdBase

from arl_flows.suites.molecules.chemistry import SUITE, InvalidMolecule, MoleculeConstraints, check_molecule, fewest_charges
from arl_flows.suites.molecules.datasets import QM9_GAP_CSV
from storage.records import Status, Tier, Verdict
from storage.cache import keep_file
from storage.settings import settings
from verifiers.base import Candidate, CostModel, Verifier
from verifiers.registry import register_verifier

__all__ = ["ReferenceTableParams", "ReferenceTableVerifier", "load_reference_table"]


class ReferenceTableParams(BaseModel):
    """Parameters of the reference-table tier."""

    model_config = ConfigDict(extra="forbid")

    constraints: MoleculeConstraints = Field(default_factory=MoleculeConstraints, description="Validity rules.")
    path: str = Field(default=str(QM9_GAP_CSV), description="CSV file of known values (default: shipped QM9 gaps).")
    smiles_column: str = Field(default="smiles", description="Column holding SMILES.")
    value_column: str = Field(default="gap_ev", description="Column holding the value (eV).")
    cost_per_call: float = Field(
        default=300.0,
        ge=0,
        description="Declared CPU-seconds charged per lookup: what the truth it stands in for would cost.",
    )


_KEYS_VERSION = 2  # 2: rows drawn with charges also under their form with the fewest (chemistry.fewest_charges)


@functools.lru_cache(maxsize=4)
def _cached_table(path: str, smiles_column: str, value_column: str, mtime: float) -> dict[str, float]:
    """The table keyed by canonical SMILES; also kept on disk under ``settings().cache`` (per file version and RDKit).

    Canonicalising QM9's 24.7k SMILES costs ~2-3 CPU-s, paid by every process that opens the table (each run and
    each resume); the disk copy is read in milliseconds. A copy that cannot be read or written is simply ignored.
    """
    key = hashlib.sha256(json.dumps([path, os.path.getsize(path), mtime, smiles_column, value_column,
                                     rdBase.rdkitVersion, _KEYS_VERSION]).encode()).hexdigest()[:24]
    cached = settings().cache / "reference_tables" / f"{key}.json"
    try:
        return {str(k): float(v) for k, v in json.loads(cached.read_text()).items()}
    except (OSError, ValueError, TypeError, AttributeError):  # missing or damaged: recomputed
        pass
    table = _canonical_table(path, smiles_column, value_column)
    keep_file(cached, lambda p: p.write_text(json.dumps(table)))
    return table


def _canonical_table(path: str, smiles_column: str, value_column: str) -> dict[str, float]:
    table: dict[str, float] = {}
    with open(path, newline="") as fh:
        reader = csv.DictReader(line for line in fh if not line.startswith("#"))
        missing = {smiles_column, value_column} - set(reader.fieldnames or [])
        if missing:
            raise ValueError(f"reference table {path} has no column(s) {', '.join(sorted(missing))}")
        for row in reader:
            mol = Chem.MolFromSmiles(row[smiles_column])
            if mol is not None:
                # Re-canonicalise with this RDKit version, so keys match our candidates; a row drawn with charges
                # (a zwitterion of a 3D structure's conversion) is also found under the form a candidate is keyed by.
                table[Chem.MolToSmiles(mol)] = float(row[value_column])
                if Chem.GetFormalCharge(mol) == 0 and any(atom.GetFormalCharge() for atom in mol.GetAtoms()):
                    table.setdefault(Chem.MolToSmiles(fewest_charges(mol)), float(row[value_column]))
    return table


def load_reference_table(path: str | Path, smiles_column: str = "smiles", value_column: str = "gap_ev") -> dict[str, float]:
    """Canonical SMILES -> value from a CSV (cached per file version; '#' lines are comments)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"reference table {p} does not exist")
    return _cached_table(str(p.resolve()), smiles_column, value_column, p.stat().st_mtime)


@register_verifier
class ReferenceTableVerifier(Verifier[ReferenceTableParams]):
    """Known gap (eV) from a reference CSV (QM9 by default), charged a declared cost per call."""

    name: ClassVar[str] = "reference-table"
    tier: ClassVar[Tier] = Tier.lab
    version: ClassVar[str] = "1"
    suite: ClassVar[str | None] = SUITE
    Params: ClassVar[type[BaseModel]] = ReferenceTableParams
    cost_model: ClassVar[CostModel] = CostModel(base=300.0)
    reports: ClassVar[frozenset[str] | None] = frozenset({"canonical_smiles", "gap_ev", "source"})

    def __init__(self, params: ReferenceTableParams | dict | None = None) -> None:
        super().__init__(params)
        # The declared price is the cost model: the budget sees what the stand-in stands for.
        self.costs = CostModel(base=self.params.cost_per_call)

    def verify_batch(self, candidates: Sequence[Candidate]) -> list[Verdict]:
        p = self.params
        table = load_reference_table(p.path, p.smiles_column, p.value_column)
        verdicts = []
        for candidate in candidates:
            with self.timed() as t:
                try:
                    parsed = check_molecule(candidate.payload, p.constraints)
                except InvalidMolecule as exc:
                    parsed, reason = None, str(exc)
            if parsed is None:
                verdicts.append(self.verdict(candidate, Status.invalid, feedback=reason, wall_s=t.wall_s))
            elif parsed.canonical not in table:
                verdicts.append(
                    self.verdict(
                        candidate,
                        Status.failed,
                        feedback="not in reference table",
                        cost_s=p.cost_per_call,
                        wall_s=t.wall_s,
                    )
                )
            else:
                gap = table[parsed.canonical]
                verdicts.append(
                    self.verdict(
                        candidate,
                        Status.ok,
                        value=gap,
                        values={"gap_ev": gap, "canonical_smiles": parsed.canonical, "source": Path(p.path).name},
                        cost_s=p.cost_per_call,
                        wall_s=t.wall_s,
                    )
                )
        return verdicts
