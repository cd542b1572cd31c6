"""Atom-level SMILES tokenizer with goal-control tokens for HOMO-LUMO gap windows.

A molecule is one token per atom or bond symbol (the regex of Schwaller et al.,
"Molecular Transformer", ACS Cent. Sci. 2019): bracket atoms such as ``[NH3+]``
stay whole, ``Cl``/``Br`` are one token, ``%12`` is one ring-bond token. The
tokenizer is a ``tokenizers`` WordLevel model behind a ``PreTrainedTokenizerFast``
so that it saves, loads and batches like any Hugging Face tokenizer.

Prompts are goal-conditioned. A gap window [low, high) in eV is written as the
run of 0.5 eV bin tokens it covers, so one policy serves every target and a
hindsight relabel only has to swap the bin tokens::

    <bos> <gap_3.0_3.5> <gap_3.5_4.0> <sep>  C C ( = O ) N  <eos>
    '------------- prompt ----------------'  '- completion -'
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

__all__ = [
    "GAP_BIN_WIDTH",
    "GAP_MAX",
    "GAP_MIN",
    "SMILES_REGEX",
    "SPECIAL_TOKENS",
    "build_smiles_tokenizer",
    "gap_bin_tokens",
    "goal_prompt_ids",
    "goal_window",
    "split_smiles",
]

# Schwaller et al. 2019, with two-digit ring bonds (%nn) before single digits.
SMILES_REGEX = (
    r"(\[[^\]]+]|Br?|Cl?|N|O|S|P|F|I|b|c|n|o|s|p|\(|\)|\.|=|#|-|\+|\\|\/|:|~|@|\?|>|\*|\$|%[0-9]{2}|[0-9])"
)
_SMILES_RE = re.compile(SMILES_REGEX)

SPECIAL_TOKENS = {
    "pad_token": "<pad>",
    "bos_token": "<bos>",
    "eos_token": "<eos>",
    "unk_token": "<unk>",
    "sep_token": "<sep>",
}

# QM9 gaps (B3LYP/6-31G(2df,p)) span about 0.67-13.7 eV; 0.5 eV bins cover 0.5-14.0.
GAP_MIN = 0.5
GAP_MAX = 14.0
GAP_BIN_WIDTH = 0.5
_N_BINS = round((GAP_MAX - GAP_MIN) / GAP_BIN_WIDTH)

# Symbols every organic-chemistry vocabulary needs even if the training set lacks them,
# so a relabeled or hand-written SMILES does not collapse into <unk>.
_BASE_SMILES_TOKENS = [
    "C", "N", "O", "S", "P", "F", "Cl", "Br", "I", "B",
    "c", "n", "o", "s", "p", "b",
    "(", ")", "=", "#", "-", "+", "\\", "/", ":", ".", "~", "@", "*",
    *[str(d) for d in range(10)],
    "[nH]", "[NH+]", "[NH2+]", "[NH3+]", "[N+]", "[N-]", "[O-]", "[C-]", "[CH-]", "[n+]", "[n-]", "[c-]",
    "[C@H]", "[C@@H]", "[C@]", "[C@@]",
]


def _bin_token(i: int) -> str:
    lo = GAP_MIN + i * GAP_BIN_WIDTH
    return f"<gap_{lo:.1f}_{lo + GAP_BIN_WIDTH:.1f}>"


GAP_TOKENS = [_bin_token(i) for i in range(_N_BINS)]
_GAP_TOKEN_RE = re.compile(r"<gap_(\d+\.\d)_(\d+\.\d)>")


def split_smiles(smiles: str) -> list[str]:
    """Atom-level tokens of a SMILES string; raises ValueError if the regex does not cover it."""
    tokens = _SMILES_RE.findall(smiles)
    if "".join(tokens) != smiles:
        raise ValueError(f"SMILES {smiles!r} has characters outside the atom-level SMILES grammar")
    return tokens


def build_smiles_tokenizer(smiles: Iterable[str] = ()) -> PreTrainedTokenizerFast:
    """A ``PreTrainedTokenizerFast`` whose vocabulary is the base symbols plus every token seen in ``smiles``.

    Special tokens (pad, bos, eos, unk, sep) and the gap-bin control tokens are added as
    special tokens, so they are matched before the SMILES regex splits the rest.
    """
    vocab_tokens: list[str] = []
    seen: set[str] = set()
    for tok in [*SPECIAL_TOKENS.values(), *GAP_TOKENS, *_BASE_SMILES_TOKENS]:
        if tok not in seen:
            seen.add(tok)
            vocab_tokens.append(tok)
    for s in smiles:
        for tok in split_smiles(s):
            if tok not in seen:
                seen.add(tok)
                vocab_tokens.append(tok)
    vocab = {tok: i for i, tok in enumerate(vocab_tokens)}

    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=SPECIAL_TOKENS["unk_token"]))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(SMILES_REGEX), behavior="isolated")
    core.decoder = decoders.Fuse()  # SMILES tokens join without spaces
    tok = PreTrainedTokenizerFast(tokenizer_object=core, **SPECIAL_TOKENS, padding_side="left")
    tok.add_special_tokens({"additional_special_tokens": GAP_TOKENS})
    return tok


def gap_bin_tokens(low: float, high: float) -> list[str]:
    """The bin tokens covering the window [low, high) in eV (at least one bin)."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        raise ValueError(f"gap window needs finite low < high, got ({low}, {high})")
    lo = min(max(low, GAP_MIN), GAP_MAX - GAP_BIN_WIDTH)
    hi = max(min(high, GAP_MAX), lo + 1e-9)
    first = int(math.floor((lo - GAP_MIN) / GAP_BIN_WIDTH + 1e-9))
    last = int(math.ceil((hi - GAP_MIN) / GAP_BIN_WIDTH - 1e-9)) - 1
    last = max(first, min(last, _N_BINS - 1))
    return GAP_TOKENS[first : last + 1]


def goal_prompt_ids(tokenizer: PreTrainedTokenizerFast, low: float, high: float) -> list[int]:
    """Token ids of the prompt ``<bos> <gap bins covering [low, high)> <sep>``."""
    toks = [tokenizer.bos_token, *gap_bin_tokens(low, high), tokenizer.sep_token]
    return tokenizer.convert_tokens_to_ids(toks)


def goal_window(tokenizer: PreTrainedTokenizerFast, prompt_ids: Iterable[int]) -> tuple[float, float]:
    """Inverse of :func:`goal_prompt_ids`: the (low, high) window the prompt's bin tokens cover."""
    bounds = [
        (float(m.group(1)), float(m.group(2)))
        for t in tokenizer.convert_ids_to_tokens(list(prompt_ids))
        if (m := _GAP_TOKEN_RE.fullmatch(t))
    ]
    if not bounds:
        raise ValueError("prompt carries no gap-bin token")
    return min(b[0] for b in bounds), max(b[1] for b in bounds)
