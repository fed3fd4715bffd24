"""Index rows in memory: one compact, immutable object per folder.

Why not the pydantic model: the store held every row twice, the dict read from
``index.json`` (written back, and digested by the index log) and its validated model
(what every reader uses): 4.4 kB a folder, 9× the row's bytes, and ten objects the
garbage collector scans on every full collection. At 10⁵ folders that was most of the
daemon's memory and a second and a half of validation on every open.

An :class:`IndexEntry` is a tuple of the row's field values as
:class:`~engine.store.records.IndexFields` validates them (read by their field names,
at C speed: ``entry.alpha``, ``entry.eventStart``), then what gives the row back exactly
as it was read or derived (:meth:`IndexEntry.row`): its keys in their order (one tuple
shared by every row of that layout), its unknown fields (None: none) and the raw value
of each known field that validation changed (an integer α read from a file the reference
plugin wrote; None: none). So the row written back, and its digest in the index log,
are those read, while one copy of each value is held.

Validation is pydantic's. A row whose known values are already what the model would
make of them (a ``str``, an ``int``, a finite ``float`` or an ``int`` for a float, a
``bool``, a list of ``str``, …) is taken without the model (the same entry, a tenth of
the time); anything else goes through the model, which makes the values or raises its
``ValidationError``. Strings that repeat across folders (keywords, labels, the score
mode, versions) are interned, so a word shared by a thousand folders is held once.

Equality is the model's: the field values and the unknown fields, not the key order or
the raw spelling of a value.
"""

from __future__ import annotations

import math
import operator
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from engine.store.records import INDEX_FIELDS, IndexFields, to_json_dict

__all__ = ["IndexEntry", "entry_from_row", "first_by_key"]


class _Fields(NamedTuple):
    id: str
    createdAt: int
    alpha: float
    beta: float
    scored: bool
    rescorePending: bool
    keywords: list[str]
    title: str
    pendingSince: int | None
    pendingEra: str | None
    scoreMode: str | None
    archivedByVersion: str | None
    archivedFrom: str | None
    eventStart: int | None
    eventEnd: int | None
    eventTimeSource: str | None
    event: str | None
    events: list[str] | None
    eventSource: str | None
    eventAt: int | None
    locations: list[str] | None
    persons: list[str] | None
    timeTags: list[dict[str, Any]] | None
    timeTagSource: str | None
    idempotencyKey: str | None
    assistantKeywords: list[str] | None
    row_keys: tuple[str, ...]
    """The row's keys in order (internal: :meth:`IndexEntry.row`)."""
    row_extra: dict[str, Any] | None
    """The row's unknown fields (internal; read them as :attr:`IndexEntry.model_extra`)."""
    row_raw: dict[str, Any] | None
    """Known fields whose value validation changed, as the row had them (internal)."""


_N = len(INDEX_FIELDS)
if _Fields._fields[:_N] != INDEX_FIELDS:  # one field list: the model's
    raise AssertionError("IndexEntry fields differ from IndexFields")
_POS: dict[str, int] = {name: i for i, name in enumerate(INDEX_FIELDS)}

_NONE = type(None)
_KINDS: dict[str, tuple[str, frozenset[type]]] = {
    "id": ("str", frozenset({str})),
    "createdAt": ("int", frozenset({int})),
    "alpha": ("float", frozenset({float, int})),
    "beta": ("float", frozenset({float, int})),
    "scored": ("bool", frozenset({bool})),
    "rescorePending": ("bool", frozenset({bool})),
    "keywords": ("words", frozenset({list})),
    "title": ("str", frozenset({str})),
    "pendingSince": ("int", frozenset({int, _NONE})),
    "pendingEra": ("label", frozenset({str, _NONE})),
    "scoreMode": ("label", frozenset({str, _NONE})),
    "archivedByVersion": ("label", frozenset({str, _NONE})),
    "archivedFrom": ("label", frozenset({str, _NONE})),
    "eventStart": ("int", frozenset({int, _NONE})),
    "eventEnd": ("int", frozenset({int, _NONE})),
    "eventTimeSource": ("label", frozenset({str, _NONE})),
    "event": ("str", frozenset({str, _NONE})),
    "events": ("words", frozenset({list, _NONE})),
    "eventSource": ("label", frozenset({str, _NONE})),
    "eventAt": ("int", frozenset({int, _NONE})),
    "locations": ("words", frozenset({list, _NONE})),
    "persons": ("words", frozenset({list, _NONE})),
    "timeTags": ("tags", frozenset({list, _NONE})),
    "timeTagSource": ("label", frozenset({str, _NONE})),
    "idempotencyKey": ("str", frozenset({str, _NONE})),
    "assistantKeywords": ("words", frozenset({list, _NONE})),
}
"""Per field: what the fast path does with it, and the value types it takes as they are
(anything else, a ``bool`` for an ``int`` included, goes through the model)."""
if tuple(_KINDS) != INDEX_FIELDS:
    raise AssertionError("every index field needs its kind")
