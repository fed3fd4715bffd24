"""memory_recall's arguments (reference §1.3 parameter table, §1.14.2).

* `keywords`: split on whitespace, commas, 、 and semicolons (ASCII and full-width),
  de-duplicated in order (by match key, so `Redis` and `redis` are one keyword when
  `match.expandLatinCase` folds case), at most 16: more keep the first 16 with a
  warning. An array of strings is taken as the same list.
* `limit`: 1..20, default 3; `offset`: 0..10000. A value out of range is clamped, a
  value that is not an integer becomes the default; both with a warning, neither
  refuses the call. A given `offset` (any value) makes the call *paginated*.
* `assistantSaid` (§1.13.5): true searches the 「你说过」 channel too, false does not,
  omitted lets the current user message decide (its quote phrase); another value is
  taken as omitted, with a warning. With true, keywords may be left out: the current
  message's channel keys are searched.
* The parameters of later features (time, events, tags) are accepted and answered with
  a warning; a call with only those and no keywords finds nothing (it never turns into
  a browse of the whole store).

Only a `keywords` value of the wrong type, or no keywords and no filter at all, refuses
the call (`SearchArgs.error`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine import texts
from engine.config import MemoryConfig
from engine.keywords import QUERY_KEYWORDS_MAX, match_key

__all__ = [
    "LIMIT_DEFAULT",
    "LIMIT_MAX",
    "LIMIT_MIN",
    "OFFSET_MAX",
    "UNSUPPORTED_FILTERS",
    "SearchArgs",
    "distinct_keywords",
    "parse_search_args",
    "split_keywords",
]

LIMIT_MIN = 1
LIMIT_MAX = 20
LIMIT_DEFAULT = 3
OFFSET_MAX = 10_000

UNSUPPORTED_FILTERS = (
    "timeFrom",
    "timeTo",
    "granularity",
    "event",
    "events",
    "locations",
    "persons",
    "timeText",
)
"""Parameters the tool lists and accepts whose features belong to later work."""

_SPLIT = re.compile(r"[\s,，、;；]+")
_NO_EVENT = frozenset({"空", "无", "不约束", "无事件", "none", "null", "n/a", "na", "-"})
"""Event placeholders that mean "no constraint" (§1.12 归一化规则)."""


@dataclass(frozen=True, slots=True)
class SearchArgs:
    """One call's arguments, checked."""

    keywords: tuple[str, ...]
    limit: int
    offset: int | None
    """None: not paginated (no `offset` given)."""
    unsupported: tuple[str, ...] = ()
    """Filters given that this version does not apply."""
    warnings: tuple[str, ...] = ()
    error: str | None = None
    """A refusal text: the call is answered with isError and runs nothing."""
    assistant_said: bool | None = None
    """The 「你说过」 channel: True / False as given, None when omitted (auto)."""

    @property
    def paginated(self) -> bool:
        return self.offset is not None


def distinct_keywords(raw: str | list[str], *, expand_latin_case: bool) -> list[str]:
    """Every keyword of `raw` split at the separators, first spelling of each match key,
    in order (uncapped)."""
    pieces = raw if isinstance(raw, list) else [raw]
    out: list[str] = []
    seen: set[str] = set()
    for piece in pieces:
        for word in _SPLIT.split(piece):
            key = match_key(word, expand_latin_case=expand_latin_case)
            if key and key not in seen:
                seen.add(key)
                out.append(word)
    return out


def split_keywords(raw: str | list[str], *, expand_latin_case: bool) -> list[str]:
    """The keywords a search uses: the first 16 distinct ones (§1.14.2)."""
    return distinct_keywords(raw, expand_latin_case=expand_latin_case)[:QUERY_KEYWORDS_MAX]


