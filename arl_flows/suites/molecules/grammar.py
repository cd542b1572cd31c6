"""The SMILES grammar as a decoding constraint: the prior never writes a string RDKit must reject for its syntax.

A :class:`SmilesGrammar` is a :class:`~policies.DecodingConstraint` over the atom-level SMILES tokenizer
(``smiles.py``). Its per-row state is updated in O(1) per token and its rules only ban what no SMILES that
RDKit parses can hold (each rule below was checked against RDKit, and the tests replay MOSES molecules
through it); what it cannot know cheaply (kekulization, valence) it leaves to the verifiers.

- special tokens (bos, sep, pad, unk, the gap bins) never appear in a completion; eos ends one;
- a bare ``+ @ ? >`` (outside a bracket atom) is never SMILES; with ``elements`` (a space's), an atom of
  another element never comes;
- the first token, and the token after ``.``, is an atom (no bond, branch, ring bond, dot or eos there);
- after ``(`` comes an atom or a bond, after a bond an atom or a ring-bond label, after ``(`` and a bond an
  atom: so no ``(`` at the start or after ``(``, no ``()``, no bond before ``(``, ``)``, ``.``, eos or a bond;
- ``)`` only inside a branch;
- a ring-bond label that is open may not close on the atom that opened it, nor on an atom already bonded to
  that one (RDKit's "duplicate bond");
- eos only after an atom, a ring bond or ``)``, with every branch and ring-bond label closed and every
  aromatic atom bonded to at least two atoms (an aromatic atom must lie in a ring);
- valence: an aliphatic atom of the organic subset (``C``, ``N``, ``O``, ``S``, ``F``, ``Cl``, ...) holds bonds
  whose orders sum to at most RDKit's largest valence of its element (C 4, N 3, O 2, S 6, halogens 1), counting
  a ring-bond label's order on the atom that opens it at once. So no bond, branch, ring bond or atom comes
  that would exceed it, and no atom comes that cannot take the pending bond's order (``C=F``). Aromatic and
  bracket atoms are not counted (their valence depends on the ring and on charges and hydrogens);
- liveness: while a ring-bond label is open, some atom still able to bond must remain reachable (the current
  one, or the parent of an open branch), so no token saturates the last of them (``C1CCF``: nothing could close
  the ring). A state every token of which is banned (only with hand-fed prefixes) allows eos alone.

The allowed ids of a state depend on a small key (what came last, whether a branch is open, whether eos may
come, which open labels may not close here, the free valence here and of the open branches' parents, the
pending bond's order), so the masks are cached per key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from math import inf

import torch

__all__ = ["SmilesGrammar", "SmilesState", "space_grammar"]


class _Last(Enum):
    """What the completion's last token was, as far as the grammar cares."""

    START = "start"  # nothing yet
    ATOM = "atom"  # an atom, a ring-bond label after one, or ')'
    BOND = "bond"  # a bond symbol on the main chain (an atom or a ring-bond label may follow)
    OPEN = "open"  # '('
    OPEN_BOND = "open_bond"  # '(' and a bond: an atom must follow
    DOT = "dot"  # '.'
    END = "end"  # eos


class _Kind(Enum):
    ATOM = "atom"
    BOND = "bond"
    RING = "ring"
    OPEN = "("
    CLOSE = ")"
    DOT = "."
    EOS = "eos"
    NEVER = "never"  # special tokens and symbols that are never SMILES outside brackets


@dataclass
class SmilesState:
    """One row's parse so far: O(1) to update per token (the lists grow by at most one entry a token)."""

    last: _Last = _Last.START
    attach: int = -1  # the atom the next bond or ring-bond label attaches to (after ')': the branch's parent)
    branches: list[int] = field(default_factory=list)  # the parent atom of each open branch
    rings: dict[int, int] = field(default_factory=dict)  # open ring-bond label -> the atom that opened it
    neighbours: list[set[int]] = field(default_factory=list)  # per atom, the atoms bonded to it so far
    aromatic: list[bool] = field(default_factory=list)
    thin_aromatic: int = 0  # aromatic atoms bonded to fewer than two atoms
    free: list[float] = field(default_factory=list)  # per atom, the bond order it may still take (inf: not counted)
    pending: int = 0  # the order of the bond symbol just written (0: none)
    ring_order: dict[int, int] = field(default_factory=dict)  # open label -> the order written where it opened (0: none)


