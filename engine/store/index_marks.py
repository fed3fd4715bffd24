"""Index-only markers: fields written into ``index.json`` rows and never into a
``meta.json`` (reference §1.11: ``memory-audit --apply`` "只在 index.json 写 pendingEra 标记
(不动 meta.json)").

Why not :meth:`SessionStore.update_metas`: it writes each meta, and a marker must not
touch the meta. Why not a line of ``index.log.jsonl``: the log's last record is settled
at load by each folder's meta (the metas are written after the log line), and a field
the meta lacks would be dropped there. So a marker goes the way an archive commit writes
the index: the whole ``index.json`` rewritten atomically from the store's rows (which
folds the log in), then the log dropped, as :meth:`SessionStore._write_index` does. Rows
keep every other field byte for byte (:meth:`IndexEntry.row`). Later meta updates keep
the marker (:func:`~engine.store.records.index_row_from_meta` carries ``pendingEra`` over
from the row it replaces).

Crash safety: before the rename nothing changed; after it, ``index.json`` holds every row
with its marker, and a log a crash left behind applies to no row it names (each marked
row differs from the row the log recorded as its base), so recovery settles those rows
from their metas over the marked row, keeping the marker.

One process owns a session directory: a daemon serving the session keeps its own rows
and its next archive would write them back without the marker. Callers make sure none
is serving it (``rofmd audit --apply`` asks the daemon).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from engine.store.errors import FolderNotFoundError
from engine.store.index_entry import IndexEntry
from engine.store.indexfile import read_index, remove_index_log, write_index
from engine.store.session_store import SessionStore

__all__ = ["INDEX_ONLY_FIELDS", "write_index_marks"]

INDEX_ONLY_FIELDS: Final = frozenset({"pendingEra"})
"""The fields a marker may set: a field a meta also carries would be overwritten by the
next update of that meta."""


def write_index_marks(
    store: SessionStore, marks: Mapping[str, Mapping[str, Any]]
) -> tuple[SessionStore, list[str]]:
    """Set index-only fields (``marks``: folder id -> {field: value}; None removes the
    field) and write the index. Returns the store reopened from disk (``store`` no longer
    matches the files once anything was written: drop it) and the ids whose row changed.
    Raises ``ValueError`` for a field outside :data:`INDEX_ONLY_FIELDS` or a row that
    would not validate, :class:`FolderNotFoundError` for an id the index lacks; nothing is
    written then. Blocking."""
    for folder_id, fields in marks.items():
        if folder_id not in store:
            raise FolderNotFoundError(folder_id)
        unknown = set(fields) - INDEX_ONLY_FIELDS
        if unknown:
            raise ValueError(f"not an index-only field: {', '.join(sorted(unknown))}")
    rows: list[dict[str, Any]] = []
    changed: list[str] = []
    for entry in store.index:
        row = entry.row()
        change = marks.get(entry.id)
        if change:
            new = dict(row)
            for key, value in change.items():
                if value is None:
                    new.pop(key, None)
                else:
                    new[key] = value
            if new != row:
                IndexEntry.model_validate(new)  # raises before anything is written
                row = new
                changed.append(entry.id)
        rows.append(row)
    if not changed:
        return store, []
    store.materialize()
    _, extra, _ = read_index(store.paths)
    write_index(store.paths, rows, extra)
    if store.paths.index_log.exists():
        remove_index_log(store.paths)
    return SessionStore(store.paths, store.session_id), changed