def _keyword_list(value: Any) -> list[str] | None:
    """The keywords value as strings, or None when its type is wrong."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [str(value)]
    if isinstance(value, list):
        out: list[str] = []
        for item in value:
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, int | float) and not isinstance(item, bool):
                out.append(str(item))
            else:
                return None
        return out
    return None


def _integer(value: Any) -> int | None:
    """An integer argument: ints, finite numbers (rounded down) and numeric strings."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, float) and math.isfinite(value):
        return math.floor(value)
    return None


def _shown(value: Any) -> str:
    """A given value in a warning (short: it is the model's own input echoed)."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _bounded(field: str, value: Any, default: int, low: int, high: int, warnings: list[str]) -> int:
    n = _integer(value)
    if n is None:
        shown = _shown(value)
        warnings.append(
            texts.RECALL_TOOL_WARN_NOT_INTEGER.format(field=field, given=shown, used=default)
        )
        return default
    used = min(high, max(low, n))
    template = texts.RECALL_TOOL_WARN_LIMIT if field == "limit" else texts.RECALL_TOOL_WARN_OFFSET
    if used != n:
        warnings.append(template.format(given=n, used=used))
    elif n != value and not isinstance(value, str):
        warnings.append(texts.RECALL_TOOL_WARN_NOT_INTEGER.format(field=field, given=value, used=n))
    return used


def _given(name: str, value: Any) -> bool:
    """Whether a filter parameter asks for something (empty values and 「空」 do not)."""
    if value is None or value is False:
        return False
    if isinstance(value, str):
        text = value.strip()
        return bool(text) and not (name == "event" and text.casefold() in _NO_EVENT)
    if isinstance(value, list | dict):
        return bool(value)
    return True


def parse_search_args(arguments: Mapping[str, Any], cfg: MemoryConfig) -> SearchArgs:
    """Check one call's arguments (module docstring)."""
    warnings: list[str] = []
    raw = _keyword_list(arguments.get("keywords"))
    if raw is None:
        return SearchArgs((), LIMIT_DEFAULT, None, error=texts.RECALL_TOOL_BAD_KEYWORDS)
    distinct = distinct_keywords(raw, expand_latin_case=cfg.match.expand_latin_case)
    keywords = distinct[:QUERY_KEYWORDS_MAX]
    if len(distinct) > QUERY_KEYWORDS_MAX:
        dropped = texts.RECALL_TOOL_KEYWORD_SEPARATOR.join(distinct[QUERY_KEYWORDS_MAX:])
        warnings.append(
            texts.RECALL_TOOL_WARN_KEYWORDS_CAP.format(n=len(distinct), dropped=dropped)
        )
    limit = LIMIT_DEFAULT
    if arguments.get("limit") is not None:
        limit = _bounded("limit", arguments["limit"], LIMIT_DEFAULT, LIMIT_MIN, LIMIT_MAX, warnings)
    offset: int | None = None
    if arguments.get("offset") is not None:
        offset = _bounded("offset", arguments["offset"], 0, 0, OFFSET_MAX, warnings)
    said = arguments.get("assistantSaid")
    assistant_said: bool | None = said if isinstance(said, bool) else None
    if said is not None and not isinstance(said, bool):
        warnings.append(texts.RECALL_TOOL_WARN_NOT_BOOLEAN.format(given=_shown(said)))
    unsupported = tuple(n for n in UNSUPPORTED_FILTERS if _given(n, arguments.get(n)))
    if unsupported:
        names = texts.RECALL_TOOL_PARAM_SEPARATOR.join(unsupported)
        template = (
            texts.RECALL_TOOL_WARN_UNSUPPORTED
            if keywords or assistant_said
            else texts.RECALL_TOOL_WARN_FILTERS_ONLY
        )
        warnings.append(template.format(params=names))
    elif not keywords and assistant_said is not True:
        return SearchArgs((), limit, offset, error=texts.RECALL_TOOL_NEED_KEYWORDS)
    return SearchArgs(
        tuple(keywords), limit, offset, unsupported, tuple(warnings), None, assistant_said
    )
