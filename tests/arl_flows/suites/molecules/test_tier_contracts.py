"""The molecules suite's tiers pass the tier contract kit (``verifiers.testing``), each with a small table.

Value ranges: QM9's B3LYP gaps for the table tiers (``data/qm9_gap.csv``); for the computed tiers, a band
around what each method gives (extended Hückel overestimates small molecules' gaps; pyridine's pi gap is small).
"""

from __future__ import annotations

import pytest

from arl_flows.suites.molecules import (
    DFTGapVerifier,
    EHTGapVerifier,
    LabVerifier,
    ReferenceTableVerifier,
    XTBGapVerifier,
    make_candidate,
)
from arl_flows.suites.molecules.cluster import SimulatedClusterVerifier
from arl_flows.suites.molecules.reference_or_dft import ReferenceOrDFTVerifier
from storage.records import Tier
from verifiers import Candidate
from verifiers.testing import Case, VerifierContract

INVALID = [Case("CCCl", "invalid"), Case("CN(C)(C)(C)C", "invalid"), Case("CC.O", "invalid")]
BAD = ("", "\u2603\U0001f4a5\x00", "C" * 10_000, "C1CC")


class _MoleculeTier(VerifierContract):
    bad_payloads = BAD

    def make_candidate(self, case: Case) -> Candidate:
        return make_candidate(case.payload, case.goal)


class TestEHT(_MoleculeTier):
    verifier_class = EHTGapVerifier
    cases = [Case("O", "ok", 13.0, 15.5), Case("C", "ok", 19.0, 22.0), Case("c1ccncc1", "ok", 2.5, 4.0), *INVALID]


class TestXTB(_MoleculeTier):
    verifier_class = XTBGapVerifier
    params = {"threads": 1}
    cases = [Case("O", "ok", 13.0, 15.5), Case("N", "ok", 11.0, 13.5), Case("c1ccncc1", "ok", 2.5, 4.0), *INVALID]
    tolerance = 1e-9


class TestLab(_MoleculeTier):
    verifier_class = LabVerifier
    cases = [Case("O", "pending"), Case("c1ccncc1", "pending"), Case("CCO", "pending"), *INVALID]


class TestReferenceTable(_MoleculeTier):
    verifier_class = ReferenceTableVerifier
    cases = [Case("O", "ok", 9.8369, 9.8369), Case("C", "ok", 13.7363, 13.7363), Case("c1ccncc1", "ok", 6.2396, 6.2396), *INVALID]


class TestSimulatedCluster(_MoleculeTier):
    verifier_class = SimulatedClusterVerifier
    params = {"latency_s": 0.01, "jitter": 0.0}
    cases = [Case("O", "ok", 9.8369, 9.8369), Case("N", "ok", 9.2491, 9.2491), *INVALID]


class TestReferenceOrDFTFromTheTable(_MoleculeTier):
    """Table molecules only: the DFT fallback is the DFT tier's (below)."""

    verifier_class = ReferenceOrDFTVerifier
    params = {"threads": 1}
    cases = [Case("O", "ok", 9.8369, 9.8369), Case("C", "ok", 13.7363, 13.7363), *INVALID]

    def test_its_tier_is_the_dft_it_stands_in_for(self) -> None:
        assert ReferenceOrDFTVerifier.tier == DFTGapVerifier.tier == Tier.high_fidelity
        assert ReferenceOrDFTVerifier().spec().tier == Tier.high_fidelity


@pytest.mark.slow(seconds=3)  # per test: DFT on water or methane, or a refusal
class TestDFT(_MoleculeTier):
    """Water and methane only (a few seconds each): the contract, not the chemistry (test_chem_tiers.py)."""

    verifier_class = DFTGapVerifier
    params = {"threads": 1, "basis": "6-31g"}  # the basis of the suite's default ladder
    cases = [Case("O", "ok", 8.0, 11.5), Case("C", "ok", 12.0, 15.5), *INVALID]
    tolerance = 1e-6
