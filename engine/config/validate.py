"""The reference's leniency, per key: a bad value never fails a config layer.

A config file is user-edited and hot-reloaded, so one typo must not take the memory
offline. Each layer is cleaned against the layers below it before it merges: a value of
the wrong type is rejected with a warning and keeps the value it had *below* (so a typo
in ``config.local.json`` does not silently undo a product default); an out-of-range
number is clamped; an enum takes its documented values only (case variants normalised);
unknown keys are kept verbatim and ignored (reference: "未知/过期键被忽略并保留"); a few
cross-field rules run once on the merged result. :data:`SCHEMA` is derived from the
fields of :class:`engine.config.model.MemoryConfig`, so the model stays the one source.
"""

from __future__ import annotations

import copy
import math
import zoneinfo
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args, get_origin

import orjson
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from engine.config.defaults import ENGINE_DEFAULTS
from engine.config.limits import CATEGORY_CLASSES_MAX, CATEGORY_WORDS_MAX, MAX_SAFE_INTEGER
from engine.config.model import CategoryClass, MemoryConfig, Range, Special

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


class _Rejected(Exception):
    """A value this layer cannot use; the key keeps the value from below."""


def _got(value: Any) -> str:
    return f"got {json_kind(value)} {describe(value)}"


def _expect(what: str, value: Any) -> _Rejected:
    return _Rejected(f"expected {what}, {_got(value)}")


@dataclass(frozen=True, slots=True)
class Rule:
    """A leaf of :data:`SCHEMA`: the field's kind (a key of :data:`_CHECKS` or
    :data:`_MERGES`) and its bounds or allowed ``values``."""

    kind: str
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    values: tuple[str, ...] | None = None

    def apply(self, prev: Any, new: Any, path: str, warn: Warn) -> Any:
        """Return the key's value after this layer; warn about anything not taken as is."""
        if self.kind in _MERGES:  # open objects merge per entry, so need an object
            if isinstance(new, Mapping):
                return _MERGES[self.kind](prev, new, path, warn)
            warn(f"{path}: expected an object, {_got(new)}; keeping previous")
            return prev
        try:
            value, note = _CHECKS[self.kind](self, new, path)
        except _Rejected as exc:
            warn(f"{path}: {exc}; keeping {describe(prev)}")
            return prev
        if note:
            warn(f"{path}: {note}")
        return value


Checked = tuple[Any, str | None]


def _bool(rule: Rule, value: Any, path: str) -> Checked:
    """JSON boolean only: the strings "true"/"false" are a type error, as in the reference.
    ALWAYS_FALSE (``time.judgeEventTime``) turns true into false with a note."""
    if not isinstance(value, bool):
        raise _expect("a boolean", value)
    if value and rule.kind == Special.ALWAYS_FALSE.name:
        return False, f"true is not supported ({path} is fixed to false)"
    return value, None


def _clamp(value: float, lo: float | None, hi: float | None) -> Checked:
    if lo is not None and value < lo:
        return lo, f"{describe(value)} is below the minimum {describe(lo)}; clamped"
    if hi is not None and value > hi:
        return hi, f"{describe(value)} is above the maximum {describe(hi)}; clamped"
    return value, None


def _int(rule: Rule, value: Any, path: str) -> Checked:
    """Integer in ``lo..hi``; 5.0 is taken as 5 and 5.5 rounds half up with a note."""
    if not _is_number(value):
        raise _expect("an integer", value)
    fractional = isinstance(value, float) and not value.is_integer()
    rounded = math.floor(value + 0.5) if fractional else int(value)
    clamped, note = _clamp(rounded, rule.lo, rule.hi)
    notes = [f"{describe(value)} is not an integer; rounded to {rounded}"] if fractional else []
    return int(clamped), "; ".join([*notes, *([note] if note else [])]) or None


def _float(rule: Rule, value: Any, path: str) -> Checked:
    """Finite number; an exclusive (``lo_open``) lower bound cannot be clamped to, so a
    value at or below it is rejected."""
    if not _is_number(value):
        raise _expect("a number", value)
    if rule.lo_open and rule.lo is not None and value <= rule.lo:
        raise _Rejected(f"{describe(value)} must be greater than {describe(rule.lo)}")
    return _clamp(value, None if rule.lo_open else rule.lo, rule.hi)


def _enum(rule: Rule, value: Any, path: str) -> Checked:
    """One of a fixed set of strings; a case variant ("Legacy") is normalised with a note."""
    values = rule.values or ()
    if not isinstance(value, str):
        raise _expect(f"one of {'|'.join(values)}", value)
    if value in values:
        return value, None
    for candidate in values:
        if candidate.casefold() == value.strip().casefold():
            return candidate, f"{describe(value)} normalised to {describe(candidate)}"
    raise _Rejected(f"expected one of {'|'.join(values)}, got {describe(value)}")


