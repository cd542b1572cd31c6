"""Shared chemistry of the molecules suite: parsing, constraints, geometry.

Every tier of the ladder starts the same way: parse the policy's SMILES with
RDKit, say precisely why it is not a molecule (RDKit's own message, e.g.
"valence error on atom 1 (N): explicit valence 5 > permitted"), check the
suite's constraints, and build a 3D geometry (ETKDG embedding, then MMFF).
Keeping that here means the tiers differ only in the physics they apply.

The candidate key is the canonical SMILES, so "OCC" and "CCO" share verdicts;
unparseable text is keyed by a hash of the raw text so that the same garbage
is not re-checked either.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import re
import threading
from abc import abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)
from rdkit import Chem, rdBase
from rdkit.Chem import AllChem

from arl_flows.suites.molecules.spaces import DEFAULT_SPACE, SPACES, get_space
from storage.records import Status, Verdict, candidate_key
from verifiers.base import Candidate
from verifiers.isolation import IsolatedVerifier, IsolationParams, TaskOutcome

__all__ = [
    "SUITE",
    "GeometryError",
    "UnrealisableStereo",
    "GeometryParams",
    "InvalidMolecule",
    "MoleculeConstraints",
    "MoleculeJobParams",
    "MoleculeJobVerifier",
    "ParsedMolecule",
    "canonical_smiles",
    "check_molecule",
    "embed_molecule",
    "make_candidate",
    "parse_smiles",
    "xyz_of",
]

SUITE = "molecules"

# RDKit logs parse errors through its C++ logger; routing it to Python's
# sys.stderr lets us capture the message per call with redirect_stderr.
rdBase.LogToPythonStderr()
# ``redirect_stderr`` swaps the process's ``sys.stderr``: two threads capturing at once could restore each other's
# buffer and leave ``sys.stderr`` pointing at one for good. Every capture of RDKit's log holds this lock.
_RDKIT_LOG = threading.RLock()


@contextlib.contextmanager
def captured_rdkit_log() -> Iterator[io.StringIO]:
    """RDKit's log lines written while the block runs, one thread at a time (reentrant)."""
    with _RDKIT_LOG:
        log = io.StringIO()
        with contextlib.redirect_stderr(log):
            yield log


class InvalidMolecule(ValueError):
    """The text is not an acceptable molecule; the message says why, for the policy to read."""


class GeometryError(RuntimeError):
    """No 3D geometry could be built for a valid molecule (the verifier failed, not the candidate)."""


class UnrealisableStereo(GeometryError):
    """The molecule embeds in 3D without its stereo marks and not with them: no structure has that stereochemistry
    (a trans-fused bicyclobutane, ``[C@H]12C[C@@H]1C2``). The candidate's fault, so an ``invalid`` verdict: as a
    ``failed`` one at every tier it would be rewarded with the surrogate's guess instead of a value."""


