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
* `event` (a string) and `events` (strings) together, `locations`, `persons` (§1.12,
  §1.13.2): labels normalised by the scoring path's rules (`engine.scoring.labels`; the
  location 家 rule; 「空」 and the other placeholders ask for nothing), de-duplicated in
  order; a value of another type is ignored with a warning. With them, keywords may be
  left out (the call lists what the constraints allow).
* `timeFrom` / `timeTo` / `granularity` and `timeText` (§1.10, §1.13.2) are kept as
  given: normalising them needs the call's time (`engine.recall.time_filter`). A
  `timeText` that is not a string is ignored with a warning. With them, too, keywords
  may be left out (a browse of the window: never the whole store).

Only a `keywords` value of the wrong type, or no keywords and no filter at all, refuses
the call (`SearchArgs.error`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine import texts
from engine.config import MemoryConfig
from engine.config.limits import RECALL_LIMIT_MAX
from engine.keywords import QUERY_KEYWORDS_MAX, match_key
from engine.scoring.labels import normalize_labels
from engine.secrets.detect import has_secret
from engine.tool_args import integer_arg, shown_arg

__all__ = [
    "LIMIT_DEFAULT",
    "LIMIT_MAX",
    "LIMIT_MIN",
    "OFFSET_MAX",
    "SearchArgs",
    "distinct_keywords",
    "parse_search_args",
    "split_keywords",
]

LIMIT_MIN = 1
LIMIT_MAX = RECALL_LIMIT_MAX  # memory_recall.limit: 1..20 (engine.config.limits)
LIMIT_DEFAULT = 3
OFFSET_MAX = 10_000

TIME_PARAMETERS = ("timeFrom", "timeTo", "granularity", "timeText")

_SPLIT = re.compile(r"[\s,，、;；]+")


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
    events: tuple[str, ...] = ()
    """`event` and `events`, normalised labels (OR-ed; §1.12)."""
    locations: tuple[str, ...] = ()
    persons: tuple[str, ...] = ()
    """Normalised labels of the location / person filters (§1.13.2)."""
    time_from: Any = None
    time_to: Any = None
    granularity: Any = None
    """The time window's arguments as given (None: omitted or blank)."""
    time_text: str | None = None
    """`timeText`, stripped (None: omitted, blank or not a string)."""

    @property
    def has_time(self) -> bool:
        """Whether a time argument was given (valid or not: §1.10 answers bad ones)."""
        return any(v is not None for v in (self.time_from, self.time_to, self.granularity)) or (
            self.time_text is not None
        )

    @property
    def has_tags(self) -> bool:
        """Whether an event, location or person label was given."""
        return bool(self.events or self.locations or self.persons)

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


def _bounded(field: str, value: Any, default: int, low: int, high: int, warnings: list[str]) -> int:
    n = integer_arg(value)
    if n is None:
        shown = shown_arg(value)
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


def _given(value: Any) -> bool:
    """Whether a filter parameter asks for something (empty values do not)."""
    if value is None or value is False:
        return False
    if isinstance(value, str):
        return bool(value.strip())
    if isinstance(value, list | dict):
        return bool(value)
    return True


def _label_values(name: str, value: Any, warnings: list[str]) -> list[Any]:
    """A label parameter as a list (a string is one label); another type is ignored
    with a warning."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    warnings.append(texts.RECALL_TOOL_WARN_LABELS.format(field=name, given=shown_arg(value)))
    return []


def _labels(arguments: Mapping[str, Any], cfg: MemoryConfig, warnings: list[str]) -> Any:
    """(events, locations, persons) of a call, normalised."""
    raw_events = _label_values("event", arguments.get("event"), warnings)
    raw_events += _label_values("events", arguments.get("events"), warnings)
    events = normalize_labels(raw_events, max_length=cfg.event.max_label_length)
    locations = normalize_labels(
        _label_values("locations", arguments.get("locations"), warnings),
        max_length=cfg.location.max_label_length,
        location=True,
    )
    persons = normalize_labels(
        _label_values("persons", arguments.get("persons"), warnings),
        max_length=cfg.person.max_label_length,
    )
    return tuple(events), tuple(locations), tuple(persons)


def parse_search_args(arguments: Mapping[str, Any], cfg: MemoryConfig) -> SearchArgs:
    """Check one call's arguments (module docstring)."""
    warnings: list[str] = []
    raw = _keyword_list(arguments.get("keywords"))
    if raw is None:
        return SearchArgs((), LIMIT_DEFAULT, None, error=texts.RECALL_TOOL_BAD_KEYWORDS)
    if cfg.secrets.mode != "off" and has_secret("\n".join(raw)):
        # no lookup by a secret's value (README "Secrets"): refused, nothing searched
        return SearchArgs((), LIMIT_DEFAULT, None, error=texts.RECALL_TOOL_SECRET_QUERY)
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
        warnings.append(texts.RECALL_TOOL_WARN_NOT_BOOLEAN.format(given=shown_arg(said)))
    events, locations, persons = _labels(arguments, cfg, warnings)
    tagged = bool(events or locations or persons)
    time_args = {n: arguments.get(n) if _given(arguments.get(n)) else None for n in TIME_PARAMETERS}
    time_text = time_args.pop("timeText")
    if time_text is not None and not isinstance(time_text, str):
        warnings.append(texts.TIME_WARN_TEXT_TYPE.format(given=shown_arg(time_text)))
        time_text = None
    timed = time_text is not None or any(v is not None for v in time_args.values())
    if not keywords and assistant_said is not True and not tagged and not timed:
        return SearchArgs((), limit, offset, error=texts.RECALL_TOOL_NEED_KEYWORDS)
    return SearchArgs(
        tuple(keywords),
        limit,
        offset,
        (),
        tuple(warnings),
        None,
        assistant_said,
        events,
        locations,
        persons,
        time_from=time_args["timeFrom"],
        time_to=time_args["timeTo"],
        granularity=time_args["granularity"],
        time_text=time_text.strip() if isinstance(time_text, str) else None,
    )