def _str(rule: Rule, value: Any, path: str) -> Checked:
    """A string; the NON_BLANK kind also rejects empty / whitespace-only strings."""
    if not isinstance(value, str):
        raise _expect("a string", value)
    if rule.kind == Special.NON_BLANK.name and not value.strip():
        raise _Rejected("expected a non-empty string")
    return value, None


def _timezone(rule: Rule, value: Any, path: str) -> Checked:
    """IANA zone name (checked through :mod:`zoneinfo`), or "" for the host's zone."""
    if not isinstance(value, str):
        raise _Rejected(f"expected an IANA timezone name, got {json_kind(value)}")
    name = value.strip()
    if name:
        try:
            zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
            raise _Rejected(f"unknown IANA timezone {describe(name)}") from None
    return name, None


def _str_list(rule: Rule, value: Any, path: str) -> Checked:
    """Array of strings; replaces the previous array (arrays never merge). Bad items are
    dropped with a note. With ``values`` the items come from that set, re-sorted into its
    order (the time fallback ladder only widens, so a shuffled one would be meaningless)."""
    if not isinstance(value, list | tuple):
        raise _expect("an array of strings", value)
    allowed = rule.values
    notes: list[str] = []
    items: list[str] = []
    for item in value:
        if not isinstance(item, str):
            notes.append(f"dropped non-string item {describe(item)}")
        elif not item.strip():
            notes.append("dropped empty item")
        elif allowed is not None and item not in allowed:
            notes.append(f"dropped {describe(item)} (allowed: {', '.join(allowed)})")
        elif item not in items:
            items.append(item)
    if allowed is not None:
        ordered = sorted(items, key=allowed.index)
        if ordered != items:
            notes.append(f"reordered to {describe(ordered)}")
        items = ordered
    return items, "; ".join(notes) or None


def _id_list(rule: Rule, value: Any, path: str) -> Checked:
    """QQ ids: strings or numbers, numbers turned into strings (reference ``compat.ownerIds``)."""
    if not isinstance(value, list | tuple):
        raise _expect("an array of ids", value)
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
    return ids, "; ".join(notes) or None


def _num_map(prev: Any, new: Mapping[str, Any], path: str, warn: Warn) -> Any:
    """An open object of name -> number (``importance.weights``); merges per entry."""
    merged = dict(prev)
    for key, item in new.items():
        if _is_number(item):
            merged[key] = item
        else:
            kept = f"keeping {describe(merged[key])}" if key in merged else "ignored"
            warn(f"{path}.{key}: expected a number, {_got(item)}; {kept}")
    return merged


def _category_classes(prev: Any, new: Mapping[str, Any], path: str, warn: Warn) -> Any:
    """``recall.categoryMatch.classes``: ``{name: {label, words[]}}``, at most 32 classes
    of at most 64 words. Classes merge per name (a layer can add a class or replace
    one class's words without restating the other five); ``words: []`` disables one."""
    merged: dict[str, Any] = copy.deepcopy(dict(prev))
    for name, entry in new.items():
        where = f"{path}.{name}"
        if not isinstance(entry, Mapping):
            warn(f"{where}: expected an object {{label, words}}, got {json_kind(entry)}; ignored")
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
            words = Rule("str list").apply(words, entry["words"], f"{where}.words", warn)
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


_CHECKS: Final[dict[str, Callable[[Rule, Any, str], Checked]]] = {
    "bool": _bool,
    "int": _int,
    "float": _float,
    "enum": _enum,
    "str": _str,
    "str list": _str_list,
    Special.TIMEZONE.name: _timezone,
    Special.NON_BLANK.name: _str,
    Special.ID_LIST.name: _id_list,
    Special.ALWAYS_FALSE.name: _bool,
}
_MERGES: Final[dict[str, Callable[[Any, Mapping[str, Any], str, Warn], Any]]] = {
    "num map": _num_map,
    "category classes": _category_classes,
}


