"""Values validated once: a surface node the host sends again skips pydantic.

Why: a host sends the whole model-visible surface with every `agent/pre-step` (400 nodes,
500 KB at a 128k-token window), and from one step to the next almost every node is one it
sent before. Checking each against its shape again is most of the work of such a request
(several ms on the event loop), yet whether a node is valid depends on its JSON alone.

What is remembered: the exact JSON bytes (orjson: ``1``, ``1.0`` and ``true`` differ; key
order counts) of values that validated, and what their validation returned when that is
not the value itself (a shape lists its known keys first, an integral ``5.0`` is read as
``5``). A value validation returns unchanged is handed on as it came, the request's own
objects; one it changed is handed on as a fresh decoding of the remembered result: equal
to what validation would return, down to key order and types, and never an object shared
between requests. Every other value goes through the validator as before, so a value
that does not validate gets the validator's own errors, byte for byte.

Only values read from a JSON line qualify (:func:`json_values`, set by the dispatcher
around its validation): their Python form is exactly what their bytes say. A value built
in Python may hold what JSON cannot tell apart (a tuple for a list, NaN written as
``null``), so it is always validated.

A list of such values (the surface) is looked up as a whole (:meth:`ValidatedOnce.each`):
first its own JSON, one encoding of the whole list, against the lists validated before
(:class:`_Whole`): the values of the longest run of leading values a remembered list
shares with it, at the byte level, are known without a per-value encoding or look-up
(the surface sent again: all of them; a surface that grew: all but its new values);
each value after that run costs one JSON encoding and one dictionary look-up; only the
values not remembered at all go through pydantic (with their per-value memory). The
look-up is made once per request: :func:`recalled` makes it for the shape check of
``handlers.params.parse_params`` (a remembered value passed that check before, at the
same place) and hands it on to the list's validator.

Why the list's own JSON first: the per-value encodings and look-ups of a 400-node
surface cost about a millisecond (400 small encodings, 400 hashes of fresh keys); one
encoding of the list is a quarter of that, and comparing it with a remembered list is a
``memcmp`` (bytes are compared, never hashed: no digest can say two lists are equal).
Better still, no encoding: when the values came from a line that held one request
(:func:`json_values` is given the line), the list's JSON is the bytes the line writes it
in, found with where each value ends by a compiled scan (`engine.json_spans`, a sixth of
an encoding; in the daemon the look-up went from 0.53 to 0.06 ms a pre-step). Bytes are
bytes: the same bytes are the same values however a host spaces or escapes its JSON,
and a host that writes the same surface in other bytes only misses the memory.
A list's JSON is its values' JSON joined by commas inside brackets (orjson writes no
spaces), so a byte prefix that ends where a remembered value ends, followed by a comma
or the closing bracket, is exactly that many leading values.

The memory holds at most :data:`MAX_BYTES` of JSON per kind (values; whole lists), least
recently used first out, and is emptied with the engine's memo caches when the daemon
gives memory back (:func:`forget_all`, ``rofmd.server.memory_release``): it refills with
the next requests.

A validated form that differs from its value only in the order of some objects' keys (a
tool result written ``toolCallId`` before ``content``, which its shape lists after) is
remembered as those key moves (:class:`_Reordered`), not as its JSON: a later request's
value is handed on with its own keys moved into that order, the same JSON as a decoding,
without one (the 100 tool results of a 128k-token pre-step: 0.1 ms a request).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from itertools import compress, count, repeat
from operator import is_, is_not
from typing import Any

import orjson
from pydantic import ValidationError

from engine import json_spans

__all__ = ["MAX_BYTES", "Recalled", "ValidatedOnce", "forget_all", "json_values", "recalled"]

MAX_BYTES = 4 * 1024 * 1024
"""JSON bytes remembered per kind of value: the surfaces of eight sessions at a 128k-token
window (500 KB each)."""

_FROM_JSON: ContextVar[bool] = ContextVar("rofmd_params_from_json", default=False)
_LINE: ContextVar[tuple[bytes, str] | None] = ContextVar("rofmd_params_line", default=None)
"""The JSON line the values were parsed from, and the member holding them."""


@contextmanager
def json_values(line: bytes | None = None, within: str = "params") -> Iterator[None]:
    """Validation inside this block reads values parsed from a JSON line (see above):
    `line` itself when given, whose member `within` holds the values validated (a
    remembered list is then looked up by the bytes the line writes it in, with no
    encoding: :func:`recalled`)."""
    token = _FROM_JSON.set(True)
    line_token = _LINE.set(None if line is None else (line, within))
    try:
        yield
    finally:
        _LINE.reset(line_token)
        _FROM_JSON.reset(token)


_ALL: weakref.WeakSet[ValidatedOnce] = weakref.WeakSet()

UNKNOWN: Any = object()
"""A value the memory does not hold (:attr:`Recalled.found`)."""


@dataclass(slots=True)
class _Whole:
    """A list of values as it validated: its exact JSON, the offset just past each
    value's JSON in it, and what the memory held for each value (None, the JSON of its
    validated form or its key moves; :data:`UNKNOWN` while the list is being looked
    up)."""

    json: bytes
    ends: list[int]
    found: list[Any]

    def shared(self, other: bytes, most: int) -> int:
        """How many leading values (at most ``most``) the list whose JSON is ``other``
        has in common with this one, byte for byte: the largest ``k`` such that both
        JSONs agree up to the end of this list's ``k``-th value and ``other`` goes on
        with a comma or its closing bracket there (module docstring)."""
        if other == self.json:
            return min(most, len(self.ends))
        view = memoryview(self.json)
        ends = self.ends
        size = len(other)

        def agrees(k: int) -> bool:
            end = ends[k - 1]
            return end < size and other[end] in _AFTER_VALUE and other.startswith(view[:end])

        lo, hi = 0, min(most, len(ends))
        while lo < hi:  # agrees(k) holds for every k up to the answer, for none beyond
            mid = (lo + hi + 1) // 2
            if agrees(mid):
                lo = mid
            else:
                hi = mid - 1
        return lo


_AFTER_VALUE = frozenset(b",]")
"""What follows a value's JSON inside a list's JSON."""


@dataclass(frozen=True, slots=True)
class _Reordered:
    """A validated form that is its value with the keys of some of its objects in
    another order: where each such object is (keys and list indices from the value
    down) and the order its keys take (module docstring)."""

    moves: tuple[tuple[tuple[Any, ...], tuple[str, ...]], ...]

    def apply(self, value: Any) -> Any:
        """`value` (this request's own, parsed from its line) in its validated form: its
        objects' keys moved in place, each to the end in the form's order."""
        for path, order in self.moves:
            obj = value
            for step in path:
                obj = obj[step]
            for key in order:
                obj[key] = obj.pop(key)
        return value


_REORDERED_BYTES = 64
"""What a :class:`_Reordered` counts for against :data:`MAX_BYTES` (a few key names)."""


def _reordering(value: Any, validated: Any) -> _Reordered | None:
    """The key moves that make `value` its validated form `validated`, when the two
    differ only in the order of some objects' keys (the same keys; everything else of
    the same type and equal); else None. Iterative: a deep value cannot exhaust the
    stack."""
    moves: list[tuple[tuple[Any, ...], tuple[str, ...]]] = []
    stack: list[tuple[tuple[Any, ...], Any, Any]] = [((), value, validated)]
    while stack:
        path, a, b = stack.pop()
        if type(a) is not type(b):
            return None
        if type(a) is dict:
            if a.keys() != b.keys():
                return None
            if list(a) != list(b):
                moves.append((path, tuple(b)))
            stack.extend(((*path, k), a[k], b[k]) for k in a)
        elif type(a) is list:
            if len(a) != len(b):
                return None
            stack.extend(((*path, i), x, y) for i, (x, y) in enumerate(zip(a, b, strict=True)))
        elif a != b:
            return None
    return _Reordered(tuple(moves)) if moves else None


def _validated_form(key: bytes, value: Any, validated: Any) -> bytes | _Reordered | None:
    """What the memory keeps for `value` (whose JSON is `key`) that validated into
    `validated`: None when that is the same JSON, its key moves when only some keys'
    order differs, else its JSON. TypeError when orjson does not write `validated`."""
    result = orjson.dumps(validated)
    if result == key:
        return None
    return _reordering(value, validated) or result


def _size(validated: bytes | _Reordered | None) -> int:
    """What a remembered validated form counts for against :data:`MAX_BYTES`."""
    if validated is None:
        return 0
    return _REORDERED_BYTES if isinstance(validated, _Reordered) else len(validated)


def _handed_on(value: Any, validated: bytes | _Reordered) -> Any:
    """A remembered value in its validated form: its keys moved, or a fresh decoding."""
    if isinstance(validated, _Reordered):
        return validated.apply(value)
    return orjson.loads(validated)


@dataclass(slots=True)
class Recalled:
    """One look-up of a list of values: per value what the memory holds for it
    (:data:`UNKNOWN`, None: valid as it is, the JSON of its validated form, or the key
    moves that make it that form).
    ``whole``: the list's JSON and where each value's JSON ends in it, kept so the list
    can be remembered as a whole once its unknown values validated (``keys``: their
    JSON)."""

    values: list[Any]
    found: list[Any]
    whole: _Whole | None = None
    keys: dict[int, bytes] = field(default_factory=dict)

    def shape_view(self) -> list[Any]:
        """The list as the shape check still has to see it: remembered values passed it
        before, at this very place, and stand as ``None``."""
        view: list[Any] = [None] * len(self.values)
        for i in self.unknown():
            view[i] = self.values[i]
        return view

    def unknown(self) -> list[int]:
        """Where the values the memory does not hold are. Found by identity at C speed,
        without touching the values themselves: a pre-step's 400 nodes were parsed just
        now and are mostly known, and a pass that touched each one cost five times as
        much."""
        return list(compress(count(), map(is_, self.found, repeat(UNKNOWN))))

    def rewritten(self) -> list[int]:
        """Where the values known to validate into another form are (their ``found``
        is that form's JSON, or its key moves)."""
        found = self.found
        return [
            i
            for i in compress(count(), map(is_not, found, repeat(None)))
            if found[i] is not UNKNOWN
        ]


_RECALLED: ContextVar[dict[int, Recalled] | None] = ContextVar("rofmd_recalled", default=None)
"""The look-ups of this validation, by memory (``id``), for :meth:`ValidatedOnce.each`."""


@contextmanager
def recalled(fields: Mapping[str, ValidatedOnce], raw: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Look up the lists ``raw[name]`` in their memories ``fields[name]`` once; yields
    ``raw`` as the shape check must see it (:meth:`Recalled.shape_view`), and lets the
    lists' validators inside this block use the same look-ups. Outside
    :func:`json_values`, or for a list not there, nothing changes."""
    if not _FROM_JSON.get() or not fields:
        yield raw
        return
    found: dict[int, Recalled] = {}
    view = raw
    source = _LINE.get()
    for name, memo in fields.items():
        values = raw.get(name)
        if type(values) is list:
            written = (
                None if source is None else json_spans.member_items(source[0], source[1], name)
            )
            rec = memo.recall(values, written)
            found[id(memo)] = rec
            if view is raw:
                view = dict(raw)
            view[name] = rec.shape_view()
    token = _RECALLED.set(found)
    try:
        yield view
    finally:
        _RECALLED.reset(token)


def forget_all() -> int:
    """Empty every memory of validated values; returns how many values were dropped."""
    dropped = 0
    for memo in list(_ALL):
        dropped += len(memo)
        memo.clear()
    return dropped


class ValidatedOnce:
    """A pydantic wrap validator (``WrapValidator(ValidatedOnce())``) that remembers."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        _ALL.add(self)
        self._max = max_bytes
        self._seen: dict[bytes, bytes | _Reordered | None] = {}
        """JSON of a valid value -> JSON of its validated form (None: the same; a
        :class:`_Reordered`: the same but for its keys' order)."""
        self._bytes = 0
        self._lists: list[_Whole] = []
        """Lists validated as a whole (:meth:`each`), most recently used last."""
        self._list_bytes = 0
        self._lock = threading.Lock()  # validation may run in worker threads
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._seen)

    def __call__(self, value: Any, handler: Callable[[Any], Any]) -> Any:
        if not _FROM_JSON.get():
            return handler(value)
        try:
            key = orjson.dumps(value)
        except TypeError:  # not JSON orjson writes (an integer beyond 64 bits)
            return handler(value)
        with self._lock:
            validated = self._touch(key)
            if validated is not UNKNOWN:
                self.hits += 1
                return value if validated is None else _handed_on(value, validated)
        out = handler(value)  # raises the validator's own errors
        self.misses += 1
        try:
            form = _validated_form(key, value, out)
        except TypeError:
            return out
        self._remember(key, form)
        return out

    def recall(self, values: list[Any], written: tuple[bytes, list[int]] | None = None) -> Recalled:
        """What the memory holds for each of ``values``; those it holds become its most
        recently used (hits are counted by the validator that uses them). The leading
        values a remembered list shares with ``values`` are read from that list, the
        others looked up one by one (module docstring). `written`: the list's JSON as
        its request line writes it and where each value ends in it
        (`engine.json_spans`), compared instead of an encoding of ``values``."""
        if not values:
            return Recalled(values, [])
        line_ends: list[int] | None = None  # where each value ends, when the line says
        if written is not None and len(written[1]) == len(values):
            whole, line_ends = written
        else:
            try:
                whole = orjson.dumps(values)
            except TypeError:  # a value orjson does not write: each is looked up (or not)
                return Recalled(values, self._each_found(values))
        rememberable = True
        with self._lock:
            known, shared = self._longest_shared(whole, len(values))
            if known is not None and shared == len(values):
                return Recalled(values, known.found[:shared])
            found: list[Any] = known.found[:shared] if known is not None else []
            if line_ends is not None:
                ends = list(line_ends)
            else:  # the shared values' ends, then each new value's, added up below
                ends = known.ends[:shared] if known is not None else []
            keys: dict[int, bytes] = {}
            end = ends[-1] if ends else 0
            for i in range(shared, len(values)):
                try:
                    key = orjson.dumps(values[i])
                except TypeError:  # only from a line: orjson wrote the whole list otherwise
                    found.append(UNKNOWN)
                    rememberable = False
                    continue
                if line_ends is None:
                    end += 1 + len(key)  # "[" or "," before each value
                    ends.append(end)
                validated = self._touch(key)
                found.append(validated)
                if validated is UNKNOWN:
                    keys[i] = key
        whole_list = _Whole(whole, ends, list(found)) if rememberable else None
        return Recalled(values, found, whole_list, keys)

    def _each_found(self, values: list[Any]) -> list[Any]:
        found: list[Any] = []
        with self._lock:
            for value in values:
                try:
                    key = orjson.dumps(value)
                except TypeError:
                    found.append(UNKNOWN)
                    continue
                # looked up while its bytes are fresh in the cache: the look-up compares
                # them with the remembered ones
                found.append(self._touch(key))
        return found

    def _longest_shared(self, whole: bytes, count: int) -> tuple[_Whole | None, int]:
        """The remembered list sharing the most leading values with the list whose JSON
        is ``whole`` (``count`` values), made the most recently used; the caller holds
        the lock."""
        best: _Whole | None = None
        most = 0
        for known in reversed(self._lists):
            shared = known.shared(whole, count)
            if shared > most:
                best, most = known, shared
                if most == count:
                    break
        if best is not None:
            self._lists.remove(best)
            self._lists.append(best)
        return best, most

    def _remember_list(self, whole: _Whole) -> None:
        """Remember a list whose every value validated (``whole.found`` complete)."""
        size = len(whole.json)
        if size > self._max:
            return
        with self._lock:
            if any(known.json == whole.json for known in self._lists):
                return
            self._lists.append(whole)
            self._list_bytes += size
            while self._list_bytes > self._max:
                self._list_bytes -= len(self._lists.pop(0).json)

    def _touch(self, key: bytes) -> Any:
        """What the memory holds for ``key`` (:data:`UNKNOWN`: nothing), made its most
        recently used; the caller holds the lock."""
        validated = self._seen.pop(key, UNKNOWN)
        if validated is not UNKNOWN:
            self._seen[key] = validated  # most recently used last
        return validated

    def each(self, max_items: int) -> Callable[[Any, Callable[[Any], Any]], Any]:
        """A wrap validator for a list of values each validated by this memory (the
        items' own ``WrapValidator(self)``): remembered values are taken as they are (or
        as a fresh decoding of their validated form), the others validated together;
        should any of them fail, the whole list is validated again, so the errors (and
        their indices) are the validator's own. ``max_items``: the list's own bound, a
        longer list is always handed to the validator."""

        def validate(value: Any, handler: Callable[[Any], Any]) -> Any:
            if not _FROM_JSON.get() or type(value) is not list or len(value) > max_items:
                return handler(value)
            pending = _RECALLED.get()
            rec = pending.get(id(self)) if pending is not None else None
            if rec is None or rec.values is not value:
                rec = self.recall(value)
            out = list(value)
            missing = rec.unknown()
            if missing:
                try:
                    fresh = handler([value[i] for i in missing])
                except ValidationError:
                    return handler(value)
                for i, v in zip(missing, fresh, strict=True):
                    out[i] = v
            with self._lock:
                self.hits += len(value) - len(missing)
            found = rec.found
            for i in rec.rewritten():
                out[i] = _handed_on(out[i], found[i])
            if rec.whole is not None and self._complete(rec, out, missing):
                self._remember_list(rec.whole)
            return out

        return validate

    def _complete(self, rec: Recalled, out: list[Any], missing: list[int]) -> bool:
        """Fill in what the values validated just now became (:func:`_validated_form`),
        as their validator remembered it, else worked out again; False when one of them
        has no JSON form orjson writes (then the list is not remembered as a whole)."""
        assert rec.whole is not None
        found = rec.whole.found
        for i in missing:
            key = rec.keys.get(i)
            if key is None:
                return False
            with self._lock:
                validated = self._seen.get(key, UNKNOWN)
            if validated is UNKNOWN:
                try:
                    validated = _validated_form(key, rec.values[i], out[i])
                except TypeError:
                    return False
            found[i] = validated
        return True

    def _remember(self, key: bytes, validated: bytes | _Reordered | None) -> None:
        size = len(key) + _size(validated)
        if size > self._max:
            return
        with self._lock:
            if key in self._seen:
                return
            self._seen[key] = validated
            self._bytes += size
            while self._bytes > self._max:
                oldest = next(iter(self._seen))
                was = self._seen.pop(oldest)
                self._bytes -= len(oldest) + _size(was)

    def clear(self) -> None:
        """Forget everything, the counts too."""
        with self._lock:
            self._seen.clear()
            self._bytes = 0
            self._lists.clear()
            self._list_bytes = 0
            self.hits = self.misses = 0
