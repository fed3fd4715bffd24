"""Typed models of the files in a session directory (reference §4).

Field names are the reference's (camelCase, ``alpha``/``beta`` for α/β) so a
memory directory written by the original plugin reads here and vice versa.

Compatibility rules, and why:

* Every model allows unknown fields and writes them back unchanged: a newer
  version (or a tool like ``memory-audit --apply`` writing ``pendingEra`` only
  into ``index.json``) may add fields we do not know, and a rewrite must not
  drop them.
* Optional fields default to ``None`` and are written **only when set**
  (``None`` is never written): old files without them stay byte-compatible in
  spirit and the reference's "有值才写" holds.
* Core fields (``alpha``, ``beta``, ``scored``, ``rescorePending``,
  ``keywords``, ``title``) have the defaults old data implies (β defaults to 0;
  ``scored`` missing means scored, as the reference tests ``scored !== false``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "INDEX_FIELDS",
    "FolderMeta",
    "ImageIndexEntry",
    "ImageRef",
    "IndexFields",
    "JournalImage",
    "JournalRecord",
    "JournalState",
    "index_row_from_meta",
    "to_json_dict",
]

_CONFIG = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False, populate_by_name=True)


def to_json_dict(model: BaseModel) -> dict[str, Any]:
    """Serialise a record for disk: known ``None`` fields omitted, extras kept.

    Extras are copied back verbatim (even ``null``) because they are not ours
    to interpret.
    """
    out = model.model_dump(mode="json", exclude_none=True)
    if model.model_extra:
        out.update(model.model_extra)
    return out


class ImageRef(BaseModel):
    """One entry of ``meta.images`` (reference §1.7): an archived image file."""

    model_config = _CONFIG

    name: str
    placeholder: str | None = None
    mediaType: str | None = None
    width: int | None = None
    height: int | None = None
    bytes: int | None = None
    attachmentId: str | None = None


class IndexFields(BaseModel):
    """The fields of an ``index.json`` entry, the recall-relevant subset of a meta, and
    how they are validated. The store holds each entry as an
    :class:`~engine.store.index_entry.IndexEntry` (one compact copy), made by this
    model's rules."""

    model_config = _CONFIG

    id: str
    createdAt: int
    alpha: float = 0.0
    beta: float = 0.0
    scored: bool = True
    rescorePending: bool = False
    keywords: list[str] = []
    title: str = ""
    pendingSince: int | None = None
    pendingEra: str | None = None
    scoreMode: str | None = None
    archivedByVersion: str | None = None
    archivedFrom: str | None = None
    eventStart: int | None = None
    eventEnd: int | None = None
    eventTimeSource: str | None = None
    event: str | None = None
    events: list[str] | None = None
    eventSource: str | None = None
    eventAt: int | None = None
    locations: list[str] | None = None
    persons: list[str] | None = None
    timeTags: list[dict[str, Any]] | None = None
    timeTagSource: str | None = None
    idempotencyKey: str | None = None
    assistantKeywords: list[str] | None = None
    """What the assistant said, as 「你说过」 channel phrases (`engine.assistant_keywords`);
    None: not extracted yet (a folder archived before the channel, until re-scored or
    back-filled)."""


class FolderMeta(IndexFields):
    """``mem-…/meta.json``: everything about one memory folder except its text.

    A meta is its index entry's fields plus what recall never needs without reading the
    folder. Times are epoch milliseconds. ``alphaSource`` / ``betaSource`` /
    ``keywordsSource`` are the reference's "three sources" (``pending`` /
    ``llm`` / ``heuristic``). The v1.4.0+ provenance, event-time, era and tag
    fields are optional.
    """

    alphaSource: str | None = None
    betaSource: str | None = None
    keywordsSource: str | None = None
    judgedAt: int | None = None
    reason: str | None = None
    images: list[ImageRef] | None = None


INDEX_FIELDS: tuple[str, ...] = tuple(IndexFields.model_fields)
"""Meta fields mirrored into ``index.json`` (what recall reads without disk I/O)."""


def index_row_from_meta(
    meta: FolderMeta, previous: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Derive the ``index.json`` row of a folder from its meta.

    Fields the index carries that the meta does not (``previous`` row: unknown
    fields, or an index-only ``pendingEra`` marker) are kept; every field the
    meta defines wins. A field the meta no longer has is dropped from the row.
    """
    meta_row = to_json_dict(meta)
    row: dict[str, Any] = {}
    if previous:
        row.update((k, v) for k, v in previous.items() if k not in INDEX_FIELDS)
        if "pendingEra" in previous and "pendingEra" not in meta_row:
            row["pendingEra"] = previous["pendingEra"]
    for key in INDEX_FIELDS:
        if key in meta_row:
            row[key] = meta_row[key]
    return row


class ImageIndexEntry(ImageRef):
    """One entry of ``images/index.json``: an image ref plus the folder that owns it."""

    folderId: str


JournalState = Literal["pending", "committed", "aborting"]


class JournalImage(BaseModel):
    """An image file a transaction writes, and the folder that owns it."""

    model_config = _CONFIG

    name: str
    folderId: str


class JournalRecord(BaseModel):
    """``.commit-<txnId>.json``: what one archive transaction writes.

    ``pending``: being written (a crash here → recovery adopts the complete
    folders). ``committed``: on disk and indexed, kept so the caller can still
    roll it back (``archive/abort``) until it finalizes. ``aborting``: a
    rollback started (a crash here → recovery finishes it).
    """

    model_config = _CONFIG

    version: int = 1
    txnId: str
    state: JournalState
    folders: list[str] = []
    images: list[JournalImage] = []
