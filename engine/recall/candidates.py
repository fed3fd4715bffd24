"""In-memory candidate index over a session's `index.json` (reference §1.3 step 2).

Built once per index version (and matching parameters) from the store's index
entries; a query then costs dictionary lookups, not a scan:

* only scored folders are indexed: `scored: false` never matches, never takes a
  slot and never bridges;
* every distinct folder keyword is a *key* (its `match_key`), with the postings
  (folder numbers) of the folders carrying it;
* "folder keyword inside a query keyword" (v1.3.0 direction): every substring of
  the query key up to the longest key length is looked up;
* "query keyword inside a folder keyword" (v1.4 direction): a character-bigram
  index over the keys gives the few keys that can contain the query key; each is
  verified with the exact rule of `engine.keywords.keys_match` (Latin word
  boundaries); `match.cjkBigram` uses the same bigram index;
* category expansion (`recall.categoryMatch`): folders with α ≥ `alphaMin` whose
  keywords or title contain a class word get a synthetic posting for the class; a
  query containing any word of the class seeds it;
* the 「你说过」 channel (`recall.assistantSaid.enabled`): each folder's `assistantKeywords`
  are matched on their own, never through the keyword postings (the reference's
  synthetic `\u0003asst:` postings: ordinary keywords never reach them), and only by a
  query asking the channel (`match_assistant`). They are one text, every folder's
  phrases back to back, built on the first such query (most sessions never ask one) and
  again on the first after a change: a query finds the folders its channel terms occur
  in with one regular-expression pass over that text (C speed: tens of milliseconds at
  10^5 folders, no per-term postings to build or keep), then counts the exact terms
  (`engine.assistant_keywords.channel_terms`) of those folders alone.

A *seed* is one query keyword (or one category class) with its posting: the folders
it hits. Rare seeds (posting length ≤ τ) drive the rareHigh and lowProbe lanes.

Incremental update (`CandidateIndex.update`): a store change (archive commit, judge,
rollback) is applied in place instead of rebuilding. The result is the index a fresh
build over the same entries gives: folder numbers are positions among the scored
entries in index order (legacy walks candidates in that order), postings are sorted
folder numbers, `by_id`, category postings and the longest key length are the same.
Only key ids (internal, never observable: `_keys_for` returns a set of them) may
differ. See `update` for the diff. The event / location / person labels of the same
folders (`CandidateIndex.tags`, `engine.recall.tag_index`) follow every update.

A session's first index after a restart or a reopen is its snapshot when that was made
over the same entries (`engine.recall.candidate_snapshot`: `snapshot_parts` / `restored`,
what a build over them gives), so only a store that changed meanwhile pays for a build.
A restore leaves its keyword part (`_KEYWORD_PART`: keys, postings, bigrams, category
postings) to be made from the snapshot's sections when first read: a ranked round that
scores reads the folders, their ids, the tags and the category classes only, and a ranked
session that is only asked questions never makes it (`_make_keywords`).

A query restricted to some folders (`Query.allowed`: the hard tag filter of a message
naming a known place or person, or memory_recall's constraints) matches only them, in
every direction and channel; the matches of later generations (hops, legacy's walk) are
built from other queries and stay unrestricted (the filters constrain the first).
"""

from __future__ import annotations

import itertools
import math
import operator
import re
import threading
from array import array
from bisect import bisect_left, bisect_right, insort
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, count, repeat
from operator import is_not
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

from engine.assistant_keywords import channel_terms
from engine.config import MemoryConfig
from engine.keywords import contains_term, keys_match, match_key, match_text
from engine.recall.assistant_said import AssistantQuery
from engine.recall.query import Query
from engine.recall.tag_index import KINDS, FolderTables, TagIndex, form_keys, tag_index_params
from engine.store.index_entry import IndexEntry
from engine.tokenizer import CJK_CLASS

__all__ = [
    "AssistantMatches",
    "CandidateIndex",
    "Folder",
    "FolderRow",
    "Matches",
    "MatchesOnce",
    "Seed",
    "index_params",
]

_CJK_PAIR = re.compile(f"[{CJK_CLASS}]{{2}}")


class Folder(Protocol):
    """What recall needs of one scored folder (from its index entry). A store's entry
    (`IndexEntry`: immutable, its fields validated) is its own folder, read by the same
    names: 10^5 tuples made on every build and restore were a third of a restore's time
    and a tenth of the index's memory. Any other entry (tests, tools; an entry whose β is
    -0.0, which recall reads as 0.0) gets a `FolderRow`."""

    @property
    def id(self) -> str: ...
    @property
    def alpha(self) -> float: ...
    @property
    def beta(self) -> float: ...
    @property
    def created_at(self) -> int: ...
    @property
    def keywords(self) -> Sequence[str]: ...
    @property
    def assistant(self) -> Sequence[str]: ...


class FolderRow(NamedTuple):
    """A `Folder` made from an entry's values (its keywords and phrases are the entry's
    own sequences)."""

    id: str
    alpha: float
    beta: float
    created_at: int
    keywords: Sequence[str]
    assistant: Sequence[str] = ()


@dataclass(slots=True)
class Seed:
    """One query keyword or category class and the folders it hits."""

    name: str
    kind: str  # "keyword" | "category"
    posting: set[int]


