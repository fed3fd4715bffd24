"""Which archived images of one session a ``memory_image`` call names, and where they
are (reference "工具 memory_image", §1.7).

Everything it reads is in memory but the answer's files: the image table
(``images/index.json``, brought up to date first by
:meth:`~engine.store.SessionStore.refresh_image_index`) and the index entries give the
candidates and their folders' keywords, title and archive time; only the images answered
(at most ``limit``) are looked at on disk, one ``stat`` each. A row whose folder is not in
the index is never answered (the refresh rebuilds such a table).

Filters, all optional and all of them applying (AND):

* ``memory_id``: the folder id, exactly (an id this store does not have is
  ``unknown_memory``: the caller refuses it, as for another session's id);
* ``name``: a substring of the stored file name or of the host's original name
  (``originalName``), NFKC and case-folded;
* ``query``: its terms (split at whitespace and ``,，、;；``, de-duplicated, at most 16,
  as ``memory_recall`` splits its keywords) each hit a folder keyword the way recall
  matches keywords (``keywords.matchMode``, ``match.*``), the folder title (contained,
  Latin word boundaries respected) or a file name (substring); an image matches when a
  term hits.

Order: with a query, more terms hit first; then the most recently archived (folder
``createdAt``, then folder id, newest first); within a folder, the table's order (the
order the archive wrote them). No filter at all: the most recently archived images.

Paths are those the recall block expands a placeholder to (``store.image_path``: the
store's resolved directory, so a symlinked memory root is written through), with the
directory spelled as the file system lists it (:func:`on_disk_path`).
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.config import MemoryConfig
from engine.keywords import QUERY_KEYWORDS_MAX, contains_term, keys_match, match_key, match_text
from engine.store.ids import is_safe_name
from engine.store.index_entry import IndexEntry
from engine.store.records import ImageIndexEntry
from engine.store.session_store import SessionStore

__all__ = [
    "ImageFilter",
    "ImageHit",
    "ImageLookup",
    "find_images",
    "on_disk_path",
    "split_query",
]

_QUERY_SPLIT = re.compile(r"[\s,，、;；]+")


def split_query(query: str) -> tuple[list[str], int]:
    """Query terms in order, without repeats and capped at 16, and how many there were
    before the cap."""
    terms: list[str] = []
    for part in _QUERY_SPLIT.split(query):
        if part and part not in terms:
            terms.append(part)
    return terms[:QUERY_KEYWORDS_MAX], len(terms)


@dataclass(frozen=True, slots=True)
class ImageFilter:
    """What one call asks for (see the module docstring); ``limit`` is 1..20."""

    terms: tuple[str, ...] = ()
    memory_id: str | None = None
    name: str | None = None
    limit: int = 10

    @property
    def filtered(self) -> bool:
        return bool(self.terms) or self.memory_id is not None or self.name is not None


@dataclass(frozen=True, slots=True)
class ImageHit:
    """One answered image. ``bytes`` is the file's size when it exists, else the size
    recorded at archive time."""

    name: str
    path: str
    exists: bool
    memory_id: str
    created_at: int
    title: str
    media_type: str | None
    width: int | None
    height: int | None
    bytes: int | None
    original_name: str | None
    matched: tuple[str, ...]
    """The query terms that hit it (empty without a query)."""


@dataclass(frozen=True, slots=True)
class ImageLookup:
    hits: tuple[ImageHit, ...]
    total: int
    """Images that match, before ``limit``."""
    unknown_memory: bool = False
    """``memory_id`` names no folder of this store (nothing was searched)."""


def on_disk_path(path: Path) -> Path:
    """``path`` with each non-ASCII component spelled as its directory lists it.

    macOS may keep a name decomposed (NFD) while the path we were given, and every path
    built from it, is composed (NFC); both open the same file there, but the model should
    get the path the file system shows (reference §2.4: "返回的是程序读到的真实绝对路径").
    ASCII components have one spelling and are kept; so is a component whose directory
    cannot be listed or that has no entry of the same NFC form. Blocking: one listing per
    non-ASCII component.
    """
    out = Path(path.anchor)
    for part in path.parts[1:] if path.anchor else path.parts:
        out = out / (part if part.isascii() else _listed_name(out, part))
    return out


def _listed_name(parent: Path, part: str) -> str:
    try:
        names = os.listdir(parent)
    except OSError:
        return part
    if part in names:
        return part
    want = unicodedata.normalize("NFC", part)
    same = sorted(n for n in names if unicodedata.normalize("NFC", n) == want)
    return same[0] if same else part


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


class _Matcher:
    """The query terms against folders (cached per folder: they share many images)."""

    def __init__(self, terms: Sequence[str], cfg: MemoryConfig) -> None:
        self._fold_case = bool(cfg.match.expand_latin_case)
        self._mode = cfg.keywords.match_mode
        self._cjk = bool(cfg.match.cjk_bigram)
        self.terms = tuple(terms)
        self._keys = tuple(match_key(t, expand_latin_case=self._fold_case) for t in terms)
        self._names = tuple(_fold(t) for t in terms)
        self._folders: dict[str, frozenset[int]] = {}

    def _folder_hits(self, entry: IndexEntry) -> frozenset[int]:
        hits = self._folders.get(entry.id)
        if hits is None:
            keywords = [match_key(k, expand_latin_case=self._fold_case) for k in entry.keywords]
            title = match_text(entry.title, expand_latin_case=self._fold_case)
            hits = frozenset(
                i
                for i, key in enumerate(self._keys)
                if contains_term(title, key)
                or any(
                    keys_match(key, fk, mode=self._mode, cjk_bigram=self._cjk) for fk in keywords
                )
            )
            self._folders[entry.id] = hits
        return hits

    def matched(self, entry: IndexEntry, row: ImageIndexEntry) -> tuple[str, ...]:
        names = [_fold(row.name)]
        original = (row.model_extra or {}).get("originalName")
        if isinstance(original, str):
            names.append(_fold(original))
        folder = self._folder_hits(entry)
        return tuple(
            term
            for i, term in enumerate(self.terms)
            if i in folder or any(self._names[i] in n for n in names if self._names[i])
        )


def _name_hits(row: ImageIndexEntry, needle: str) -> bool:
    original = (row.model_extra or {}).get("originalName")
    names = [row.name, original] if isinstance(original, str) else [row.name]
    return any(needle in _fold(n) for n in names)


def find_images(store: SessionStore, flt: ImageFilter, cfg: MemoryConfig) -> ImageLookup:
    """The images ``flt`` names, best first, at most ``flt.limit``. Blocking (one stat per
    answered image, and listings of the memory root's non-ASCII directory names)."""
    if flt.memory_id is not None and flt.memory_id not in store:
        return ImageLookup(hits=(), total=0, unknown_memory=True)
    matcher = _Matcher(flt.terms, cfg) if flt.terms else None
    needle = _fold(flt.name) if flt.name else None
    found: list[tuple[ImageIndexEntry, IndexEntry, tuple[str, ...]]] = []
    for row in store.image_entries():
        if flt.memory_id is not None and row.folderId != flt.memory_id:
            continue
        if row.folderId not in store or not is_safe_name(row.name):
            continue  # a name the store would not write never leaves images/ (as in recall)
        if needle is not None and not _name_hits(row, needle):
            continue
        entry = store.get_entry(row.folderId)
        matched: tuple[str, ...] = ()
        if matcher is not None:
            matched = matcher.matched(entry, row)
            if not matched:
                continue
        found.append((row, entry, matched))
    # table order within a folder; Python's sort stays stable with reverse=True
    found.sort(key=lambda f: (len(f[2]), f[1].createdAt, f[1].id), reverse=True)
    images_dir = on_disk_path(store.paths.images_dir) if found else store.paths.images_dir
    hits = tuple(
        _hit(images_dir / store.image_path(row.name).name, row, entry, matched)
        for row, entry, matched in found[: flt.limit]
    )
    return ImageLookup(hits=hits, total=len(found))


def _hit(path: Path, row: ImageIndexEntry, entry: IndexEntry, matched: tuple[str, ...]) -> ImageHit:
    size = row.bytes
    try:
        st = path.stat()
    except OSError:
        exists = False
    else:
        exists = stat.S_ISREG(st.st_mode)
        size = st.st_size if exists else size
    original = (row.model_extra or {}).get("originalName")
    return ImageHit(
        name=row.name,
        path=str(path),
        exists=exists,
        memory_id=row.folderId,
        created_at=entry.createdAt,
        title=entry.title,
        media_type=row.mediaType,
        width=row.width,
        height=row.height,
        bytes=size,
        original_name=original if isinstance(original, str) else None,
        matched=matched,
    )