_BRACKET_ELEMENT = re.compile(r"\[\d*(\*|se|as|te|[a-z]|[A-Z][a-z]?)")
_ORGANIC = {"B", "C", "N", "O", "P", "S", "F", "Cl", "Br", "I", "b", "c", "n", "o", "p", "s", "*"}
# symbol -> the order counted. The bonds a space's molecule may have (chemistry._normalised): '~' (zero-order) and
# '$' (quadruple) are refused there, so the grammar never writes them; ':' only in a grammar that allows aromatic atoms.
_BONDS = {"-": 1, "=": 2, "#": 3, ":": 1, "/": 1, "\\": 1}
# RDKit's largest valence of each aliphatic organic-subset atom (Chem.GetPeriodicTable().GetValenceList).
_MAX_VALENCE = {"B": 3, "C": 4, "N": 3, "O": 2, "P": 5, "S": 6, "F": 1, "Cl": 1, "Br": 1, "I": 5}
_R = 5  # free valences above this are one key: no bond order (at most 4) with liveness (1 more) tells them apart


def _atom(token: str) -> tuple[str, bool] | None:
    """(element, aromatic) of an atom token, or None if the token is not an atom."""
    if token in _ORGANIC:
        return (token.capitalize() if token != "*" else "*"), token.islower()
    if token.startswith("[") and token.endswith("]"):
        m = _BRACKET_ELEMENT.match(token)
        if m is None:
            return None
        symbol = m.group(1)
        return (symbol.capitalize() if symbol != "*" else "*"), symbol.islower()
    return None


def _ring_label(token: str) -> int | None:
    if len(token) == 1 and token.isdigit():
        return int(token)
    if len(token) == 3 and token[0] == "%" and token[1:].isdigit():
        return int(token[1:])
    return None


