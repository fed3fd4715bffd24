"""Per-session archive state (reference §1.1 step 3, §1.1.1) and the record that makes
archiving exactly-once across crashes.

In memory only: the pressure-episode counter and the hard-limit stop, the warn-once
flags (small / fake window).

Durable: every archive the host has not reported yet (``archive/commit`` /
``archive/abort``), in ``archives-unreported.json`` in the session directory, written
atomically on every change. A record holds the span the archive replaces, as the
``(seq, message id)`` of every shadowed node, what its store transaction writes
(``Transaction.record()``: folders, images), the compaction answered, and what undoes
its pass-0 re-archive (recall-state snapshot, folders marked rescorePending). Its
phase says whether the answer may have left the daemon:

* ``planned``: written before the transaction's journal. The answer is sent only after
  the record turns ``answered``, so a ``planned`` record found at load (crash mid-commit
  or just after it) was certainly never answered: everything it wrote is rolled back
  (folders, images, index entries, rescorePending marks, the recall block), and the
  host's replay plans afresh. Its messages never left the host's context.
* ``answered``: the host may hold the answer. At load it is reinstated in the store
  (``SessionStore.reinstate``), so ``archive/abort`` still removes exactly what it wrote.
* ``aborting``: written before ``archive/abort`` removes anything; found at load (a
  crash mid-abort), the abort is finished there and remembered as settled.

A pre-step whose surface still shows an answered archive's whole span, seq by seq with
the same message ids, is a replay of the request whose answer was lost: it is answered
with that archive's compaction again, as it is (same token, same folders), even when
the surface has grown or a fresh plan would cut elsewhere. One token thus stands for
one set of folders, whatever the number of replays or restarts, and no message is
archived twice. A span that is gone from the surface has landed (the commit was lost):
the archive is final. A span partly gone (something else rewrote the surface) is kept
as well: data is never dropped on a maybe.

Settled tokens are remembered in the same record (the last :data:`MAX_SETTLED` per
session, each change written atomically before it is answered), so a report re-sent
after a lost answer or a restart gets the answer the first one got or would have got,
and a host can tell a settled token from a wrong one:

* ``committed``, ``landed`` (span gone from the surface), ``kept`` (past
  :data:`MAX_UNREPORTED`, or its record entry unreadable): the folders are kept;
  ``archive/commit`` is ``{"ok": true}``, ``archive/abort`` is refused (-32602, it is
  final);
* ``aborted`` (also an abort cut short and finished at load): ``archive/abort`` is
  ``{"ok": true, "rolledBack": [...], "alreadyRolledBack": true}`` with the folders the
  first abort named, ``archive/commit`` is refused (-32602, nothing is kept);
* ``unanswered`` (a ``planned`` archive rolled back at load, or abandoned before its
  answer): the host cannot hold the token, but if a report names it anyway it is
  treated as aborted: commit refused, abort answered as already rolled back.

A token neither pending nor settled is unknown (-32602 "unknown archive token").
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import orjson
import structlog
from pydantic import ValidationError

from engine.jsonio import CorruptJSONError, read_json, write_json_atomic
from engine.recall import load_state_file
from engine.store import JournalRecord, SessionStore, UnknownTransactionError

__all__ = [
    "MAX_SETTLED",
    "MAX_UNREPORTED",
    "RECORD_NAME",
    "ArchiveState",
    "PendingArchive",
    "Settled",
    "span_of",
    "surface_ids",
]

log = structlog.get_logger("rofmd.archive")

MAX_UNREPORTED = 16
"""Unreported archives remembered per session; older ones are kept and finalized."""
MAX_SETTLED = 64
"""Settled tokens remembered per session (re-sent commit / abort answers)."""
RECORD_NAME = "archives-unreported.json"
"""The durable record, in the session directory."""
RECORD_VERSION = 1

Phase = Literal["planned", "answered", "aborting"]
Outcome = Literal["committed", "aborted", "landed", "kept", "unanswered"]
_OUTCOMES: frozenset[str] = frozenset(get_args(Outcome))
_KEPT: frozenset[str] = frozenset(("committed", "landed", "kept"))
"""Outcomes whose folders stay in the store (a commit of them succeeds)."""
Span = tuple[tuple[int, str | None], ...]
_ABSENT = object()


def surface_ids(surface: Sequence[Mapping[str, Any]]) -> dict[int, str | None]:
    """``seq → message id`` of a pre-step surface (id None when the node has none)."""
    out: dict[int, str | None] = {}
    for node in surface:
        seq = node.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool):
            continue
        msg = node.get("message")
        mid = msg.get("id") if isinstance(msg, Mapping) else None
        out[seq] = mid if isinstance(mid, str) else None
    return out


def span_of(seqs: Sequence[int], ids: Mapping[int, str | None]) -> Span:
    """The ``(seq, message id)`` pairs of the shadowed seqs."""
    return tuple((seq, ids.get(seq)) for seq in seqs)


@dataclass
class PendingArchive:
    """An archive written and indexed but not yet committed or aborted by the host."""

    token: str
    span: Span
    journal: JournalRecord
    """What the store transaction writes (the rollback set)."""
    phase: Phase = "answered"
    folders: list[str] = field(default_factory=list)
    """The folders the answer names (written now, or already archived under the key)."""
    compaction: dict[str, Any] | None = None
    recall_snapshot: object | None = None
    recall: Any = None
    """The recall state object the snapshot was taken from (restored into that one);
    None after a restart (the session's loaded state is used)."""
    rescore_marked: list[str] = field(default_factory=list)
    turn: int = 0

    @property
    def written(self) -> list[str]:
        """Folders this archive wrote (what a rollback removes)."""
        return list(self.journal.folders)

    @property
    def shadowed_seqs(self) -> frozenset[int]:
        return frozenset(seq for seq, _ in self.span)

    def status(self, surface: Mapping[int, str | None]) -> Literal["live", "landed", "partial"]:
        """``live``: the whole span is on the surface (same seqs, same message ids), the
        replacement has not landed; ``landed``: none of it is; ``partial``: some is."""
        on = sum(1 for seq, mid in self.span if surface.get(seq, _ABSENT) == mid)
        if self.span and on == len(self.span):
            return "live"
        return "landed" if on == 0 else "partial"

    def to_json(self, snapshot_json: Any) -> dict[str, Any]:
        return {
            "token": self.token,
            "phase": self.phase,
            "turn": self.turn,
            "span": [[seq, mid] for seq, mid in self.span],
            "journal": self.journal.model_dump(mode="json"),
            "folders": list(self.folders),
            "compaction": self.compaction,
            "recallSnapshot": snapshot_json,
            "rescoreMarked": list(self.rescore_marked),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PendingArchive:
        span: list[tuple[int, str | None]] = []
        for item in d.get("span") or []:
            seq, mid = item
            if not isinstance(seq, int) or not (mid is None or isinstance(mid, str)):
                raise ValueError(f"bad span entry {item!r}")
            span.append((seq, mid))
        phase = d.get("phase")
        if phase not in ("planned", "answered", "aborting"):
            raise ValueError(f"bad phase {phase!r}")
        compaction = d.get("compaction")
        return cls(
            token=str(d["token"]),
            span=tuple(span),
            journal=JournalRecord.model_validate(d["journal"]),
            phase=phase,
            folders=[str(f) for f in d.get("folders") or []],
            compaction=compaction if isinstance(compaction, dict) else None,
            recall_snapshot=d.get("recallSnapshot"),
            rescore_marked=[str(f) for f in d.get("rescoreMarked") or []],
            turn=int(d.get("turn") or 0),
        )


@dataclass(frozen=True)
class Settled:
    """How an archive ended; ``rolled_back``: the folders an abort (or the rollback of an
    unanswered archive) named, what a re-sent abort answers again."""

    outcome: Outcome
    rolled_back: tuple[str, ...] = ()

    @property
    def kept(self) -> bool:
        """Its folders stay: a commit succeeds, an abort is refused."""
        return self.outcome in _KEPT


@dataclass
class ArchiveState:
    """Archive guards and unreported archives of one session."""

    pressure_failures: int = 0
    hard_stopped: bool = False
    warned: set[str] = field(default_factory=set)
    pending: dict[str, PendingArchive] = field(default_factory=dict)
    settled: dict[str, Settled] = field(default_factory=dict)
    tokens_issued: int = 0
    path: Path | None = None
    """Where the record lives; None: in memory only (tests, no store)."""
    _snapshot_json: dict[str, Any] = field(default_factory=dict, repr=False)

    def warn_once(self, key: str) -> bool:
        """True the first time ``key`` is warned in this session."""
        if key in self.warned:
            return False
        self.warned.add(key)
        return True

    # -- replays -----------------------------------------------------------------
    def classify(
        self, surface: Mapping[int, str | None]
    ) -> tuple[PendingArchive | None, list[tuple[PendingArchive, str]]]:
        """The answered archive a pre-step with this surface replays (its whole span still
        on the surface), and the answered archives whose span is gone (``landed``) or
        partly gone (``partial``): both are final."""
        live: PendingArchive | None = None
        gone: list[tuple[PendingArchive, str]] = []
        for pend in self.pending.values():
            if pend.phase != "answered":
                continue
            status = pend.status(surface)
            if status == "live":
                live = live or pend
            else:
                gone.append((pend, status))
        return live, gone

    # -- transitions (each one durable before it returns) -----------------------------
    # Each changes memory, then saves; if the save fails, memory is put back and the
    # error raised: memory never claims more than the record on disk does.
    def begin(self, pend: PendingArchive) -> None:
        """Record a ``planned`` archive before its transaction writes anything."""
        pend.phase = "planned"
        self.pending[pend.token] = pend
        self._remember_snapshot(pend)
        try:
            self.save()
        except BaseException:
            self.pending.pop(pend.token, None)
            self._forget_snapshot(pend.token)
            raise

    def answered(
        self, token: str, folders: list[str], compaction: dict[str, Any]
    ) -> list[PendingArchive]:
        """The archive is written and about to be answered; returns the oldest unreported
        archives dropped to stay under :data:`MAX_UNREPORTED` (the caller finalizes them)."""
        before = (dict(self.pending), dict(self.settled), dict(self._snapshot_json))
        pend = self.pending[token]
        pend.phase = "answered"
        pend.folders = list(folders)
        pend.compaction = compaction
        dropped: list[PendingArchive] = []
        while len(self.pending) > MAX_UNREPORTED:
            oldest = next(iter(self.pending))
            dropped.append(self.pending.pop(oldest))
            self._forget_snapshot(oldest)
            self._settle(oldest, Settled("kept"))
        try:
            self.save()
        except BaseException:
            self.pending, self.settled, self._snapshot_json = before
            pend.phase, pend.folders, pend.compaction = "planned", [], None
            raise
        return dropped

    def aborting(self, token: str) -> None:
        """``archive/abort`` is about to remove the archive (finished at load if cut short)."""
        pend = self.pending.get(token)
        if pend is None:
            return
        phase, pend.phase = pend.phase, "aborting"
        try:
            self.save()
        except BaseException:
            pend.phase = phase
            raise

    def discard(self, token: str) -> None:
        """A planned archive that was rolled back before its answer (remembered as
        ``unanswered``, so its token is never issued again and a report naming it is
        told so)."""
        pend = self.pending.pop(token, None)
        if pend is not None:
            self._forget_snapshot(token)
            self._settle(token, Settled("unanswered", tuple(pend.written)))
            self.save()

    def settle(self, token: str, outcome: Outcome, rolled_back: Sequence[str] = ()) -> None:
        """The archive ended (commit, abort, landed): forget it, remember the outcome. (If
        the save fails, the record still lists it: at load it is reinstated, or its abort
        finished, and a re-sent commit or abort gets its answer again.)"""
        self.pending.pop(token, None)
        self._forget_snapshot(token)
        self._settle(token, Settled(outcome, tuple(rolled_back)))
        self.save()

    def _settle(self, token: str, outcome: Settled) -> None:
        self.settled.pop(token, None)
        self.settled[token] = outcome
        while len(self.settled) > MAX_SETTLED:
            del self.settled[next(iter(self.settled))]

    # -- persistence -------------------------------------------------------------
    def _remember_snapshot(self, pend: PendingArchive) -> None:
        """The recall snapshot as JSON, once (None when it cannot be stored)."""
        snap = pend.recall_snapshot
        if snap is None:
            self._snapshot_json.pop(pend.token, None)
            return
        try:
            self._snapshot_json[pend.token] = orjson.loads(orjson.dumps(snap))
        except TypeError:
            self._snapshot_json[pend.token] = None

    def _forget_snapshot(self, token: str) -> None:
        self._snapshot_json.pop(token, None)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": RECORD_VERSION,
            "unreported": [
                p.to_json(self._snapshot_json.get(p.token)) for p in self.pending.values()
            ],
            "settled": [
                {"token": t, "outcome": s.outcome, "rolledBack": list(s.rolled_back)}
                for t, s in self.settled.items()
            ],
        }

    def save(self) -> None:
        """Write the record atomically (no-op without a path)."""
        if self.path is not None:
            write_json_atomic(self.path, self.to_json())

    @classmethod
    def load(cls, store: SessionStore) -> ArchiveState:
        """The session's archive state after a (re)start. Blocking; runs once per session,
        right after the store's recovery and before any request uses the session.

        Answered archives are reinstated in the store; planned ones (never answered)
        are rolled back, together with their pass-0 re-archive.
        """
        path = store.dir / RECORD_NAME
        ast = cls(path=path)
        try:
            doc = read_json(path)
        except FileNotFoundError:
            return ast
        except (CorruptJSONError, OSError) as exc:
            log.warning(
                "unreported-archive record unreadable: ignored", path=str(path), error=str(exc)
            )
            return ast
        if not isinstance(doc, dict):
            log.warning("unreported-archive record unreadable: ignored", path=str(path))
            return ast
        for item in doc.get("settled") or []:
            with contextlib.suppress(KeyError, TypeError, ValueError):
                outcome = item["outcome"]
                if outcome in _OUTCOMES:
                    ast._settle(
                        str(item["token"]),
                        Settled(outcome, tuple(str(f) for f in item.get("rolledBack") or [])),
                    )
        changed = False
        for item in doc.get("unreported") or []:
            try:
                pend = PendingArchive.from_json(item)
            except (KeyError, TypeError, ValueError, ValidationError) as exc:
                # recovery finalized its journal: its folders stay, and so does the answer
                # to a report naming its token
                token = item.get("token") if isinstance(item, dict) else None
                if isinstance(token, str) and token:
                    ast._settle(token, Settled("kept"))
                log.warning(
                    "unreported archive record unreadable: kept as is", token=token, error=str(exc)
                )
                changed = True
                continue
            store.reinstate(pend.journal)
            if pend.phase == "answered":
                ast.pending[pend.token] = pend
                ast._snapshot_json[pend.token] = (
                    pend.recall_snapshot if isinstance(pend.recall_snapshot, dict) else None
                )
                continue
            if pend.phase == "aborting":
                _roll_back(store, pend, "archive/abort cut short by a restart: finished")
                ast._settle(pend.token, Settled("aborted", tuple(pend.written)))
                log.info("interrupted archive abort finished", token=pend.token)
            else:
                removed = _roll_back(
                    store, pend, "never answered (the daemon stopped before the answer)"
                )
                ast._settle(pend.token, Settled("unanswered", tuple(pend.written)))
                log.info(
                    "archive never answered before the restart: rolled back",
                    token=pend.token,
                    removed=len(removed),
                )
            changed = True
        if changed:
            ast.save()
        return ast


def _roll_back(store: SessionStore, pend: PendingArchive, reason: str) -> list[str]:
    """Undo everything a planned (or aborting) archive may have written before a crash."""
    removed: list[str] = []
    with contextlib.suppress(UnknownTransactionError):
        removed = store.rollback_committed(pend.token)
    present = [fid for fid in pend.rescore_marked if fid in store]
    if present:
        store.update_metas({fid: {"rescorePending": None} for fid in present})
    snapshot = pend.recall_snapshot
    recall_path = store.paths.recall_state
    if isinstance(snapshot, dict) and recall_path.exists():
        # the recall state is not loaded yet (this runs before any request of the
        # session): restoring it is putting the snapshot back into its file
        load_state_file(recall_path, persist=True).restore(snapshot)
    store.append_stats(
        {
            "type": "archive-abort",
            "time": int(time.time() * 1000),
            "token": pend.token,
            "reason": reason,
            "rolledBack": removed,
        }
    )
    return removed
