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
one JSON encoding and one dictionary look-up per value, no validator call per value;
only the values not remembered go through pydantic (with their per-value memory). The
look-up is made once per request: :func:`recalled` makes it for the shape check of
``handlers.params.parse_params`` (a remembered value passed that check before, at the
same place) and hands it on to the list's validator.

The memory holds at most :data:`MAX_BYTES` of JSON, least recently used first out, and
is emptied with the engine's memo caches when the daemon gives memory back
(:func:`forget_all`, ``rofmd.server.memory_release``): it refills with the next requests.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import ValidationError

__all__ = ["MAX_BYTES", "Recalled", "ValidatedOnce", "forget_all", "json_values", "recalled"]

MAX_BYTES = 4 * 1024 * 1024
"""JSON bytes remembered per kind of value: the surfaces of eight sessions at a 128k-token
window (500 KB each)."""

_FROM_JSON: ContextVar[bool] = ContextVar("rofmd_params_from_json", default=False)


@contextmanager
def json_values() -> Iterator[None]:
    """Validation inside this block reads values parsed from a JSON line (see above)."""
    token = _FROM_JSON.set(True)
    try:
        yield
    finally:
        _FROM_JSON.reset(token)


_ALL: weakref.WeakSet[ValidatedOnce] = weakref.WeakSet()

UNKNOWN: Any = object()
"""A value the memory does not hold (:attr:`Recalled.found`)."""


@dataclass(slots=True)
class Recalled:
    """One look-up of a list of values: per value what the memory holds for it
    (:data:`UNKNOWN`, None: valid as it is, or the JSON of its validated form)."""

    values: list[Any]
    found: list[Any]

    def shape_view(self) -> list[Any]:
        """The list as the shape check still has to see it: remembered values passed it
        before, at this very place, and stand as ``None``."""
        return [v if f is UNKNOWN else None for v, f in zip(self.values, self.found, strict=True)]


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
    for name, memo in fields.items():
        values = raw.get(name)
        if type(values) is list:
            rec = memo.recall(values)
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
        self._seen: dict[bytes, bytes | None] = {}
        """JSON of a valid value -> JSON of its validated form (None: the same)."""
        self._bytes = 0
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
                return value if validated is None else orjson.loads(validated)
        out = handler(value)  # raises the validator's own errors
        self.misses += 1
        try:
            result = orjson.dumps(out)
        except TypeError:
            return out
        self._remember(key, None if result == key else result)
        return out

    def recall(self, values: list[Any]) -> Recalled:
        """What the memory holds for each of ``values``; those it holds become its most
        recently used (hits are counted by the validator that uses them)."""
        found: list[Any] = []
        with self._lock:
            for value in values:
                try:
                    key = orjson.dumps(value)
                except TypeError:
                    found.append(UNKNOWN)
                    continue
                # looked up while its bytes are fresh in the cache: the look-up compares
                # them with the remembered ones (the surface: 500 KB of each)
                found.append(self._touch(key))
        return Recalled(values, found)

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
            missing = [i for i, f in enumerate(rec.found) if f is UNKNOWN]
            if missing:
                try:
                    fresh = handler([value[i] for i in missing])
                except ValidationError:
                    return handler(value)
                for i, v in zip(missing, fresh, strict=True):
                    out[i] = v
            with self._lock:
                self.hits += len(value) - len(missing)
            for i, f in enumerate(rec.found):
                if f is not UNKNOWN and f is not None:
                    out[i] = orjson.loads(f)
            return out

        return validate

    def _remember(self, key: bytes, validated: bytes | None) -> None:
        size = len(key) + (len(validated) if validated is not None else 0)
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
                self._bytes -= len(oldest) + (len(was) if was is not None else 0)

    def clear(self) -> None:
        """Forget everything, the counts too."""
        with self._lock:
            self._seen.clear()
            self._bytes = 0
            self.hits = self.misses = 0
