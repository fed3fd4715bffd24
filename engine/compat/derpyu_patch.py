"""The text side of the Derpyu tool-whitelist autopatch (reference §3.2.5).

Derpyu's ``qq-tool-restrict.mjs`` guard refuses every tool outside its whitelist, and
rofmd's four tools are outside it, so in a Derpyu chat nothing is ever scored or
recalled by the model. The patch adds the four names to ``const SAFE_EXACT = new
Set([...])`` and nothing else.

This edits a third party's code, so it recognises one shape only and never guesses:
the Set opened alone on its line, then one string literal per line (optional trailing
comma and ``//`` comment; blank and ``//`` comment lines allowed), then a line opening
with ``])``. Anything else (no Set, several, a spread or a variable, entries beside the
brackets, an escape in a literal) is ``unknown`` and the text is returned as it came.
Each added line carries :data:`MARKER`, so a person (or :func:`strip_patch`) can find
and delete exactly what was added; every other byte, line ends included, is kept.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "MARKER",
    "PATCH_NAMES",
    "PatchStatus",
    "PatchText",
    "patch_text",
    "strip_patch",
]

PATCH_NAMES = ("memory_judge", "memory_recall", "memory_image", "memory_group_recall")
"""rofmd's model tools that the Derpyu guard must let through, in insertion order."""

MARKER = "// rofm-autopatch: 自动补丁注入"
"""The end-of-line comment of every line the patch adds (the reference's marker)."""

PatchStatus = Literal["patched", "already", "unknown"]

_DECLARATION = re.compile(r"\b(?:const|let|var)[ \t]+SAFE_EXACT\b")
_OPENER = re.compile(
    r"[ \t]*(?:export[ \t]+)?const[ \t]+SAFE_EXACT[ \t]*=[ \t]*new[ \t]+Set[ \t]*\([ \t]*\[[ \t]*(?://.*)?"
)
_ENTRY = re.compile(
    r"(?P<indent>[ \t]*)(?P<q>['\"])(?P<name>[^'\"\\]*)(?P=q)(?P<comma>[ \t]*,)?[ \t]*(?://.*)?"
)
_SKIP = re.compile(r"[ \t]*(?://.*)?")
_CLOSER = re.compile(r"(?P<indent>[ \t]*)\][ \t]*\).*")
_LINE = re.compile(r"([^\n]*?)(\r?\n|$)")


@dataclass(frozen=True)
class PatchText:
    """What :func:`patch_text` made of a file.

    ``text`` is the new text when ``status`` is ``patched``, the input unchanged
    otherwise; ``added`` the names inserted; ``reason`` why the shape was not
    recognised (``unknown`` only)."""

    status: PatchStatus
    text: str
    added: tuple[str, ...] = ()
    reason: str | None = None


@dataclass(frozen=True)
class _Entry:
    line: int
    """Index in the line list."""
    quote: str
    name: str
    close_at: int
    """Offset in the line's content just past the closing quote (where a missing comma
    goes)."""
    has_comma: bool
    indent: str


def _split_lines(src: str) -> list[tuple[str, str]]:
    """``(content, line end)`` pairs whose concatenation is ``src`` exactly; only LF
    and CRLF end a line (``str.splitlines`` also splits on form feeds and U+2028)."""
    lines: list[tuple[str, str]] = []
    pos = 0
    while pos < len(src):
        m = _LINE.match(src, pos)
        assert m is not None  # the pattern matches at any position
        lines.append((m.group(1), m.group(2)))
        pos = m.end()
    return lines


def _unknown(src: str, reason: str) -> PatchText:
    return PatchText("unknown", src, reason=reason)


def _entries(lines: list[tuple[str, str]], start: int) -> tuple[list[_Entry], int] | str:
    """The literal entries after the opener at ``start`` and the closer's index, or the
    reason the body is not one literal per line."""
    entries: list[_Entry] = []
    for i in range(start + 1, len(lines)):
        content = lines[i][0]
        if _CLOSER.fullmatch(content):
            if any(not e.has_comma for e in entries[:-1]):
                return "an entry other than the last has no comma"
            return entries, i
        m = _ENTRY.fullmatch(content)
        if m is not None:
            entries.append(
                _Entry(
                    line=i,
                    quote=m.group("q"),
                    name=m.group("name"),
                    close_at=m.end("name") + 1,
                    has_comma=m.group("comma") is not None,
                    indent=m.group("indent"),
                )
            )
        elif not _SKIP.fullmatch(content):
            return f"line {i + 1} of the SAFE_EXACT set is not one string literal"
    return "the SAFE_EXACT set has no line opening with '])'"


def _quote(entries: list[_Entry]) -> str:
    """The quote most entries use (the last entry's on a tie; single with none)."""
    if not entries:
        return "'"
    counts = Counter(e.quote for e in entries)
    best = max(counts.values())
    return next(e.quote for e in reversed(entries) if counts[e.quote] == best)


def patch_text(src: str) -> PatchText:
    """Add the missing :data:`PATCH_NAMES` to ``SAFE_EXACT``, one marked line each, just
    before its closing ``])``; ``already`` when all four are entries already."""
    found = _DECLARATION.findall(src)
    if not found:
        return _unknown(src, "no SAFE_EXACT declaration")
    if len(found) > 1:
        return _unknown(src, f"{len(found)} SAFE_EXACT declarations")
    lines = _split_lines(src)
    opener = next((i for i, (c, _) in enumerate(lines) if _DECLARATION.search(c)), -1)
    if not _OPENER.fullmatch(lines[opener][0]):
        return _unknown(src, "SAFE_EXACT is not 'const SAFE_EXACT = new Set([' alone on its line")
    body = _entries(lines, opener)
    if isinstance(body, str):
        return _unknown(src, body)
    entries, closer = body
    present = {e.name for e in entries}
    missing = tuple(name for name in PATCH_NAMES if name not in present)
    if not missing:
        return PatchText("already", src)
    quote = _quote(entries)
    if entries:
        indent = entries[-1].indent
    else:
        m = _CLOSER.fullmatch(lines[closer][0])
        assert m is not None
        indent = m.group("indent") + "  "
    eol = lines[closer - 1][1]
    out = list(lines)
    if entries and not entries[-1].has_comma:
        last = entries[-1]
        content, end = out[last.line]
        out[last.line] = (content[: last.close_at] + "," + content[last.close_at :], end)
    added = [(f"{indent}{quote}{name}{quote}, {MARKER}", eol) for name in missing]
    out[closer:closer] = added
    return PatchText("patched", "".join(c + e for c, e in out), added=missing)


def strip_patch(src: str) -> str:
    """``src`` without the lines the patch added (those ending in :data:`MARKER`): what
    deleting them by hand gives, the reference's second way to roll back."""
    return "".join(c + e for c, e in _split_lines(src) if not c.endswith(MARKER))
