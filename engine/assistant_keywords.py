"""The assistant's own words of a folder: its 「你说过」 channel keywords (reference §1.13.5,
§1.17 "助手原话通道修复").

Why a channel of its own: what the assistant promised or decided ("以后我就叫你小鲸",
"I'll remind you to water the ferns on Tuesday") is asked about later as "你之前说过叫我
什么？", in words the judge rarely puts into a folder's keywords. So every archive also
keeps, in the folder's meta and index row (``assistantKeywords``), up to
:data:`ASSISTANT_KEYWORDS_MAX` phrases of what the assistant said, and recall matches a
question that quotes the assistant against them (`engine.recall.assistant_said`).

Extraction (v1.5.5 fix):

* only real conversation: assistant messages, their text parts (tool-call blocks and
  ``[tool-call …`` / ``[tool-added …`` / ``[tool-removed …`` / ``[tool-result …`` lines
  dropped), and no JSON-like text (``{…}`` / ``[…]``); ``role: tool`` never counts;
* a turn is a user message and what follows it; each turn's last natural-language reply
  comes first: its first phrase takes a slot before any turn gets a second one, then
  the rest of those replies, then the earlier replies of each turn, in order;
* filtered afterwards: JSON keys and tool tokens (``tool-call``, ``id``, ``alpha``,
  ``keywords`` …), ``mem-…`` ids, bare numbers, lower-case identifiers (with ``_`` or
  ``.``, or longer than 11 characters), and words the channel cannot match on (chat
  filler such as "sure", "thing").

Phrases, not the keyword tokenizer's words: a promise's meaning sits between a verb and
a pronoun (叫你, 提醒你), which the keyword tokenizer cuts away as particles. Here
Chinese text is cut only at punctuation, multi-character stopwords and particles other
than 我 / 你 / 您; a protected word (了解, 会议 …) stays whole; Latin words are words.
The channel then matches on the phrases' search terms (:func:`channel_terms`: character
bigrams and stemmed words), so "叫你什么" meets "叫你小鲸" and "周三要提醒你" meets
"我周三提醒你去取快递".

Old folders (archived before the channel) have none: they get them when scored again
(:func:`with_assistant_keywords`) or from a one-off back-fill (:func:`backfill_store`,
`rofmd engine backfill-assistant`). Deterministic; pure except those two and
:func:`missing_assistant_keywords`, which read folders.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from engine.content import REPLY, text_parts, unwrapped
from engine.keywords import match_key
from engine.relevance.analyzer import search_terms
from engine.scoring.readable import PROTOCOL_PREFIXES
from engine.stopwords import CJK_PROTECTED, CJK_SPLIT_CHARS, CJK_STOPWORDS, EN_STOPWORDS
from engine.store import CorruptFolderError, FolderNotFoundError, SessionPaths, SessionStore
from engine.store.folders import read_context as read_folder_context
from engine.store.folders import read_meta
from engine.store.ids import is_folder_id
from engine.tokenizer import CJK_CLASS, LATIN_WORD_CLASS, normalize_text

__all__ = [
    "ASSISTANT_KEYWORDS_MAX",
    "FIELD",
    "PRONOUNS",
    "Backfill",
    "assistant_keywords",
    "backfill_store",
    "channel_terms",
    "count_backfill",
    "missing_assistant_keywords",
    "phrases",
    "with_assistant_keywords",
]

ASSISTANT_KEYWORDS_MAX: Final = 16
"""Phrases kept per folder: the archive side's keyword cap (`keywords.max`, v1.6.0)."""
FIELD: Final = "assistantKeywords"
"""The meta / index row field."""
PRONOUNS: Final = frozenset("我你您")
"""Particles kept inside phrases: who promised what to whom."""
MAX_PHRASE_CHARS: Final = 16

