"""The recall candidate index on disk, so that a restart or a reopen does not build it.

Building a session's candidate index works out every keyword's match key, every
folder's category classes and labels (5–9 s at 10^5 folders on a busy 2-core machine);
a snapshot holds what the build made of them (keys and postings, category postings,
each labelled folder's labels: `CandidateIndex.snapshot_parts`), so a restore only
makes the folders from their entries again (`CandidateIndex.restored`). It is derived
data: whatever is wrong with it, the index is built from the entries instead, and
nothing else reads it.

The file is the relevance snapshot's frame (`engine.relevance.snapshot.encode_sections`:
magic, JSON header, checksummed sections, CRC of the header), written whole through
`engine.jsonio.write_bytes_atomic` (a crash leaves the old file or the new one). It is
used only when it is whole, this code's (format and :func:`fingerprint`), the same
store's, built with the same index parameters (`index_params`), and built over the very
entries given: the header holds a digest of the indexed entries' fields that the index
reads (:func:`entries_digest`, one JSON encoding of them: tens of milliseconds at 10^5),
and any other entries (a folder archived, judged, hidden or removed since) make it
stale. Then :func:`read_index_snapshot` says why and the caller builds afresh (an index
it has in memory is updated in place instead, as ever).

The digest costs what it hashes (a quarter of a restore at 10^5, and UTF-8 copies of
every non-ASCII string it encodes, which orjson keeps in the strings), so a snapshot of
an index over a store's entries as opened (nothing hidden, nothing changed since) is
stamped instead with what those entries are a function of, `SessionStore.loaded_from`
(the SHA-256 and size of the ``index.json`` whose rows they are exactly, and the code
that read it); over a store opened again with the same stamp the entries are those it
was built over, and nothing is hashed. Any other entries are held to the digest (an
unstamped snapshot's), which a stamped one does not hold: they are stale.

Bump :data:`FORMAT` for any change of what the sections mean; a change of how keys or
labels are normalised changes the fingerprint by itself as far as its probe shows it.
"""

from __future__ import annotations

import functools
import hashlib
import operator
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

from engine.config import MemoryConfig
from engine.jsonio import write_bytes_atomic
from engine.keywords import match_key
from engine.recall.candidates import CandidateIndex, index_params
from engine.relevance.snapshot import SnapshotError, encode_sections, read_sections
from engine.scoring.events import folder_labels
from engine.scoring.labels import normalize_labels
from engine.store import SessionStore

__all__ = [
    "FORMAT",
    "SNAPSHOT_NAME",
    "encode_index_snapshot",
    "entries_digest",
    "fingerprint",
    "read_index_snapshot",
    "restored_index",
    "save_index_snapshot",
    "snapshot_due",
    "snapshot_path",
    "synced_index",
    "write_index_snapshot",
]

FORMAT = 2
MAGIC = b"RFMDCIX\x00"
SNAPSHOT_NAME = ".recall-index.snapshot"
"""In the session directory, beside the relevance snapshot: a dot-file, which the store,
its recovery and every listing leave alone."""
SNAPSHOT_MIN_DOCS = 256
"""Below this many folders no snapshot is written (a build takes milliseconds)."""
SNAPSHOT_MIN_CHANGES = 512
SNAPSHOT_CHANGE_SHARE = 32
"""While a session is loaded, its snapshot is rewritten once this many changes (and a
1/32 of its folders) piled up since the last, so that a crash leaves one not far
behind; it is always written when the session is unloaded."""

SIGNATURE_FIELDS = (
    "id",
    "alpha",
    "beta",
    "createdAt",
    "keywords",
    "title",
    "assistantKeywords",
    "event",
    "events",
    "locations",
    "persons",
)
"""The entry fields the index reads (`engine.recall.candidates._signature`)."""
_signature = operator.attrgetter(*SIGNATURE_FIELDS)
_PROBE_LABELS = ("我家", " 杭州市 ", "Hangzhou", "Mina", "小林的家", "未知", "")
_PROBE_WORDS = ("Ｒｅｄｉｓ集群", "API-Gateway", "星港 项目", "k8s", "Hello World", "喜欢吃辣")