class SmilesGrammar:
    """The SMILES grammar over a tokenizer's vocabulary, as a :class:`~policies.DecodingConstraint`.

    ``elements`` (e.g. a chemistry space's, ``H`` included) also bans atoms of other elements; None allows any.
    ``kekule`` (a prior trained on Kekule SMILES) bans aromatic atoms.
    """

    def __init__(self, tokenizer, elements: Iterable[str] | None = None, kekule: bool = False):  # noqa: ANN001 - a PreTrainedTokenizer
        vocab = tokenizer.get_vocab()
        self.vocab_size = max(vocab.values()) + 1
        self.eos = tokenizer.eos_token_id
        allowed_elements = set(elements) if elements is not None else None
        special = set(tokenizer.all_special_ids)
        self._kind: list[_Kind] = [_Kind.NEVER] * self.vocab_size
        self._aromatic = [False] * self.vocab_size
        self._capacity = [inf] * self.vocab_size  # an atom token's largest valence (inf: not counted)
        self._order = [0] * self.vocab_size  # a bond symbol's order
        self._label: dict[int, int] = {}  # token id -> ring-bond label
        for token, i in vocab.items():
            if i == self.eos:
                self._kind[i] = _Kind.EOS
            elif i in special:
                continue
            elif (atom := _atom(token)) is not None:
                if (allowed_elements is None or atom[0] in allowed_elements) and not (kekule and atom[1]):
                    self._kind[i], self._aromatic[i] = _Kind.ATOM, atom[1]
                    if token in _MAX_VALENCE:  # aliphatic organic subset: implicit hydrogens fill up to a valence
                        self._capacity[i] = _MAX_VALENCE[token]
            elif token in _BONDS and not (kekule and token == ":"):
                self._kind[i] = _Kind.BOND
                self._order[i] = _BONDS[token]
            elif (label := _ring_label(token)) is not None:
                self._kind[i] = _Kind.RING
                self._label[i] = label
            elif token in ("(", ")", "."):
                self._kind[i] = {"(": _Kind.OPEN, ")": _Kind.CLOSE, ".": _Kind.DOT}[token]
        self._ids_of = {kind: torch.tensor([i for i, k in enumerate(self._kind) if k == kind], dtype=torch.long)
                        for kind in _Kind}
        self._id_of_label = {label: i for i, label in self._label.items()}
        atoms = self._ids_of[_Kind.ATOM]
        self._atom_capacity = torch.tensor([self._capacity[i] for i in atoms.tolist()], dtype=torch.float64)
        self._bond_ids = {order: torch.tensor([i for i in self._ids_of[_Kind.BOND].tolist() if self._order[i] == order],
                                              dtype=torch.long) for order in set(_BONDS.values())}
        self._masks: dict[tuple, torch.Tensor] = {}

    # -- the DecodingConstraint protocol ----------------------------------------------------------
    def start(self) -> SmilesState:
        return SmilesState()

    def allowed(self, state: SmilesState) -> torch.Tensor:
        """(vocab_size,) bool: the ids that may follow ``state`` (cached per the state's key)."""
        key = self._key(state)
        mask = self._masks.get(key)
        if mask is None:
            mask = self._masks[key] = self._build(*key)
        return mask

    def advance(self, state: SmilesState, token_id: int) -> SmilesState:
        """The state after ``token_id`` (updated in place). A token :meth:`allowed` bans is an error."""
        if not (0 <= token_id < self.vocab_size and bool(self.allowed(state)[token_id])):
            raise ValueError(f"token id {token_id} breaks the SMILES grammar here: rescore under the grammar only "
                             "completions sampled under it")
        kind = self._kind[token_id]
        if kind is _Kind.ATOM:
            atom = len(state.neighbours)
            state.neighbours.append(set())
            state.aromatic.append(self._aromatic[token_id])
            state.free.append(self._capacity[token_id])
            state.thin_aromatic += self._aromatic[token_id]
            if state.last not in (_Last.START, _Last.DOT):
                self._bond(state, state.attach, atom)
                order = max(state.pending, 1)
                state.free[state.attach] -= order
                state.free[atom] -= order
            state.attach, state.last, state.pending = atom, _Last.ATOM, 0
        elif kind is _Kind.BOND:
            state.last = _Last.OPEN_BOND if state.last is _Last.OPEN else _Last.BOND
            state.pending = self._order[token_id]
        elif kind is _Kind.RING:
            label = self._label[token_id]
            opener = state.rings.pop(label, None)
            if opener is None:
                state.rings[label] = state.attach
                state.ring_order[label] = state.pending
                state.free[state.attach] -= max(state.pending, 1)  # held for the bond the label closes
            else:
                self._bond(state, opener, state.attach)
                opened = state.ring_order.pop(label)
                order = max(opened, state.pending, 1)
                state.free[opener] -= order - max(opened, 1)
                state.free[state.attach] -= order
            state.last, state.pending = _Last.ATOM, 0
        elif kind is _Kind.OPEN:
            state.branches.append(state.attach)
            state.last = _Last.OPEN
        elif kind is _Kind.CLOSE:
            state.attach = state.branches.pop()
            state.last = _Last.ATOM
        elif kind is _Kind.DOT:
            state.last = _Last.DOT
        else:  # eos
            state.last = _Last.END
        return state

    # -- the rules ------------------------------------------------------------------------------------
    @staticmethod
    def _bond(state: SmilesState, a: int, b: int) -> None:
        for x, y in ((a, b), (b, a)):
            state.neighbours[x].add(y)
            if state.aromatic[x] and len(state.neighbours[x]) == 2:
                state.thin_aromatic -= 1

    def _key(self, state: SmilesState) -> tuple:
        last = state.last
        here = min(state.free[state.attach], _R) if state.attach >= 0 else _R
        parents = [min(state.free[p], _R) for p in state.branches]
        # In OPEN states the attach atom is the innermost parent: what the next atom's bond leaves it is checked
        # in _build, so only the other parents count as reachable there.
        outer = parents[:-1] if last in (_Last.OPEN, _Last.OPEN_BOND) else parents
        outer_live = any(free >= 1 for free in outer)
        unclosable = ()
        if state.rings and last in (_Last.ATOM, _Last.BOND):
            at = state.attach
            near = state.neighbours[at]
            others_open = len(state.rings) > 1
            banned = []
            for label, opener in state.rings.items():
                opened = state.ring_order[label]
                order = max(opened, state.pending, 1)
                if (opener == at or opener in near or state.free[at] < order
                        or state.free[opener] < order - max(opened, 1)
                        or (others_open and state.free[at] - order < 1 and not outer_live)):
                    banned.append(label)
            unclosable = tuple(sorted(banned))
        ends = last is _Last.ATOM and not state.branches and not state.rings and state.thin_aromatic == 0
        return last, bool(state.branches), ends, tuple(sorted(state.rings)), unclosable, here, state.pending, outer_live

    def _atoms_with(self, capacity: float) -> torch.Tensor:
        """The atom ids whose largest valence is at least ``capacity``."""
        return self._ids_of[_Kind.ATOM][self._atom_capacity >= capacity]

    def _build(self, last: _Last, in_branch: bool, ends: bool, open_labels: tuple[int, ...], unclosable: tuple[int, ...],
               here: float, pending: int, outer_live: bool) -> torch.Tensor:
        mask = torch.zeros(self.vocab_size, dtype=torch.bool)
        if last is _Last.END:  # a finished row is not sampled from; allow eos so that it is never empty
            mask[self.eos] = True
            return mask
        stuck = bool(open_labels) and not outer_live  # an open label needs an atom that can still bond, and none is elsewhere
        order = max(pending, 1)
        if last in (_Last.START, _Last.DOT):
            mask[self._ids_of[_Kind.ATOM]] = True
        elif last in (_Last.ATOM, _Last.BOND):
            if here >= order:  # the next atom bonds to this one; while stuck, it must be able to bond on
                mask[self._atoms_with(order + 1 if stuck else order)] = True
        else:  # OPEN, OPEN_BOND: the atom bonds to the branch's parent, which stays reachable if it keeps a valence
            if here >= order:
                mask[self._atoms_with(order + 1 if stuck and here - order < 1 else order)] = True
        if last is _Last.ATOM:
            for bond_order, ids in self._bond_ids.items():
                if here >= bond_order:
                    mask[ids] = True
            if here >= 1:
                mask[self._ids_of[_Kind.OPEN]] = True
            # A new label holds a valence here until it closes; something must still be able to bond after it.
            self._ring_labels(mask, open_labels, unclosable, here >= 2 or (here >= 1 and outer_live))
            mask[self._ids_of[_Kind.DOT]] = True
            if in_branch and not stuck:
                mask[self._ids_of[_Kind.CLOSE]] = True
            mask[self.eos] = ends
        elif last is _Last.BOND:
            self._ring_labels(mask, open_labels, unclosable, here - pending >= 1 or outer_live)
        elif last is _Last.OPEN:
            for bond_order, ids in self._bond_ids.items():
                if here >= bond_order:
                    mask[ids] = True
        if not bool(mask.any()):  # only a hand-fed prefix gets here (sampling under the grammar never does)
            mask[self.eos] = True
        return mask

    def _ring_labels(self, mask: torch.Tensor, open_labels: tuple[int, ...], unclosable: tuple[int, ...], may_open: bool) -> None:
        """Allow the ring-bond labels that may come here: an open one closes unless banned, a new one opens if ``may_open``."""
        for label, i in self._id_of_label.items():
            mask[i] = label not in unclosable if label in open_labels else may_open

def space_grammar(tokenizer, space: str, kekule: bool = False) -> SmilesGrammar:  # noqa: ANN001 - a PreTrainedTokenizer
    """The SMILES grammar of a chemistry space: its elements only (``spaces.py``); ``kekule``: no aromatic atoms."""
    from arl_flows.suites.molecules.spaces import get_space

    return SmilesGrammar(tokenizer, elements=get_space(space).elements, kekule=kekule)
