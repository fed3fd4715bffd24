"""Sentence splitting for over-long messages (reference §1.1).

Rules: split after Chinese terminators (。！？；…, with any closing quotes or brackets
that follow) and after line breaks; split after Latin ``. ! ? ;`` only when whitespace
or the end follows, so ``3.14`` and ``v1.2.0`` stay whole (the whitespace stays with
the sentence before it). The pieces concatenate to exactly the input. Python strings are
code points, so a cut can never fall inside an astral character; input is expected to
be well formed (see :func:`engine.archive.surface.well_formed`). One linear scan.
"""

from __future__ import annotations

__all__ = ["split_sentences"]

_CJK_TERMS = frozenset("。！？；…")
_LATIN_TERMS = frozenset("!?.;")
_CLOSERS = frozenset("”’」』）)】》\"'")
_NEWLINE = frozenset("\n")


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences whose concatenation is ``text``."""
    out: list[str] = []
    n = len(text)
    start = 0
    i = 0
    while i < n:
        ch = text[i]
        cut = -1
        if ch in _CJK_TERMS:
            cut = _past(text, _past(text, i + 1, _CJK_TERMS), _CLOSERS)
        elif ch == "\n":
            cut = _past(text, i + 1, _NEWLINE)
        elif ch in _LATIN_TERMS:
            j = _past(text, _past(text, i + 1, _LATIN_TERMS), _CLOSERS)
            if j == n or text[j].isspace():
                while j < n and text[j].isspace():
                    j += 1
                cut = j
            else:
                i = j
                continue
        if cut < 0:
            i += 1
            continue
        out.append(text[start:cut])
        start = i = cut
    if start < n:
        out.append(text[start:])
    return out


def _past(text: str, j: int, chars: frozenset[str]) -> int:
    """The index after the run of ``chars`` that starts at ``j`` (``j`` when there is none)."""
    n = len(text)
    while j < n and text[j] in chars:
        j += 1
    return j
