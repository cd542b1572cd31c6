"""Strict parsing of code trajectories.

A trajectory is one or more turns; each turn is a ``<think>...</think>``
block followed by a ``<code>...</code>`` block, and consecutive turns are
separated by the environment's ``<observation>...</observation>``::

    <think>plan</think>
    <code>print(1)</code>
    <observation>1</observation>
    <think>fix it</think>
    <code>print(2)</code>          <- the final code block is the answer

Only whitespace may sit between blocks. Training needs a precise reason for
every malformed trajectory (it is both the fast tier's feedback and a
signal for the format reward), so the parser returns either a parsed
trajectory or a :class:`FormatError` naming the first problem.

The candidate key hashes the *code of every turn* (as the sandbox runs it) and
the *judged content of its task* (``CodeTask.judged_digest``): two answers
with the same code but different thinking share verdicts, because every
verdict of this suite depends only on the code and the task (the tiers re-run earlier
turns themselves rather than trusting the observations). The turns are
encoded as a canonical JSON list, never joined with a separator a program
could itself contain, so two different trajectories never share a key; the
key carries the encoding's scheme (``KEY_SCHEME``) so keys of an older
scheme are never looked up again.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import re
import textwrap
import tokenize

from pydantic import BaseModel, ConfigDict, Field

from arl_flows.suites.code.tasks import get_task
from storage.records import candidate_key
from verifiers.base import Candidate

__all__ = [
    "KEY_SCHEME",
    "FormatError",
    "ParsedTrajectory",
    "ParsedTurn",
    "canonical_code",
    "make_candidate",
    "normalise_code",
    "parse_answer",
]

SUITE = "code"
_TAGS = ("<think>", "</think>", "<code>", "</code>", "<observation>", "</observation>")
_TAG_RE = re.compile("|".join(re.escape(t) for t in _TAGS))
# Bumped whenever canonical_code's encoding changes; part of every key, so older keys never match.
KEY_SCHEME = "c3"


class ParsedTurn(BaseModel):
    """One think + code turn, with the observation that followed it (None for the final turn)."""

    model_config = ConfigDict(extra="forbid")

    think: str
    code: str = Field(description="Normalised code of this turn (what the sandbox runs).")
    observation: str | None = None


class ParsedTrajectory(BaseModel):
    """A well-formed trajectory; the last turn's code is the answer."""

    model_config = ConfigDict(extra="forbid")

    turns: list[ParsedTurn] = Field(min_length=1)

    @property
    def final_code(self) -> str:
        return self.turns[-1].code

    @property
    def codes(self) -> list[str]:
        return [t.code for t in self.turns]


