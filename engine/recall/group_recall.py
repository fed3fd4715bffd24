"""memory_group_recall: the QQ owner's private chat reads group memories (reference
§3.2.10, v1.4.2). Pure: who may call, what the arguments mean, which memories answer,
and the text; the group stores are read by :mod:`engine.recall.group_stores`.

Direction is the whole point of the tool: private → group only, so a group member who
talks the model into calling it learns nothing, and no private, WebUI or subagent memory
can ever come out. Hence :func:`authorize` decides from the call's facts alone (config,
live compat status, the caller's chat key, subagent, the connection's tool switch) before
anything touches the disk, and the peer is the QQ number in the private chat key: a
sender marker in the message text is forgeable, the host's session id is not.

Matching is memory_recall's keyword matching (:class:`engine.keywords.QueryMatcher`:
``keywords.matchMode``, both directions, ``match.*`` options) over each memory's keywords;
the words of ``query`` are a union. A memory's time is ``eventStart ?? createdAt``; it
filters, dates the entry and orders keyword-less calls (newest first). With words, more
words matched come first, then α. Only scored memories answer, with no α floor (the owner
asks; member gating is for group members).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Any, Final

from engine import texts
from engine.compat.chatkey import channel_kind, fold_chat_key, group_number, private_peer
from engine.compat.status import CompatStatus
from engine.config import MemoryConfig
from engine.keywords import QUERY_KEYWORDS_MAX, QueryMatcher, match_key
from engine.recall.dates import format_datetime

# memory_recall's argument rules (an integer argument, a value echoed in a warning), so
# both tools read and echo what the model gave alike
from engine.recall.search_args import distinct_keywords
from engine.scoring.budget import safe_slice, to_well_formed
from engine.scoring.readable import flat_text, readable_text
from engine.secrets.detect import has_secret
from engine.timeexpr.civil import resolve_timezone, window_ms
from engine.timeexpr.endpoint import Instant, Span, read_endpoint
from engine.tool_args import integer_arg, shown_arg

__all__ = [
    "DEFAULT_LIMIT",
    "GROUP_DIR",
    "LIMIT_MAX",
    "OFFSET_MAX",
    "GroupAnswer",
    "GroupCall",
    "GroupFilter",
    "GroupMemory",
    "GroupStore",
    "Refusal",
    "authorize",
    "cap_folders",
    "choose_groups",
    "group_label",
    "memory_time",
    "parse_group_call",
    "refusal_answer",
    "render_answer",
    "select_memories",
    "snippet",
]

GROUP_DIR: Final = re.compile(r"^(?:onebot-group|qqb-g)-(.+)\Z")
"""The session directories that are group stores (§3.2.10 数据范围); nothing else is read.
The whole name, as the reference's JavaScript pattern reads (Python's `$` would also take
``onebot-group-1`` followed by a line break, a look-alike id's store, as group 1)."""
DEFAULT_LIMIT: Final = 8
LIMIT_MAX: Final = 20
OFFSET_MAX: Final = 1000
ARGUMENTS: Final = ("query", "group", "limit", "offset", "timeFrom", "timeTo", "listGroups")
"""Numbers in [1e9, 1e11) are epoch seconds (a mistake); epoch ms start at 1e11."""
_WS = re.compile(r"\s+")
_DIGITS = re.compile(r"[0-9]+")
"""A group given by its number alone."""