def _rule_for(field: FieldInfo, path: str) -> Rule:
    """The leniency rule a field's annotation and metadata imply."""
    special = next((meta for meta in field.metadata if isinstance(meta, Special)), None)
    if special is not None:
        return Rule(special.name)
    kind, args = field.annotation, get_args(field.annotation)
    bound = next((meta for meta in field.metadata if isinstance(meta, Range)), Range())
    if kind in (bool, str):
        return Rule(kind.__name__)
    if kind is int:
        lo = -MAX_SAFE_INTEGER if bound.lo is None else int(bound.lo)
        return Rule("int", lo, MAX_SAFE_INTEGER if bound.hi is None else int(bound.hi))
    if kind is float:
        return Rule("float", bound.lo, bound.hi, bound.lo_open)
    if get_origin(kind) is Literal:
        return Rule("enum", values=args)
    if get_origin(kind) is tuple:
        literal = get_origin(args[0]) is Literal
        return Rule("str list", values=get_args(args[0]) if literal else None)
    if get_origin(kind) is Mapping and args[1] is float:
        return Rule("num map")
    if get_origin(kind) is Mapping and args[1] is CategoryClass:
        return Rule("category classes")
    raise TypeError(f"{path}: no leniency rule for {kind!r}")


def schema_of(model: type[BaseModel], prefix: str = "") -> dict[str, Any]:
    """The rule tree of ``model``: JSON key -> :class:`Rule`, or a sub-tree for a section."""
    tree: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        key = field.alias or name
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            tree[key] = schema_of(kind, f"{prefix}{key}.")
        else:
            tree[key] = _rule_for(field, prefix + key)
    return tree


#: The validation rule of every key of the model, in the shape of ENGINE_DEFAULTS.
SCHEMA: Final[dict[str, Any]] = schema_of(MemoryConfig)


def clean_layer(
    below: Mapping[str, Any],
    layer: Mapping[str, Any],
    warn: Warn,
    unknown: list[str] | None = None,
    *,
    schema: Mapping[str, Any] = SCHEMA,
    prefix: str = "",
) -> dict[str, Any]:
    """One (forbidden-key-stripped) layer cleaned against the merged layers ``below`` it,
    to deep-merge onto them: a rejected value keeps the value below, a clamped one is
    replaced, a section that is not an object is dropped. Unknown keys pass verbatim and
    their paths are appended to ``unknown``."""
    out: dict[str, Any] = {}
    for key, value in layer.items():
        path = f"{prefix}{key}"
        node = schema.get(key)
        if node is None:
            if unknown is not None:
                unknown.append(path)
            out[key] = copy.deepcopy(value)
        elif isinstance(node, Rule):
            out[key] = node.apply(below[key], value, path, warn)
        elif isinstance(value, Mapping):
            out[key] = clean_layer(below[key], value, warn, unknown, schema=node, prefix=path + ".")
        else:
            warn(f"{path}: expected an object, {_got(value)}; ignored")
    return out


def cross_check(acc: dict[str, Any], warn: Warn) -> None:
    """Rules that involve more than one key, run once on the fully merged config."""
    for section in ("importance", "keywords"):
        lo, hi = acc[section]["min"], acc[section]["max"]
        if lo > hi:
            warn(f"{section}.min {describe(lo)} > {section}.max {describe(hi)}; swapped")
            acc[section].update(min=hi, max=lo)
    compress = acc["compress"]
    target, trigger = compress["releaseTargetPercent"], compress["triggerPercent"]
    if compress["releaseFloorEnabled"] and target >= trigger:
        warn(
            f"compress.releaseTargetPercent {describe(target)} is not below "
            f"compress.triggerPercent {describe(trigger)}; the archive release floor is disabled"
        )
    time = acc["time"]
    lo, hi = time["minRangeDays"], time["maxRangeDays"]
    if lo < 3:
        warn(f"time.minRangeDays {lo} is below the recommended 3 days")
    if hi < lo:
        warn(f"time.maxRangeDays {hi} < time.minRangeDays {lo}; raised to {lo}")
        time["maxRangeDays"] = lo
    if not acc["compat"]["crossChat"]["ownerOnly"]:
        warn(
            "compat.crossChat.ownerOnly is false: any QQ private chat can read group "
            "memories (leak risk, not recommended)"
        )


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """New dict: objects merge recursively, arrays and scalars from ``override`` replace
    (the rule pydantic-settings applies between its sources)."""
    merged: dict[str, Any] = copy.deepcopy(dict(base))
    for key, value in override.items():
        current = merged.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = deep_merge(current, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def validate_tree(
    tree: Mapping[str, Any], *, source: str = "config"
) -> tuple[dict[str, Any], list[str]]:
    """One config tree validated over the engine defaults, for callers holding one dict
    (tests, tools); the daemon's :func:`engine.config.layers.build_config` also strips
    forbidden keys."""
    warnings: list[str] = []
    patch = clean_layer(ENGINE_DEFAULTS, tree, lambda msg: warnings.append(f"{source}: {msg}"))
    acc = deep_merge(ENGINE_DEFAULTS, patch)
    cross_check(acc, lambda msg: warnings.append(f"config: {msg}"))
    return acc, warnings