@dataclass(slots=True)
class Matches:
    """The candidate set C(Q) of one query."""

    seeds: list[Seed]
    candidates: set[int]
    hits: dict[int, int] = field(default_factory=dict)  # folder -> distinct keywords hit
    categories: list[str] = field(default_factory=list)


class MatchesOnce:
    """`CandidateIndex.match` of one query, made the first time it is asked for, then
    kept: a `ranked` round reads the keyword candidates only when nothing scores (its
    fallback) or nothing was picked (its telemetry), and making them was a third to a half
    of such a round (every folder a common query keyword hits, one by one: 0.4 ms a round
    at 10⁴ folders, 1.5 ms at 10⁵, on average)."""

    __slots__ = ("_index", "_min_alpha", "_query", "_value")

    def __init__(self, index: CandidateIndex, query: Query, min_alpha: float) -> None:
        self._index = index
        self._query = query
        self._min_alpha = min_alpha
        self._value: Matches | None = None

    def __call__(self) -> Matches:
        if self._value is None:
            self._value = self._index.match(self._query, min_alpha=self._min_alpha)
        return self._value


@dataclass(slots=True)
class AssistantMatches:
    """The 「你说过」 channel's hits of one query: per folder number, the distinct channel
    terms it shares with the query and their weight Σ 1/ln(2 + df)."""

    terms: tuple[str, ...]
    hits: dict[int, int] = field(default_factory=dict)
    score: dict[int, float] = field(default_factory=dict)


def index_params(cfg: MemoryConfig) -> tuple[Any, ...]:
    """The configuration the index depends on (a change rebuilds it)."""
    cm = cfg.recall.category_match
    classes = tuple(
        (name, tuple(cls.words)) for name, cls in sorted(cm.classes.items()) if cls.words
    )
    return (
        cfg.keywords.match_mode,
        cfg.match.expand_latin_case,
        cfg.match.cjk_bigram,
        cm.enabled,
        cm.alpha_min,
        classes,
        cfg.recall.assistant_said.enabled,
        tag_index_params(cfg),
    )


def _bigrams(key: str) -> set[str]:
    return {key[i : i + 2] for i in range(len(key) - 1)}


def _signature(entry: Any) -> tuple[Any, ...]:
    """The fields of an index entry the index reads, as they are (cheap to build).

    Equal signatures give an equal `Folder`, keys, title and category classes: the
    fields are compared by value, and a zero α / β by its repr as well (0.0 == -0.0,
    but they are different floats).
    """
    a, b = entry.alpha, entry.beta
    return (
        entry.id,
        a or repr(a),
        b or repr(b),
        entry.createdAt,
        tuple(entry.keywords or ()),
        entry.title,
        tuple(getattr(entry, "assistantKeywords", None) or ()),
        getattr(entry, "event", None),
        tuple(getattr(entry, "events", None) or ()),
        tuple(getattr(entry, "locations", None) or ()),
        tuple(getattr(entry, "persons", None) or ()),
    )


_new = tuple.__new__


def _is_own_folder(entry: Any) -> bool:
    """Whether `entry` reads as its `Folder` (see there)."""
    return type(entry) is IndexEntry and not _negative_zero(entry.beta)


def _negative_zero(value: float) -> bool:
    return value == 0.0 and math.copysign(1.0, value) < 0


def _make_folder(entry: Any) -> Folder:
    if _is_own_folder(entry):
        own: Folder = entry
        return own
    folder: FolderRow = _new(
        FolderRow,
        (
            entry.id,
            float(entry.alpha),
            float(entry.beta or 0.0),
            int(entry.createdAt),
            entry.keywords or (),
            getattr(entry, "assistantKeywords", None) or (),
        ),
    )
    return folder


_ID = operator.attrgetter("id")
_SCORED = operator.attrgetter("scored")
_BETA = operator.attrgetter("beta")


def _make_folders(entries: list[Any]) -> list[Folder]:
    """`_make_folder` of each entry; for the store's entries (`IndexEntry`) the entries
    themselves, at C speed, but for the few whose β is zero and -0.0."""
    if not entries or set(map(type, entries)) != {IndexEntry}:
        return list(map(_make_folder, entries))
    folders: list[Folder] = list(entries)
    for n in compress(count(), map(operator.not_, map(_BETA, entries))):  # β is ±0.0
        folders[n] = _make_folder(entries[n])  # itself, or a row for -0.0
    return folders


CHANNEL_SEP = "\x00"
"""Between a folder's phrases in the channel text (and, as ``\x01``, between folders):
no channel term holds a control character, so no match spans two phrases."""


def _folder_terms(folder: Folder) -> frozenset[str]:
    return frozenset(t for p in folder.assistant for t in channel_terms(p))


def _first_other(a: Iterable[Any], b: Iterable[Any], default: int) -> int:
    """Index of the first position where `a` and `b` hold different objects (at C
    speed), else `default`."""
    return next(compress(count(), map(is_not, a, b)), default)


def _offsets(lengths: Iterable[int]) -> array[int]:
    """Where each of a run of pieces of these lengths starts, and the end."""
    out = array("q", [0])
    total = 0
    for n in lengths:
        total += n
        out.append(total)
    return out


