"""Fast tier: RDKit sanitize, constraints, ETKDG + MMFF geometry, extended-Hueckel gap.

Milliseconds per molecule, in-process. Extended Hueckel (Hoffmann, J. Chem.
Phys. 39, 1397 (1963)) as implemented by RDKit's ``rdEHTTools`` (YAeHMOP) has
no self-consistency and no electron correlation: its gaps correlate with DFT
but sit on a different scale, which is what the surrogate's per-tier
calibration is for. This tier's main job is validity: every invalid SMILES is
caught here, with RDKit's reason as feedback for the policy. It also reports
exact cheap properties for objectives to read by name: ``qed`` (Bickerton et
al., Nat. Chem. 4, 90 (2012)), ``sa_score`` (Ertl and Schuffenhauer,
J. Cheminform. 1, 8 (2009); 1 easy to 10 hard, RDKit's Contrib
implementation), ``heavy_atoms`` and ``novel`` (1.0 when the canonical SMILES is
in neither the chemistry space's training set nor QM9, else 0.0; ``novelty.py``).
"""

from __future__ import annotations

import _thread
import contextlib
import ctypes
import functools
import importlib.util
import os
import sys
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field
from rdkit import Chem, RDConfig
from rdkit.Chem import QED, rdEHTTools

from storage.records import Status, Tier, Verdict
from verifiers.base import Candidate, CostModel, Verifier
from arl_flows.suites.molecules.chemistry import (
    SUITE,
    GeometryError,
    GeometryParams,
    InvalidMolecule,
    MoleculeConstraints,
    UnrealisableStereo,
    captured_rdkit_log,
    check_molecule,
    embed_molecule,
)
from arl_flows.suites.molecules.novelty import is_novel
from arl_flows.suites.molecules.spaces import get_space
from verifiers.registry import register_verifier

__all__ = ["EHTGapVerifier", "EHTParams"]


_libc = ctypes.CDLL(None)


@contextlib.contextmanager
def _quiet_c_output() -> Iterator[None]:
    """Silence YAeHMOP's C-level warnings ("Distance between atoms ... is suspicious").

    They are written straight to file descriptors 1/2, around Python's
    ``sys.stdout``, and would clutter every ``arl verify`` call.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    try:
        with open(os.devnull, "w") as devnull:
            for fd in saved:
                os.dup2(devnull.fileno(), fd)
            yield
    finally:
        _libc.fflush(None)  # C stdio may buffer them; flush into /dev/null before restoring
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)


# RDKit's substructure search (QED's alerts, the SA score's fragments, ETKDG's torsion patterns) swaps the process's
# SIGINT handler for its own while it runs (``RDKit::ControlCHandler``): a Ctrl-C that lands then only stops that
# search ("Substructure search was interrupted" on RDKit's log, which ``chemistry`` routes to ``sys.stderr``), and
# two threads searching at once can leave RDKit's handler installed for good, so that no later Ctrl-C reaches
# Python. The tier's RDKit work therefore runs one molecule at a time per process (under the lock of
# ``captured_rdkit_log``), and a Ctrl-C that RDKit swallowed is handed to the main thread as the signal would
# have been (``_thread.interrupt_main``).
_SWALLOWED_INTERRUPT = "Substructure search was interrupted"


@contextlib.contextmanager
def _interruptible_rdkit() -> Iterator[None]:
    """RDKit work one thread at a time; a Ctrl-C that RDKit's own handler took meanwhile is delivered again."""
    text = ""
    try:
        with captured_rdkit_log() as log:
            try:
                yield
            finally:
                text = log.getvalue()
    finally:
        if text:
            sys.stderr.write(text)  # RDKit's other messages, where they went before
        if _SWALLOWED_INTERRUPT in text:
            _thread.interrupt_main()


@functools.cache
def _sascorer() -> ModuleType:
    """RDKit's Contrib SA_Score module, loaded from its file (Contrib is not an importable package)."""
    path = os.path.join(RDConfig.RDContribDir, "SA_Score", "sascorer.py")
    spec = importlib.util.spec_from_file_location("rdkit_contrib_sascorer", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"RDKit's SA_Score is missing ({path}); install an RDKit build that ships Contrib")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.readFragmentScores()  # once, here: not charged to the first molecule's cost
    return module


class EHTParams(BaseModel):
    """Parameters of the fast extended-Hueckel tier."""

    model_config = ConfigDict(extra="forbid")

    constraints: MoleculeConstraints = Field(default_factory=MoleculeConstraints, description="Validity rules.")
    geometry: GeometryParams = Field(default_factory=GeometryParams, description="3D embedding settings.")


