"""Per-key validation and clamping of memory configuration layers.

The reference validates its config key by key and never throws for a bad value:
a config file is user-edited and hot-reloaded, so one typo must not take the memory
offline. We keep that contract:

* a value of the wrong type is rejected with a warning, and the key keeps the value
  it had *below* this layer (the engine default, or what the packaged / user file set),
  so a typo in ``config.local.json`` does not silently undo a product default;
* an out-of-range number is clamped into its range with a warning;
* enums accept their documented values only (case-insensitively, normalised);
* keys we do not know are kept verbatim and ignored (reference: "未知/过期键被忽略并保留");
* a handful of cross-field rules run once on the merged result (min <= max pairs,
  the release floor needing ``releaseTargetPercent < triggerPercent``, ...).

:data:`SCHEMA` mirrors :data:`engine.config.defaults.ENGINE_DEFAULTS`: a nested dict
whose leaves are :class:`Rule` objects. A test walks both trees to keep them equal.
"""

from __future__ import annotations

import copy
import math
import zoneinfo
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from engine.config.defaults import ENGINE_DEFAULTS
from engine.config.limits import (
    ALPHA_MAX,
    ALPHA_MIN,
    CATEGORY_CLASSES_MAX,
    CATEGORY_WORDS_MAX,
    KEYWORDS_MAX,
    KEYWORDS_MIN,
    RECALL_LIMIT_MAX,
)

__all__ = [
    "MAX_SAFE_INTEGER",
    "SCHEMA",
    "BoolRule",
    "CategoryClassesRule",
    "EnumRule",
    "FixedRule",
    "IdListRule",
    "IntRule",
    "NumMapRule",
    "NumRule",
    "Rule",
    "StrListRule",
    "StrRule",
    "TimezoneRule",
    "Warn",
    "cross_check",
    "describe",
    "merge_layer",
    "schema_paths",
    "validate_tree",
]

Warn = Callable[[str], None]


