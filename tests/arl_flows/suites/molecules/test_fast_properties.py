"""The fast tier reports exact cheap properties (QED, SA score, heavy atoms) for objectives to read by name."""

from __future__ import annotations

import pytest

from storage.records import Status
from arl_flows.suites.molecules import EHTGapVerifier, make_candidate

# SMILES, heavy atoms, QED and SA score as RDKit computes them (QED of pyridine from Bickerton et al.'s weights).
TABLE = [
    ("c1ccncc1", 6, 0.4531, 1.372),
    ("CCO", 3, 0.4068, 1.980),
    ("CC1(C)C2CC3C(C2)C13O", 10, 0.5364, 5.232),
]


@pytest.mark.parametrize(("smiles", "heavy", "qed", "sa"), TABLE)
def test_fast_tier_reports_qed_sa_and_size(smiles: str, heavy: int, qed: float, sa: float) -> None:
    from arl_flows.suites.molecules.chemistry import MoleculeConstraints

    verifier = EHTGapVerifier({"constraints": MoleculeConstraints(max_heavy_atoms=12).model_dump()})
    (verdict,) = verifier.verify_batch([make_candidate(smiles)])
    assert verdict.status == Status.ok
    assert verdict.values["heavy_atoms"] == heavy
    assert verdict.values["qed"] == pytest.approx(qed, abs=1e-3)
    assert verdict.values["sa_score"] == pytest.approx(sa, abs=1e-3)


def test_an_invalid_molecule_carries_no_properties() -> None:
    (verdict,) = EHTGapVerifier().verify_batch([make_candidate("C1CC")])
    assert verdict.status == Status.invalid and "qed" not in verdict.values



def test_ctrl_c_reaches_the_main_thread_while_two_threads_search_substructures() -> None:
    """RDKit's substructure search takes SIGINT for itself while it runs; the fast tier's guard hands it back.

    QED's structural alerts are ~100 substructure searches, so two threads computing QED keep RDKit's handler
    installed nearly all the time. Unguarded, none of 20 Ctrl-Cs reached Python here, nor one sent after the
    threads had stopped (two threads' save-and-restore left RDKit's handler installed for good).
    """
    import os
    import signal
    import threading
    import time

    from rdkit import Chem
    from rdkit.Chem import QED

    from arl_flows.suites.molecules.fast import _interruptible_rdkit

    mol = Chem.MolFromSmiles("CC(=O)Nc1ccc(O)cc1CCCNC(=O)c1ccc2ccccc2c1")
    stop = threading.Event()

    def search_until_stopped() -> None:
        while not stop.is_set():
            with _interruptible_rdkit():  # as EHTGapVerifier.verify_batch runs each molecule
                QED.qed(mol)

    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: received.append(signum))
    threads = [threading.Thread(target=search_until_stopped, daemon=True) for _ in range(2)]
    try:
        for thread in threads:
            thread.start()
        for sent in range(1, 21):
            os.kill(os.getpid(), signal.SIGINT)
            deadline = time.monotonic() + 30
            while len(received) < sent and time.monotonic() < deadline:
                time.sleep(0.01)
            assert len(received) == sent, f"Ctrl-C number {sent} never reached Python"
        stop.set()
        for thread in threads:
            thread.join(60)
        os.kill(os.getpid(), signal.SIGINT)  # no RDKit work now: Python's own handler must be the one installed
        deadline = time.monotonic() + 10
        while len(received) < 21 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(received) == 21, "RDKit's SIGINT handler was left installed"
    finally:
        stop.set()
        signal.signal(signal.SIGINT, previous)
