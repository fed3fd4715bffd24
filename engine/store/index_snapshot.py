"""``index.json`` as read, kept beside it, so that opening a large store parses nothing.

Opening a store turned every row of ``index.json`` into its entry (parsing and
validating 10^5 rows: 3–5 s on a busy 2-core machine, the largest part of a restart).
What that gives depends on the file's bytes alone, so it is kept, as the entries'
values (`marshal`: read back at C speed, a tenth of the time), in a snapshot named by
the digest of the bytes it was made from. Opening reads ``index.json``, hashes it
(SHA-256: tens of milliseconds at 10^5 rows) and takes the snapshot's entries only when
the digest is the file's; anything else (another writer, a rewrite since, a damaged or
foreign snapshot) parses the file, as ever. The index log and recovery then run over the
entries exactly as over parsed ones. It is derived data, safe to delete.

The snapshot is written when a session is unloaded (eviction, ``agent/disposed``,
shutdown: :func:`save_index_snapshot`, in the daemon's snapshot thread), when the file
changed since the last one. It is made from the file's bytes, with the entries in
memory as hints: each row whose text is the one the store would write for its entry in
memory is that entry (an entry gives its row back exactly), and any other row (one the
index log changed since, or another writer's) is parsed; so the snapshot is what parsing
the file gives, whatever the store did meanwhile.

The file: 8 bytes magic, 8 bytes little-endian header length, the header (JSON: format,
:func:`fingerprint`, the SHA-256 and size of the ``index.json`` it stands for, the size
and CRC-32 of the payload), then the payload: `marshal` of the entries' values by
column (one tuple per field: the entries are made from them in one pass, and no
per-row tuple is made only to be copied and dropped), the refused rows (their place and
the text recovery reports for them) and the file's top-level extras. It is written
whole through `engine.jsonio.write_bytes_atomic`.

Why it is read as it is: ``index.json`` is hashed a block at a time
(`hashlib.file_digest`) and the snapshot is mapped, not read into one bytes object. A
freed buffer of tens of megabytes stays in glibc malloc's heap (its mmap threshold
rises to the largest block freed), and the daemon's resident size kept that peak.
Recovery starts the hash in a worker thread before it lists the store's directory
(:func:`identity_ahead`): hashing and reading the file release the interpreter lock, so
both go on at once (a store open at 10^5 folders: 0.57 → 0.50 s here).
"""

from __future__ import annotations

import functools
import hashlib
import marshal
import mmap
import struct
import sys
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from engine.concurrent_io import LazyPool
from engine.jsonio import write_bytes_atomic
from engine.store.index_entry import IndexEntry, entry_from_row
from engine.store.index_stats import StatsSeed
from engine.store.indexfile import IndexStatus, encode_index, parse_index, row_spans
from engine.store.layout import SessionPaths
from engine.store.records import INDEX_FIELDS

__all__ = [
    "DERIVED_SNAPSHOTS",
    "SNAPSHOT_NAME",
    "Identity",
    "LoadedIndex",
    "checked_entry",
    "fingerprint",
    "identity_ahead",
    "load_index_entries",
    "read_index_entries",
    "save_index_snapshot",
    "snapshot_path",
]

FORMAT = 2
MAGIC = b"RFMDIRX\x00"
SNAPSHOT_NAME = ".index-rows.snapshot"
"""In the session directory: a dot-file, which recovery and every listing leave alone."""
DERIVED_SNAPSHOTS = (".relevance-index.snapshot", ".recall-index.snapshot", SNAPSHOT_NAME)
"""Every derived index file of a session directory (the relevance index's, the recall
candidate index's, this one; each module names its own, a test holds them to this
list): what a rewrite of the session's text deletes (they hold its words) and a backup
leaves out (the daemon makes them again)."""
SNAPSHOT_MIN_ROWS = 1024
"""Below this many rows no snapshot is written (parsing them takes milliseconds)."""
_HEAD = struct.Struct("<8sQ")
_MAX_HEADER = 1 << 16
_UTF8_BOM = b"\xef\xbb\xbf"
_PROBE = {
    "id": "mem-20260101T000000Z-0001",
    "createdAt": 1767225600000,
    "alpha": 1,
    "beta": -2.5,
    "scored": True,
    "keywords": ["星港", "Gateway"],
    "title": "probe",
    "timeTags": [{"text": "昨天", "start": 1}],
    "custom": {"kept": [1, 2]},
}
_new = tuple.__new__
_WIDTH = len(INDEX_FIELDS) + 3
"""The values of an entry: its fields, then how it gives its row back."""