_DEFAULTS: tuple[Any, ...] = tuple(
    None if f.is_required() else f.get_default(call_default_factory=True)
    for f in IndexFields.model_fields.values()
)
_REQUIRED = frozenset(name for name, f in IndexFields.model_fields.items() if f.is_required())
_KEYWORDS = _POS["keywords"]
_BETA = _POS["beta"]
_SAFE_INT = 2**53  # an int a float holds exactly
_FLOATS: dict[float, float] = {}
"""β values (integer scores, mostly): held once."""


class _Plan:
    """How the rows of one layout (keys in order, and the type of each value) become
    entries: where each field comes from, and what to check or make of some of them."""

    __slots__ = ("extra", "floats", "ints", "keys", "labels", "pick", "tags", "words")

    def __init__(self, keys: tuple[str, ...], types: tuple[type, ...]) -> None:
        self.keys = keys
        where = {key: n for n, key in enumerate(keys)}
        picks = [where.get(name, len(keys) + i) for i, name in enumerate(INDEX_FIELDS)]
        self.pick = operator.itemgetter(*picks)
        kinds = {name: _KINDS[name][0] for name in where if name in _POS}
        given = {name: types[where[name]] for name in kinds}
        self.words = tuple(_POS[n] for n, k in kinds.items() if k == "words" and given[n] is list)
        self.labels = tuple(_POS[n] for n, k in kinds.items() if k == "label" and given[n] is str)
        self.tags = tuple(_POS[n] for n, k in kinds.items() if k == "tags" and given[n] is list)
        self.floats = tuple(_POS[n] for n, k in kinds.items() if k == "float")
        self.ints = tuple(n for n, k in kinds.items() if k == "float" and given[n] is int)
        extra = tuple((key, n) for key, n in where.items() if key not in _POS)
        self.extra = extra or None

    @staticmethod
    def fits(keys: tuple[str, ...], types: tuple[type, ...]) -> bool:
        """Whether rows of this layout can skip the model (module docstring)."""
        if not set(keys) >= _REQUIRED or len(set(keys)) != len(keys):
            return False
        return all(
            key not in _KINDS or t in _KINDS[key][1] for key, t in zip(keys, types, strict=True)
        )


_PLANS: dict[tuple[tuple[str, ...], tuple[type, ...]], _Plan | None] = {}
_MAX_PLANS = 4096
"""Layouts remembered (most stores have a handful; foreign rows with keys of their own
each add one, until this many)."""

_new = tuple.__new__


def _plan(keys: tuple[str, ...], types: tuple[type, ...]) -> _Plan | None:
    sig = (keys, types)
    if sig in _PLANS:
        return _PLANS[sig]
    plan = _Plan(keys, types) if _Plan.fits(keys, types) else None
    if len(_PLANS) < _MAX_PLANS:
        _PLANS[sig] = plan
    return plan


def _float_of(value: Any) -> float | None:
    """A float field's value (None: the model has to decide)."""
    if type(value) is int:
        return float(value) if -_SAFE_INT <= value <= _SAFE_INT else None
    return value if math.isfinite(value) else None


def _shared_beta(value: float) -> float:
    shared = _FLOATS.get(value)
    if shared is not None and math.copysign(1.0, shared) == math.copysign(1.0, value):
        return shared
    if len(_FLOATS) < 1024:
        _FLOATS.setdefault(value, value)
    return value


def _interned(words: list[str]) -> list[str]:
    """`words` interned, in a list of exactly their number: ``list(map(...))`` grows its
    list as a map gives no length, leaving a third of the slots of a 10-word list unused
    (4 MB of the lists of 10⁵ parsed rows; a snapshot's lists come back exact)."""
    return list(tuple(map(sys.intern, words)))


def _fast(row: dict[str, Any]) -> IndexEntry | None:
    """The entry of a row whose known values need no model, else None."""
    keys = tuple(row)
    vals = tuple(row.values())
    plan = _plan(keys, tuple(map(type, vals)))
    if plan is None:
        return None
    fields = list(plan.pick(vals + _DEFAULTS))
    intern = sys.intern
    try:
        for i in plan.words:
            fields[i] = _interned(fields[i])  # TypeError: not all str
    except TypeError:
        return None
    for i in plan.labels:
        fields[i] = intern(fields[i])
    for i in plan.tags:
        for tag in fields[i]:
            if type(tag) is not dict or not all(type(k) is str for k in tag):
                return None
    raw: dict[str, Any] | None = None
    for i in plan.floats:
        value = _float_of(fields[i])
        if value is None:
            return None
        fields[i] = value
    if plan.ints:
        raw = {name: row[name] for name in plan.ints}
    fields[_BETA] = _shared_beta(fields[_BETA])
    if fields[_KEYWORDS] is _DEFAULTS[_KEYWORDS]:
        fields[_KEYWORDS] = []
    extra = {key: vals[n] for key, n in plan.extra} if plan.extra is not None else None
    entry: IndexEntry = _new(IndexEntry, (*fields, plan.keys, extra, raw))
    return entry