class FormatError(BaseModel):
    """Why a trajectory is malformed, and where."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(description="e.g. 'missing </code>', 'text after </code>'.")
    offset: int = Field(ge=0, description="Character offset where the problem was found.")

    def __str__(self) -> str:
        return f"{self.reason} (at character {self.offset})"


def normalise_code(code: str) -> str:
    """The program the sandbox runs: the written code block, changed only where Python itself would not tell.

    Newlines are unified (Python's tokenizer reads ``\\r\\n`` and ``\\r`` as ``\\n``, inside string literals too),
    blank lines at either edge are dropped, and trailing blanks are dropped from lines that end outside a string
    literal (the tokenizer decides; a line ending inside a multi-line literal, or a program that does not
    tokenize, keeps them, as does a line whose blanks follow a backslash). A block indented as a whole is dedented only where that cannot change a
    value: when it parses after dedenting and no string literal spans lines (a multi-line literal's inner
    indentation is part of its value). Otherwise it runs as written and fails as written.
    """
    lines = code.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return ""
    text = _strip_trailing_blanks(lines)
    if text[0] in " \t":
        dedented = textwrap.dedent(text)
        if dedented != text and _dedent_keeps_meaning(dedented):
            return dedented
    return text


def _strip_trailing_blanks(lines: list[str]) -> str:
    """The lines joined, without trailing blanks where they are outside every string literal."""
    text = "\n".join(lines) + "\n"
    inside: set[int] = set()  # 1-based rows whose end lies inside a string literal
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                inside.update(range(tok.start[0], tok.end[0]))
    except (tokenize.TokenError, SyntaxError, ValueError, RecursionError, MemoryError):
        return text
    kept = [
        line if row in inside or line.rstrip().endswith("\\") else line.rstrip()
        for row, line in enumerate(lines, 1)
    ]
    return "\n".join(kept) + "\n"


def _dedent_keeps_meaning(dedented: str) -> bool:
    """Whether a dedented block parses with no string literal spanning lines (whose value dedenting would change)."""
    try:
        tree = ast.parse(dedented)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return not any(
        isinstance(node, (ast.Constant, ast.JoinedStr)) and node.lineno != node.end_lineno for node in ast.walk(tree)
    )


class _Cursor:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def next_tag(self) -> str | None:
        """The tag starting exactly here, if any."""
        m = _TAG_RE.match(self.text, self.pos)
        return m.group(0) if m else None

    def block(self, tag: str) -> str | FormatError:
        """Consume ``<tag>body</tag>`` (the opening tag is at ``pos``); reject nested tags."""
        close = "</" + tag[1:]
        start = self.pos + len(tag)
        end = self.text.find(close, start)
        if end < 0:
            return FormatError(reason=f"missing {close}", offset=len(self.text))
        body = self.text[start:end]
        inner = _TAG_RE.search(body)
        if inner is not None and tag != "<observation>":
            return FormatError(reason=f"{inner.group(0)} inside {tag}...{close}", offset=start + inner.start())
        self.pos = end + len(close)
        return body


def _describe_stray(cur: _Cursor) -> str:
    tag = cur.next_tag()
    return tag if tag else repr(cur.text[cur.pos : cur.pos + 20])


def parse_answer(text: str) -> ParsedTrajectory | FormatError:
    """Parse a trajectory strictly; return the parsed turns or the first problem."""
    cur = _Cursor(text)
    turns: list[ParsedTurn] = []
    cur.skip_space()
    if cur.at_end():
        return FormatError(reason="empty answer", offset=0)
    while True:
        n = len(turns) + 1
        tag = cur.next_tag()
        if tag != "<think>":
            if tag == "<code>":
                return FormatError(reason=f"missing <think> before <code> in turn {n}", offset=cur.pos)
            where = "before <think>" if n == 1 else f"where turn {n}'s <think> should start"
            return FormatError(reason=f"text {where}: {_describe_stray(cur)}", offset=cur.pos)
        think = cur.block("<think>")
        if isinstance(think, FormatError):
            return think
        cur.skip_space()
        if cur.at_end():
            return FormatError(reason=f"missing <code> after </think> in turn {n}", offset=cur.pos)
        if cur.next_tag() != "<code>":
            return FormatError(reason=f"text between </think> and <code>: {_describe_stray(cur)}", offset=cur.pos)
        code = cur.block("<code>")
        if isinstance(code, FormatError):
            return code
        if not code.strip():
            return FormatError(reason=f"empty <code> block in turn {n}", offset=cur.pos)
        cur.skip_space()
        if cur.at_end():
            turns.append(ParsedTurn(think=think.strip(), code=normalise_code(code)))
            return ParsedTrajectory(turns=turns)
        tag = cur.next_tag()
        if tag == "<code>":
            return FormatError(reason="two final code blocks: a second <code> follows </code> without an <observation>", offset=cur.pos)
        if tag == "<think>":
            return FormatError(reason=f"turn {n + 1} starts without an <observation> after turn {n}'s </code>", offset=cur.pos)
        if tag != "<observation>":
            return FormatError(reason=f"text after </code>: {_describe_stray(cur)}", offset=cur.pos)
        obs = cur.block("<observation>")
        if isinstance(obs, FormatError):
            return obs
        turns.append(ParsedTurn(think=think.strip(), code=normalise_code(code), observation=obs))
        cur.skip_space()
        if cur.at_end():
            return FormatError(reason="the trajectory ends with an <observation>; the final turn must be a <code> block", offset=cur.pos)


def canonical_code(answer_text: str) -> str:
    """What the candidate key hashes: canonical JSON of every turn's normalised code, or of the raw text if malformed."""
    parsed = parse_answer(answer_text)
    if isinstance(parsed, FormatError):
        body: dict[str, object] = {"malformed": answer_text.replace("\r\n", "\n")}
    else:
        body = {"turns": parsed.codes}
    return json.dumps(body, ensure_ascii=True, separators=(",", ":"), sort_keys=True)


def make_candidate(task_id: str, answer_text: str) -> Candidate:
    """The verifier input for one code trajectory (``arl verify --suite code`` calls this)."""
    task = get_task(task_id)  # an unknown task is the caller's mistake; UnknownTask says which ids exist
    canonical = canonical_code(answer_text)  # ASCII: json escapes lone surrogates too
    # The task's judged content is part of the key: a verdict names the program *and* what it was judged against.
    digest = f"{KEY_SCHEME}-{task.judged_digest()}-" + hashlib.sha256(canonical.encode("ascii")).hexdigest()
    parsed = parse_answer(answer_text)
    return Candidate(
        key=candidate_key(SUITE, digest, task_id=task_id),
        suite=SUITE,
        payload=answer_text,
        task_id=task_id,
        valid=not isinstance(parsed, FormatError),
        size=float(len(answer_text)),  # the tiers' cost models scale with the text's length
        meta={
            "chars": len(answer_text),
            "turns": 0 if isinstance(parsed, FormatError) else len(parsed.turns),
        }
        # A task of a source other than the bundled set: how to load it, for a verifier in a process that has not.
        | ({"task_source": dict(task.source_spec)} if task.source_spec else {}),
    )