_JSON_KEYS: Final = frozenset(
    (
        *("tool-call", "tool_call", "toolcall", "tool-result", "tool-added", "tool-removed"),
        *("toolcallid", "id", "ids", "alpha", "beta", "keywords", "keyword", "events"),
        *("event", "locations", "persons", "reason", "keep", "updates", "type", "text"),
        *("name", "arguments", "content", "role", "source", "kind", "seq", "time", "turn"),
        *("title", "scored"),
    )
)
_SCAN = re.compile(
    rf"(?P<lat>[{LATIN_WORD_CLASS}]+(?:[.\-][{LATIN_WORD_CLASS}]+)*)|(?P<cjk>[{CJK_CLASS}]+)"
)
_REPEATS = re.compile(f"([{CJK_CLASS}]{{1,4}}?)\\1{{3,}}")
"""A CJK unit of up to four characters said four times or more in a row (哈哈哈哈,
好的好的…): kept twice, which gives the same phrases at a fraction of the scan (looked
for in texts longer than :data:`_REPEAT_FROM` characters only)."""
_REPEAT_FROM = 80
_CJK_TERM = re.compile(f"[{CJK_CLASS}]+")
_CJK_CHAR = re.compile(f"[{CJK_CLASS}]")
_IDENTIFIER = re.compile(r"[a-z0-9_.\-]+")
_DIGITS = re.compile(r"[\d.\-]+")


@functools.lru_cache(maxsize=64)
def _table(
    extra: tuple[str, ...],
) -> tuple[dict[str, tuple[tuple[str, bool], ...]], re.Pattern[str]]:
    """The cuts (multi-character stopwords, particles other than pronouns, CJK extra
    stopwords) and protected words by first character, longest first, each marked cut or
    not, and a character class of those first characters (the tokenizer's layout: a
    several-hundred-way alternation is much slower)."""
    stops = set(CJK_STOPWORDS) | (set(CJK_SPLIT_CHARS) - PRONOUNS)
    stops |= {e for e in extra if e and all(_CJK_CHAR.match(c) for c in e)}
    entries = {w: True for w in stops} | {w: False for w in CJK_PROTECTED if w not in stops}
    by_first: dict[str, list[tuple[str, bool]]] = {}
    for w, stop in entries.items():
        by_first.setdefault(w[0], []).append((w, stop))
    first = {c: tuple(sorted(ws, key=lambda e: (-len(e[0]), e[0]))) for c, ws in by_first.items()}
    starts = re.compile("[" + "".join(re.escape(c) for c in sorted(first)) + "]")
    return first, starts


def _cjk_phrases(run: str, extra: tuple[str, ...]) -> list[str]:
    """Cut one CJK run into phrases: at each possible start the longest entry wins; a
    cut ends the phrase, a protected word stays in it."""
    first, starts = _table(extra)
    out: list[str] = []
    begin = skip = 0
    startswith = run.startswith
    for m in starts.finditer(run):
        i = m.start()
        if i < skip:
            continue
        for word, cut in first[run[i]]:
            if startswith(word, i):
                if cut:
                    if i - begin >= 2:
                        out.extend(_pieces(run[begin:i]))
                    begin = i + len(word)
                skip = i + len(word)
                break
    if len(run) - begin >= 2:
        out.extend(_pieces(run[begin:]))
    return out


def _pieces(piece: str) -> list[str]:
    """A phrase as kept: not a lone pronoun pair, cut into chunks of at most 16."""
    if len(piece) < 2 or all(c in PRONOUNS for c in piece):
        return []
    if len(piece) <= MAX_PHRASE_CHARS:
        return [piece]
    parts = (piece[i : i + MAX_PHRASE_CHARS] for i in range(0, len(piece), MAX_PHRASE_CHARS))
    return [part for part in parts if len(part) >= 2]


@functools.lru_cache(maxsize=64)
def _latin_drop(extra: tuple[str, ...]) -> frozenset[str]:
    return EN_STOPWORDS | frozenset(extra)


def _extra(extra_stopwords: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted({normalize_text(e).strip().casefold() for e in extra_stopwords if e}))


def phrases(text: str, extra_stopwords: Iterable[str] = ()) -> list[str]:
    """The channel's phrases of `text`, in text order, duplicates kept (module
    docstring): CJK phrases and Latin words that are not stopwords."""
    return list(_phrases(text, _extra(extra_stopwords)))


def _phrases(text: str, extra: tuple[str, ...]) -> Iterator[str]:
    """:func:`phrases`, one at a time (extraction takes only what it needs)."""
    drop = _latin_drop(extra)
    if len(text) > _REPEAT_FROM:
        text = _REPEATS.sub(r"\1\1", text)
    for m in _SCAN.finditer(normalize_text(text)):
        lat, cjk = m.group("lat"), m.group("cjk")
        if lat is not None:
            if 2 <= len(lat) <= 64 and lat.casefold() not in drop:
                yield lat
        else:
            yield from _cjk_phrases(cjk, extra)


