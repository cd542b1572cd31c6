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
  aromatic atom bonded to at least two atoms (an aromatic atom must lie in a ring).

The allowed ids of a state depend on a small key (what came last, whether a branch is open, whether eos may
come, which open labels may not close here), so the masks are cached per key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

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


_BRACKET_ELEMENT = re.compile(r"\[\d*(\*|se|as|te|[a-z]|[A-Z][a-z]?)")
_ORGANIC = {"B", "C", "N", "O", "P", "S", "F", "Cl", "Br", "I", "b", "c", "n", "o", "p", "s", "*"}
_BONDS = {"-", "=", "#", "$", ":", "/", "\\", "~"}


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
    """

    def __init__(self, tokenizer, elements: Iterable[str] | None = None):  # noqa: ANN001 - a PreTrainedTokenizer
        vocab = tokenizer.get_vocab()
        self.vocab_size = max(vocab.values()) + 1
        self.eos = tokenizer.eos_token_id
        allowed_elements = set(elements) if elements is not None else None
        special = set(tokenizer.all_special_ids)
        self._kind: list[_Kind] = [_Kind.NEVER] * self.vocab_size
        self._aromatic = [False] * self.vocab_size
        self._label: dict[int, int] = {}  # token id -> ring-bond label
        for token, i in vocab.items():
            if i == self.eos:
                self._kind[i] = _Kind.EOS
            elif i in special:
                continue
            elif (atom := _atom(token)) is not None:
                if allowed_elements is None or atom[0] in allowed_elements:
                    self._kind[i], self._aromatic[i] = _Kind.ATOM, atom[1]
            elif token in _BONDS:
                self._kind[i] = _Kind.BOND
            elif (label := _ring_label(token)) is not None:
                self._kind[i] = _Kind.RING
                self._label[i] = label
            elif token in ("(", ")", "."):
                self._kind[i] = {"(": _Kind.OPEN, ")": _Kind.CLOSE, ".": _Kind.DOT}[token]
        self._ids_of = {kind: torch.tensor([i for i, k in enumerate(self._kind) if k == kind], dtype=torch.long)
                        for kind in _Kind}
        self._id_of_label = {label: i for i, label in self._label.items()}
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
            state.thin_aromatic += self._aromatic[token_id]
            if state.last not in (_Last.START, _Last.DOT):
                self._bond(state, state.attach, atom)
            state.attach, state.last = atom, _Last.ATOM
        elif kind is _Kind.BOND:
            state.last = _Last.OPEN_BOND if state.last is _Last.OPEN else _Last.BOND
        elif kind is _Kind.RING:
            label = self._label[token_id]
            opener = state.rings.pop(label, None)
            if opener is None:
                state.rings[label] = state.attach
            else:
                self._bond(state, opener, state.attach)
            state.last = _Last.ATOM
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
        unclosable = ()
        if state.rings and state.last in (_Last.ATOM, _Last.BOND):
            here = state.attach
            near = state.neighbours[here]
            unclosable = tuple(sorted(label for label, opener in state.rings.items() if opener == here or opener in near))
        ends = state.last is _Last.ATOM and not state.branches and not state.rings and state.thin_aromatic == 0
        return state.last, bool(state.branches), ends, unclosable

    def _build(self, last: _Last, in_branch: bool, ends: bool, unclosable: tuple[int, ...]) -> torch.Tensor:
        mask = torch.zeros(self.vocab_size, dtype=torch.bool)
        if last is _Last.END:  # a finished row is not sampled from; allow eos so that it is never empty
            mask[self.eos] = True
            return mask
        mask[self._ids_of[_Kind.ATOM]] = True
        if last is _Last.ATOM:
            for kind in (_Kind.BOND, _Kind.RING, _Kind.OPEN, _Kind.DOT):
                mask[self._ids_of[kind]] = True
            if in_branch:
                mask[self._ids_of[_Kind.CLOSE]] = True
            mask[self.eos] = ends
        elif last is _Last.BOND:
            mask[self._ids_of[_Kind.RING]] = True
        elif last is _Last.OPEN:
            mask[self._ids_of[_Kind.BOND]] = True
        for label in unclosable:
            i = self._id_of_label.get(label)
            if i is not None:
                mask[i] = False
        return mask


def space_grammar(tokenizer, space: str) -> SmilesGrammar:  # noqa: ANN001 - a PreTrainedTokenizer
    """The SMILES grammar of a chemistry space: its elements only (``spaces.py``)."""
    from arl_flows.suites.molecules.spaces import get_space

    return SmilesGrammar(tokenizer, elements=get_space(space).elements)
