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

The memory holds at most :data:`MAX_BYTES` of JSON, least recently used first out, and
is emptied with the engine's memo caches when the daemon gives memory back
(:func:`forget_all`, ``rofmd.server.memory_release``): it refills with the next requests.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import orjson

__all__ = ["MAX_BYTES", "ValidatedOnce", "forget_all", "json_values"]

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
            if key in self._seen:
                validated = self._seen.pop(key)
                self._seen[key] = validated  # most recently used last
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
