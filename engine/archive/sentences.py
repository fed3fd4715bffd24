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
            j = i + 1
            while j < n and text[j] in _CJK_TERMS:
                j += 1
            while j < n and text[j] in _CLOSERS:
                j += 1
            cut = j
        elif ch == "\n":
            j = i + 1
            while j < n and text[j] == "\n":
                j += 1
            cut = j
        elif ch in _LATIN_TERMS:
            j = i + 1
            while j < n and text[j] in _LATIN_TERMS:
                j += 1
            while j < n and text[j] in _CLOSERS:
                j += 1
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