def _trivial(term: str) -> bool:
    """A bigram that says nothing by itself: two particles, or a stopword."""
    return term in CJK_STOPWORDS or all(c in CJK_SPLIT_CHARS for c in term)


def channel_terms(phrase: str, extra_stopwords: Iterable[str] = ()) -> tuple[str, ...]:
    """The terms the channel matches a phrase on, distinct, in order: the relevance
    analyser's terms (`engine.relevance.analyzer.search_terms`) without single CJK
    characters and trivial bigrams."""
    return _channel_terms(phrase, tuple(extra_stopwords))


@functools.lru_cache(maxsize=1 << 16)
def _channel_terms(phrase: str, extra: tuple[str, ...]) -> tuple[str, ...]:
    if _CJK_TERM.fullmatch(phrase) and not extra:  # a CJK phrase: its bigrams, directly
        pairs = (a + b for a, b in itertools.pairwise(phrase))
        return tuple(dict.fromkeys(t for t in pairs if not _trivial(t)))
    out: list[str] = []
    for term in search_terms(phrase, extra):
        if _CJK_TERM.fullmatch(term) and (len(term) < 2 or _trivial(term)):
            continue
        out.append(term)
    return tuple(dict.fromkeys(out))


@functools.lru_cache(maxsize=1 << 16)
def _keepable(phrase: str, extra: tuple[str, ...]) -> bool:
    return not _dropped(phrase) and bool(_channel_terms(phrase, extra))


def _dropped(phrase: str) -> bool:
    """The v1.5.5 filters: JSON keys and tool tokens, mem- ids, numbers, identifiers."""
    low = phrase.casefold()
    if low in _JSON_KEYS or low.startswith("mem-"):
        return True
    if _DIGITS.fullmatch(phrase):
        return True
    return bool(
        _IDENTIFIER.fullmatch(phrase)
        and phrase == low
        and ("_" in phrase or "." in phrase or len(phrase) > 11)
    )


def _looks_json(text: str) -> bool:
    s = text.strip()
    return (s.startswith("{") and s.endswith("}")) or (s.startswith("[") and s.endswith("]"))


def _reply_text(message: Mapping[str, Any]) -> str:
    """The natural-language text of an assistant message ('' when it has none)."""
    lines: list[str] = []
    for part in text_parts(message.get("content"), REPLY):
        if _looks_json(part):
            continue
        for line in part.split("\n"):
            s = line.strip()
            if s and not s.startswith(PROTOCOL_PREFIXES) and not _looks_json(s):
                lines.append(s)
    return "\n".join(lines)