def entries_digest(entries: Iterable[Any]) -> str:
    """A digest of the fields the index reads of each scored entry, in order (two lists
    of entries with the same digest give the same index). Raises TypeError for values
    JSON cannot hold (such entries are never snapshotted)."""
    scored = [e for e in entries if e.scored is not False]
    try:
        keys = list(map(_signature, scored))
    except AttributeError:  # entries without every field (tests, tools): the slow way
        keys = [tuple(getattr(e, f, None) for f in SIGNATURE_FIELDS) for e in scored]
    return hashlib.sha256(orjson.dumps(keys)).hexdigest()


@functools.cache
def fingerprint() -> str:
    """What a snapshot's contents depend on besides the entries and the parameters: how
    keywords become match keys and how labels are normalised (by a probe), the byte
    order and the format."""
    facts = {
        "format": FORMAT,
        "byteorder": sys.byteorder,
        "keys": [
            match_key(w, expand_latin_case=fold) for w in _PROBE_WORDS for fold in (False, True)
        ],
        "events": folder_labels(["马拉松", " Marathon "], "杭州马拉松"),
        "labels": [
            normalize_labels(_PROBE_LABELS, max_length=size, location=location)
            for size in (4, 16)
            for location in (False, True)
        ],
    }
    return hashlib.blake2b(orjson.dumps(facts), digest_size=16).hexdigest()


def _params(params: Any) -> Any:
    """Index parameters as the header holds them (JSON: tuples become lists)."""
    return orjson.loads(orjson.dumps(params))


def snapshot_path(store: SessionStore) -> Path:
    """Where the snapshot of `store`'s candidate index lives."""
    return store.dir / SNAPSHOT_NAME


def _owner(store: SessionStore) -> str:
    return str(store.dir)  # as the relevance snapshot names its store


