"""The ``reference-or-dft`` tier: the QM9 table's value for a molecule in it, corrected small-basis DFT for one outside."""

from __future__ import annotations

import pytest

from arl_flows.suites.molecules import canonical_smiles, load_reference_table, make_candidate
from storage.records import Status
from verifiers import registry


def test_reference_or_dft_answers_from_table_or_runs_dft() -> None:
    table = load_reference_table(registry.create("reference-or-dft").params.table_path)
    known, novel = "CCO", "CC"  # ethanol is in the shipped QM9 table, ethane is not
    assert canonical_smiles(known) in table and canonical_smiles(novel) not in table
    verifier = registry.create("reference-or-dft", {"threads": 1})
    try:
        goal = {"property": "gap_ev", "low": 3.0, "high": 4.0}
        got = verifier.verify_batch([make_candidate(s, goal) for s in (known, novel, "C(C)(C)(C)(C)C", "not a smiles")])
    finally:
        verifier.close()
    in_table, computed, pentavalent, garbage = got
    assert in_table.status == Status.ok and in_table.value == pytest.approx(table[canonical_smiles(known)])
    assert in_table.cost_s == pytest.approx(verifier.table_charge(3)) and in_table.uncertainty is None
    assert computed.status == Status.ok and computed.cost_s > 0 and computed.uncertainty
    p = verifier.params
    assert computed.value == pytest.approx(p.correction_slope * computed.values["gap_631g_ev"] + p.correction_intercept)
    assert 7.0 < computed.value < 12.0  # ethane's B3LYP gap is ~9 eV
    for bad in (pentavalent, garbage):
        assert bad.status == Status.invalid and bad.cost_s == 0.0 and bad.feedback
