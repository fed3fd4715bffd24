"""Is a token random (a key, a token, a password generator's output) or a word, a path,
a hash?

Why our own test and not Shannon entropy alone: entropy of a 24-character token barely
separates ``getUserAccountDetails2024`` from ``Xq7fK2pLm9QwZ3vB8nR4tY6u``; what does is
how often a random string switches between character classes (upper, lower, digit,
symbol: about 0.6 of its neighbouring pairs, against 0.1-0.3 for identifiers and words)
together with the variety of its characters and the presence of every class.

The false-positive policy lives here too (README "Secrets"): hexadecimal strings (git
SHAs, checksums, UUIDs) are never secrets by shape alone, nor are paths made of words,
nor blobs longer than :data:`BLOB_MAX` (images, binary data, public keys): such values
are caught only in a context that says they are secrets (``secret_key = "…"``).
"""

from __future__ import annotations

import re
from itertools import pairwise

__all__ = ["BLOB_MAX", "BLOB_MIN", "is_hex", "looks_random", "path_like"]

BLOB_MIN = 20
"""Shortest token judged by shape alone (20 random base64 characters are 120 bits)."""

BLOB_MAX = 256
"""Longest: past it a run of base64 is data (an image, a certificate), not a key."""

_HEX = re.compile(r"[0-9a-fA-F-]+")
_WORDY = re.compile(r"[a-z]+|[A-Z][a-z]*|[A-Z]+|[0-9]+|[a-z0-9_.-]+")


def is_hex(token: str) -> bool:
    """Hexadecimal with optional dashes: hashes, SHAs, UUIDs."""
    return _HEX.fullmatch(token) is not None


def path_like(token: str) -> bool:
    """A path whose every segment is a word, a number or a lower-case name."""
    if "/" not in token:
        return False
    return all(not seg or _WORDY.fullmatch(seg) for seg in token.split("/"))


def _class(ch: str) -> int:
    if "a" <= ch <= "z":
        return 0
    if "A" <= ch <= "Z":
        return 1
    if "0" <= ch <= "9":
        return 2
    return 3


def looks_random(token: str, *, min_len: int = BLOB_MIN) -> bool:
    """True when ``token`` reads as machine-made randomness (module docstring)."""
    n = len(token.rstrip("="))
    if n < min_len or n > BLOB_MAX or is_hex(token) or path_like(token):
        return False
    classes = [_class(c) for c in token]
    if not (0 in classes and 1 in classes and 2 in classes):
        return False
    if len(set(token)) < 0.45 * min(n, 64):
        return False
    switches = sum(1 for a, b in pairwise(classes) if a != b)
    return switches >= 0.34 * (n - 1)