class MoleculeConstraints(BaseModel):
    """What counts as a valid molecule in the suite: a chemistry space's rules (``spaces.py``; QM9 by default).

    ``elements`` and ``max_heavy_atoms`` left out take the space's own; given, they narrow or widen it.
    """

    model_config = ConfigDict(extra="forbid")

    space: str = Field(default=DEFAULT_SPACE, description=f"The chemistry space ({', '.join(sorted(SPACES))}): its rules and training set.")
    elements: list[str] = Field(
        default_factory=lambda: ["C", "N", "O", "F", "H"], description="Allowed element symbols (default: the space's)."
    )
    max_heavy_atoms: int = Field(default=9, ge=1, description="Maximum number of non-hydrogen atoms (default: the space's).")
    formal_charge: int = Field(default=0, description="Required net formal charge of the molecule.")
    single_fragment: bool = Field(default=True, description="Reject dot-separated mixtures ('CC.O').")
    max_smiles_length: int = Field(
        default=500, ge=1, description="A molecule whose canonical SMILES is longer is rejected (input is read up "
        "to 1,000 characters, as a candidate's key is, which keeps parse time bounded)."
    )

    @model_validator(mode="before")
    @classmethod
    def _space_fills_the_rest(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "space" not in data:
            return data
        space = get_space(data["space"])
        filled = {"elements": list(space.elements), "max_heavy_atoms": space.max_heavy_atoms,
                  "formal_charge": space.formal_charge, "single_fragment": space.single_fragment}
        return filled | data

    @field_validator("elements")
    @classmethod
    def _known_elements(cls, value: list[str]) -> list[str]:
        table = Chem.GetPeriodicTable()
        for symbol in value:
            try:
                number = table.GetAtomicNumber(symbol)
            except RuntimeError:
                number = 0
            if number <= 0:
                raise ValueError(f"unknown element symbol {symbol!r}; use symbols like 'C', 'N', 'Cl'")
        return value

    @model_serializer(mode="wrap")
    def _default_space_unwritten(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The default space is not written, so the params (and their hash, a cache key) of a QM9 ladder stay as they were."""
        data = handler(self)
        if data.get("space") == DEFAULT_SPACE:
            data.pop("space")
        return data


class GeometryParams(BaseModel):
    """How a 3D geometry is built from a SMILES."""

    model_config = ConfigDict(extra="forbid")

    seed: int = Field(default=42, description="Random seed of the ETKDG embedding (fixed: verdicts are cached).")
    max_force_field_iters: int = Field(default=2000, ge=0, description="MMFF optimisation steps (0: no optimisation).")
    conformers: int = Field(
        default=1, ge=1, le=100,
        description="ETKDG conformers embedded; with more than one, every one is MMFF-optimised and the lowest MMFF "
        "energy is kept (flexible molecules: the gap moves 0.2-0.6 eV between conformers for 1 in 10 drug-like "
        "ones, docs/tiers.md).",
    )

    @model_serializer(mode="wrap")
    def _one_conformer_unwritten(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """One conformer (the default) is not written, so the params hash of every existing ladder stays as it was."""
        data = handler(self)
        if data.get("conformers") == 1:
            data.pop("conformers")
        return data


@dataclass(frozen=True)
class ParsedMolecule:
    """A sanitized molecule that passed the constraints."""

    mol: Chem.Mol
    canonical: str
    heavy_atoms: int


_TIMESTAMP = re.compile(r"^\[\d\d:\d\d:\d\d\]\s*")


def _rdkit_messages(text: str) -> list[str]:
    lines = [_TIMESTAMP.sub("", line).strip() for line in text.splitlines()]
    return [line for line in lines if line and line != "^"]


def _describe_problem(problem: Any) -> str:
    """One line per RDKit chemistry problem, naming the atom where RDKit does."""
    kind = problem.GetType()
    message = problem.Message()
    if kind == "AtomValenceException":
        idx = problem.GetAtomIdx()
        match = re.search(r"atom # \d+ (\w+), (\d+), is greater than permitted", message)
        if match:
            return f"valence error on atom {idx} ({match.group(1)}): explicit valence {match.group(2)} > permitted"
        return f"valence error on atom {idx}: {message}"
    if kind == "KekulizeException":
        return f"aromaticity error: {message.replace('  ', ' ')}"
    if kind == "AtomKekulizeException":
        return f"aromaticity error on atom {problem.GetAtomIdx()}: {message}"
    return message


def _parse_error(smiles: str, messages: list[str]) -> str:
    """RDKit's parse error as one line ("SMILES syntax error at position 3")."""
    reason = "RDKit could not parse it"
    for message in messages:
        message = message.removeprefix("SMILES Parse Error: ")
        position = re.search(r"check for mistakes around position (\d+)", message)
        if position:
            reason = f"syntax error around position {position.group(1)}"
            break
        if not message.startswith(("syntax error while parsing", "Failed parsing SMILES")):
            reason = message
            break
    return f"SMILES parse error: {reason}"


def _bad_character(smiles: str) -> str:
    """Where the first non-ASCII or control character of ``smiles`` is, as one line."""
    for position, ch in enumerate(smiles):
        if not ch.isascii():
            return f"SMILES parse error: non-ASCII character U+{ord(ch):04X} at position {position} (SMILES must be ASCII)"
        if not ch.isprintable():
            return f"SMILES parse error: control character U+{ord(ch):04X} at position {position}"
    return "SMILES parse error: SMILES must be printable ASCII"


# OpenSMILES bounds on the numbers inside a bracket atom: an isotope up to 999, a hydrogen count
# of one digit, a charge from -15 to +15. RDKit reads larger numbers into narrow integers that
# wrap ("[CH260]" parses as methane, "[99999C]" as isotope 34463) or that crash its valence code
# ("[CH128]" raises a C++ pre-condition violation), so they are refused before RDKit sees them.
_BRACKET_ATOM = re.compile(r"\[([^\[\]]*)\]")
_ISOTOPE = re.compile(r"^(\d+)")
_H_COUNT = re.compile(r"(?<!@T)(?<!@O)H(\d+)")  # "@TH1"/"@OH20" are chirality classes, not hydrogens
_CHARGE = re.compile(r"[+-](\d+)|\++|-+")
MAX_ISOTOPE, MAX_BRACKET_HYDROGENS, MAX_CHARGE = 999, 9, 15


def _bracket_atom_problem(smiles: str) -> str | None:
    """Why a bracket atom of ``smiles`` is outside the OpenSMILES bounds, or None."""
    for match in _BRACKET_ATOM.finditer(smiles):
        inside, where = match.group(1), f"bracket atom {match.group(0)[:20]!r} at position {match.start()}"
        isotope = _ISOTOPE.match(inside)
        if isotope and (len(isotope.group(1)) > 3 or int(isotope.group(1)) > MAX_ISOTOPE):
            return f"SMILES parse error: {where} has isotope {isotope.group(1)[:10]}; isotopes run up to {MAX_ISOTOPE}"
        for count in _H_COUNT.finditer(inside):
            if len(count.group(1)) > 1 or int(count.group(1)) > MAX_BRACKET_HYDROGENS:
                return (
                    f"SMILES parse error: {where} lists {count.group(1)[:10]} hydrogens; "
                    f"a bracket atom holds at most {MAX_BRACKET_HYDROGENS}"
                )
        for charge in _CHARGE.finditer(inside):
            digits = charge.group(1)
            size = len(charge.group(0)) if digits is None else (int(digits) if len(digits) <= 2 else MAX_CHARGE + 1)
            if size > MAX_CHARGE:
                return f"SMILES parse error: {where} has a charge beyond -{MAX_CHARGE}..+{MAX_CHARGE}"
    return None


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return " ".join(lines[:2]) if lines else type(exc).__name__


def parse_smiles(text: str, max_length: int = 500, *, read_back: bool = True) -> Chem.Mol:
    """Sanitized, normalised RDKit molecule of ``text``, or :class:`InvalidMolecule` with RDKit's reason.

    ``read_back`` also checks that RDKit reads the molecule's canonical SMILES back as itself (a candidate's key must
    name one molecule); :func:`canonical_smiles` of a dataset's rows leaves it out (one parse more a molecule).
    """
    if not isinstance(text, str):
        raise InvalidMolecule(f"expected a SMILES string, got {type(text).__name__}")
    smiles = text.strip()
    if not smiles:
        raise InvalidMolecule("empty SMILES")
    if len(smiles) > max_length:
        raise InvalidMolecule(f"SMILES is {len(smiles)} characters long; at most {max_length} are accepted")
    if any(ch.isspace() for ch in smiles):
        # A .smi line is 'SMILES name'; a tokenized SMILES ('C C O') has no word of four letters or more.
        first, *rest = smiles.split()
        named = len(first) > 1 and (rest[0].startswith("#") or any(len(w) >= 4 and w.replace("_", "").replace("-", "").isalnum()
                                                                 for w in rest))
        raise InvalidMolecule("SMILES must not contain whitespace" + (
            f" (a name after the SMILES, as in a .smi line? give {first[:40]!r} alone)" if named else ""))
    # RDKit skips some characters it cannot read ("\x00C" and "C\u0301" parse as methane) and
    # cannot encode others (lone surrogates raise UnicodeEncodeError): SMILES is printable ASCII.
    if not (smiles.isascii() and smiles.isprintable()):
        raise InvalidMolecule(_bad_character(smiles))
    bracket_problem = _bracket_atom_problem(smiles)
    if bracket_problem:
        raise InvalidMolecule(bracket_problem)
    with captured_rdkit_log() as log:
        mol = Chem.MolFromSmiles(smiles, sanitize=False)
        if mol is None:
            raise InvalidMolecule(_parse_error(smiles, _rdkit_messages(log.getvalue())))
        # RDKit's checks are C++ with pre-conditions of their own: whatever they raise is a verdict
        # on this text (one line), never an exception for the caller's batch.
        try:
            problems = Chem.DetectChemistryProblems(mol)
        except Exception as exc:  # noqa: BLE001 - RDKit raises RuntimeError and its own types
            raise InvalidMolecule(f"RDKit cannot check this molecule: {_first_line(exc)}") from None
        if problems:
            raise InvalidMolecule("; ".join(_describe_problem(p) for p in problems))
        try:
            Chem.SanitizeMol(mol)
        except Exception as exc:  # noqa: BLE001 - RDKit raises several exception types
            raise InvalidMolecule(f"sanitization failed: {_first_line(exc)}") from None
        mol = _normalised(mol, read_back)
    if mol.GetNumAtoms() == 0:
        raise InvalidMolecule("SMILES contains no atoms")
    return mol


# The bonds that make a molecule of the spaces' chemistry: an allow-list, so that any other kind RDKit reads (the
# zero-order '~', dative '->', quadruple '$', and whatever a later RDKit adds) is refused rather than counted.
_BOND_SYMBOLS = {Chem.BondType.SINGLE: "-", Chem.BondType.DOUBLE: "=", Chem.BondType.TRIPLE: "#",
                 Chem.BondType.AROMATIC: ":"}


def _normalised(mol: Chem.Mol, read_back: bool) -> Chem.Mol:
    """One molecule, one graph: what only spells a molecule differently is taken off, what is not chemistry refused.

    A candidate's key, its novelty and every exact property are read from this graph, so that a spelling (an
    explicit ``[H]``, an atom map number) cannot make a known molecule new or buy a second reward. Refused: a bond
    outside the single/double/triple/ring-aromatic allow-list, an aromatic bond outside an aromatic ring, a hydrogen
    bonded to more than one atom, and isotope labels (a space holds elements; a mass number moves QED and SA).
    """
    for bond in mol.GetBonds():
        kind = bond.GetBondType()
        begin, end = bond.GetBeginAtom(), bond.GetEndAtom()
        if kind not in _BOND_SYMBOLS or (kind == Chem.BondType.AROMATIC and not (
                bond.IsInRing() and begin.GetIsAromatic() and end.GetIsAromatic())):
            name = kind.name.lower()
            what = ("an aromatic bond outside an aromatic ring" if kind == Chem.BondType.AROMATIC
                    else f"{'an' if name[0] in 'aeiou' else 'a'} {name} bond")
            raise InvalidMolecule(f"{what} between {begin.GetSymbol()} {begin.GetIdx() + 1} and {end.GetSymbol()} "
                                  f"{end.GetIdx() + 1}; a molecule here has single (-), double (=), triple (#) and "
                                  "ring aromatic bonds only")
    for atom in mol.GetAtoms():
        if atom.GetIsotope():
            raise InvalidMolecule(f"isotope label [{atom.GetIsotope()}{atom.GetSymbol()}]: a chemistry space holds "
                                  "elements, not isotopes; write the atom without its mass number")
        if atom.GetAtomicNum() == 1 and atom.GetDegree() > 1:
            raise InvalidMolecule(f"a hydrogen bonded to {atom.GetDegree()} atoms; hydrogen takes one bond")
        atom.SetAtomMapNum(0)  # a label on the atom, not part of the molecule
    if any(atom.GetAtomicNum() == 1 for atom in mol.GetAtoms()):
        try:
            mol = Chem.RemoveHs(mol)  # an explicit [H] is the hydrogen the atom holds implicitly
        except Exception as exc:  # noqa: BLE001 - RDKit raises several exception types
            raise InvalidMolecule(f"sanitization failed: {_first_line(exc)}") from None
    mol = fewest_charges(mol)  # a resonance form that spells charges is the molecule's neutral drawing
    if not read_back or _reads_back(mol):
        return mol
    # RDKit's canonical form of some pseudo-asymmetric centres (2-substituted adamantanes, bispidines) flips between
    # two spellings on every round trip: no stereo-marked key is stable, so the molecule is keyed without its marks.
    flat = Chem.Mol(mol)
    Chem.RemoveStereochemistry(flat)
    if _reads_back(flat):
        return flat
    raise InvalidMolecule(f"RDKit does not read this molecule's canonical SMILES {Chem.MolToSmiles(mol)[:80]!r} back as "
                          "the same molecule; write it another way")


def _charged_atoms(mol: Chem.Mol) -> int:
    return sum(1 for atom in mol.GetAtoms() if atom.GetFormalCharge())


def fewest_charges(mol: Chem.Mol) -> Chem.Mol:
    """``mol`` drawn as its Lewis structure with the fewest charged atoms: one molecule, one key, whichever resonance
    form a SMILES spells (sixth attack pass: ``[NH2+]=C[O-]`` was formamide under a key of its own, "novel" and paid
    again at DFT; ``[CH2+][CH2-]`` was ethylene).

    Two adjacent opposite charges become one more bond where both atoms' valence allows it (``C[CH+][O-]`` ->
    ``CC=O``); what is left is read through RDKit's resonance structures (``Chem.ResonanceMolSupplier``), taking the
    one with the fewest charged atoms, then the smallest canonical SMILES, so every spelling ends on one form. A
    molecule with no charged atom is returned as it is (the common case costs one pass over the atoms).
    """
    if not _charged_atoms(mol):
        return mol
    best = Chem.Mol(mol)
    merged = True
    while merged:
        merged = False
        for bond in best.GetBonds():
            a, b = bond.GetBeginAtom(), bond.GetEndAtom()
            if a.GetFormalCharge() * b.GetFormalCharge() != -1 or bond.GetBondType() not in _ONE_MORE_BOND:
                continue
            trial = Chem.RWMol(best)
            trial.GetBondWithIdx(bond.GetIdx()).SetBondType(_ONE_MORE_BOND[bond.GetBondType()])
            for atom in (trial.GetAtomWithIdx(a.GetIdx()), trial.GetAtomWithIdx(b.GetIdx())):
                atom.SetFormalCharge(0)
                atom.SetNoImplicit(True)  # keep its hydrogens: the charge goes into the bond, not into an H
            try:
                Chem.SanitizeMol(trial)
            except Exception:  # noqa: BLE001, S112 - a valence the new bond exceeds: not this pair
                continue
            if _charged_atoms(trial) < _charged_atoms(best):  # sanitizing redraws N(=O)=O as [N+](=O)[O-]: no gain
                best, merged = trial.GetMol(), True
                break
    if _charged_atoms(best) >= 2:
        forms = [(_charged_atoms(best), Chem.MolToSmiles(best), best)]
        for form in Chem.ResonanceMolSupplier(best, 0, _MAX_RESONANCE_FORMS):
            if form is None:
                continue
            form = Chem.Mol(form)
            try:
                Chem.SanitizeMol(form)
            except Exception:  # noqa: BLE001, S112 - a form RDKit cannot sanitize is not a spelling of this molecule
                continue
            forms.append((_charged_atoms(form), Chem.MolToSmiles(form), form))
        best = min(forms, key=lambda f: f[:2])[2]
    return best


_ONE_MORE_BOND = {Chem.BondType.SINGLE: Chem.BondType.DOUBLE, Chem.BondType.DOUBLE: Chem.BondType.TRIPLE}
_MAX_RESONANCE_FORMS = 64

# Which atoms of a neutral closed-shell molecule may carry a charge, once it is drawn with the fewest
# (fewest_charges): nitrogen (+1 or -1: ammonium, nitro, N-oxides, azides, the zwitterions QM9 holds) and oxygen
# (-1: carboxylates, N-oxides, nitro), and the carbon of an isocyanide. An allow-list: any other charged atom is
# refused (a carbonyl ylide's carbanion and oxonium, C2, ozone, a doubly charged carbon).
_CHARGE_ALLOWED = {(7, 1), (7, -1), (8, -1)}
_ISOCYANIDE = Chem.MolFromSmarts("[C-]#[N+]")


def _unlisted_charges(mol: Chem.Mol) -> list[Chem.Atom]:
    """The charged atoms of ``mol`` that the allow-list above does not take."""
    charged = [a for a in mol.GetAtoms() if a.GetFormalCharge() and (a.GetAtomicNum(), a.GetFormalCharge()) not in _CHARGE_ALLOWED]
    if charged:
        isocyanide = {m[0] for m in mol.GetSubstructMatches(_ISOCYANIDE)}
        charged = [a for a in charged if a.GetIdx() not in isocyanide]
    return charged


def _reads_back(mol: Chem.Mol) -> bool:
    """Whether RDKit reads ``mol``'s canonical SMILES back as the same canonical SMILES: a key names one molecule."""
    canonical = Chem.MolToSmiles(mol)
    again = Chem.MolFromSmiles(canonical)
    return again is not None and Chem.MolToSmiles(again) == canonical


def _elsewhere(space: str, text: str) -> str:
    """Where a molecule ``space`` refuses passes every rule: '; the druglike space allows it (...)', or '' (none)."""
    for other in SPACES.values():
        if other.name == space:
            continue
        try:
            check_molecule(text, MoleculeConstraints(space=other.name), hint=False)
        except InvalidMolecule:
            continue
        return f"; the {other.name} space allows it ([options] space, --space {other.name})"
    return ""


def check_molecule(text: str, constraints: MoleculeConstraints | None = None, *, hint: bool = True) -> ParsedMolecule:
    """Parse ``text`` and check the suite's constraints; :class:`InvalidMolecule` says which failed (and, with
    ``hint``, for a rule of the space's size or elements, another space that takes the molecule whole)."""
    c = constraints or MoleculeConstraints()
    # A candidate's key is its canonical SMILES, read from up to KEY_PARSE_LIMIT characters: the length rule reads the
    # canonical SMILES too, so that a long spelling of a short molecule is that molecule, not an `invalid` cached
    # under its key for every later spelling of it (sixth attack pass).
    mol = parse_smiles(text, max(c.max_smiles_length, KEY_PARSE_LIMIT))
    if len(canonical := Chem.MolToSmiles(mol)) > c.max_smiles_length:
        raise InvalidMolecule(f"canonical SMILES is {len(canonical)} characters long; at most {c.max_smiles_length} "
                              "are accepted")
    allowed = set(c.elements)
    bad = sorted({a.GetSymbol() for a in mol.GetAtoms()} - allowed)
    if bad:
        raise InvalidMolecule(
            f"element(s) {', '.join(bad)} not in the {c.space} space (allowed: {', '.join(c.elements)})"
            + (_elsewhere(c.space, text) if hint else "")
        )
    if "H" not in allowed and any(a.GetTotalNumHs() for a in mol.GetAtoms()):
        raise InvalidMolecule("hydrogen is not allowed")
    heavy = mol.GetNumHeavyAtoms()
    if heavy == 0:
        raise InvalidMolecule("no heavy atoms")
    if heavy > c.max_heavy_atoms:
        raise InvalidMolecule(f"{heavy} heavy atoms > {c.max_heavy_atoms}, the most the {c.space} space allows"
                              + (_elsewhere(c.space, text) if hint else ""))
    charge = Chem.GetFormalCharge(mol)
    if charge != c.formal_charge:
        raise InvalidMolecule(f"charged: net formal charge {charge:+d}; the {c.space} space needs {c.formal_charge:+d}")
    if c.single_fragment and len(Chem.GetMolFrags(mol)) > 1:
        raise InvalidMolecule(f"several fragments: {len(Chem.GetMolFrags(mol))} disconnected fragments; the {c.space} space needs one molecule")
    if unlisted := _unlisted_charges(mol):
        atoms = ", ".join(f"{a.GetSymbol()} {a.GetIdx() + 1} ({a.GetFormalCharge():+d})" for a in unlisted[:4])
        raise InvalidMolecule(f"charged atoms {atoms} that no neutral drawing removes (the {c.space} space takes a "
                              "charge on nitrogen, +1 or -1, on oxygen, -1, and on an isocyanide's carbon); draw the "
                              "molecule without them")
    if any(a.GetNumRadicalElectrons() for a in mol.GetAtoms()):
        raise InvalidMolecule(f"radical: unpaired electrons; the {c.space} space is closed-shell")
    electrons = sum(a.GetAtomicNum() + a.GetTotalNumHs() for a in mol.GetAtoms()) - charge
    if electrons % 2:  # what RDKit's radical count misses (e.g. through a dative bond) the electron count does not
        raise InvalidMolecule(f"odd electron count ({electrons}): an open shell; the {c.space} space is closed-shell")
    return ParsedMolecule(mol=mol, canonical=canonical, heavy_atoms=heavy)


def canonical_smiles(text: str) -> str | None:
    """RDKit canonical SMILES of ``text``, or None if it does not parse."""
    try:
        return Chem.MolToSmiles(parse_smiles(text, max_length=10_000, read_back=False))
    except InvalidMolecule:
        return None


def embed_molecule(mol: Chem.Mol, params: GeometryParams | None = None) -> tuple[Chem.Mol, str]:
    """Molecule with explicit hydrogens and one 3D conformer: ETKDG, then MMFF (UFF if MMFF lacks parameters).

    Returns the molecule and the force field used ("MMFF94", "UFF" or "none").
    """
    p = params or GeometryParams()
    molh = Chem.AddHs(mol)
    options = AllChem.ETKDGv3()
    options.randomSeed = p.seed
    if p.conformers > 1 and p.max_force_field_iters > 0 and AllChem.MMFFHasAllMoleculeParams(molh):
        return _lowest_mmff_conformer(molh, options, p)
    if AllChem.EmbedMolecule(molh, options) != 0:
        options.useRandomCoords = True
        if AllChem.EmbedMolecule(molh, options) != 0:
            _refuse_unrealisable_stereo(mol, p)
            raise GeometryError("3D embedding (ETKDG) failed")
    if p.max_force_field_iters == 0:
        return molh, "none"
    if AllChem.MMFFHasAllMoleculeParams(molh):
        AllChem.MMFFOptimizeMolecule(molh, maxIters=p.max_force_field_iters)
        return molh, "MMFF94"
    if AllChem.UFFHasAllMoleculeParams(molh):
        AllChem.UFFOptimizeMolecule(molh, maxIters=p.max_force_field_iters)
        return molh, "UFF"
    return molh, "none"


def _refuse_unrealisable_stereo(mol: Chem.Mol, p: GeometryParams) -> None:
    """Raise :class:`UnrealisableStereo` when no 3D structure of ``mol`` (whose embedding failed) has its stereo marks.

    The molecule is embedded without its marks (a few conformers) and each conformer's stereo is read back from its
    coordinates: if one has the centres and double bonds the marks ask for, the structure exists and ETKDG only
    failed to build it under the constraints (a near-planar ring-fusion carbon): the verifier's failure, not the
    candidate's. If the unmarked molecule does not embed either, it is not the marks' doing.
    """
    asked = _stereo_labels(Chem.RemoveHs(mol, sanitize=False))
    if not asked[0] and not asked[1]:
        return
    flat = Chem.RemoveHs(mol, sanitize=False)
    Chem.RemoveStereochemistry(flat)
    flat = Chem.AddHs(flat)
    options = AllChem.ETKDGv3()
    options.randomSeed = p.seed
    ids = list(AllChem.EmbedMultipleConfs(flat, 8, options))
    if not ids:
        options.useRandomCoords = True
        ids = list(AllChem.EmbedMultipleConfs(flat, 8, options))
        if not ids:
            return  # not the marks: the embedding itself failed
    for conf_id in ids:
        built = Chem.Mol(flat)
        Chem.AssignStereochemistryFrom3D(built, confId=conf_id)
        atoms, bonds = _stereo_labels(Chem.RemoveHs(built, sanitize=False))
        if all(atoms.get(i) == label for i, label in asked[0].items()) and all(
            bonds.get(j) == label for j, label in asked[1].items()
        ):
            return  # a structure with these marks exists
    raise UnrealisableStereo(
        "no 3D structure with this stereochemistry can be built: the molecule embeds without its @/@@ and / \\ "
        "marks, and none of its structures has them; write a stereoisomer that exists, or leave the marks out"
    )


def _stereo_labels(mol: Chem.Mol) -> tuple[dict[int, str], dict[int, str]]:
    """CIP labels of the specified stereocentres (atom index -> R/S, r/s for pseudo-asymmetric ones) and double bonds
    (bond index -> E/Z)."""
    atoms = dict(Chem.FindMolChiralCenters(Chem.Mol(mol), includeUnassigned=False, useLegacyImplementation=False))
    mol = Chem.Mol(mol)
    Chem.AssignStereochemistry(mol, cleanIt=True, force=True)
    ez = (Chem.BondStereo.STEREOE, Chem.BondStereo.STEREOZ)
    bonds = {b.GetIdx(): str(b.GetStereo()) for b in mol.GetBonds() if b.GetStereo() in ez}
    return atoms, bonds


def _lowest_mmff_conformer(molh: Chem.Mol, options: Any, p: GeometryParams) -> tuple[Chem.Mol, str]:
    """``p.conformers`` ETKDG conformers, each MMFF-optimised; the molecule keeps only the lowest-energy one."""
    ids = list(AllChem.EmbedMultipleConfs(molh, p.conformers, options))
    if not ids:
        options.useRandomCoords = True
        ids = list(AllChem.EmbedMultipleConfs(molh, p.conformers, options))
        if not ids:
            _refuse_unrealisable_stereo(molh, p)
            raise GeometryError(f"3D embedding (ETKDG) failed for all {p.conformers} conformers")
    results = AllChem.MMFFOptimizeMoleculeConfs(molh, maxIters=p.max_force_field_iters)
    best = ids[min(range(len(ids)), key=lambda i: results[i][1])]
    keep = Chem.Conformer(molh.GetConformer(best))
    molh.RemoveAllConformers()
    molh.AddConformer(keep, assignId=True)
    return molh, "MMFF94"


def xyz_of(molh: Chem.Mol) -> tuple[list[int], list[str], list[tuple[float, float, float]]]:
    """Atomic numbers, symbols and Cartesian coordinates (Angstrom) of the first conformer."""
    conf = molh.GetConformer()
    numbers, symbols, coords = [], [], []
    for atom in molh.GetAtoms():
        pos = conf.GetAtomPosition(atom.GetIdx())
        numbers.append(atom.GetAtomicNum())
        symbols.append(atom.GetSymbol())
        coords.append((pos.x, pos.y, pos.z))
    return numbers, symbols, coords


# Longer text is keyed by its hash without parsing: parsing a 10,000-atom chain
# only to build a cache key would cost more than rejecting it.
KEY_PARSE_LIMIT = 1000


class MoleculeJobParams(IsolationParams):
    """What every tier that computes on a molecule's 3D geometry in a worker process needs."""

    constraints: MoleculeConstraints = Field(default_factory=MoleculeConstraints, description="Validity rules.")
    geometry: GeometryParams = Field(default_factory=GeometryParams, description="3D embedding settings.")


class MoleculeJobVerifier(IsolatedVerifier):
    """A worker-process tier on one molecule's 3D geometry (xTB, DFT).

    ``prepare`` checks the SMILES against the constraints in this process (an
    invalid molecule is a verdict; no worker is asked) and starts the job with
    what every geometry needs; ``job_settings`` adds the tier's own.
    """

    suite: ClassVar[str | None] = SUITE

    def prepare(self, candidate: Candidate) -> dict[str, Any] | Verdict:
        p = self.params
        try:
            parsed = check_molecule(candidate.payload, p.constraints)
        except InvalidMolecule as exc:
            return self.verdict(candidate, Status.invalid, feedback=str(exc))
        job = {"smiles": parsed.canonical, "charge": p.constraints.formal_charge, "geometry": p.geometry.model_dump()}
        return job | self.job_settings()

    @abstractmethod
    def job_settings(self) -> dict[str, Any]:
        """The tier's own entries of the job its work function reads (method, basis, limits)."""

    def _verdict_from(self, candidate: Candidate, outcome: TaskOutcome) -> Verdict:
        # A worker that found the candidate at fault (:class:`UnrealisableStereo`) answers {"invalid": reason}.
        if outcome.kind == "ok" and isinstance(outcome.result, dict) and "invalid" in outcome.result:
            return self.verdict(candidate, Status.invalid, feedback=str(outcome.result["invalid"]),
                                cost_s=max(outcome.cpu_s, 0.0), wall_s=max(outcome.wall_s, 0.0))
        return super()._verdict_from(candidate, outcome)


def make_candidate(smiles: str, goal: dict[str, Any] | None = None) -> Candidate:
    """Candidate for the molecules suite, keyed by canonical SMILES (or a hash of unparseable text)."""
    text = smiles if isinstance(smiles, str) else str(smiles)
    try:
        mol = parse_smiles(text, max_length=KEY_PARSE_LIMIT)
    except InvalidMolecule as exc:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        key = candidate_key(SUITE, f"invalid:{digest}")
        return Candidate(key=key, suite=SUITE, payload=text, goal=dict(goal or {}), valid=False, meta={"reason": str(exc)})
    canonical = Chem.MolToSmiles(mol)
    heavy = mol.GetNumHeavyAtoms()
    return Candidate(
        key=candidate_key(SUITE, canonical), suite=SUITE, payload=text, goal=dict(goal or {}), valid=True, size=float(heavy),
        meta={"canonical": canonical, "heavy_atoms": heavy},
    )