def snapshot_path(paths: SessionPaths) -> Path:
    """Where the snapshot of the store's ``index.json`` lives."""
    return paths.dir / SNAPSHOT_NAME


def checked_entry(item: Any) -> IndexEntry | str:
    """A row of ``index.json`` as its entry, or (refused) the id it names, as text."""
    try:
        return IndexEntry.model_validate(item)
    except ValidationError:
        return str(item.get("id") if isinstance(item, dict) else None)


@functools.cache
def fingerprint() -> str:
    """What the stored values depend on besides the file: this Python's `marshal`, the
    entry's fields, and what validation makes of a probe row (its values, the
    layout it keeps)."""
    facts = {
        "format": FORMAT,
        "python": list(sys.version_info[:2]),
        "marshal": marshal.version,
        "fields": list(INDEX_FIELDS),
        "probe": list(entry_from_row(dict(_PROBE))),
    }
    return hashlib.blake2b(orjson.dumps(facts), digest_size=16).hexdigest()


def _identity(data: bytes) -> dict[str, Any]:
    return {"index": hashlib.sha256(data).hexdigest(), "size": len(data)}


def _file_identity(path: Path) -> dict[str, Any] | None:
    """:func:`_identity` of the file at `path`, hashed a block at a time (no copy of it
    in memory); None when it cannot be read."""
    try:
        with path.open("rb") as f:
            digest = hashlib.file_digest(f, "sha256")
            size = f.tell()
    except OSError:
        return None
    return {"index": digest.hexdigest(), "size": size}


Identity = Callable[[], dict[str, Any] | None]
"""A call that gives :func:`_identity` of ``index.json`` (None: it cannot be read)."""

_hashers = LazyPool("rofmd-hash", 2)


def identity_ahead(paths: SessionPaths) -> Identity:
    """Start hashing ``index.json`` in a worker thread; the call returned waits for the
    identity (:func:`load_index_entries` takes it). Hashing a large file holds no lock
    the caller needs, so whatever the caller does meanwhile costs no time of its own."""
    return _hashers().submit(_file_identity, paths.index).result


def read_index_entries(paths: SessionPaths) -> tuple[list[Any], dict[str, Any], IndexStatus]:
    """Each row of ``index.json`` as :func:`checked_entry` makes it, the top-level extras
    and the file's status: what ``read_index(paths, checked_entry)`` gives, from the
    snapshot when it stands for the file's bytes (module docstring). Blocking."""
    loaded = load_index_entries(paths)
    return loaded.entries, loaded.extra, loaded.status


@dataclass(slots=True)
class LoadedIndex:
    """What :func:`load_index_entries` read."""

    entries: list[Any]
    """Each row as :func:`checked_entry` makes it."""
    extra: dict[str, Any]
    """The file's top-level extras."""
    status: IndexStatus
    source: str | None = None
    """What the entries are a function of: the file's bytes (their SHA-256 and size) and
    the code that read them (:func:`fingerprint`), as one string; None when the file was
    missing or unreadable."""
    seed: StatsSeed | None = None
    """The entries' index counters picked out by column, when they came from the
    snapshot (`engine.store.index_stats.StatsSeed`)."""