def _strings(prefix: str, items: list[str]) -> dict[str, tuple[str, list[Any]]]:
    """Strings as two sections: their UTF-8 back to back, and each one's length."""
    return {
        f"{prefix}.text": ("u1", ["".join(items).encode()]),
        f"{prefix}.len": ("i4", [array("i", map(len, items))]),
    }


def _check_numbers(numbers: array[Any], bound: int, what: str) -> None:
    values = np.frombuffer(numbers, dtype=np.int32)
    if values.size and (int(values.min()) < 0 or int(values.max()) >= bound):
        raise ValueError(f"{what} is out of range")


def _pieces(
    arrays: Mapping[str, array[Any]], prefix: str, count: int, bound: int
) -> list[array[Any]]:
    """Section `prefix.n` (numbers below `bound`) cut at the offsets `prefix.at` into
    `count` arrays."""
    numbers = arrays[f"{prefix}.n"] if f"{prefix}.n" in arrays else arrays[f"{prefix}.k"]
    at = arrays[f"{prefix}.at"].tolist()
    if len(at) != count + 1 or at[0] != 0 or at[-1] != len(numbers) or at != sorted(at):
        raise ValueError(f"{prefix}: offsets do not fit")
    _check_numbers(numbers, bound, prefix)
    return list(map(numbers.__getitem__, map(slice, at[:-1], at[1:])))


def _read_strings(arrays: Mapping[str, array[Any]], prefix: str) -> list[str]:
    text = arrays[f"{prefix}.text"].tobytes().decode()
    lengths = arrays[f"{prefix}.len"].tolist()
    if sum(lengths) != len(text) or (lengths and min(lengths) < 0):
        raise ValueError(f"{prefix}: lengths do not fit the text")
    ends = list(itertools.accumulate(lengths))
    return list(map(text.__getitem__, map(slice, [0, *ends[:-1]], ends)))


_KEYWORD_PART = ("_keys", "_key_ids", "_postings", "_key_lens", "_max_key", "_bigram", "categories")
"""What a restored index makes on first use (`CandidateIndex.restored`)."""
_KEYWORD_SECTIONS = (
    "k.text",
    "k.len",
    "p.at",
    "p.n",
    "g.text",
    "g.len",
    "g.at",
    "g.k",
    "c.text",
    "c.len",
    "c.at",
    "c.n",
)
"""The snapshot sections it is made from."""


def _keyword_part(arrays: Mapping[str, array[Any]], count: int) -> tuple[Any, ...]:
    """The keyword part (`_KEYWORD_PART`, in order) that `snapshot_parts` stored for
    `count` folders. Raises ValueError (or KeyError, IndexError) when it does not fit."""
    keys = _read_strings(arrays, "k")
    postings = _pieces(arrays, "p", len(keys), count)
    key_ids = dict(zip(keys, range(len(keys)), strict=True))
    if len(key_ids) != len(keys) or "" in key_ids:
        raise ValueError("an empty or repeated key")
    key_lens = Counter(map(len, keys))
    grams = _read_strings(arrays, "g")
    bigram = dict(zip(grams, _pieces(arrays, "g", len(grams), len(keys)), strict=True))
    if any(len(g) != 2 for g in grams):
        raise ValueError("the bigram index does not fit the keys")
    names = _read_strings(arrays, "c")
    categories = dict(zip(names, map(set, _pieces(arrays, "c", len(names), count)), strict=True))
    return keys, key_ids, postings, key_lens, max(key_lens, default=0), bigram, categories