# ---- authorisation (before any IO) ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why the call is refused (``reason``, for the value and the log) and what the
    model reads: no memory content, no path."""

    reason: str
    text: str


def authorize(
    cfg: MemoryConfig,
    status: CompatStatus,
    chat_key: str,
    *,
    subagent: bool,
    tools_enabled: bool,
) -> Refusal | None:
    """None when the caller may read group memories, else the first failed check, in
    the reference's order: the config switch (compat active, ``crossChat.enabled``), the
    tool switch (the connection's ``tools`` capability), a QQ private chat key, not a
    subagent, the peer among ``ownerIds`` (with ``ownerOnly``; empty = nobody), and one
    directory per chat (``storage.perSession``)."""
    cross = cfg.compat.cross_chat
    if not status.active or cross.enabled is False:
        return Refusal("disabled", texts.GROUP_RECALL_REFUSED_DISABLED)
    if not tools_enabled:
        return Refusal("no-tools", texts.GROUP_RECALL_REFUSED_NO_TOOLS)
    kind = channel_kind(chat_key)
    if kind in ("onebot-group", "qqb-group"):
        return Refusal("group-chat", texts.GROUP_RECALL_REFUSED_GROUP)
    peer = private_peer(chat_key)
    if kind not in ("onebot-private", "qqb-private") or peer is None:
        return Refusal("not-private", texts.GROUP_RECALL_REFUSED_NOT_PRIVATE)
    if subagent:
        return Refusal("subagent", texts.GROUP_RECALL_REFUSED_SUBAGENT)
    if cross.owner_only:
        if not cfg.compat.owner_ids:
            return Refusal("no-owner-ids", texts.GROUP_RECALL_REFUSED_NO_OWNERS)
        if peer not in cfg.compat.owner_ids:
            return Refusal("not-owner", texts.GROUP_RECALL_REFUSED_NOT_OWNER)
    if not cfg.storage.per_session:
        return Refusal("shared-store", texts.GROUP_RECALL_REFUSED_SHARED_STORE)
    return None


# ---- arguments -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupFilter:
    """``group`` as a filter on directory names: a group number, or a folded chat key.
    Neither: a value that names no group (a path, a private key), which matches nothing."""

    given: str
    number: str | None = None
    key: str | None = None

    def matches(self, name: str) -> bool:
        key, number = group_label(name)
        if self.number is not None:
            return number == self.number
        return self.key is not None and key == self.key


@dataclass(frozen=True, slots=True)
class GroupCall:
    """One call's arguments, normalised; ``warnings`` are the 提示 lines."""

    words: tuple[str, ...] = ()
    group: GroupFilter | None = None
    limit: int = DEFAULT_LIMIT
    offset: int = 0
    start: int | None = None
    """Inclusive lower bound (epoch ms) of the memories' time, None: open."""
    end: int | None = None
    """Exclusive upper bound, None: open."""
    time_labels: tuple[str, str] | None = None
    list_groups: bool = False
    warnings: tuple[str, ...] = ()
    error: str | None = None


def _bounded(
    name: str, value: Any, default: int, high: int, template: str, warnings: list[str]
) -> int:
    if value is None:
        return default
    low = 1 if name == "limit" else 0
    n = integer_arg(value)
    if n is None:
        warnings.append(
            texts.RECALL_TOOL_WARN_NOT_INTEGER.format(
                field=name, given=shown_arg(value), used=default
            )
        )
        return default
    used = min(high, max(low, n))
    if used != n:
        warnings.append(template.format(given=n, used=used, high=high))
    return used


def _words(value: Any, cfg: MemoryConfig, warnings: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        warnings.append(texts.GROUP_RECALL_WARN_QUERY_TYPE.format(given=shown_arg(value)))
        return ()
    distinct = distinct_keywords(value, expand_latin_case=cfg.match.expand_latin_case)
    if len(distinct) > QUERY_KEYWORDS_MAX:
        dropped = " ".join(distinct[QUERY_KEYWORDS_MAX:])
        warnings.append(
            texts.GROUP_RECALL_WARN_QUERY_CAP.format(
                n=len(distinct), max=QUERY_KEYWORDS_MAX, dropped=dropped
            )
        )
    return tuple(distinct[:QUERY_KEYWORDS_MAX])


def group_label(name: str) -> tuple[str, str]:
    """(chat key, group number) of a group store's directory name: the name folded
    (an id stored before compat folded it), its number (or the name's tail)."""
    key = fold_chat_key(name)
    number = group_number(key)
    if number is None:
        m = GROUP_DIR.match(key)
        number = m.group(1) if m is not None else key
    return key, number


def _group(value: Any, warnings: list[str]) -> GroupFilter | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return GroupFilter(str(value), number=str(value))
    if not isinstance(value, str):
        warnings.append(texts.GROUP_RECALL_WARN_GROUP_TYPE.format(given=shown_arg(value)))
        return None
    given = value.strip()
    if _DIGITS.fullmatch(given):
        return GroupFilter(given, number=given)
    folded = fold_chat_key(given)
    if GROUP_DIR.match(folded) and group_number(folded) is not None:
        return GroupFilter(given, key=folded)
    # not echoed: a value that names no group may be a path, and no answer shows one
    warnings.append(texts.GROUP_RECALL_WARN_GROUP_UNKNOWN)
    return GroupFilter(given)


def _endpoint(
    name: str, value: Any, tz: tzinfo, warnings: list[str]
) -> tuple[int, int, str] | None:
    """[start, end) of a time argument and its label (`engine.timeexpr.endpoint`, the
    rules memory_recall reads its time with, without relative expressions): a year,
    month or day as civil days in ``time.timezone``, or one instant."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    got = read_endpoint(value, tz)
    if isinstance(got, Span):
        start, end = window_ms(got.first, got.last, tz)
        return start, end, value.strip() if isinstance(value, str) else str(int(value))
    if isinstance(got, Instant):
        return got.ms, got.ms + 1, format_datetime(got.ms, tz)
    if got == "seconds":
        warnings.append(texts.TIME_WARN_SECONDS.format(field=name, given=shown_arg(value)))
    else:
        warnings.append(
            texts.GROUP_RECALL_WARN_TIME_INVALID.format(field=name, given=shown_arg(value))
        )
    return None


def parse_group_call(arguments: Mapping[str, Any], cfg: MemoryConfig) -> GroupCall:
    """Every argument is optional and never fails the call: a value that cannot be used
    is left out with a warning (§3.2.10 "时间/参数非法只产生 提示 行"). The one refusal is
    a query holding a secret's value (memories are never looked up by one)."""
    warnings: list[str] = []
    unknown = [str(k) for k in arguments if k not in ARGUMENTS]
    if unknown:
        warnings.append(texts.GROUP_RECALL_WARN_UNKNOWN_ARGUMENT.format(names=" / ".join(unknown)))
    words = _words(arguments.get("query"), cfg, warnings)
    if words and cfg.secrets.mode != "off" and has_secret(" ".join(words)):
        return GroupCall(error=texts.GROUP_RECALL_SECRET_QUERY)
    cross = cfg.compat.cross_chat
    high = max(1, min(LIMIT_MAX, cross.max_results))
    limit = _bounded(
        "limit",
        arguments.get("limit"),
        min(DEFAULT_LIMIT, high),
        high,
        texts.GROUP_RECALL_WARN_LIMIT,
        warnings,
    )
    offset = _bounded(
        "offset", arguments.get("offset"), 0, OFFSET_MAX, texts.GROUP_RECALL_WARN_OFFSET, warnings
    )
    tz = resolve_timezone(cfg.time.timezone)
    lo = _endpoint("timeFrom", arguments.get("timeFrom"), tz, warnings)
    hi = _endpoint("timeTo", arguments.get("timeTo"), tz, warnings)
    if lo is not None and hi is not None and lo[0] >= hi[1]:
        warnings.append(texts.TIME_WARN_SWAPPED)
        lo, hi = hi, lo
    labels = None
    if lo is not None or hi is not None:
        open_ = texts.GROUP_RECALL_TIME_OPEN
        labels = (lo[2] if lo else open_, hi[2] if hi else open_)
    list_groups = arguments.get("listGroups")
    if list_groups is not None and not isinstance(list_groups, bool):
        warnings.append(texts.GROUP_RECALL_WARN_LIST_GROUPS.format(given=shown_arg(list_groups)))
        list_groups = False
    return GroupCall(
        words=words,
        group=_group(arguments.get("group"), warnings),
        limit=limit,
        offset=offset,
        start=lo[0] if lo else None,
        end=hi[1] if hi else None,
        time_labels=labels,
        list_groups=bool(list_groups),
        warnings=tuple(warnings),
    )


# ---- which stores, which memories ------------------------------------------------------


def choose_groups(
    names: Iterable[str], call: GroupCall, cfg: MemoryConfig
) -> tuple[list[str], list[str]]:
    """The group directories to read (group stores only, the ``group`` filter, at most
    ``crossChat.maxGroups`` in name order) and the warning of a cut."""
    matching = sorted(
        n for n in names if GROUP_DIR.match(n) and (call.group is None or call.group.matches(n))
    )
    cap = cfg.compat.cross_chat.max_groups
    if len(matching) <= cap:
        return matching, []
    return matching[:cap], [texts.GROUP_RECALL_WARN_MAX_GROUPS.format(total=len(matching), max=cap)]


@dataclass(frozen=True, slots=True)
class GroupStore:
    """One group store as read: its scored index entries within the folder cap."""

    name: str
    entries: tuple[Any, ...]

    @property
    def label(self) -> tuple[str, str]:
        return group_label(self.name)


@dataclass(frozen=True, slots=True)
class GroupMemory:
    """A memory that answers: where it is, what the entry shows, how it ranks."""

    store: str
    id: str
    title: str
    alpha: float
    time: int
    hits: int


def memory_time(entry: Any) -> int:
    """``eventStart ?? createdAt`` (§3.2.10)."""
    start = entry.eventStart
    return int(start) if isinstance(start, int) and not isinstance(start, bool) else entry.createdAt


def cap_folders(
    name: str, entries: Sequence[Any], cfg: MemoryConfig
) -> tuple[tuple[Any, ...], list[str]]:
    """The scored entries among the ``crossChat.maxFoldersPerGroup`` most recently
    archived folders, and the warning of a cut."""
    cap = cfg.compat.cross_chat.max_folders_per_group
    warnings: list[str] = []
    if len(entries) > cap:
        warnings.append(
            texts.GROUP_RECALL_WARN_MAX_FOLDERS.format(
                group=group_label(name)[1], total=len(entries), max=cap
            )
        )
        entries = sorted(entries, key=lambda e: (e.createdAt, e.id))[len(entries) - cap :]
    return tuple(e for e in entries if e.scored is not False), warnings


def select_memories(
    stores: Sequence[GroupStore], call: GroupCall, cfg: MemoryConfig
) -> list[GroupMemory]:
    """Every memory of ``stores`` the call asks for, in answer order."""
    matched = _keyword_hits(call.words, cfg) if call.words else None
    found: list[GroupMemory] = []
    for store in stores:
        for entry in store.entries:
            t = memory_time(entry)
            if (call.start is not None and t < call.start) or (
                call.end is not None and t >= call.end
            ):
                continue
            hits = 0
            if matched is not None:
                hits = len(set().union(*map(matched, entry.keywords)))
                if not hits:
                    continue
            found.append(
                GroupMemory(store.name, entry.id, str(entry.title or ""), entry.alpha, t, hits)
            )
    if matched is not None:
        found.sort(key=lambda m: (-m.hits, -m.alpha, -m.time, m.store, m.id))
    else:
        found.sort(key=lambda m: (-m.time, -m.alpha, m.store, m.id))
    return found


def _keyword_hits(words: Sequence[str], cfg: MemoryConfig) -> Callable[[str], tuple[str, ...]]:
    """A folder keyword -> the query words it matches, worked out once per distinct
    keyword of the call (a keyword recurs across a group's folders)."""
    fold = cfg.match.expand_latin_case
    matcher = QueryMatcher(
        words, mode=cfg.keywords.match_mode, expand_latin_case=fold, cjk_bigram=cfg.match.cjk_bigram
    )
    memo: dict[str, tuple[str, ...]] = {}

    def hits(keyword: str) -> tuple[str, ...]:
        got = memo.get(keyword)
        if got is None:
            got = memo[keyword] = tuple(
                matcher.matched_terms(match_key(keyword, expand_latin_case=fold))
            )
        return got

    return hits


def snippet(messages: Sequence[Mapping[str, Any]], max_chars: int) -> tuple[str, bool]:
    """A memory's 摘要: its readable conversation (the scoring model's view, v1.4.3;
    all its text when it has none), on one line, cut at ``maxSnippetChars`` without
    splitting a character; and whether it was cut."""
    text = readable_text(messages).text or flat_text(messages)
    line = _WS.sub(" ", text.replace("\n", texts.GROUP_RECALL_LINE_JOIN)).strip()
    cut = safe_slice(line, max_chars)
    return cut, len(cut) < len(line)


# ---- the answer ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupAnswer:
    """What the model reads, the structured value, isError."""

    text: str
    value: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False


def refusal_answer(refusal: Refusal) -> GroupAnswer:
    return GroupAnswer(refusal.text, {"refused": refusal.reason}, is_error=True)


def _one_line(text: str) -> str:
    return _WS.sub(" ", to_well_formed(text)).strip()


def _conditions(call: GroupCall) -> list[str]:
    items = []
    if call.words:
        items.append(texts.GROUP_RECALL_CONDITION_QUERY.format(words=" ".join(call.words)))
    group = call.group
    if group is not None:
        shown = group.given if group.number or group.key else texts.GROUP_RECALL_GROUP_INVALID
        items.append(texts.GROUP_RECALL_CONDITION_GROUP.format(group=shown_arg(shown)))
    if call.time_labels is not None:
        items.append(
            texts.GROUP_RECALL_CONDITION_TIME.format(
                start=call.time_labels[0], end=call.time_labels[1]
            )
        )
    if not items:
        return []
    return [texts.GROUP_RECALL_CONDITIONS.format(items=texts.GROUP_RECALL_SEPARATOR.join(items))]


def _warning_lines(warnings: Sequence[str]) -> list[str]:
    return [texts.GROUP_RECALL_WARNING.format(text=w) for w in warnings]


def _listing(
    stores: Sequence[GroupStore], found: Sequence[GroupMemory], warnings: list[str], tz: tzinfo
) -> GroupAnswer:
    by_store: dict[str, list[GroupMemory]] = {}
    for m in found:
        by_store.setdefault(m.store, []).append(m)
    groups = []
    lines = [texts.GROUP_RECALL_LIST_HEADER, *_warning_lines(warnings), ""]
    for store in stores:
        mems = by_store.get(store.name)
        if not mems:
            continue
        key, number = store.label
        latest = max(m.time for m in mems)
        groups.append({"group": number, "chatKey": key, "memories": len(mems), "latest": latest})
        lines.append(
            texts.GROUP_RECALL_LIST_ITEM.format(
                group=number, key=key, n=len(mems), latest=format_datetime(latest, tz)
            )
        )
    if groups:
        lines.append("")
    lines += [texts.GROUP_RECALL_LIST_TOTAL.format(n=len(groups)), "", texts.GROUP_RECALL_SCOPE]
    value = {"listGroups": True, "groups": groups, "total": len(groups), "warnings": warnings}
    return GroupAnswer("\n".join(lines), value)


def render_answer(
    call: GroupCall,
    stores: Sequence[GroupStore],
    found: Sequence[GroupMemory],
    snippets: Mapping[tuple[str, str], tuple[str, bool] | None],
    cfg: MemoryConfig,
    warnings: Sequence[str] = (),
) -> GroupAnswer:
    """The text of §3.2.10's examples and its value. ``found`` is every match in order;
    ``snippets`` holds the page's (None: the folder could not be read)."""
    tz = resolve_timezone(cfg.time.timezone)
    shown_warnings = [*call.warnings, *warnings]
    if call.list_groups:
        return _listing(stores, found, shown_warnings, tz)
    total = len(found)
    page = list(found[call.offset : call.offset + call.limit])
    head = _conditions(call) + _warning_lines(shown_warnings)
    more = call.offset + len(page) < total
    groups = []
    counts: dict[str, int] = {}
    for m in found:
        counts[m.store] = counts.get(m.store, 0) + 1
    for store in stores:
        key, number = store.label
        groups.append({"group": number, "chatKey": key, "hits": counts.get(store.name, 0)})
    value: dict[str, Any] = {
        "groups": groups,
        "items": [],
        "total": total,
        "offset": call.offset,
        "limit": call.limit,
        "hasMore": more,
        "nextOffset": call.offset + len(page) if more else None,
        "warnings": shown_warnings,
    }
    if not page:
        header = texts.GROUP_RECALL_HEADER_EMPTY.format(total=total)
        if total and call.offset >= total:
            miss = texts.GROUP_RECALL_OFFSET_PAST.format(offset=call.offset, total=total)
        else:
            miss = texts.GROUP_RECALL_NONE
        lines = [header, *head, "", miss, "", texts.GROUP_RECALL_SCOPE]
        return GroupAnswer("\n".join(lines), value)
    first = call.offset + 1
    lines = [
        texts.GROUP_RECALL_HEADER.format(total=total, first=first, last=call.offset + len(page)),
        *head,
    ]
    for n, m in enumerate(page, start=first):
        key, number = group_label(m.store)
        text, cut = snippets.get((m.store, m.id)) or (texts.GROUP_RECALL_SNIPPET_UNREADABLE, False)
        lines.append(
            texts.GROUP_RECALL_ITEM.format(
                n=n,
                group=number,
                date=format_datetime(m.time, tz),
                alpha=f"{m.alpha:.2f}",
                title=_one_line(m.title),
            )
        )
        lines.append(
            texts.GROUP_RECALL_SNIPPET.format(
                snippet=text + (texts.GROUP_RECALL_TRUNCATED if cut else "")
            )
        )
        value["items"].append(
            {
                "group": number,
                "chatKey": key,
                "id": m.id,
                "title": m.title,
                "alpha": m.alpha,
                "time": m.time,
                "date": format_datetime(m.time, tz),
                "snippet": text,
                "truncated": cut,
                "matched": m.hits,
            }
        )
    lines.append("")
    if more:
        lines.append(texts.GROUP_RECALL_MORE.format(next=call.offset + len(page)))
    lines.append(texts.GROUP_RECALL_SCOPE)
    return GroupAnswer("\n".join(lines), value)