def load_index_entries(paths: SessionPaths, identity_of: Identity | None = None) -> LoadedIndex:
    """:func:`read_index_entries`, with what the entries are a function of and, from the
    snapshot, their counters' seed (:class:`LoadedIndex`). `identity_of`: the file's
    identity as :func:`identity_ahead` started working it out (else it is worked out
    now)."""
    if not paths.index.exists():
        return LoadedIndex([], {}, "missing")
    identity = _file_identity(paths.index) if identity_of is None else identity_of()
    if identity is not None:
        cached = _cached(snapshot_path(paths), identity)
        if cached is not None:
            entries, extra, seed = cached
            return LoadedIndex(entries, extra, "ok", _source(identity), seed)
    try:
        data = paths.index.read_bytes()
    except FileNotFoundError:
        return LoadedIndex([], {}, "missing")
    except OSError:
        return LoadedIndex([], {}, "corrupt")
    entries, extra, status = parse_index(data, checked_entry)
    return LoadedIndex(entries, extra, status, _source(_identity(data)) if status == "ok" else None)


def _source(identity: dict[str, Any]) -> str:
    return f"{fingerprint()}:{identity['index']}:{identity['size']}"


@contextmanager
def _mapped(path: Path) -> Iterator[memoryview | None]:
    """The file's bytes, mapped read-only (None: unreadable or empty); unmapped after."""
    try:
        with path.open("rb") as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        yield None
        return
    view = memoryview(mapped)
    try:
        yield view
    finally:
        view.release()
        mapped.close()


def _payload(blob: memoryview, identity: dict[str, Any]) -> memoryview | None:
    """The snapshot's payload when the file is whole (its CRC), this code's and made
    from the file `identity` names; else None."""
    if len(blob) < _HEAD.size:
        return None
    magic, size = _HEAD.unpack_from(blob)
    if magic != MAGIC or size > _MAX_HEADER or _HEAD.size + size > len(blob):
        return None
    try:
        header = orjson.loads(blob[_HEAD.size : _HEAD.size + size])
    except orjson.JSONDecodeError:
        return None
    payload = blob[_HEAD.size + size :]
    if (
        not isinstance(header, dict)
        or header.get("format") != FORMAT
        or header.get("fingerprint") != fingerprint()
        or {k: header.get(k) for k in identity} != identity
        or header.get("payload") != [len(payload), zlib.crc32(payload)]
    ):
        return None
    return payload


def _stands_for(path: Path, identity: dict[str, Any]) -> bool:
    with _mapped(path) as blob:
        return blob is not None and _payload(blob, identity) is not None


def _cached(
    path: Path, identity: dict[str, Any]
) -> tuple[list[Any], dict[str, Any], StatsSeed | None] | None:
    """The snapshot's entries, extras and the entries' counters' seed when it stands for
    the file `identity` names (:func:`_payload`); else None."""
    with _mapped(path) as blob:
        payload = None if blob is None else _payload(blob, identity)
        if payload is None:
            return None
        try:
            loaded = marshal.loads(payload)
        except (ValueError, EOFError, TypeError):
            return None
        finally:
            payload.release()
    return _entries_of(loaded)


_SCORED_AT, _MARKED_AT, _EVENTS_AT, _EVENT_AT = (
    INDEX_FIELDS.index(name) for name in ("scored", "rescorePending", "events", "event")
)


def _seed(entries: list[Any], columns: tuple[tuple[Any, ...], ...]) -> StatsSeed:
    """The counters' seed of `entries`, picked by the columns they were made from: a
    column is one tuple, read in one sweep, where each entry's field is a pointer away."""
    return StatsSeed.of_columns(
        entries,
        columns[_SCORED_AT],
        columns[_MARKED_AT],
        columns[_EVENTS_AT],
        columns[_EVENT_AT],
    )


def _entries_of(loaded: Any) -> tuple[list[Any], dict[str, Any], StatsSeed | None] | None:
    """The entries (refused rows as their text, in place), extras and, when no row was
    refused, the entries' counters' seed (:func:`_seed`) of a payload."""
    if not isinstance(loaded, tuple) or len(loaded) != 3:
        return None
    columns, refused, extra = loaded
    if (
        type(columns) is not tuple
        or len(columns) != _WIDTH
        or type(refused) is not tuple
        or not isinstance(extra, dict)
    ):
        return None
    count = len(columns[0])
    if any(type(c) is not tuple or len(c) != count for c in columns):
        return None
    entries: list[Any] = list(map(_new, repeat(IndexEntry), zip(*columns, strict=True)))
    seed = None if refused else _seed(entries, columns)
    for item in refused:
        if (
            type(item) is not tuple
            or len(item) != 2
            or type(item[0]) is not int
            or type(item[1]) is not str
            or not 0 <= item[0] <= len(entries)
        ):
            return None
        entries.insert(item[0], item[1])
    return entries, extra, seed