@register_verifier
class EHTGapVerifier(Verifier[EHTParams]):
    """Validity + extended-Hueckel HOMO-LUMO gap (eV) on an MMFF geometry."""

    name: ClassVar[str] = "rdkit-eht"
    tier: ClassVar[Tier] = Tier.fast
    # 2: values carry qed and sa_score; 3: and novel; 4: computed on the canonical molecule (not the spelling's atom
    # order), unrealisable stereo is invalid, a failed geometry still reports the exact properties; 5: a resonance
    # form's key is its form with the fewest charges and charges outside the listed groups are invalid (novelty and
    # validity of a few keys changed)
    version: ClassVar[str] = "5"
    suite: ClassVar[str | None] = SUITE
    Params: ClassVar[type[BaseModel]] = EHTParams
    # CPU seconds measured with benchmarks/tiers.py (docs/tiers.md): 0.5 ms for water, median 5 ms at 7-9 heavy
    # atoms; fitted to 300 MOSES test molecules of 12-26 (``--space druglike``): 12 ms at 12, 59 ms at 26.
    cost_model: ClassVar[CostModel] = CostModel(base=0.0013, per_unit=3.7e-5, exponent=2.3)
    reports: ClassVar[frozenset[str] | None] = frozenset({
        "gap_ev", "homo_ev", "lumo_ev", "canonical_smiles", "heavy_atoms", "qed", "sa_score", "novel", "force_field"})

    def verify_batch(self, candidates: Sequence[Candidate]) -> list[Verdict]:
        _sascorer()
        verdicts = []
        for candidate in candidates:
            with _interruptible_rdkit():
                verdicts.append(self._verify_one(candidate))
        return verdicts

    def _verify_one(self, candidate: Candidate) -> Verdict:
        with self.timed() as t:
            try:
                parsed = check_molecule(candidate.payload, self.params.constraints)
            except InvalidMolecule as exc:
                reason = str(exc)
                parsed = None
            if parsed is not None:
                qed, sa_score = QED.qed(parsed.mol), _sascorer().calculateScore(parsed.mol)
                novel = is_novel(parsed.canonical, get_space(self.params.constraints.space).training_index)
                try:
                    # The molecule the key names, in its canonical atom order, as the xTB and DFT workers build it:
                    # the payload's own order gave one key up to 16 EHT gaps (3.00-3.54 eV) over 20 spellings, and
                    # whichever spelling came first was cached for all of them.
                    molh, force_field = embed_molecule(Chem.MolFromSmiles(parsed.canonical), self.params.geometry)
                    with _quiet_c_output():
                        ok, result = rdEHTTools.RunMol(molh)
                except UnrealisableStereo as exc:
                    reason, parsed = str(exc), None
                except GeometryError as exc:
                    ok, result, error = False, None, str(exc)
                else:
                    error = "extended-Hueckel calculation failed"
        if parsed is None:
            return self.verdict(candidate, Status.invalid, feedback=reason, cost_s=t.cpu_s, wall_s=t.wall_s)
        if not ok:
            # The properties computed before the geometry are still this molecule's: a failed gap must not leave its
            # QED and SA unknown, which a composite objective would score as met.
            known = {"canonical_smiles": parsed.canonical, "heavy_atoms": parsed.heavy_atoms, "qed": qed,
                     "sa_score": sa_score, "novel": 1.0 if novel else 0.0}
            return self.verdict(candidate, Status.failed, values=known, feedback=error, cost_s=t.cpu_s, wall_s=t.wall_s)
        energies = sorted(result.GetOrbitalEnergies())  # eV
        n_occupied = result.numElectrons // 2  # closed shell: radicals are rejected by the constraints
        homo, lumo = energies[n_occupied - 1], energies[n_occupied]
        gap = lumo - homo
        return self.verdict(
            candidate,
            Status.ok,
            value=gap,
            values={
                "gap_ev": gap,
                "homo_ev": homo,
                "lumo_ev": lumo,
                "canonical_smiles": parsed.canonical,
                "heavy_atoms": parsed.heavy_atoms,
                "qed": qed,
                "sa_score": sa_score,
                "novel": 1.0 if novel else 0.0,
                "force_field": force_field,
            },
            cost_s=t.cpu_s,
            wall_s=t.wall_s,
        )