def _validated(row: Any) -> IndexEntry:
    """The model's entry of ``row`` (raises its ValidationError)."""
    model = IndexFields.model_validate(row)
    source: Mapping[str, Any] = row if isinstance(row, Mapping) else to_json_dict(model)
    fields = [getattr(model, name) for name in INDEX_FIELDS]
    intern = sys.intern
    for name, (kind, _) in _KINDS.items():
        i = _POS[name]
        if kind == "words" and fields[i] is not None:
            fields[i] = _interned(fields[i])  # held as the fast path holds them
        elif kind == "label" and fields[i] is not None:
            fields[i] = intern(fields[i])
    fields[_BETA] = _shared_beta(fields[_BETA])
    extra = dict(model.model_extra) if model.model_extra else None
    raw: dict[str, Any] | None = None
    for key, value in source.items():
        at = _POS.get(key)
        if at is not None and (type(value) is not type(fields[at]) or value != fields[at]):
            if raw is None:
                raw = {}
            raw[key] = value
    keys = tuple(source)
    plan = _PLANS.get((keys, tuple(map(type, source.values()))))
    entry: IndexEntry = _new(IndexEntry, (*fields, plan.keys if plan else keys, extra, raw))
    return entry


def entry_from_row(row: Any) -> IndexEntry:
    """The entry of an index row (a dict as ``index.json`` holds it), validated as
    :class:`~engine.store.records.IndexFields` validates it: raises pydantic's
    ``ValidationError`` for a row the model refuses."""
    if type(row) is dict:
        entry = _fast(row)
        if entry is not None:
            return entry
    return _validated(row)


_KEY_AND_ID = operator.attrgetter("idempotencyKey", "id")


def first_by_key(entries: Iterable[Any]) -> dict[str, str]:
    """Idempotency key -> the id of the first of `entries` carrying it (what
    ``setdefault`` over them in order gives; entries without a key left out), in one pass
    at C speed (a store of 10⁵ folders is opened with it)."""
    pairs = list(map(_KEY_AND_ID, entries))
    pairs.reverse()  # the first of each key is written last, and wins
    out: dict[Any, str] = dict(pairs)
    out.pop(None, None)
    return out


def _restore(values: tuple[Any, ...]) -> IndexEntry:
    entry: IndexEntry = _new(IndexEntry, values)
    return entry


class IndexEntry(_Fields):
    """One entry of ``index.json``: the recall-relevant subset of a meta (module
    docstring). Immutable: a change is a new entry."""

    __slots__ = ()

    # read as recall's `engine.recall.candidates.Folder` (an entry is its own folder)
    if TYPE_CHECKING:

        @property
        def created_at(self) -> int:
            """``createdAt``."""
            ...

    else:
        created_at = _Fields.createdAt

    @property
    def assistant(self) -> Sequence[str]:
        """``assistantKeywords``, or none."""
        return self.assistantKeywords or ()

    def __new__(cls, **fields: Any) -> IndexEntry:
        return entry_from_row(fields)

    @classmethod
    def model_validate(cls, row: Any) -> IndexEntry:
        """The entry of ``row`` (see :func:`entry_from_row`)."""
        return entry_from_row(row)

    @property
    def model_extra(self) -> dict[str, Any]:
        """The row's unknown fields, as they were."""
        return dict(self.row_extra) if self.row_extra else {}

    def row(self) -> dict[str, Any]:
        """The row, exactly as it was read or derived (keys in order, raw values)."""
        extra, raw = self.row_extra, self.row_raw
        if extra is None and raw is None:
            return {key: self[_POS[key]] for key in self.row_keys}
        out: dict[str, Any] = {}
        for key in self.row_keys:
            if raw is not None and key in raw:
                out[key] = raw[key]
            elif key in _POS:
                out[key] = self[_POS[key]]
            elif extra is not None:
                out[key] = extra[key]
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IndexEntry):
            return NotImplemented
        return self[:_N] == other[:_N] and (self.row_extra or {}) == (other.row_extra or {})

    def __ne__(self, other: object) -> bool:
        same = self.__eq__(other)
        return same if same is NotImplemented else not same

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={self[i]!r}" for i, name in enumerate(INDEX_FIELDS))
        extra = "".join(f", {k}={v!r}" for k, v in (self.row_extra or {}).items())
        return f"IndexEntry({shown}{extra})"

    def __reduce__(self) -> tuple[Callable[[tuple[Any, ...]], IndexEntry], tuple[Any, ...]]:
        return _restore, (tuple(self),)