def save_index_snapshot(
    paths: SessionPaths, entries: Sequence[IndexEntry], source: str | None = None
) -> int | None:
    """Write the snapshot of the store's ``index.json`` as it is now, with `entries` (the
    store's, in index order) as hints (module docstring); its size, None when there was
    nothing to write (no file, a small one, or the snapshot stands for it already).
    `source`: the store's `loaded_from` (what its entries are a function of, as opened);
    when it names the file as it is now, `entries` are what parsing it gives, and it is
    not parsed. Blocking; raises OSError when the disk refuses."""
    try:
        data = paths.index.read_bytes()
    except FileNotFoundError:
        return None
    identity = _identity(data)
    path = snapshot_path(paths)
    if _stands_for(path, identity):
        return None  # it stands for the file already
    text = data[len(_UTF8_BOM) :] if data.startswith(_UTF8_BOM) else data
    del data
    extra = _extras(text) if source is not None and source == _source(identity) else None
    parsed = (entries, extra) if extra is not None else _parsed(text, entries)
    del text
    if parsed is None or len(parsed[0]) < SNAPSHOT_MIN_ROWS:
        return None
    rows, extra = parsed
    if all(map(isinstance, rows, repeat(IndexEntry))):
        refused: tuple[tuple[int, str], ...] = ()
        columns = tuple(zip(*rows, strict=True))
    else:
        refused = tuple((n, e) for n, e in enumerate(rows) if not isinstance(e, IndexEntry))
        kept = [e for e in rows if isinstance(e, IndexEntry)]
        columns = tuple(zip(*kept, strict=True))
    payload = marshal.dumps((columns or ((),) * _WIDTH, refused, extra))
    del columns
    header = {
        "format": FORMAT,
        "fingerprint": fingerprint(),
        **identity,
        "payload": [len(payload), zlib.crc32(payload)],
    }
    raw = orjson.dumps(header)
    blob = _HEAD.pack(MAGIC, len(raw)) + raw + payload
    write_bytes_atomic(path, blob)
    return len(blob)


def _extras(data: bytes) -> dict[str, Any] | None:
    """The top-level extras of an index file (its document without the rows; None when
    it is not in the layout the store writes: then it is parsed)."""
    cut = row_spans(data)
    return None if cut is None else {k: v for k, v in cut[0].items() if k != "folders"}


def _parsed(
    data: bytes, hints: Sequence[IndexEntry]
) -> tuple[Sequence[Any], dict[str, Any]] | None:
    """What parsing `data` gives (rows as :func:`checked_entry` makes them, extras), each
    row whose text is the one `hints` holds at its place taken from there; None when the
    file does not parse."""
    cut = row_spans(data)
    if cut is not None:
        rest, spans = cut
        extra = {k: v for k, v in rest.items() if k != "folders"}
        mine = encode_index((e.row() for e in hints), extra)
        if mine == data:
            return list(hints), extra  # the file is what the store writes for them
        ours = row_spans(mine)
        if ours is not None and len(ours[1]) == len(spans):
            view, other = memoryview(data), memoryview(mine)
            rows: list[Any] = []
            try:
                for (a, b), (c, d), hint in zip(spans, ours[1], hints, strict=True):
                    if view[a:b] == other[c:d]:
                        rows.append(hint)
                    else:
                        rows.append(checked_entry(orjson.loads(view[a:b])))
                return rows, extra
            except orjson.JSONDecodeError:
                pass  # parsed whole below, as a read does
    entries, extra, status = parse_index(data, checked_entry)
    return (entries, extra) if status == "ok" else None
