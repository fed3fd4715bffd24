"""What a restored relevance index checks each index entry against, and how it is stored.

A document's terms depend on its folder's text and on the entry's title, keywords,
events, persons, locations and score mode (`RelevanceIndex._field_counts`); its score
also on α. The text is immutable per folder, but a folder id can be handed out again
after a rollback and a restart: its creation time and idempotency key (a digest of the
archived span) tell the new folder from the old. An entry's key is all of these, as
they are (two keys that differ only by a spelling, `null` or `[]`, have a folder indexed
again, never let a change pass).

A snapshot stores the keys of its live documents in document order, as JSON, in chunks
of :data:`CHUNK` documents: the first sync after a restore encodes the store's entries
the same way and compares chunk by chunk, so an unchanged store costs one JSON encoding
of its keys (10^5 entries in tens of milliseconds; one encoding per entry costs ten
times that), and a change costs decoding only its chunk.
"""

from __future__ import annotations

import gc
import operator
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

__all__ = [
    "CHUNK",
    "KEY_FIELDS",
    "StoredFields",
    "StoredKeys",
    "collection_paused",
    "entry_keys",
]

KEY_FIELDS = (
    "id",
    "scored",
    "alpha",
    "createdAt",
    "idempotencyKey",
    "title",
    "keywords",
    "events",
    "persons",
    "locations",
    "scoreMode",
)
ID, SCORED, ALPHA = 0, 1, 2
TEXT = 3  # the key from here on: what the document's terms depend on ...
FIELDS = 5  # ... of which the text's identity comes first
CHUNK = 256

_get_key = operator.attrgetter(*KEY_FIELDS)
key_id = operator.itemgetter(ID)
key_scored = operator.itemgetter(SCORED)


@contextmanager
def collection_paused() -> Iterator[None]:
    """The cyclic garbage collector held off while a batch of keys is made: 10^5 new
    tuples set off collections that scan every object of the daemon (three quarters of
    the keys' cost at 10^5 folders), and tuples of an entry's values make no cycle. A
    collection another thread asks for still runs; the collector's state is put back."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def entry_keys(entries: Sequence[Any]) -> list[tuple[Any, ...]]:
    """Each entry's key (module docstring): its values of :data:`KEY_FIELDS`."""
    try:
        return list(map(_get_key, entries))
    except AttributeError:  # entries without every field (tests, tools): the slow way
        return [tuple(getattr(e, f, None) for f in KEY_FIELDS) for e in entries]


@dataclass(frozen=True, slots=True)
class StoredFields:
    """An entry as a snapshot stored it: enough to take its document out again
    (`RelevanceIndex._kill` recounts its field terms)."""

    title: str | None
    keywords: list[str] | None
    events: list[str] | None
    persons: list[str] | None
    locations: list[str] | None
    scoreMode: str | None  # the index entry's field name

    @classmethod
    def of(cls, key: Any) -> StoredFields:
        if not isinstance(key, list) or len(key) != len(KEY_FIELDS):
            raise ValueError("not an entry key")
        return cls(*key[FIELDS:])


@dataclass(frozen=True, slots=True)
class StoredKeys:
    """The keys of a snapshot's live documents, in document order, chunk by chunk."""

    blob: bytes
    offsets: npt.NDArray[np.int64]  # chunk k is blob[offsets[k]:offsets[k + 1]]
    count: int  # keys
    size: int  # keys per chunk

    @classmethod
    def encode(cls, keys: Sequence[tuple[Any, ...]]) -> StoredKeys:
        size = CHUNK
        chunks = [orjson.dumps(keys[a : a + size]) for a in range(0, len(keys), size)]
        offsets = np.zeros(len(chunks) + 1, dtype=np.int64)
        np.cumsum([len(c) for c in chunks], out=offsets[1:])
        return cls(b"".join(chunks), offsets, len(keys), size)

    @classmethod
    def of(cls, blob: bytes, offsets: npt.NDArray[np.int64], count: int, size: int) -> StoredKeys:
        cls.check_layout(offsets, count, size, len(blob))
        return cls(blob, offsets, count, size)

    @staticmethod
    def check_layout(offsets: npt.NDArray[np.int64], count: int, size: int, nbytes: int) -> None:
        """Raise ValueError unless `count` keys in chunks of `size` at `offsets` fill
        `nbytes` bytes: checkable before the bytes are read."""
        if size < 1:
            raise ValueError("stored keys without a chunk size")
        chunks = -(-count // size)
        if (
            offsets.size != chunks + 1
            or (offsets.size and (offsets[0] != 0 or offsets[-1] != nbytes))
            or bool((offsets[1:] < offsets[:-1]).any())
        ):
            raise ValueError("stored keys do not fit their chunks")

    @property
    def chunks(self) -> int:
        return int(self.offsets.size) - 1

    def keys_in(self, k: int) -> int:
        return min(self.size, self.count - k * self.size)

    def chunk(self, k: int) -> bytes:
        return self.blob[int(self.offsets[k]) : int(self.offsets[k + 1])]

    def decode(self, k: int) -> list[Any]:
        """Chunk k's keys, as JSON gives them back (lists)."""
        keys = orjson.loads(self.chunk(k))
        want = self.keys_in(k)
        if not isinstance(keys, list) or len(keys) != want:
            raise ValueError("a stored key chunk does not fit its documents")
        return keys
