"""Tag label normalisation (reference §1.13.1), shared by scoring and query paths.

String → NFKC → zero-width characters removed → trim → whitespace folded → Latin
lower-cased → one pair of wrapping quotes / brackets removed (repeatedly) → placeholders
(空/无/不约束/无事件/none/null/n/a/na/-) become empty → cut to ``maxLabelLength``.
Locations have the 家 rule: 我家 / 我家里 / 家里 / 在家 / 回家 / 家 → 家, X的家 → X家
(小明的家 → 小明家); XX家 and 公司 stay. Persons and events do not get it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Final

from engine.scoring.budget import safe_slice, to_well_formed

PLACEHOLDERS: Final[frozenset[str]] = frozenset(
    {"空", "无", "不约束", "无事件", "none", "null", "n/a", "na", "-"}
)
_ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e"))
_WS = re.compile(r"\s+")
_WRAPPERS: Final = (
    ('"', '"'),
    ("'", "'"),
    ("“", "”"),
    ("‘", "’"),
    ("「", "」"),
    ("『", "』"),
    ("《", "》"),
    ("(", ")"),
    ("[", "]"),
    ("{", "}"),
    ("【", "】"),
    ("<", ">"),
    ("`", "`"),
)
HOME: Final = "家"
HOME_FORMS: Final[frozenset[str]] = frozenset({"我家", "我家里", "家里", "在家", "回家", "家"})
_OWNED_HOME = re.compile(r"^(.+?)的家\Z")


def _lower_latin(text: str) -> str:
    return "".join(c.lower() if c.isascii() else c for c in text)


def normalize_label(value: object, max_length: int) -> str:
    """The canonical form of one label; "" when it is empty or a placeholder."""
    if not isinstance(value, str):
        return ""
    text = unicodedata.normalize("NFKC", to_well_formed(value)).translate(_ZERO_WIDTH)
    text = _WS.sub(" ", text).strip()
    text = _lower_latin(text)
    changed = True
    while changed and len(text) >= 2:
        changed = False
        for left, right in _WRAPPERS:
            if text.startswith(left) and text.endswith(right) and len(text) >= 2:
                text = text[len(left) : len(text) - len(right)].strip()
                changed = True
                break
    if text in PLACEHOLDERS:
        return ""
    return safe_slice(text, max(1, max_length)).strip()


def normalize_location(value: object, max_length: int) -> str:
    """A location label with the 家 rule applied."""
    text = normalize_label(value, max_length)
    if not text:
        return ""
    m = _OWNED_HOME.match(text)
    if m is not None:
        text = f"{m.group(1).strip()}家"
    if text in HOME_FORMS:
        return HOME
    return text


def normalize_labels(
    values: Iterable[object], *, max_length: int, location: bool = False
) -> list[str]:
    """Normalised, non-empty, de-duplicated labels in submission order."""
    out: list[str] = []
    seen: set[str] = set()
    for value in values:
        label = (
            normalize_location(value, max_length)
            if location
            else normalize_label(value, max_length)
        )
        if label and label not in seen:
            seen.add(label)
            out.append(label)
    return out