def _turn_replies(messages: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """Per turn (a user message and what follows it), its assistant replies' texts."""
    turns: list[list[str]] = [[]]
    for raw in messages:
        if not isinstance(raw, Mapping):
            continue
        msg = unwrapped(raw)
        role = msg.get("role")
        if role == "user":
            if turns[-1]:
                turns.append([])
        elif role == "assistant":
            text = _reply_text(msg)
            if text:
                turns[-1].append(text)
    return [t for t in turns if t]


def assistant_keywords(
    messages: Sequence[Mapping[str, Any]], extra_stopwords: Iterable[str] = ()
) -> list[str]:
    """Up to :data:`ASSISTANT_KEYWORDS_MAX` channel phrases of what the assistant said in
    `messages` (a folder's ``context.json`` messages), most important first (module
    docstring); one spelling per match key."""
    extra = _extra(extra_stopwords)
    turns = _turn_replies(messages)

    def keep(text: str) -> Iterator[str]:
        return (p for p in _phrases(text, extra) if _keepable(p, extra))

    last = [keep(replies[-1]) for replies in turns]
    firsts = [next(ps, None) for ps in last]  # each turn's first slot
    ordered = itertools.chain(
        (p for p in firsts if p is not None),
        itertools.chain.from_iterable(last),
        (p for replies in turns for r in replies[:-1] for p in keep(r)),
    )
    out: list[str] = []
    seen: set[str] = set()
    for p in ordered:
        key = match_key(p, expand_latin_case=True)
        if key not in seen:
            seen.add(key)
            out.append(p)
            if len(out) >= ASSISTANT_KEYWORDS_MAX:
                break
    return out


def missing_assistant_keywords(
    store: SessionStore, folder_ids: Iterable[str], extra_stopwords: Iterable[str] = ()
) -> dict[str, dict[str, list[str]]]:
    """``{folder: {"assistantKeywords": [...]}}`` for the folders of `folder_ids` whose meta
    has none yet (an old folder being re-scored): read from their ``context.json``. A
    folder that is gone or damaged is left out (the caller's write goes on without it);
    storage errors propagate."""
    out: dict[str, dict[str, list[str]]] = {}
    for fid in folder_ids:
        try:
            if getattr(store.get_meta(fid), FIELD, None) is not None:
                continue
            messages = store.read_context(fid)
        except (FolderNotFoundError, CorruptFolderError):
            continue
        out[fid] = {FIELD: assistant_keywords(messages, extra_stopwords)}
    return out


def with_assistant_keywords(
    store: SessionStore,
    changes: Mapping[str, Mapping[str, Any]],
    extra_stopwords: Iterable[str] = (),
) -> dict[str, dict[str, Any]]:
    """`changes` (a re-score's meta changes, `SessionStore.update_metas`) plus the
    assistant keywords of each changed folder that has none yet: an old folder gets its
    「你说过」 phrases when it is scored again."""
    out = {fid: dict(fields) for fid, fields in changes.items()}
    for fid, fields in missing_assistant_keywords(store, list(out), extra_stopwords).items():
        out[fid].update(fields)
    return out


BACKFILL_BATCH: Final = 256
"""Folders per `update_metas` of a back-fill: one index log line and its metas each."""


@dataclass
class Backfill:
    """What :func:`backfill_store` did to one store."""

    folders: int = 0
    missing: int = 0
    """Folders without assistant keywords when it started."""
    filled: int = 0
    """Of those, written (dry run: would be written)."""
    with_phrases: int = 0
    """Of those, with at least one phrase (the others had no assistant text)."""
    unreadable: list[str] = field(default_factory=list)
    """Folders that could not be read (left as they are)."""


def count_backfill(paths: SessionPaths) -> Backfill:
    """What :func:`backfill_store` would do, read from the folders on disk alone: no store
    is opened, so nothing is recovered, finalised or written (a dry run). Every ``mem-…``
    directory counts, including one a store's recovery would adopt or remove."""
    out = Backfill()
    try:
        names = sorted(e.name for e in os.scandir(paths.dir) if e.is_dir(follow_symlinks=False))
    except FileNotFoundError:
        return out
    for fid in names:
        if not is_folder_id(fid):
            continue
        out.folders += 1
        try:
            if getattr(read_meta(paths, fid), FIELD, None) is not None:
                continue
            out.missing += 1
            phrases_ = assistant_keywords(read_folder_context(paths, fid))
        except CorruptFolderError:
            out.unreadable.append(fid)
            continue
        out.filled += 1
        out.with_phrases += bool(phrases_)
    return out


def backfill_store(
    store: SessionStore,
    *,
    dry_run: bool = False,
    batch: int = BACKFILL_BATCH,
    progress: Callable[[int, int], None] | None = None,
) -> Backfill:
    """Give every folder of `store` without assistant keywords its phrases, read from its
    ``context.json``; each batch of `batch` folders is one atomic `update_metas`, so an
    interrupted run leaves every folder either as it was or done, and a second run does
    only what is left. `dry_run` reads and counts, and writes nothing. `progress(done,
    missing)` after each batch. A folder that cannot be read is listed and skipped.
    Opening the store has already run its recovery; a dry run that must not even do that
    is :func:`count_backfill`."""
    out = Backfill(folders=len(store))
    todo = [e.id for e in store.index if getattr(e, FIELD, None) is None]
    out.missing = len(todo)
    for start in range(0, len(todo), max(1, batch)):
        ids = todo[start : start + max(1, batch)]
        found = missing_assistant_keywords(store, ids)
        out.unreadable += [fid for fid in ids if fid not in found]
        out.filled += len(found)
        out.with_phrases += sum(1 for f in found.values() if f[FIELD])
        if found and not dry_run:
            store.update_metas(found)
        if progress is not None:
            progress(start + len(ids), out.missing)
    return out
