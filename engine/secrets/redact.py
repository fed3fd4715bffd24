"""Apply ``secrets.mode`` to a text: the one function every archived word goes through.

* ``redact`` (default): each secret value becomes a typed placeholder,
  ``[secret:api-key …c9f2]``. The suffix tells two secrets of one kind apart (the key
  that was rotated, the token used twice) without revealing either: it is 16 bits of a
  BLAKE2s hash of the value, and only for values that are machine-made randomness (a
  format token, a private key, a random-looking credential; ``Finding.random``), where
  16 bits of a hash of 100+ random bits cannot be searched back. A human-chosen value
  (a password, a short token) gets no suffix at all: a dictionary of likely passwords
  would turn even 16 bits into a short list of candidates.
* ``drop``: the value is removed without a trace of its kind or identity, and the text
  ends with one note saying how many were removed.
* ``off``: the text as it is.

Deterministic (same text, same output) and idempotent: a placeholder is never a finding,
so a redacted text redacts to itself (scan-secrets may run any number of times).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from engine import texts
from engine.secrets.detect import Finding, find_secrets

__all__ = ["Mode", "Redaction", "placeholder", "query_text", "redact_text", "strip_secrets"]

Mode = Literal["redact", "drop", "off"]

_PERSON = b"rofm-sec"
"""Hash personalisation: the suffix is not a plain SHA of the value another tool shows."""


@dataclass(frozen=True, slots=True)
class Redaction:
    """A text after ``secrets.mode``, and how many values of each kind it lost."""

    text: str
    kinds: Counter[str] = field(default_factory=Counter)

    @property
    def count(self) -> int:
        return sum(self.kinds.values())


def placeholder(kind: str, value: str, *, random: bool) -> str:
    """The typed placeholder of one value (module docstring)."""
    if not random:
        return texts.SECRET_PLACEHOLDER.format(kind=kind)
    tag = hashlib.blake2s(value.encode("utf-8", "surrogatepass"), digest_size=2, person=_PERSON)
    return texts.SECRET_PLACEHOLDER_TAGGED.format(kind=kind, tag=tag.hexdigest())


def _replace(text: str, findings: list[Finding], sub: Callable[[Finding, str], str]) -> str:
    """``text`` with each finding's span replaced by ``sub(finding, value)``."""
    parts: list[str] = []
    pos = 0
    for f in findings:
        parts.append(text[pos : f.start])
        parts.append(sub(f, text[f.start : f.end]))
        pos = f.end
    parts.append(text[pos:])
    return "".join(parts)


def _typed(f: Finding, value: str) -> str:
    return placeholder(f.kind, value, random=f.random)


def redact_text(text: str, mode: Mode) -> Redaction:
    """``text`` under ``mode`` (module docstring)."""
    if mode == "off":
        return Redaction(text)
    findings = find_secrets(text)
    if not findings:
        return Redaction(text)
    kinds = Counter(f.kind for f in findings)
    if mode == "drop":
        out = _replace(text, findings, lambda f, v: "").rstrip()
        out += "\n" + texts.SECRET_DROPPED_NOTE.format(n=len(findings))
    else:
        out = _replace(text, findings, _typed)
    return Redaction(out, kinds)


def strip_secrets(text: str) -> tuple[str, int]:
    """A query without its secret values (each becomes a space): what recall may search
    for, and how many values it lost. Nobody looks a memory up by a secret's value."""
    findings = find_secrets(text)
    if not findings:
        return text, 0
    return _replace(text, findings, lambda f, v: " "), len(findings)


def query_text(text: str, mode: Mode) -> str:
    """A user message as automatic recall may search, analyse and show it (its clauses
    are shown in the block, its quote phrase kept in the recall state): without its
    secret values, unless ``secrets.mode`` is ``off``."""
    return text if mode == "off" else strip_secrets(text)[0]