def describe(value: Any) -> str:
    """Render a value for a warning: compact JSON, shortened so a huge blob stays readable."""
    try:
        text = orjson.dumps(value, default=repr).decode()
    except (TypeError, orjson.JSONEncodeError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def json_kind(value: Any) -> str:
    """JSON-ish type name of a value, for "expected X, got Y" messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _is_number(value: Any) -> bool:
    """True for finite ints and floats; bool is excluded (JSON true is not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return not (isinstance(value, float) and not math.isfinite(value))


@dataclass(frozen=True, slots=True)
class _Outcome:
    """Result of checking one value: accepted (maybe adjusted, with a note) or rejected."""

    value: Any = None
    note: str | None = None
    rejected: bool = False


def _reject(reason: str) -> _Outcome:
    return _Outcome(note=reason, rejected=True)


class Rule:
    """A leaf of :data:`SCHEMA`: knows how to apply a layer's value over the previous one.

    Scalar rules only implement :meth:`check`; rules for arrays replace wholesale (like
    the deep merge) and rules for open objects override :meth:`apply` to merge per entry.
    """

    def check(self, value: Any) -> _Outcome:
        raise NotImplementedError

    def apply(self, prev: Any, new: Any, path: str, warn: Warn) -> Any:
        """Return the key's value after this layer; warn about anything not taken as is."""
        outcome = self.check(new)
        if outcome.rejected:
            warn(f"{path}: {outcome.note}; keeping {describe(prev)}")
            return prev
        if outcome.note:
            warn(f"{path}: {outcome.note}")
        return outcome.value


@dataclass(frozen=True, slots=True)
class BoolRule(Rule):
    """JSON boolean only: the strings "true"/"false" are a type error, as in the reference."""

    def check(self, value: Any) -> _Outcome:
        if isinstance(value, bool):
            return _Outcome(value)
        return _reject(f"expected a boolean, got {json_kind(value)} {describe(value)}")


def _clamp(value: float, lo: float | None, hi: float | None) -> tuple[float, str | None]:
    if lo is not None and value < lo:
        return lo, f"{describe(value)} is below the minimum {describe(lo)}; clamped"
    if hi is not None and value > hi:
        return hi, f"{describe(value)} is above the maximum {describe(hi)}; clamped"
    return value, None


#: Largest integer a JavaScript number (the reference's config) holds exactly; also keeps
#: every value inside what orjson can serialise (64-bit), so a dump never fails.
MAX_SAFE_INTEGER: Final = 2**53 - 1


@dataclass(frozen=True, slots=True)
class IntRule(Rule):
    """Integer with optional inclusive bounds; integral floats (5.0) are taken as ints.

    Without an explicit bound the range is the JavaScript safe-integer range.
    """

    lo: int | None = None
    hi: int | None = None

    def check(self, value: Any) -> _Outcome:
        if not _is_number(value):
            return _reject(f"expected an integer, got {json_kind(value)} {describe(value)}")
        notes: list[str] = []
        if isinstance(value, float) and not value.is_integer():
            rounded = math.floor(value + 0.5)
            notes.append(f"{describe(value)} is not an integer; rounded to {rounded}")
            value = rounded
        number = int(value)
        lo = -MAX_SAFE_INTEGER if self.lo is None else self.lo
        hi = MAX_SAFE_INTEGER if self.hi is None else self.hi
        clamped, note = _clamp(number, lo, hi)
        if note:
            notes.append(note)
        return _Outcome(int(clamped), "; ".join(notes) or None)


@dataclass(frozen=True, slots=True)
class NumRule(Rule):
    """Finite number with optional bounds. ``lo_open`` makes the lower bound exclusive,
    which cannot be clamped to, so a value at or below it is rejected instead."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False

    def check(self, value: Any) -> _Outcome:
        if not _is_number(value):
            return _reject(f"expected a number, got {json_kind(value)} {describe(value)}")
        if self.lo_open and self.lo is not None and value <= self.lo:
            return _reject(f"{describe(value)} must be greater than {describe(self.lo)}")
        clamped, note = _clamp(value, None if self.lo_open else self.lo, self.hi)
        return _Outcome(clamped, note)


@dataclass(frozen=True, slots=True)
class EnumRule(Rule):
    """One of a fixed set of strings; a case variant ("Legacy") is normalised with a note."""

    values: tuple[str, ...]

    def check(self, value: Any) -> _Outcome:
        allowed = "|".join(self.values)
        if not isinstance(value, str):
            return _reject(f"expected one of {allowed}, got {json_kind(value)} {describe(value)}")
        if value in self.values:
            return _Outcome(value)
        folded = value.strip().casefold()
        for candidate in self.values:
            if candidate.casefold() == folded:
                return _Outcome(candidate, f"{describe(value)} normalised to {describe(candidate)}")
        return _reject(f"expected one of {allowed}, got {describe(value)}")


@dataclass(frozen=True, slots=True)
class StrRule(Rule):
    """A string; ``allow_blank=False`` rejects empty / whitespace-only strings."""

    allow_blank: bool = True

    def check(self, value: Any) -> _Outcome:
        if not isinstance(value, str):
            return _reject(f"expected a string, got {json_kind(value)} {describe(value)}")
        if not self.allow_blank and not value.strip():
            return _reject("expected a non-empty string")
        return _Outcome(value)


@dataclass(frozen=True, slots=True)
class TimezoneRule(Rule):
    """IANA zone name, or "" for the host's local zone (reference ``time.timezone``).

    The zone is resolved through :mod:`zoneinfo` so that a misspelt zone is reported
    at load time rather than surfacing as wrong day boundaries in a recall.
    """

    def check(self, value: Any) -> _Outcome:
        if not isinstance(value, str):
            return _reject(f"expected an IANA timezone name, got {json_kind(value)}")
        name = value.strip()
        if not name:
            return _Outcome("")
        try:
            zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
            return _reject(f"unknown IANA timezone {describe(name)}")
        return _Outcome(name)


@dataclass(frozen=True, slots=True)
class FixedRule(Rule):
    """A key the reference pins to one value (``time.judgeEventTime`` is always false)."""

    inner: Rule
    fixed: Any
    reason: str

    def check(self, value: Any) -> _Outcome:
        outcome = self.inner.check(value)
        if outcome.rejected or outcome.value == self.fixed:
            return outcome
        return _Outcome(self.fixed, f"{describe(outcome.value)} is not supported ({self.reason})")


@dataclass(frozen=True, slots=True)
class StrListRule(Rule):
    """Array of strings; replaces the previous array (arrays never merge).

    Non-string items are dropped with a note. With ``allowed`` the items must come from
    that set and, when ``canonical_order`` is set, are re-sorted into its order (the
    time fallback ladder only widens, so a shuffled ladder would be meaningless).
    """

    allowed: tuple[str, ...] | None = None
    canonical_order: bool = False
    dedupe: bool = True
    drop_blank: bool = True

    def check(self, value: Any) -> _Outcome:
        if not isinstance(value, list | tuple):
            return _reject(
                f"expected an array of strings, got {json_kind(value)} {describe(value)}"
            )
        notes: list[str] = []
        items: list[str] = []
        for item in value:
            if not isinstance(item, str):
                notes.append(f"dropped non-string item {describe(item)}")
                continue
            if self.drop_blank and not item.strip():
                notes.append("dropped empty item")
                continue
            if self.allowed is not None and item not in self.allowed:
                notes.append(
                    f"dropped {describe(item)} (allowed: {', '.join(self.allowed)})",
                )
                continue
            if self.dedupe and item in items:
                continue
            items.append(item)
        if self.allowed is not None and self.canonical_order:
            ordered = sorted(items, key=self.allowed.index)
            if ordered != items:
                notes.append(f"reordered to {describe(ordered)}")
            items = ordered
        return _Outcome(items, "; ".join(notes) or None)


@dataclass(frozen=True, slots=True)
class IdListRule(Rule):
    """QQ ids: strings or numbers, numbers turned into strings (reference ``compat.ownerIds``)."""

    def check(self, value: Any) -> _Outcome:
        if not isinstance(value, list | tuple):
            return _reject(f"expected an array of ids, got {json_kind(value)} {describe(value)}")
        notes: list[str] = []
        ids: list[str] = []
        for item in value:
            if _is_number(item):
                text = str(int(item)) if float(item).is_integer() else str(item)
            elif isinstance(item, str) and item.strip():
                text = item.strip()
            else:
                notes.append(f"dropped invalid id {describe(item)}")
                continue
            if text not in ids:
                ids.append(text)
        return _Outcome(ids, "; ".join(notes) or None)


def _is_object(new: Any, path: str, warn: Warn) -> bool:
    """Open-object rules merge per entry; anything but an object keeps the previous value."""
    if isinstance(new, Mapping):
        return True
    warn(f"{path}: expected an object, got {json_kind(new)} {describe(new)}; keeping previous")
    return False


@dataclass(frozen=True, slots=True)
class NumMapRule(Rule):
    """An open object of name -> number (``importance.weights``); merges per entry."""

    def check(self, value: Any) -> _Outcome:  # pragma: no cover - apply() is used instead
        return _Outcome(value)

    def apply(self, prev: Any, new: Any, path: str, warn: Warn) -> Any:
        if not _is_object(new, path, warn):
            return prev
        merged = dict(prev)
        for key, item in new.items():
            if _is_number(item):
                merged[key] = item
            else:
                kept = f"keeping {describe(merged[key])}" if key in merged else "ignored"
                warn(
                    f"{path}.{key}: expected a number, got {json_kind(item)} {describe(item)}; {kept}"
                )
        return merged


@dataclass(frozen=True, slots=True)
class CategoryClassesRule(Rule):
    """``recall.categoryMatch.classes``: ``{name: {label, words[]}}``, at most 32 classes
    of at most 64 words. Classes merge per name (a layer can add a class or replace
    one class's words without restating the other five); ``words: []`` disables one."""

    def check(self, value: Any) -> _Outcome:  # pragma: no cover - apply() is used instead
        return _Outcome(value)

    def apply(self, prev: Any, new: Any, path: str, warn: Warn) -> Any:
        if not _is_object(new, path, warn):
            return prev
        merged: dict[str, Any] = {k: copy.deepcopy(v) for k, v in prev.items()}
        words_rule = StrListRule()
        for name, entry in new.items():
            where = f"{path}.{name}"
            if not isinstance(entry, Mapping):
                warn(
                    f"{where}: expected an object {{label, words}}, got {json_kind(entry)}; ignored"
                )
                continue
            base = merged.get(name)
            label = base["label"] if base else name
            words: list[str] | None = list(base["words"]) if base else None
            if "label" in entry:
                if isinstance(entry["label"], str) and entry["label"].strip():
                    label = entry["label"]
                else:
                    warn(f"{where}.label: expected a non-empty string; keeping {describe(label)}")
            if "words" in entry:
                outcome = words_rule.check(entry["words"])
                if outcome.rejected:
                    warn(f"{where}.words: {outcome.note}; keeping {describe(words)}")
                else:
                    if outcome.note:
                        warn(f"{where}.words: {outcome.note}")
                    words = outcome.value
            if words is None:
                warn(f"{where}: a new class needs a words array; ignored")
                continue
            if len(words) > CATEGORY_WORDS_MAX:
                warn(f"{where}.words: more than {CATEGORY_WORDS_MAX} words; truncated")
                words = words[:CATEGORY_WORDS_MAX]
            extras = {k: copy.deepcopy(v) for k, v in entry.items() if k not in ("label", "words")}
            merged[name] = {**(base or {}), **extras, "label": label, "words": words}
        if len(merged) > CATEGORY_CLASSES_MAX:
            dropped = list(merged)[CATEGORY_CLASSES_MAX:]
            warn(f"{path}: more than {CATEGORY_CLASSES_MAX} classes; dropped {describe(dropped)}")
            merged = {k: merged[k] for k in list(merged)[:CATEGORY_CLASSES_MAX]}
        return merged


_BOOL: Final = BoolRule()
_PERCENT: Final = NumRule(0, 100)
_PERCENT_POS: Final = NumRule(1, 100)
_RATIO: Final = NumRule(0, 1)
_COUNT: Final = IntRule(0)
_POS: Final = IntRule(1)
_MODE: Final = EnumRule(("off", "index", "constrain"))

#: The validation rule of every key of ENGINE_DEFAULTS, in the same shape. Ranges are
#: the reference's where it gives one (noted inline); elsewhere they are the natural
#: domain of the value (counts >= 0, percentages 0..100, ratios 0..1).
SCHEMA: Final[dict[str, Any]] = {
    "enabled": _BOOL,
    "compress": {
        "enabled": _BOOL,
        "triggerPercent": _PERCENT_POS,
        "compressPercent": _PERCENT_POS,
        "releaseTargetPercent": _PERCENT,
        "releaseFloorEnabled": _BOOL,
        "contextWindowTokens": _COUNT,  # 0 = use the window the host reports
        "minContextTokens": _COUNT,
        "minMessagesToCompress": _COUNT,
        "minChunkChars": _COUNT,
        "targetChunkChars": _POS,
        "maxFoldersPerRun": _POS,
        "maxFoldersPerStep": _POS,
        "keepRecentMessages": _COUNT,
        "maxBoundaryOvershoot": NumRule(1),
        "protectCurrentTurn": _BOOL,
        "allowSmallWindow": _BOOL,
        "smallWindowTokens": _COUNT,
        "hardLimitStop": _BOOL,
        "applyToSubagents": _BOOL,
        "applyToMainSessions": _BOOL,
        "preStepEnabled": _BOOL,
        "emergencyPercent": _PERCENT_POS,
        "emergencyCompressPercent": _PERCENT_POS,
        "maxExtraPasses": _COUNT,
        "hardLimitPercent": _PERCENT_POS,
    },
    "importance": {
        "min": NumRule(ALPHA_MIN, ALPHA_MAX),  # α（0.01～1）
        "max": NumRule(ALPHA_MIN, ALPHA_MAX),
        "warnAbove": _RATIO,
        "weights": NumMapRule(),
    },
    "keywords": {
        "min": IntRule(KEYWORDS_MIN, KEYWORDS_MAX),  # v1.5.4: 3~16
        "max": IntRule(KEYWORDS_MIN, KEYWORDS_MAX),
        "extraStopwords": StrListRule(),
        "matchMode": EnumRule(("contains", "exact")),
    },
    "match": {
        "expandLatinCase": _BOOL,
        "cjkBigram": _BOOL,
    },
    "recall": {
        "enabled": _BOOL,
        "mode": EnumRule(("ranked", "fair", "deterministic", "legacy")),
        "firstGenMax": _COUNT,  # 0 = recall off (v1.4.1)
        "hops": _COUNT,
        "maxRecalledBlocks": _POS,
        "maxRecalledChars": _POS,
        "maxWindowPercent": _PERCENT,
        "minAlpha": _RATIO,
        "persistInjected": _BOOL,
        "categoryMatch": {
            "enabled": _BOOL,
            "alphaMin": _RATIO,
            "classes": CategoryClassesRule(),
        },
        "sort": EnumRule(("createdAt", "alpha", "generation")),
        "fairness": {
            "thetaHigh": _RATIO,
            "exploreRatio": _RATIO,
            "specificProbeSlots": _COUNT,
            "rareTerm": {"ratio": _RATIO, "minPosting": _POS, "scanCap": _POS},
            "register": {"lookahead": _POS, "capFactor": _POS, "ttlRounds": _COUNT},
            "queryBoost": _BOOL,
            "recycle": {"enabled": _BOOL, "cooldownRounds": _COUNT, "maxPerRound": _COUNT},
            "ledger": {
                "maxEntries": _POS,
                "overflow": EnumRule(("evict-lowest-alpha-last-seen",)),
            },
            "blockTrim": {
                "policy": EnumRule(("priority",)),
                "protectCurrentQuery": _BOOL,
                "pinHigh": _BOOL,
            },
            "roundBudget": {"maxChars": _POS},
        },
        "mu": NumRule(),
        "sigma": NumRule(0, lo_open=True),  # divides in p(n)
        "maxGeneration": _COUNT,  # 0 = unlimited
        "probabilityScale": NumRule(0),
        "seed": _COUNT,  # > 0 = fixed seed
        "triggerSourceKinds": StrListRule(),
        "applyToSubagents": _BOOL,
        "applyToMainSessions": _BOOL,
        "espEmptyHint": _BOOL,
        "adaptiveQuota": {
            "enabled": _BOOL,
            "complexQuota": IntRule(1, RECALL_LIMIT_MAX),  # same ceiling as memory_recall.limit
            "complexMinClauses": _POS,
            "complexMinChars": _POS,
            "complexMinKeywords": _POS,
        },
        "clauseSplit": {"enabled": _BOOL, "maxClauses": _POS, "minClauseChars": _COUNT},
        "tagMentions": {"enabled": _BOOL, "maxTagsPerKind": IntRule(1, 32)},  # 1..32
        "assistantSaid": {"enabled": _BOOL, "reserveSlots": _COUNT},
        "showTags": _BOOL,
        "computeDates": _BOOL,
        "highRelevance": {"enabled": _BOOL, "minMatches": _POS, "reserveSlots": _COUNT},
        "ranked": {
            "minRelativeScore": _RATIO,
            "alphaPrior": _RATIO,
            "passageWeight": _RATIO,
            "keepRounds": _COUNT,
        },
    },
    "time": {
        "mode": _MODE,
        "timezone": TimezoneRule(),
        "minRangeDays": _POS,  # < 3 allowed with a warning (cross_check)
        "maxRangeDays": _POS,
        "centerDayPriority": _BOOL,
        "fallback": StrListRule(allowed=("day3", "month", "year", "all"), canonical_order=True),
        "fallbackMinResults": _COUNT,  # 0 is treated as 1 by the consumer (reference)
        "windowScanMax": _POS,
        "askUserHint": _BOOL,
        "judgeEventTime": FixedRule(_BOOL, False, "time.judgeEventTime is fixed to false"),
    },
    "event": {
        "mode": _MODE,
        "maxLabelLength": _POS,
        "similarity": {
            "metric": EnumRule(("dice", "avg", "min")),
            "threshold": _RATIO,  # 0..1
            "maxCandidates": IntRule(1, 10),  # 1..10
        },
        "askUserHint": _BOOL,
        "maxPerFolder": _POS,
        "mergeRequiresApproval": _BOOL,
        "showExisting": _BOOL,
        "showExistingLimit": _COUNT,
    },
    "location": {
        "mode": _MODE,
        "maxLabelLength": _POS,
        "maxPerFolder": _POS,
        "autoMention": _BOOL,
    },
    "person": {
        "mode": _MODE,
        "maxLabelLength": _POS,
        "maxPerFolder": _POS,
        "autoMention": _BOOL,
    },
    "timeTag": {
        "mode": _MODE,
        "maxPerFolder": _POS,
        "weekStart": IntRule(1, 7),  # 1 = Monday .. 7 = Sunday
        "maxSpanDays": _POS,
    },
    "rules": {"enabled": _BOOL},
    "scoring": {
        "includeLegacy": _BOOL,
        "maxPending": _COUNT,
        "fallback": EnumRule(("never", "onPressure", "always")),
        "autoHeuristicAfterRounds": {"plain": _POS, "channel": _POS},
        "taskBudgetPercent": _PERCENT,
        "taskMaxTokens": _POS,
        "order": EnumRule(("newest", "mixed", "oldest")),
        "warnUniformAlpha": _BOOL,
        "maxItemsPerJudge": _POS,
        "categoryKeyword": {
            "enabled": _BOOL,
            "alphaMin": _RATIO,
            "words": StrListRule(),
        },
        "judgeTelemetry": _BOOL,
    },
    "storage": {
        "dir": StrRule(allow_blank=False),
        "perSession": _BOOL,
        "maxFolders": _POS,
    },
    "logging": {"enabled": _BOOL, "verbose": _BOOL},
    "test": {"dryRun": _BOOL},
    "secrets": {"mode": EnumRule(("redact", "drop", "off"))},
    "compat": {
        "qqBots": EnumRule(("auto", "off", "on")),
        "ownerIds": IdListRule(),
        "memberMinAlpha": _RATIO,  # 0 = gating off
        "autoPatchDerpyu": _BOOL,
        "channelScore": EnumRule(("model", "heuristic")),
        "mediaRoots": StrListRule(),
        "maxImageBytes": _POS,
        "stagingTtlMs": _POS,
        "crossChat": {
            "enabled": _BOOL,
            "ownerOnly": _BOOL,
            "maxResults": IntRule(1, 20),  # clamp 1..20
            "maxSnippetChars": IntRule(80, 2000),  # clamp 80..2000
            "maxGroups": IntRule(1, 500),  # clamp 1..500
            "maxFoldersPerGroup": IntRule(1, 100000),  # clamp 1..100000
        },
    },
}


def schema_paths(tree: Mapping[str, Any] = SCHEMA, prefix: str = "") -> list[str]:
    """Dotted paths of every rule in ``tree`` (sections are walked, rules are leaves)."""
    paths: list[str] = []
    for key, node in tree.items():
        path = f"{prefix}{key}"
        if isinstance(node, Mapping):
            paths.extend(schema_paths(node, path + "."))
        else:
            paths.append(path)
    return paths


def _merge_unknown(prev: Any, new: Any) -> Any:
    """Deep-merge a value under an unknown key: objects recurse, anything else replaces."""
    if isinstance(prev, Mapping) and isinstance(new, Mapping):
        merged = dict(prev)
        for key, value in new.items():
            merged[key] = _merge_unknown(prev.get(key), value)
        return merged
    return copy.deepcopy(new)


def merge_layer(
    acc: dict[str, Any],
    layer: Mapping[str, Any],
    warn: Warn,
    unknown: list[str] | None = None,
    *,
    schema: Mapping[str, Any] = SCHEMA,
    prefix: str = "",
) -> None:
    """Apply one (already forbidden-key-stripped) layer onto ``acc`` in place.

    ``acc`` must already be valid (it starts as the engine defaults), which is what lets
    a rejected value fall back to "the value below this layer". Unknown keys are merged
    in verbatim and their paths appended to ``unknown``.
    """
    for key, value in layer.items():
        path = f"{prefix}{key}"
        node = schema.get(key)
        if node is None:
            if unknown is not None:
                unknown.append(path)
            acc[key] = _merge_unknown(acc.get(key), value)
        elif isinstance(node, Mapping):
            if isinstance(value, Mapping):
                merge_layer(acc[key], value, warn, unknown, schema=node, prefix=path + ".")
            else:
                warn(
                    f"{path}: expected an object, got {json_kind(value)} {describe(value)}; ignored"
                )
        else:
            assert isinstance(node, Rule)
            acc[key] = node.apply(acc[key], value, path, warn)


def cross_check(acc: dict[str, Any], warn: Warn) -> None:
    """Rules that involve more than one key, run once on the fully merged config."""
    importance = acc["importance"]
    if importance["min"] > importance["max"]:
        warn(
            f"importance.min {describe(importance['min'])} > importance.max "
            f"{describe(importance['max'])}; swapped"
        )
        importance["min"], importance["max"] = importance["max"], importance["min"]
    keywords = acc["keywords"]
    if keywords["min"] > keywords["max"]:
        warn(f"keywords.min {keywords['min']} > keywords.max {keywords['max']}; swapped")
        keywords["min"], keywords["max"] = keywords["max"], keywords["min"]
    compress = acc["compress"]
    if compress["releaseFloorEnabled"] and (
        compress["releaseTargetPercent"] >= compress["triggerPercent"]
    ):
        warn(
            f"compress.releaseTargetPercent {describe(compress['releaseTargetPercent'])} is not "
            f"below compress.triggerPercent {describe(compress['triggerPercent'])}; "
            "the archive release floor is disabled"
        )
    time = acc["time"]
    if time["minRangeDays"] < 3:
        warn(f"time.minRangeDays {time['minRangeDays']} is below the recommended 3 days")
    if time["maxRangeDays"] < time["minRangeDays"]:
        warn(
            f"time.maxRangeDays {time['maxRangeDays']} < time.minRangeDays "
            f"{time['minRangeDays']}; raised to {time['minRangeDays']}"
        )
        time["maxRangeDays"] = time["minRangeDays"]
    if not acc["compat"]["crossChat"]["ownerOnly"]:
        warn(
            "compat.crossChat.ownerOnly is false: any QQ private chat can read group "
            "memories (leak risk, not recommended)"
        )


def validate_tree(
    tree: Mapping[str, Any], *, source: str = "config"
) -> tuple[dict[str, Any], list[str]]:
    """Validate a single config tree over the engine defaults.

    Convenience for callers holding one dict (tests, tools); the daemon goes through
    :func:`engine.config.layers.build_config`, which also strips forbidden keys.
    """
    warnings: list[str] = []
    acc = copy.deepcopy(ENGINE_DEFAULTS)
    merge_layer(acc, tree, lambda msg: warnings.append(f"{source}: {msg}"))
    cross_check(acc, lambda msg: warnings.append(f"config: {msg}"))
    return acc, warnings