def snapshot_due(index: CandidateIndex, *, unloading: bool = False) -> bool:
    """Whether a snapshot of `index` is worth writing now: it is large enough, holds
    unsaved changes, and it never had one, or is being unloaded (eviction,
    `agent/disposed`, shutdown), or enough changes piled up (the relevance snapshot's
    rule: `engine.relevance.folder_text.snapshot_due`)."""
    if len(index) < SNAPSHOT_MIN_DOCS or not index.unsaved or not index.unique_ids:
        return False
    if unloading or not index.saved:
        return True
    return index.unsaved >= max(SNAPSHOT_MIN_CHANGES, len(index) // SNAPSHOT_CHANGE_SHARE)


def encode_index_snapshot(
    index: CandidateIndex, *, owner: str, source: str | None = None
) -> tuple[bytes, int]:
    """The snapshot file of `index` and the changes it holds, copied under the index's
    lock. `source`: what its entries are a function of (`SessionStore.loaded_from`, the
    caller checked that the index is over all of them), stamped instead of the entries'
    digest. Raises ValueError for an index no snapshot can hold (folder ids not unique,
    entries JSON cannot encode)."""
    with index.lock:
        if not index.unique_ids:
            raise ValueError("folder ids are not unique")
        digest = None
        if source is None:
            try:
                digest = entries_digest(index.entries())
            except TypeError as exc:
                raise ValueError(f"entries cannot be encoded: {exc}") from None
        header = {
            "format": FORMAT,
            "fingerprint": fingerprint(),
            "owner": owner,
            "params": _params(index.params),
            "folders": len(index),
            "entries": digest,
            "source": source,
        }
        return encode_sections(MAGIC, header, index.snapshot_parts()), index.unsaved


def write_index_snapshot(
    path: Path,
    index: CandidateIndex,
    *,
    owner: str,
    source: str | None = None,
    write: Callable[[Path, bytes], None] = write_bytes_atomic,
) -> int:
    """Write `index`'s snapshot to `path` (atomically and durably); returns its size.
    Blocking; takes the index's lock only to copy it, so queries go on meanwhile. The
    changes it holds no longer count as unsaved. Raises ValueError as
    :func:`encode_index_snapshot` does."""
    data, taken = encode_index_snapshot(index, owner=owner, source=source)
    write(path, data)
    with index.lock:
        index.unsaved -= taken
        index.saved = True
    return len(data)


def save_index_snapshot(store: SessionStore, index: CandidateIndex) -> int | None:
    """Write the snapshot of `store`'s candidate index; its size, None when the store has
    no directory yet or the index cannot have one. Blocking; raises OSError when the
    disk refuses."""
    if not store.materialized:
        return None
    try:
        return write_index_snapshot(
            snapshot_path(store), index, owner=_owner(store), source=_source_of(store, index)
        )
    except ValueError:
        return None


_SCORED = operator.attrgetter("scored")


def _source_of(store: SessionStore, index: CandidateIndex) -> str | None:
    """`store.loaded_from` when `index` is over every scored entry of the store as
    opened (nothing hidden, nothing changed since), in order; else None."""
    source = store.loaded_from
    if source is None:
        return None
    with index.lock:
        mine = index.entries()
        every = store.index
        scored = [e for e, s in zip(every, map(_SCORED, every), strict=True) if s is not False]
        if len(mine) != len(scored) or any(map(operator.is_not, mine, scored)):
            return None
    return source if store.loaded_from == source else None


def restored_index(
    store: SessionStore, entries: Sequence[Any], cfg: MemoryConfig, version: Any = None
) -> tuple[CandidateIndex | None, str | None]:
    """The candidate index of `store`'s snapshot over `entries` (the store's visible
    entries), or None and why not (None and None: there is none). Blocking."""
    source = store.loaded_from if entries is store.index else None
    try:
        index = read_index_snapshot(
            snapshot_path(store), entries, cfg, owner=_owner(store), version=version, source=source
        )
    except FileNotFoundError:
        return None, None
    except (SnapshotError, OSError) as exc:
        return None, str(exc)
    return index, None


def read_index_snapshot(
    path: Path,
    entries: Sequence[Any],
    cfg: MemoryConfig,
    *,
    owner: str,
    version: Any = None,
    source: str | None = None,
) -> CandidateIndex:
    """The index stored at `path`, over `entries` (what a build over them gives). Raises
    FileNotFoundError when there is none and :class:`SnapshotError` (with the reason)
    when it cannot be used (damaged, another version's, store's or parameters', or built
    over other entries). `source`: what `entries` (all of a store's, as opened) are a
    function of (`SessionStore.loaded_from`); a snapshot stamped with the same was built
    over them, and their digest is not worked out. Blocking."""
    params = _params(index_params(cfg))

    def check(header: dict[str, Any]) -> None:
        if header.get("format") != FORMAT or header.get("fingerprint") != fingerprint():
            raise SnapshotError("written by another version")
        if header.get("owner") != owner:
            raise SnapshotError("built over another store")
        if header.get("params") != params:
            raise SnapshotError("built with other index parameters")
        if source is not None and header.get("source") == source:
            return  # built over the very entries `source` makes
        try:
            digest = entries_digest(entries)
        except TypeError:
            digest = None
        if header.get("entries") != digest:
            raise SnapshotError("built over other entries (stale)")

    arrays = read_sections(path, MAGIC, "a recall index snapshot", check)
    try:
        return CandidateIndex.restored(entries, cfg, arrays, version)
    except (KeyError, ValueError, IndexError, UnicodeDecodeError, TypeError) as exc:
        raise SnapshotError(f"inconsistent arrays: {exc!r}") from None


def synced_index(
    cached: CandidateIndex | None,
    store: SessionStore,
    entries: Sequence[Any],
    cfg: MemoryConfig,
    version: Any = None,
) -> tuple[CandidateIndex, str]:
    """The candidate index over `entries` (the store's entries recall may see): `cached`
    updated in place when it can be (`CandidateIndex.update`), else, when there is no
    index yet, the store's snapshot, else a build; and how it was made (``current``,
    ``updated``, ``restored``, ``built``, or ``built: <why the snapshot was not used>``).
    Every way gives what a build over `entries` gives. Blocking."""
    if cached is not None:
        if cached.version == version and cached.params == index_params(cfg):
            return cached, "current"
        if cached.update(entries, cfg, version):
            return cached, "updated"
        return CandidateIndex(entries, cfg, version), "built"
    restored, why = restored_index(store, entries, cfg, version)
    if restored is not None:
        return restored, "restored"
    return CandidateIndex(entries, cfg, version), "built" if why is None else f"built: {why}"