class CandidateIndex:
    """Postings by match key, a bigram index over the keys, and category postings."""

    tags: TagIndex
    """Events / locations / persons of the same folders, kept by the same updates."""

    def __init__(self, entries: Iterable[Any], cfg: MemoryConfig, version: Any = None) -> None:
        self._setup(cfg, version)
        indexed = self._entries
        folders = self.folders
        by_id = self.by_id
        tags = self.tags
        # a keyword's match key, worked out once per distinct keyword of the build (a
        # word recurs across thousands of folders), here and not in `match_key`'s
        # process-wide cache, which would keep 64k of them after the build (8 MB at 10^5
        # folders) for the lookups of later updates and questions
        key_of: dict[str, str] = {}
        for entry in entries:
            if entry.scored is False:
                continue
            indexed.append(entry)
            n = len(folders)
            folder = _make_folder(entry)
            folders.append(folder)
            by_id[entry.id] = n
            tags.add(entry)
            self._index_keys(n, folder, entry.title, key_of)
        self._unique_ids = len(by_id) == len(folders)
        self.unsaved = len(folders)

    def _index_keys(self, n: int, folder: Folder, title: str, key_of: dict[str, str]) -> None:
        """Folder `n`'s keys and category postings, as a build adds them (`key_of`: the
        build's match keys, by keyword)."""
        fold = self._fold
        keys: list[str] = []
        for kw in folder.keywords:
            key = key_of.get(kw)
            if key is None:
                key = key_of[kw] = match_text(kw, expand_latin_case=fold)
            keys.append(key)
        key_ids, postings = self._key_ids, self._postings
        seen: set[int] = set()
        for key in keys:
            if not key:
                continue
            kid = key_ids.get(key)
            if kid is None:
                kid = self._new_key(key)
            if kid not in seen:
                seen.add(kid)
                postings[kid].append(n)
        if self._category_re is not None:
            for name in self._classes_of(keys, folder.alpha, title):
                self.categories.setdefault(name, set()).add(n)

    def _setup(self, cfg: MemoryConfig, version: Any) -> None:
        """The empty index for `cfg` (what a build and a restore start from)."""
        self.version = version
        self.cfg = cfg
        """The configuration it was made for (its `params`)."""
        self.params = index_params(cfg)
        self.lock = threading.Lock()
        """Held by `update` and while a snapshot copies the index (queries only read it,
        so they never wait)."""
        self._keywords_later: Mapping[str, array[Any]] | None = None
        """A restore's keyword sections, until its keyword part is made (`_KEYWORD_PART`)."""
        self._keywords_lock = threading.Lock()
        self._mode = cfg.keywords.match_mode
        self._fold = cfg.match.expand_latin_case
        self._cjk_bigram = cfg.match.cjk_bigram
        self.folders: list[Folder] = []
        self.by_id: dict[str, int] = {}
        self._empty_keywords()
        # for `update`: the indexed entries by folder number
        self._entries: list[Any] = []
        self._unique_ids = True
        self.unsaved = 0
        """Folders added, changed or removed since the index was built, restored or
        written to its snapshot (`engine.recall.candidate_snapshot`)."""
        self.saved = False
        """Whether it came from, or was written to, a snapshot."""
        self._assistant = bool(cfg.recall.assistant_said.enabled)
        # the channel text and each folder's start in it (built on first use)
        self._channel: tuple[str, array[int]] | None = None
        self.tags = TagIndex(cfg)
        self._category_words: dict[str, list[str]] = {}
        self._category_re: re.Pattern[str] | None = None
        cm = cfg.recall.category_match
        self._alpha_min = cm.alpha_min
        if cm.enabled and cm.classes:
            for name, cls in sorted(cm.classes.items()):
                for word in cls.words:
                    wk = match_key(word, expand_latin_case=self._fold)
                    if wk:
                        self._category_words.setdefault(wk, []).append(name)
            if self._category_words:
                alts = sorted(self._category_words, key=lambda w: (-len(w), w))
                self._category_re = re.compile("(?=(" + "|".join(map(re.escape, alts)) + "))")

    def _empty_keywords(self) -> None:
        """The keyword part of an index of no folders (`_KEYWORD_PART`), and no freed key
        ids."""
        self._key_ids: dict[str, int] = {}
        self._keys: list[str] = []
        self._postings: list[array[int]] = []
        self._bigram: dict[str, array[int]] = {}
        self._max_key = 0
        self._key_lens: Counter[int] = Counter()
        """How many keys have each length (`update` keeps the longest)."""
        self._free_kids: list[int] = []
        """Key ids freed by keys that lost their last folder."""
        self.categories: dict[str, set[int]] = {}

    def _make_keywords(self) -> None:
        """Make the keyword part a restore left (`restored`), from its sections, or, if
        they do not fit the folders (a snapshot no writer makes: its checksums held),
        by indexing the folders' keywords again as a build does. Once, whichever thread
        reads it first; the others wait and see it whole."""
        with self._keywords_lock:
            arrays = self._keywords_later
            if arrays is None:
                return
            try:
                part = _keyword_part(arrays, len(self.folders))
            except (KeyError, ValueError, IndexError, UnicodeDecodeError, TypeError):
                part = self._keyword_part_built()
            for name, value in zip(_KEYWORD_PART, part, strict=True):
                setattr(self, name, value)
            self._keywords_later = None

    def _keyword_part_built(self) -> tuple[Any, ...]:
        """The keyword part of the folders held, made as a build makes it."""
        self._empty_keywords()
        key_of: dict[str, str] = {}
        for n, (entry, folder) in enumerate(zip(self._entries, self.folders, strict=True)):
            self._index_keys(n, folder, entry.title, key_of)
        return tuple(getattr(self, name) for name in _KEYWORD_PART)

    if not TYPE_CHECKING:  # what mypy should not take for any attribute's type

        def __getattr__(self, name: str) -> Any:
            """Called only for an attribute the index lacks: its keyword part, while a
            restore has not made it (`_make_keywords`)."""
            if name in _KEYWORD_PART and self.__dict__.get("_keywords_later") is not None:
                self._make_keywords()
                return self.__dict__[name]
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # -- snapshot ------------------------------------------------------------
    def snapshot_parts(self) -> dict[str, tuple[str, list[Any]]]:
        """What a restore cannot work out from the entries cheaply, as arrays
        (`engine.recall.candidate_snapshot`): the keys (key ids renumbered densely, in
        id order: ids are internal) with their postings and the bigram index over them,
        the category postings, and each labelled folder's labels (as one of the distinct
        label sets). Everything else is made from the entries again."""
        live = sorted(self._key_ids.values())
        renumber = {kid: i for i, kid in enumerate(live)}
        keys = [self._keys[kid] for kid in live]
        grams = sorted(self._bigram)
        names = sorted(self.categories)
        of = self.tags.labels_by_folder()
        labels: dict[tuple[int, str], int] = {}  # in the order they first appear
        members: list[array[int]] = []
        sets: dict[tuple[tuple[str, ...], ...], int] = {}
        set_at = array("q", [0])
        set_labels = array("i")
        labelled = array("i")
        set_ids = array("i")
        for n, folder in enumerate(self.folders):
            found = of.get(folder.id)
            if found is None:
                continue
            for k, kind_labels in enumerate(found):
                for label in kind_labels:
                    lid = labels.setdefault((k, label), len(labels))
                    if lid == len(members):
                        members.append(array("i"))
                    members[lid].append(n)
            sid = sets.setdefault(found, len(sets))
            if sid == len(set_at) - 1:
                set_labels.extend(labels[k, label] for k, ls in enumerate(found) for label in ls)
                set_at.append(len(set_labels))
            labelled.append(n)
            set_ids.append(sid)
        forms = [form_keys(KINDS[k], label) for k, label in labels]
        return {
            **_strings("k", keys),
            "p.at": ("i8", [_offsets(len(self._postings[kid]) for kid in live)]),
            "p.n": ("i4", [self._postings[kid] for kid in live]),
            **_strings("g", grams),
            "g.at": ("i8", [_offsets(len(self._bigram[g]) for g in grams)]),
            "g.k": ("i4", [array("i", [renumber[kid] for kid in self._bigram[g]]) for g in grams]),
            **_strings("c", names),
            "c.at": ("i8", [_offsets(len(self.categories[name]) for name in names)]),
            "c.n": ("i4", [array("i", sorted(self.categories[name])) for name in names]),
            **_strings("t", [label for _, label in labels]),
            "t.kind": ("u1", [array("B", [k for k, _ in labels])]),
            "m.at": ("i8", [_offsets(map(len, members))]),
            "m.n": ("i4", members),
            **_strings("f", [key for keys in forms for key in keys]),
            "f.at": ("i8", [_offsets(map(len, forms))]),
            "s.at": ("i8", [set_at]),
            "s.lab": ("i4", [set_labels]),
            "t.of": ("i4", [labelled]),
            "t.set": ("i4", [set_ids]),
        }

    @classmethod
    def restored(
        cls,
        entries: Iterable[Any],
        cfg: MemoryConfig,
        arrays: Mapping[str, array[Any]],
        version: Any = None,
    ) -> CandidateIndex:
        """The index `snapshot_parts` stored, over `entries` (the caller checked that they
        are the entries it was built over, in order): what a build over them gives.
        Raises ValueError (or KeyError, IndexError) when the arrays do not fit them."""
        self = cls.__new__(cls)
        self._setup(cfg, version)
        every = list(entries)
        self._entries = list(compress(every, map(is_not, map(_SCORED, every), repeat(False))))
        self.folders = _make_folders(self._entries)
        count = len(self.folders)
        self.by_id = dict(zip(map(_ID, self.folders), range(count), strict=True))
        self._unique_ids = len(self.by_id) == count
        self.saved = True
        # the keyword part is made when first read (`__getattr__`): a ranked round reads
        # it only for its fallback, a fair round and every update at once
        self._keywords_later = {name: arrays[name] for name in _KEYWORD_SECTIONS if name in arrays}
        for name in _KEYWORD_PART:
            delattr(self, name)
        labels = _read_strings(arrays, "t")
        kinds = arrays["t.kind"].tolist()
        if len(kinds) != len(labels) or (kinds and max(kinds) >= len(KINDS)):
            raise ValueError("labels do not fit their kinds")
        fids = [f.id for f in self.folders]
        members = _pieces(arrays, "m", len(labels), count)
        keys_of = _read_strings(arrays, "f")
        at = arrays["f.at"].tolist()
        if len(at) != len(labels) + 1 or at[0] != 0 or at[-1] != len(keys_of):
            raise ValueError("form keys do not fit their labels")
        flat = arrays["s.lab"].tolist()
        _check_numbers(arrays["s.lab"], len(labels), "a label of a set")
        set_at = arrays["s.at"].tolist()
        labelled = arrays["t.of"]
        set_ids = arrays["t.set"]
        if len(set_ids) != len(labelled):
            raise ValueError("labelled folders do not fit their sets")
        _check_numbers(labelled, count, "a labelled folder")
        _check_numbers(set_ids, max(len(set_at) - 1, 0), "a label set")

        def folder_tables() -> FolderTables:
            """Each labelled folder's labels and each label's folders (checked above)."""
            sets: list[tuple[tuple[str, ...], ...]] = []
            for a, b in itertools.pairwise(set_at):
                per_kind: list[list[str]] = [[] for _ in KINDS]
                for lid in flat[a:b]:
                    per_kind[kinds[lid]].append(labels[lid])
                sets.append(tuple(map(tuple, per_kind)))
            of = dict(
                zip(map(fids.__getitem__, labelled), map(sets.__getitem__, set_ids), strict=True)
            )
            tables = (
                (KINDS[kind], label, map(fids.__getitem__, folders))
                for kind, label, folders in zip(kinds, labels, members, strict=True)
            )
            return of, tables

        self.tags.restore(
            (
                (KINDS[kind], label, keys_of[a:b])
                for kind, label, (a, b) in zip(kinds, labels, itertools.pairwise(at), strict=True)
            ),
            folder_tables,
        )
        return self

    def _folder_keys(self, folder: Folder) -> list[str]:
        """Its keys: the match keys of its keywords."""
        fold = self._fold
        return [k for k in (match_key(kw, expand_latin_case=fold) for kw in folder.keywords) if k]

    def _channel_text(self) -> tuple[str, array[int]]:
        """Every folder's phrases, case-folded, as one text, and each folder's start."""
        if self._channel is None:
            starts = array("q")
            parts: list[str] = []
            pos = 0
            for folder in self.folders:
                starts.append(pos)
                part = CHANNEL_SEP.join(folder.assistant).casefold() if folder.assistant else ""
                parts.append(part)
                pos += len(part) + 1
            self._channel = ("\x01".join(parts), starts)
        return self._channel

    def _new_key(self, key: str) -> int:
        if self._free_kids:
            kid = self._free_kids.pop()
            self._keys[kid] = key
        else:
            kid = len(self._keys)
            self._keys.append(key)
            self._postings.append(array("i"))
        self._key_ids[key] = kid
        self._key_lens[len(key)] += 1
        self._max_key = max(self._max_key, len(key))
        for bg in _bigrams(key):
            arr = self._bigram.get(bg)
            if arr is None:
                arr = self._bigram[bg] = array("i")
            arr.append(kid)
        return kid

    def _drop_key(self, kid: int) -> None:
        """Forget a key whose posting became empty (a fresh build would not have it)."""
        key = self._keys[kid]
        del self._key_ids[key]
        self._keys[kid] = ""
        self._free_kids.append(kid)
        for bg in _bigrams(key):
            arr = self._bigram[bg]
            arr.remove(kid)
            if not arr:
                del self._bigram[bg]
        lens = self._key_lens
        lens[len(key)] -= 1
        if not lens[len(key)]:
            del lens[len(key)]
            if len(key) == self._max_key:
                self._max_key = max(lens, default=0)

    def _folder_kids(self, folder: Folder) -> set[int]:
        return {self._key_ids[key] for key in self._folder_keys(folder)}

    def _folder_classes(self, folder: Folder, title: Any) -> list[str]:
        if self._category_re is None or folder.alpha < self._alpha_min:
            return []
        fold = self._fold
        return self._classes_of(
            [match_key(k, expand_latin_case=fold) for k in folder.keywords], folder.alpha, title
        )

    def _classes_of(self, keys: list[str], alpha: float, title: Any) -> list[str]:
        """The category classes of a folder of α `alpha` whose keywords have match keys
        `keys` (empty ones included), and of its `title` (an entry's, as it is)."""
        if self._category_re is None or alpha < self._alpha_min:
            return []
        text = "\x00".join(keys)
        title = str(title or "")
        if title:
            text += "\x00" + match_text(title, expand_latin_case=self._fold)
        return self._classes_in(text)

    # -- incremental update ------------------------------------------------------
    def update(
        self,
        entries: Iterable[Any],
        cfg: MemoryConfig,
        version: Any = None,
        *,
        max_changes: float = 0.2,
    ) -> bool:
        """Bring the index to `entries` in place (`_update`), holding its lock (a snapshot
        being copied meanwhile is copied whole first)."""
        with self.lock:
            return self._update(entries, cfg, version, max_changes=max_changes)

    def _update(
        self,
        entries: Iterable[Any],
        cfg: MemoryConfig,
        version: Any,
        *,
        max_changes: float,
    ) -> bool:
        """Bring the index to `entries` in place, as `CandidateIndex(entries, cfg)` would
        build it. False (and the index untouched) when a fresh build is due instead:
        other index parameters, duplicate folder ids, an order that is not the old one
        with folders inserted / removed, or more than `max_changes` × N folders added,
        removed or changed.

        Entries are values: an entry that is the very object indexed before is taken as
        unchanged (the store's `IndexEntry` is a frozen model, replaced on every change,
        never edited in place). The diff walks the old and new scored entries, skipping
        runs of identical objects at C speed; at a difference, a new id is an added
        folder, an old id further on means the old folders before it were removed, the
        same id with other indexed fields (`_signature`) is a changed folder (removed
        and added again), else it is kept (its folder made of the new entry: a store's
        entry is its own folder, the same to recall). Kept folders keep their relative order (the
        store's index order is stable; anything else falls back), so their numbers
        shift by the insertions and removals before them: postings and category sets
        are renumbered from the first shifted folder on, by a monotone map, so postings
        stay sorted. Then the added folders are inserted at their new numbers.
        """
        if index_params(cfg) != self.params or not self._unique_ids:
            return False
        new = [e for e in entries if e.scored is not False]
        old = self._entries
        lo, ho = len(old), len(new)
        p = _first_other(old, new, min(lo, ho))
        if p == lo == ho:
            self._entries = new
            self.version = version
            return True
        s = _first_other(reversed(old), reversed(new), min(lo, ho) - p)
        s = min(s, min(lo, ho) - p)
        old_end, new_end = lo - s, ho - s
        # walk the middle old[p:old_end] -> new[p:new_end]
        runs: list[tuple[int, int, int]] = []  # kept (old start, old stop, new start)
        added: list[int] = []
        removed: list[int] = []
        added_ids: set[str] = set()
        renewed: list[int] = []  # kept, a new entry with the same signature
        changed = 0
        by_id = self.by_id
        i = j = p
        while j < new_end:
            t = _first_other(
                map(old.__getitem__, range(i, old_end)),
                map(new.__getitem__, range(j, new_end)),
                min(old_end - i, new_end - j),
            )
            if t:
                runs.append((i, i + t, j))
                i += t
                j += t
                if j >= new_end:
                    break
            entry = new[j]
            fid = entry.id
            n = by_id.get(fid)
            if n is None:
                if fid in added_ids:
                    return False  # duplicate id
                added_ids.add(fid)
                added.append(j)
            elif n < i or n >= old_end:
                return False  # reordered, or a duplicate of a folder seen or kept
            else:
                removed.extend(range(i, n))
                if _signature(old[n]) == _signature(entry):
                    runs.append((n, n + 1, j))
                    renewed.append(j)
                else:
                    removed.append(n)
                    added.append(j)
                    changed += 1
                i = n + 1
            j += 1
        removed.extend(range(i, old_end))
        if len(removed) + len(added) - changed > max_changes * max(lo, ho, 1):
            return False
        if s:
            runs.append((old_end, lo, new_end))

        # 1. take the removed (and changed) folders out of the postings
        postings = self._postings
        for n in removed:
            folder = self.folders[n]
            self.tags.remove(folder.id)
            for kid in self._folder_kids(folder):
                arr = postings[kid]
                del arr[bisect_left(arr, n)]
                if not arr:
                    self._drop_key(kid)
            for name in self._folder_classes(folder, self._entries[n].title):
                members = self.categories[name]
                members.discard(n)
                if not members:
                    del self.categories[name]
        # 2. renumber the kept folders from the first one that moved
        remap: list[int] = [-1] * (lo - p)  # old number - p -> new number
        start = lo
        for i0, i1, j0 in runs:
            remap[i0 - p : i1 - p] = range(j0, j0 + i1 - i0)
            if j0 != i0 and start == lo:
                start = i0
        if start < lo:
            tail = [n for n in range(start, lo) if remap[n - p] >= 0]
            if len(tail) * 4 < len(self._key_ids):
                kids: Iterable[int] = {k for n in tail for k in self._folder_kids(self.folders[n])}
            else:
                kids = range(len(postings))
            for kid in kids:
                arr = postings[kid]
                i = bisect_left(arr, start)
                if i < len(arr):
                    arr[i:] = array("i", [remap[x - p] for x in arr[i:]])
            for members in self.categories.values():
                moved = [x for x in members if x >= start]
                if moved:
                    members.difference_update(moved)
                    members.update(remap[x - p] for x in moved)
        # 3. folders, titles, entries, ids
        pieces: list[tuple[int, int, int]] = sorted(
            [(j0, i0, i1) for i0, i1, j0 in runs if i0 < old_end] + [(m, -1, -1) for m in added]
        )
        mid_folders: list[Folder] = []
        for m, i0, i1 in pieces:
            if i0 >= 0:
                mid_folders += self.folders[i0:i1]
            else:
                mid_folders.append(_make_folder(new[m]))
        for n in removed:
            fid = self.folders[n].id
            if by_id.get(fid) == n:
                del by_id[fid]
        self.folders[p:old_end] = mid_folders
        for m in renewed:  # the same to recall, but an entry is its own folder
            self.folders[m] = _make_folder(new[m])
        self._entries = new
        for m in added:
            by_id[self.folders[m].id] = m
        if start < lo:
            for m in range(remap[start - p], ho):
                by_id[self.folders[m].id] = m
        # 4. add the new (and changed) folders
        for m in added:
            folder = self.folders[m]
            self.tags.add(new[m])
            seen: set[int] = set()
            for key in self._folder_keys(folder):
                known = self._key_ids.get(key)
                kid = self._new_key(key) if known is None else known
                if kid not in seen:
                    seen.add(kid)
                    insort(postings[kid], m)
            for name in self._folder_classes(folder, new[m].title):
                self.categories.setdefault(name, set()).add(m)
        self._channel = None  # rebuilt by the next query asking the channel
        self.version = version
        self.unsaved += len(removed) + len(added)
        return True

    def __len__(self) -> int:
        return len(self.folders)

    @property
    def unique_ids(self) -> bool:
        """No folder id repeats (an index with repeated ids is never updated in place nor
        snapshotted: it is rebuilt)."""
        return self._unique_ids

    def entries(self) -> Sequence[Any]:
        """The entries it indexes, by folder number (read only)."""
        return self._entries

    def entry(self, n: int) -> Any:
        """The index entry folder `n` was built from (for fields recall does not index,
        such as the event time a browse orders by)."""
        return self._entries[n]

    # -- matching ------------------------------------------------------------
    def categories_in(self, query: Query) -> list[str]:
        """The category classes `query` names: `match(query).categories`, without
        matching its keywords."""
        return self._classes_in(query.normalized)

    def _classes_in(self, text: str) -> list[str]:
        if self._category_re is None or not text:
            return []
        out: list[str] = []
        for m in self._category_re.finditer(text):
            for name in self._category_words.get(m.group(1), ()):
                if name not in out:
                    out.append(name)
        return out

    def _keys_for(self, q: str) -> set[int]:
        """Key ids a query key hits, by the rule of `keys_match`."""
        hit: set[int] = set()
        kid = self._key_ids.get(q)
        if kid is not None:
            hit.add(kid)
        if self._mode == "contains":
            # folder key inside the query key
            lq = len(q)
            for i in range(lq):
                for j in range(i + 1, min(lq, i + self._max_key) + 1):
                    kid = self._key_ids.get(q[i:j])
                    if kid is not None and kid not in hit and contains_term(q, self._keys[kid]):
                        hit.add(kid)
            # query key inside a folder key
            if lq >= 2:
                grams = sorted(_bigrams(q), key=lambda g: len(self._bigram.get(g, ())))
                if grams and grams[0] in self._bigram:
                    for kid in set(self._bigram[grams[0]]):
                        if kid not in hit and contains_term(self._keys[kid], q):
                            hit.add(kid)
        if self._cjk_bigram:
            for i in range(len(q) - 1):
                bg = q[i : i + 2]
                if _CJK_PAIR.fullmatch(bg) and bg in self._bigram:
                    for kid in self._bigram[bg]:
                        if kid not in hit and keys_match(
                            q, self._keys[kid], mode=self._mode, cjk_bigram=True
                        ):
                            hit.add(kid)
        return hit

    def match(self, query: Query, *, min_alpha: float = 0.0) -> Matches:
        """Seeds and candidates of `query`; folders below `min_alpha` are left out."""
        seeds: list[Seed] = []
        hits: dict[int, int] = {}
        folders = self.folders
        for q in query.keys:
            posting: set[int] = set()
            for kid in self._keys_for(q):
                posting.update(self._postings[kid])
            if min_alpha > 0:
                posting = {n for n in posting if folders[n].alpha >= min_alpha}
            seeds.append(Seed(q, "keyword", posting))
            for n in posting:
                hits[n] = hits.get(n, 0) + 1
        cats = self._classes_in(query.normalized)
        for name in cats:
            posting = set(self.categories.get(name, ()))
            if min_alpha > 0:
                posting = {n for n in posting if folders[n].alpha >= min_alpha}
            seeds.append(Seed(name, "category", posting))
        candidates: set[int] = set()
        for s in seeds:
            candidates |= s.posting
        if query.allowed is not None:
            keep = self.numbers(query.allowed)
            for s in seeds:
                s.posting &= keep
            candidates &= keep
            hits = {n: c for n, c in hits.items() if n in keep}
        return Matches(seeds, candidates, hits, cats)

    def numbers(self, ids: Iterable[str]) -> set[int]:
        """The folder numbers of the scored folders among `ids`."""
        by_id = self.by_id
        return {by_id[fid] for fid in ids if fid in by_id}

    def ids_among(self, ids: Iterable[str], numbers: Collection[int]) -> set[str]:
        """Those of `ids` that name a folder among `numbers` (a question's candidates,
        say): what ``{folders[n].id for n in numbers} & ids`` gives, costing what `ids`
        holds (a recall block: tens) instead of what `numbers` does (tens of thousands for
        a question whose words most folders hold)."""
        if not self._unique_ids:  # an id of two folders: either may be among them
            return {self.folders[n].id for n in numbers} & set(ids)
        by_id = self.by_id
        return {fid for fid in ids if by_id.get(fid, -1) in numbers}

    def match_assistant(
        self,
        ask: AssistantQuery,
        *,
        min_alpha: float = 0.0,
        allowed: frozenset[str] | None = None,
    ) -> AssistantMatches:
        """The 「你说过」 channel's hits of `ask` (nothing when the channel is off);
        folders below `min_alpha`, and with `allowed` those not in it, are left out."""
        terms = tuple(dict.fromkeys(t for key in ask.keys for t in channel_terms(key)))
        out = AssistantMatches(terms)
        if not self._assistant or not terms:
            return out
        text, starts = self._channel_text()
        pattern = re.compile("|".join(map(re.escape, sorted(terms, key=lambda t: (-len(t), t)))))
        folders = self.folders
        found: dict[int, frozenset[str]] = {}
        wanted = frozenset(terms)
        for m in pattern.finditer(text):
            n = bisect_right(starts, m.start()) - 1
            if n in found or folders[n].alpha < min_alpha:
                continue
            if allowed is not None and folders[n].id not in allowed:
                continue
            shared = _folder_terms(folders[n]) & wanted
            if shared:
                found[n] = shared
        df: Counter[str] = Counter(t for shared in found.values() for t in shared)
        weight = {t: 1.0 / math.log(2 + c) for t, c in df.items()}
        for n, shared in found.items():
            out.hits[n] = len(shared)
            out.score[n] = sum(weight[t] for t in terms if t in shared)
        return out

    def assistant_postings(self) -> dict[str, frozenset[str]]:
        """The channel's terms and the folders holding each (for tests and tools)."""
        out: dict[str, set[str]] = {}
        if self._assistant:
            for folder in self.folders:
                for t in _folder_terms(folder):
                    out.setdefault(t, set()).add(folder.id)
        return {t: frozenset(ids) for t, ids in out.items()}

    def rare_threshold(self, ratio: float, min_posting: int) -> int:
        """τ = max(minPosting, ceil(ratio × N)), N = scored folders."""
        return max(min_posting, math.ceil(ratio * len(self.folders)))
