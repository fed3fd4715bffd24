"""Per-session recall state and its file, `recall-state.json` (reference §3.1, §1.4).

v3 (written)::

    {"version": 3, "block": "<section text>", "ids": [...], "round": 7,
     "additions": [{"id", "alpha", "beta", "createdAt", "generation", "injectedTurn",
                    "injectedRound", "lane", "keywords", "date", "body", "messages": [...],
                    "chars", "neededRound"}],
     "configFingerprint": "…", "lanesFingerprint": "…",
     "lanes": {"cursor": [α, createdAt, id] | null, "register": [{"id", "ttl"}],
               "highRecycle": {id: round}, "recycle": {id: round}, "lowWatermark": ms},
     "ledger": {id: [lastSurfacedRound, α]}, "counters": {...}, "degraded": false,
     "currentIds": [...], "messageIds": [...],
     "queryInfo": {"clauses", "quota", "assistantSaid": {"phrase", "keys"} | null} | null,
     "render": {"sort", "computeDates", "emptyHint", "fullQuota", "clauses": [[text, hits]]}}

`block` is exactly the section text the model saw; it is restored verbatim, so a
restart shows the same block even when folders were deleted. A file whose content
cannot be used at all (not JSON, not an object or list) gives an empty state, and is
first moved aside as `recall-state.json.corrupt-<its mtime, UTC>` so the next save
never overwrites what may be the only copy of the block; `read_state_file` says so
(`DiscardedState`), the caller reports it. v2 files (block and
additions, no lanes) restore the block and reset lanes and ledger (bounded
duplicates, never loss); v1 files (ids only) are rebuilt from the folders still
present (see `engine.recall.round.rebuild_from_ids`).

The file is a snapshot: each save after it appends what changed to
`recall-state.log.jsonl` beside it, and a new snapshot retires the log now and then
(`engine.recall.state_log`: what survives a crash is the state of the last committed
save, or of the one before it when the crash was mid-write, never a mix). Every reader
here reads both; a tool that rewrites the file folds the log into it first
(:func:`fold_state_log`).

:class:`RecallState` implements `engine.recall_view.RecallBlockView` for re-archive.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine import jsonio
from engine.archive.tokens import estimate_text_tokens
from engine.jsonio import (
    CorruptJSONError,
    append_jsonl,
    dumps_json,
    read_json,
    write_bytes_atomic,
)
from engine.recall.block import block_header, entry_heading, render_entries
from engine.recall.render_cache import RenderCache
from engine.recall.state_log import MAX_RECORDS, encode_record, log_path, replay
from engine.texts import (
    RECALL_CLAUSE_ELLIPSIS,
    RECALL_CLAUSE_FOUND,
    RECALL_CLAUSE_ITEM,
    RECALL_CLAUSE_MAX_CHARS,
    RECALL_CLAUSE_NONE,
    RECALL_CLAUSE_SEPARATOR,
    RECALL_CLAUSE_STATUS,
    RECALL_EMPTY_HINT,
    RECALL_FULL_QUOTA_HINT,
    RECALL_FULL_QUOTA_TRIMMED,
)

__all__ = [
    "MESSAGE_IDS_KEPT",
    "Addition",
    "DiscardedState",
    "Lanes",
    "RecallState",
    "clause_status_line",
    "committed_document",
    "fold_state_log",
    "load_state_file",
    "peek_state_file",
    "read_state_file",
]

MESSAGE_IDS_KEPT = 64
"""How many handled user-message ids are remembered for dedup."""


def clause_status_line(clauses: Sequence[tuple[str, int]]) -> str:
    """本轮子问题召回情况 (§1.13.4): each clause and how many memories of the block it hit."""
    items = []
    for n, (text, found) in enumerate(clauses, start=1):
        shown = " ".join(text.split())
        if len(shown) > RECALL_CLAUSE_MAX_CHARS:
            shown = shown[: RECALL_CLAUSE_MAX_CHARS - 1] + RECALL_CLAUSE_ELLIPSIS
        status = RECALL_CLAUSE_FOUND.format(count=found) if found else RECALL_CLAUSE_NONE
        items.append(RECALL_CLAUSE_ITEM.format(n=n, clause=shown, status=status))
    return RECALL_CLAUSE_STATUS.format(items=RECALL_CLAUSE_SEPARATOR.join(items))


def _num(value: Any, default: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return float(value)


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return int(value)


@dataclass
class Addition:
    """One memory in the recall block (implements `AdditionView`)."""

    id: str
    alpha: float
    beta: float
    created_at_ms: int
    generation: int = 1
    injected_turn: int = 0
    injected_round: int = 0
    lane: str = ""
    keywords: list[str] = field(default_factory=list)
    date: str = ""
    body: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    current_query: bool = False
    number: int = 1
    # ranked mode: the last round whose message this memory was relevant to
    needed_round: int = 0
    # the last entry text made and what it was made from (a round asks for it many times)
    _entry: tuple[tuple[Any, ...], str] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    # the tokens of the last entry text counted (every round counts the whole block's)
    _tokens: tuple[str, int] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def created_at(self) -> str:
        """ISO-8601 UTC of `createdAt` (sorts like the number)."""
        dt = datetime.fromtimestamp(self.created_at_ms / 1000, tz=UTC)
        return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.created_at_ms % 1000:03d}Z"

    def entry(self, n: int) -> str:
        key = (
            n,
            self.date,
            self.alpha,
            self.beta,
            self.generation,
            tuple(self.keywords),
            self.body,
        )
        made = self._entry
        if made is not None and made[0] == key:
            return made[1]
        head = entry_heading(n, self.date, self.alpha, self.beta, self.generation, self.keywords)
        text = f"{head}\n{self.body}" if self.body else head
        self._entry = (key, text)
        return text

    @property
    def text(self) -> str:
        return self.entry(self.number)

    @property
    def chars(self) -> int:
        return len(self.text)

    @property
    def tokens(self) -> int:
        """`estimate_text_tokens` of its entry text, counted once per text: a round with
        a context window counts every memory of the block, and the count is a regex
        pass over the text."""
        text = self.text
        counted = self._tokens
        if counted is not None and counted[0] is text:
            return counted[1]
        tokens = estimate_text_tokens(text)
        self._tokens = (text, tokens)
        return tokens

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "alpha": self.alpha,
            "beta": self.beta,
            "createdAt": self.created_at_ms,
            "generation": self.generation,
            "injectedTurn": self.injected_turn,
            "injectedRound": self.injected_round,
            "lane": self.lane,
            "keywords": list(self.keywords),
            "date": self.date,
            "body": self.body,
            "messages": self.messages,
            "chars": self.chars,
            "neededRound": self.needed_round,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Addition | None:
        fid = d.get("id")
        if not isinstance(fid, str) or not fid:
            return None
        kws = d.get("keywords")
        msgs = d.get("messages")
        return cls(
            id=fid,
            alpha=_num(d.get("alpha")),
            beta=max(-10.0, min(10.0, _num(d.get("beta")))),
            created_at_ms=_int(d.get("createdAt")),
            generation=max(1, _int(d.get("generation"), 1)),
            injected_turn=_int(d.get("injectedTurn")),
            injected_round=_int(d.get("injectedRound")),
            lane=str(d.get("lane") or ""),
            keywords=[str(k) for k in kws] if isinstance(kws, list) else [],
            date=str(d.get("date") or ""),
            body=str(d.get("body") or ""),
            messages=[m for m in msgs if isinstance(m, dict)] if isinstance(msgs, list) else [],
            needed_round=_int(d.get("neededRound"), _int(d.get("injectedRound"))),
        )


@dataclass
class Lanes:
    """FAIR-DRI lane state that persists between rounds."""

    cursor: tuple[float, int, str] | None = None
    register: list[dict[str, Any]] = field(default_factory=list)  # [{"id", "ttl"}]
    high_recycle: dict[str, int] = field(default_factory=dict)  # id -> round trimmed
    recycle: dict[str, int] = field(default_factory=dict)  # id -> round trimmed
    low_watermark: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "cursor": list(self.cursor) if self.cursor is not None else None,
            "register": [dict(r) for r in self.register],
            "highRecycle": dict(self.high_recycle),
            "recycle": dict(self.recycle),
            "lowWatermark": self.low_watermark,
        }

    @classmethod
    def from_json(cls, d: Any) -> Lanes:
        if not isinstance(d, dict):
            return cls()
        cur = d.get("cursor")
        cursor = None
        if isinstance(cur, list) and len(cur) == 3 and isinstance(cur[2], str):
            cursor = (_num(cur[0]), _int(cur[1]), cur[2])
        reg = [
            {"id": r["id"], "ttl": _int(r.get("ttl"), 1)}
            for r in d.get("register") or []
            if isinstance(r, dict) and isinstance(r.get("id"), str)
        ]

        def rounds(x: Any) -> dict[str, int]:
            return {str(k): _int(v) for k, v in x.items()} if isinstance(x, dict) else {}

        return cls(
            cursor,
            reg,
            rounds(d.get("highRecycle")),
            rounds(d.get("recycle")),
            _int(d.get("lowWatermark")),
        )


_COUNTERS = (
    "rounds",
    "recalled",
    "reInjections",
    "registerDrops",
    "ledgerEvicted",
    "degradedRounds",
    "roundBudgetDropped",
)


@dataclass(slots=True)
class LogState:
    """Where the state's files stand (`engine.recall.state_log`): the snapshot's base,
    the highest base seen, the lines of this base in the log and its size, the
    snapshot's size, and the document the last save committed (None: the next save
    writes a snapshot)."""

    base: int = 0
    top: int = 0
    records: int = 0
    log_bytes: int = 0
    snapshot_bytes: int = 0
    written: dict[str, Any] | None = None

    def full(self) -> bool:
        """The log is due for a snapshot (or must not be appended to: a reader stopped
        in it, or it could not be removed)."""
        return self.records >= MAX_RECORDS or self.log_bytes > 2 * self.snapshot_bytes

    def appendable(self) -> bool:
        return self.written is not None and not self.full()


@dataclass
class RecallState:
    """The recall block of one session and everything selection remembers."""

    path: Path | None = None
    persist: bool = True
    additions: list[Addition] = field(default_factory=list)
    block: str = ""
    round: int = 0
    lanes: Lanes = field(default_factory=Lanes)
    ledger: dict[str, list[float]] = field(default_factory=dict)
    """id -> [last surfaced round (an int), α]: already the form the file holds, so a save
    copies the mapping without rebuilding it. An entry is replaced, never changed in
    place: the document the last save committed shares its lists."""
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_COUNTERS, 0))
    degraded: bool = False
    config_fingerprint: str = ""
    lanes_fingerprint: str = ""
    message_ids: list[str] = field(default_factory=list)
    # render settings of the current block (so re-archive can re-render without config)
    sort: str = "createdAt"
    compute_dates: bool = True
    empty_hint: bool = False
    full_quota: tuple[int, int] | None = None
    query_info: dict[str, Any] | None = None
    """The current user message as the last round analysed it (`queryInfo`: its clauses,
    quota, and its 「你说过」 request), for memory_recall's automatic `assistantSaid`."""
    clause_status: list[tuple[str, int]] | None = None
    """The last round's clauses and their hits (a message of several clauses), rendered
    as the 本轮子问题召回情况 line at the end of a block with entries (an empty block has
    no line: the empty hint, when on, says it all)."""
    loaded_version: int = 0
    pending_v1_ids: list[str] = field(default_factory=list)
    render_cache: RenderCache = field(default_factory=RenderCache, repr=False, compare=False)
    """Entries rendered in earlier rounds (`engine.recall.render_cache`); not persisted."""
    log_state: LogState = field(default_factory=LogState, repr=False, compare=False)
    """How the next save writes (`engine.recall.state_log`); not part of the state."""

    # -- block ---------------------------------------------------------------
    def render(self) -> str:
        """Re-render `block` from the additions and the stored render settings."""
        parts: list[str] = []
        if self.additions:
            entries = render_entries(self.additions, self.sort)
            for number, (addition, _) in enumerate(entries, start=1):
                addition.number = number
            parts.append(block_header(self.compute_dates))
            parts.append("\n\n".join(text for _, text in entries))
            if self.full_quota is not None:
                n, trimmed = self.full_quota
                line = (
                    RECALL_FULL_QUOTA_TRIMMED.format(n=n, trimmed=trimmed)
                    if trimmed
                    else RECALL_FULL_QUOTA_HINT.format(n=n)
                )
                parts.append(line)
            if self.clause_status:  # §1.13.4: annotated in the injected block
                parts.append(clause_status_line(self.clause_status))
        elif self.empty_hint:
            parts.append(RECALL_EMPTY_HINT)
        self.block = "\n\n".join(parts)
        return self.block

    def ids(self) -> list[str]:
        return [a.id for a in self.additions]

    def block_chars(self) -> int:
        return sum(a.chars for a in self.additions)

    # -- RecallBlockView -----------------------------------------------------------
    def rearchive_candidates(self) -> Sequence[Addition]:
        return list(self.additions)

    def remove_for_rearchive(
        self, removed: Sequence[str], recycle_high: Sequence[str], turn: int
    ) -> None:
        gone = set(removed)
        if not gone:
            return
        for fid in recycle_high:
            if fid in gone:
                self.lanes.high_recycle[fid] = self.round
        self.additions = [a for a in self.additions if a.id not in gone]
        self.full_quota = None
        self.clause_status = None
        self.render()
        self.save()

    def snapshot(self) -> object:
        return copy.deepcopy(self.to_json())

    def restore(self, snapshot: object) -> None:
        if not isinstance(snapshot, dict):
            raise TypeError("not a recall-state snapshot")
        other = RecallState.from_json(copy.deepcopy(snapshot), path=self.path, persist=self.persist)
        for name in self.__dataclass_fields__:
            if name not in ("path", "persist", "render_cache", "log_state"):
                setattr(self, name, getattr(other, name))
        self.save()

    # -- ledger ---------------------------------------------------------------
    def surface(self, fid: str, alpha: float, max_entries: int) -> list[str]:
        """Record `fid` as surfaced this round; evict beyond `max_entries`.

        Overflow policy `evict-lowest-alpha-last-seen`: the entries surfaced longest ago
        go first, the lowest α first among those, then id. Returns the evicted ids.
        """
        self.ledger.pop(fid, None)
        self.ledger[fid] = [self.round, float(alpha)]
        if max_entries <= 0 or len(self.ledger) <= max_entries:
            return []
        over = len(self.ledger) - max_entries
        block = set(self.ids())
        victims = sorted(
            (k for k in self.ledger if k not in block and k != fid),
            key=lambda k: (self.ledger[k][0], self.ledger[k][1], k),
        )[:over]
        for k in victims:
            del self.ledger[k]
        self.counters["ledgerEvicted"] = self.counters.get("ledgerEvicted", 0) + len(victims)
        return victims

    def last_surfaced(self, fid: str) -> int | None:
        entry = self.ledger.get(fid)
        return int(entry[0]) if entry else None

    # -- message dedup -----------------------------------------------------------
    def seen_message(self, message_id: str | None) -> bool:
        return bool(message_id) and message_id in self.message_ids

    def remember_message(self, message_id: str | None) -> None:
        if not message_id:
            return
        self.message_ids.append(message_id)
        del self.message_ids[:-MESSAGE_IDS_KEPT]

    # -- persistence ----------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "version": 3,
            "block": self.block,
            "ids": self.ids(),
            "round": self.round,
            "additions": [a.to_json() for a in self.additions],
            "configFingerprint": self.config_fingerprint,
            "lanesFingerprint": self.lanes_fingerprint,
            "lanes": self.lanes.to_json(),
            "ledger": dict(self.ledger),
            "counters": dict(self.counters),
            "degraded": self.degraded,
            "currentIds": [a.id for a in self.additions if a.current_query],
            "messageIds": list(self.message_ids),
            "queryInfo": copy.deepcopy(self.query_info),
            "render": {
                "sort": self.sort,
                "computeDates": self.compute_dates,
                "emptyHint": self.empty_hint,
                "fullQuota": list(self.full_quota) if self.full_quota else None,
                "clauses": [list(c) for c in self.clause_status] if self.clause_status else None,
            },
        }

    @classmethod
    def from_json(cls, d: Any, *, path: Path | None = None, persist: bool = True) -> RecallState:
        """Read a v3, v2 or v1 document (anything unusable gives an empty state)."""
        state = cls(path=path, persist=persist)
        if isinstance(d, list):  # oldest form: a bare id list
            d = {"version": 1, "ids": d}
        if not isinstance(d, dict):
            return state
        version = _int(d.get("version"), 1)
        raw_adds = d.get("additions")
        if version >= 2 and isinstance(raw_adds, list):
            state.additions = [
                a for a in (Addition.from_json(x) for x in raw_adds if isinstance(x, dict)) if a
            ]
            block = d.get("block")
            state.block = block if isinstance(block, str) else ""
        else:
            ids = d.get("ids")
            state.pending_v1_ids = (
                [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []
            )
        state.loaded_version = version
        if version < 3:
            return state
        state.round = _int(d.get("round"))
        state.config_fingerprint = str(d.get("configFingerprint") or "")
        state.lanes_fingerprint = str(d.get("lanesFingerprint") or "")
        state.lanes = Lanes.from_json(d.get("lanes"))
        ledger = d.get("ledger")
        if isinstance(ledger, dict):
            for k, v in ledger.items():
                if isinstance(v, list) and len(v) == 2:
                    state.ledger[str(k)] = [_int(v[0]), _num(v[1])]
        counters = d.get("counters")
        if isinstance(counters, dict):
            for k, v in counters.items():
                state.counters[str(k)] = _int(v)
        state.degraded = bool(d.get("degraded"))
        current = set(d.get("currentIds") or [])
        for a in state.additions:
            a.current_query = a.id in current
        mids = d.get("messageIds")
        if isinstance(mids, list):
            state.message_ids = [m for m in mids if isinstance(m, str)][-MESSAGE_IDS_KEPT:]
        qi = d.get("queryInfo")
        state.query_info = qi if isinstance(qi, dict) else None
        render = d.get("render")
        if isinstance(render, dict):
            state.sort = str(render.get("sort") or "createdAt")
            state.compute_dates = bool(render.get("computeDates", True))
            state.empty_hint = bool(render.get("emptyHint"))
            fq = render.get("fullQuota")
            if isinstance(fq, list) and len(fq) == 2:
                state.full_quota = (_int(fq[0]), _int(fq[1]))
            cl = render.get("clauses")
            if isinstance(cl, list):
                status = [
                    (c[0], _int(c[1]))
                    for c in cl
                    if isinstance(c, list) and len(c) == 2 and isinstance(c[0], str)
                ]
                state.clause_status = status or None
        return state

    def save(self) -> None:
        """Commit the state durably (when `recall.persistInjected`): one line appended to
        the log, or a new snapshot when the log is due (`engine.recall.state_log`)."""
        if self.path is None or not self.persist:
            return
        doc = self.to_json()
        log = self.log_state
        if log.appendable():
            assert log.written is not None
            record = encode_record(log.written, doc, log.base, log.records + 1)
            log.written = None  # until the line is durable, only a snapshot is safe
            log.log_bytes += append_jsonl(log_path(self.path), record)
            log.records += 1
            log.written = doc
            return
        _write_snapshot(self.path, doc, log)


def _write_snapshot(path: Path, doc: dict[str, Any], log: LogState) -> None:
    """Replace the snapshot with `doc` under a base no line of the log has, then drop the
    log (its lines are retired by the base alone; removing it only saves the space)."""
    base = log.top + 1
    data = dumps_json({**doc, "logBase": base})
    log.written = None
    write_bytes_atomic(path, data)
    log.base = log.top = base
    log.records = log.log_bytes = 0
    log.snapshot_bytes = len(data)
    log.written = doc
    try:
        jsonio.fs.unlink(log_path(path))
    except OSError:
        log.log_bytes = 2 * len(data) + 1  # still there: the next save writes a snapshot


@dataclass(frozen=True, slots=True)
class DiscardedState:
    """A recall-state file that could not be used: why, and where it was kept.

    ``kept_as`` is the name it was moved to beside itself; ``None`` when the move
    failed (``keep_error`` says why), so the next save replaces it.
    """

    reason: str
    kept_as: str | None
    keep_error: str | None = None


_KEEP_ATTEMPTS = 100


def _keep_aside(path: Path, reason: str) -> DiscardedState:
    """Move an unusable recall-state file aside, never over an earlier kept copy; the
    name carries the file's own mtime (a fact of the file, no clock needed)."""
    try:
        mtime_ms = path.lstat().st_mtime_ns // 1_000_000
    except OSError as exc:
        return DiscardedState(reason, None, exc.strerror or str(exc))
    stamp = datetime.fromtimestamp(mtime_ms / 1000, tz=UTC).strftime("%Y%m%dT%H%M%SZ")
    for n in range(1, _KEEP_ATTEMPTS + 1):
        name = f"{path.name}.corrupt-{stamp}" + (f"-{n}" if n > 1 else "")
        try:
            jsonio.fs.rename(path, path.with_name(name))
        except FileExistsError:
            continue
        except OSError as exc:
            return DiscardedState(reason, None, exc.strerror or str(exc))
        try:
            jsonio.fs.fsync_dir(path.parent)
        except OSError as exc:
            return DiscardedState(reason, name, f"moved, but not synced: {exc.strerror or exc}")
        return DiscardedState(reason, name)
    return DiscardedState(reason, None, f"{_KEEP_ATTEMPTS} kept copies of that time exist")


@dataclass(frozen=True, slots=True)
class _Read:
    """A state file as read: the document its snapshot and log commit, and the log."""

    doc: Any
    log: LogState


def _read_document(path: Path) -> _Read:
    """The committed document of `path` and its log (module `engine.recall.state_log`).
    Raises ``FileNotFoundError`` (no snapshot; the log still names the bases it used)
    and ``CorruptJSONError`` like :func:`engine.jsonio.read_json`."""
    try:
        data = log_path(path).read_bytes()
    except FileNotFoundError:
        data = b""
    try:
        doc = read_json(path)
    except FileNotFoundError as exc:
        raise _NoSnapshot(LogState(top=_top_of(data))) from exc
    try:
        size = path.stat().st_size  # (a heuristic: when the log is due for a snapshot)
    except OSError:
        size = 0
    log = LogState(snapshot_bytes=size)
    if not isinstance(doc, dict):
        return _Read(doc, log)
    base = doc.pop("logBase", 0)
    base = base if isinstance(base, int) and not isinstance(base, bool) else 0
    doc, applied, clean, top = replay(doc, data, base)
    log.base, log.top, log.records, log.log_bytes = base, top, applied, len(data)
    if not clean:
        log.log_bytes = 2 * size + 1  # never append after a line a reader stops at
    return _Read(doc, log)


class _NoSnapshot(FileNotFoundError):
    def __init__(self, log: LogState) -> None:
        super().__init__("no recall-state snapshot")
        self.log = log


def _state_of(read: _Read, path: Path | None, persist: bool) -> RecallState:
    state = RecallState.from_json(read.doc, path=path, persist=persist)
    log = read.log
    if isinstance(read.doc, dict) and not log.full():
        # the next line is a change from what a reader rebuilds: only when that is what
        # this state writes (a document this code wrote) may it refer to it
        log.written = read.doc if state.to_json() == read.doc else None
    state.log_state = log
    return state


def read_state_file(
    path: Path, *, persist: bool = True
) -> tuple[RecallState, DiscardedState | None]:
    """Read `recall-state.json` and its log: the state, and what was discarded.

    Missing gives an empty state and no discard (a session that never recalled). An
    unusable content gives an empty state too, after the file was moved aside (module
    docstring). A file the system will not let us read (permissions, a directory in its
    place, an I/O error) raises its ``OSError``: that is the storage being unavailable,
    not damaged content, and nothing may write over it.
    """
    try:
        read = _read_document(path)
    except _NoSnapshot as missing:
        state = RecallState(path=path, persist=persist)
        state.log_state = missing.log
        return state, None
    except CorruptJSONError as exc:
        reason = f"not JSON: {exc.reason}"
    else:
        if isinstance(read.doc, dict | list):
            return _state_of(read, path, persist), None
        reason = "not a JSON object"
    state = RecallState(path=path, persist=persist)
    kept = _keep_aside(path, reason)
    state.log_state = LogState(top=_log_top(path))
    return state, kept


def _log_top(path: Path) -> int:
    """The highest base the log beside `path` names (0: none)."""
    try:
        return _top_of(log_path(path).read_bytes())
    except FileNotFoundError:
        return 0


def _top_of(data: bytes) -> int:
    """The highest base the log `data` names (0: none)."""
    return max(0, replay({}, data, -1)[3]) if data else 0


def peek_state_file(path: Path) -> RecallState:
    """The state in `recall-state.json` for a caller that must write nothing (a read-only
    search): missing or unusable content gives an empty state and the file stays where
    it is; the state has no path, so saving it is a no-op. An unreadable file raises."""
    try:
        read = _read_document(path)
    except (FileNotFoundError, CorruptJSONError):
        return RecallState(persist=False)
    return RecallState.from_json(read.doc, persist=False)


def committed_document(path: Path) -> Any:
    """The raw document `recall-state.json` and its log commit, exactly what a load
    reads, for a checker that must judge that rather than the snapshot alone
    (``rofmd selfcheck``). Raises ``FileNotFoundError`` / ``CorruptJSONError`` like
    :func:`engine.jsonio.read_json`; reads only."""
    return _read_document(path).doc


def load_state_file(path: Path, *, persist: bool = True) -> RecallState:
    """`read_state_file` for callers that have nobody to report a discard to (an
    unusable file is still moved aside; an unreadable one raises)."""
    return read_state_file(path, persist=persist)[0]


def fold_state_log(path: Path) -> bool:
    """Fold the log into a new snapshot and remove it, so `recall-state.json` alone holds
    the state (a tool that rewrites that file: `engine.secrets.rewrite`). True when
    there was a log; a missing or unusable snapshot is left as it is."""
    if not log_path(path).exists():
        return False
    try:
        read = _read_document(path)
    except (FileNotFoundError, CorruptJSONError):
        return False
    if not isinstance(read.doc, dict):
        return False
    _write_snapshot(path, read.doc, read.log)
    return True
