"""Damage on disk made visible, per session (issue 21: a daemon that runs for months).

Damage is whatever the store or recall had to skip or repair instead of using as it
was: a memory folder that cannot be read (recall skips one whose conversation it cannot
read, and reads the index, not the meta file, for the rest; recovery leaves it on
disk), a `recall-state.json` that could not be used (the block starts empty; the file
is kept aside), and the repairs recovery made when the store was opened. The engine
returns what it skipped or repaired (`LoadReport`, `RoundOutcome.unreadable`,
`Prepared.unreadable`, `synced_index`, `DiscardedState`); this ledger turns each
damage into

1. one warning in the next `agent/inbox/inserted` or `agent/pre-step` answer (its
   stable code before the colon; texts in `engine.texts.DAMAGE_WARN_*`),
2. one structlog warning line, when it is first seen,
3. an entry in `status`: `repairs` (what each load repaired, with counts and time)
   and `unreadableFolders`, kept until fixed.

Once per damage: a folder already listed as unreadable is not warned about again when
recall trips over it the next time (its reason is kept current). It leaves the list
when it is read fine again (a recall round that injects it, or `status`, which
re-checks the few listed folders in a worker thread) or when its directory is gone
and the store no longer indexes it; if it breaks again it is warned about again. A
fresh load of the session (restart, `agent/disposed`) starts a fresh ledger, so
standing damage is reported again once.

The ledger is fed from worker threads (where the reads already happen) while `status`
reads it on the event loop, hence the lock. Times are the daemon's wall clock when the
damage was seen: the session registry has no request time at load, and the times are
only shown, never decided on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from engine.recall import DiscardedState
from engine.store import CorruptFolder, CorruptFolderError, LoadReport, SessionStore, reason_file
from engine.store.folders import validate_folder
from engine.texts import (
    DAMAGE_REPAIR_PARTS,
    DAMAGE_WARN_MORE_UNREADABLE,
    DAMAGE_WARN_RECALL_STATE_KEPT,
    DAMAGE_WARN_RECALL_STATE_LOST,
    DAMAGE_WARN_STORE_REPAIRED,
    DAMAGE_WARN_UNREADABLE_FOLDER,
)

if TYPE_CHECKING:
    from handlers.app import App

__all__ = [
    "RECALL_STATE_DISCARDED",
    "STORE_REPAIRED",
    "UNREADABLE_FOLDER",
    "DamageLedger",
    "Repair",
    "damage_status",
    "describe_repairs",
    "recheck_folders",
    "repair_counts",
]

log = structlog.get_logger("rofmd.damage")

UNREADABLE_FOLDER = "unreadableFolder"
STORE_REPAIRED = "storeRepaired"
RECALL_STATE_DISCARDED = "recallStateDiscarded"

MAX_FOLDER_WARNINGS = 20
"""Unreadable-folder warnings one answer carries; the rest become one summary warning
(a damaged disk can make thousands of folders unreadable at once)."""


def wall_clock_ms() -> int:
    """When damage was seen (shown in `status`; see the module docstring)."""
    return time.time_ns() // 1_000_000


def repair_counts(report: LoadReport) -> dict[str, int]:
    """What a store load repaired, one count per kind (`engine.texts.DAMAGE_REPAIR_PARTS`).

    Unreadable folders are not repairs (nothing fixed them; they are listed apart), and
    neither is a committed journal finalized at load: that is the normal restart path
    of an archive the host never confirmed, not damage.
    """
    rebuilt = report.index_status == "corrupt" or (
        report.index_status == "missing" and report.index_rewritten
    )
    return {
        "indexRebuilt": int(rebuilt),
        "adoptedFolders": len(report.adopted),
        "removedIncomplete": len(report.removed_incomplete),
        "journalsReplayed": sum(1 for j in report.journals if j.action != "finalized"),
        "duplicateFolders": len(report.duplicate_folders),
        "missingFolders": len(report.missing_folders),
        "droppedEntries": len(report.dropped_entries),
        "reindexed": len(report.reindexed),
        "tempFilesRemoved": len(report.temp_removed),
    }


def describe_repairs(counts: Mapping[str, int], index_status: str) -> str:
    """The repairs of one load for a person, the non-zero counts in a fixed order."""
    parts = [
        DAMAGE_REPAIR_PARTS[name].format(n=n, index_status=index_status)
        for name, n in counts.items()
        if n and name in DAMAGE_REPAIR_PARTS
    ]
    return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class Repair:
    """One repair a session went through: a store load, a recall state set aside."""

    code: str
    at_ms: int
    summary: str
    counts: Mapping[str, int] = field(default_factory=dict)
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Its `status` entry; `summary` is what `rofmd status` prints."""
        out: dict[str, Any] = {"code": self.code, "at": self.at_ms, "summary": self.summary}
        if self.counts:
            out["counts"] = dict(self.counts)
        out.update(self.detail)
        return out


def _summary(message: str) -> str:
    """A warning without its code: the readable part."""
    return message.split(": ", 1)[1]


@dataclass(frozen=True, slots=True)
class _Unreadable:
    reason: str
    since_ms: int


class DamageLedger:
    """Pending warnings and the current damage of one session (module docstring)."""

    def __init__(self, clock_ms: Callable[[], int] = wall_clock_ms) -> None:
        self.session_key = ""
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        self._unreadable: dict[str, _Unreadable] = {}
        self._repairs: list[Repair] = []
        self._pending: list[str] = []
        self._pending_folders: list[str] = []

    # -- what the engine reported ----------------------------------------------------
    def record_load(self, session_key: str, report: LoadReport) -> None:
        """The store was opened: its repairs, and the folders recovery could not read."""
        self.session_key = session_key
        counts = repair_counts(report)
        if any(counts.values()):
            message = DAMAGE_WARN_STORE_REPAIRED.format(
                repairs=describe_repairs(counts, report.index_status)
            )
            repair = Repair(
                STORE_REPAIRED,
                self._clock_ms(),
                _summary(message),
                counts,
                {"indexStatus": report.index_status},
            )
            with self._lock:
                self._repairs.append(repair)
                self._pending.append(message)
            log.warning(
                "session store repaired at load",
                session_key=session_key,
                index_status=report.index_status,
                **{k: v for k, v in counts.items() if v},
            )
        self.note_unreadable(report.corrupt_folders)

    def note_unreadable(self, folders: Iterable[CorruptFolder]) -> None:
        """Folders a read path skipped; each new one is warned about and logged once."""
        new: list[CorruptFolder] = []
        with self._lock:
            for f in folders:
                known = self._unreadable.get(f.folder_id)
                if known is None:
                    self._unreadable[f.folder_id] = _Unreadable(f.reason, self._clock_ms())
                    self._pending_folders.append(
                        DAMAGE_WARN_UNREADABLE_FOLDER.format(folder=f.folder_id, reason=f.reason)
                    )
                    new.append(f)
                elif known.reason != f.reason:
                    self._unreadable[f.folder_id] = _Unreadable(f.reason, known.since_ms)
        for f in new:
            log.warning(
                "memory folder unreadable: skipped",
                session_key=self.session_key,
                folder=f.folder_id,
                reason=f.reason,
            )

    def note_readable(
        self, folder_ids: Iterable[str], files: Collection[str] | None = None
    ) -> None:
        """Folders read fine just now: fixed, if they were listed. `files`: the folder
        files that were read (a recall round reads a memory's ``context.json`` alone),
        which fix only the damage they are about (`engine.store.reason_file`); None:
        every file of each (what `status`'s re-check reads)."""
        with self._lock:
            if not self._unreadable:
                return
            listed = self._unreadable
            fixed = [
                fid
                for fid in folder_ids
                if fid in listed and (files is None or reason_file(listed[fid].reason) in files)
            ]
            for fid in fixed:
                del listed[fid]
        for fid in fixed:
            log.info("memory folder readable again", session_key=self.session_key, folder=fid)

    def note_recall_state_discarded(self, discarded: DiscardedState) -> None:
        """`recall-state.json` could not be used; the block starts empty."""
        if discarded.kept_as is not None:
            message = DAMAGE_WARN_RECALL_STATE_KEPT.format(
                reason=discarded.reason, kept_as=discarded.kept_as
            )
        else:
            message = DAMAGE_WARN_RECALL_STATE_LOST.format(
                reason=discarded.reason, error=discarded.keep_error
            )
        detail = {
            "reason": discarded.reason,
            "keptAs": discarded.kept_as,
            "keepError": discarded.keep_error,
        }
        with self._lock:
            self._repairs.append(
                Repair(RECALL_STATE_DISCARDED, self._clock_ms(), _summary(message), {}, detail)
            )
            self._pending.append(message)
        log.warning(
            "recall state discarded: the recall block starts empty",
            session_key=self.session_key,
            reason=discarded.reason,
            kept_as=discarded.kept_as,
            keep_error=discarded.keep_error,
        )

    def apply_recheck(self, results: Mapping[str, str | None]) -> None:
        """Results of `recheck_folders`: None is fixed, a reason keeps the folder listed."""
        fixed = [fid for fid, reason in results.items() if reason is None]
        self.note_readable(fixed)
        with self._lock:
            for fid, reason in results.items():
                known = self._unreadable.get(fid)
                if reason is not None and known is not None and known.reason != reason:
                    self._unreadable[fid] = _Unreadable(reason, known.since_ms)

    # -- what is shown -----------------------------------------------------------------
    def take_warnings(self) -> list[str]:
        """The warnings not handed out yet (each damage once), for this answer."""
        with self._lock:
            pending, self._pending = self._pending, []
            folders, self._pending_folders = self._pending_folders, []
        if len(folders) > MAX_FOLDER_WARNINGS:
            more = len(folders) - MAX_FOLDER_WARNINGS
            folders = [*folders[:MAX_FOLDER_WARNINGS], DAMAGE_WARN_MORE_UNREADABLE.format(n=more)]
        return [*pending, *folders]

    def unreadable_ids(self) -> list[str]:
        """The folders listed as unreadable now, sorted."""
        with self._lock:
            return sorted(self._unreadable)

    def unreadable_json(self) -> list[dict[str, Any]]:
        """`status.unreadableFolders[<session key>]`."""
        with self._lock:
            items = sorted(self._unreadable.items())
        return [{"folder": fid, "reason": u.reason, "since": u.since_ms} for fid, u in items]

    def repairs_json(self) -> list[dict[str, Any]]:
        """`status.repairs[<session key>]`, oldest first."""
        with self._lock:
            repairs = list(self._repairs)
        return [r.to_json() for r in repairs]


def recheck_folders(store: SessionStore, folder_ids: Sequence[str]) -> dict[str, str | None]:
    """Blocking. For each listed folder: None when fixed (readable again, or its directory
    is gone and the store does not index it), else its reason now. An unindexed folder
    that is readable again is adopted by the next load of the session."""
    out: dict[str, str | None] = {}
    for fid in folder_ids:
        try:
            validate_folder(store.paths, fid)
        except CorruptFolderError as exc:
            gone = fid not in store and not store.paths.folder(fid).exists()
            out[fid] = None if gone else exc.reason
        else:
            out[fid] = None
    return out


async def damage_status(app: App) -> dict[str, Any]:
    """`repairs` and `unreadableFolders` of `status`, per loaded session. The listed
    folders (a handful, not the store) are re-checked first, off the event loop."""
    states = app.sessions.loaded_states()
    todo = [(st, ids) for st in states if (ids := st.damage.unreadable_ids())]
    if todo:
        results = await anyio.to_thread.run_sync(
            lambda: [recheck_folders(st.store, ids) for st, ids in todo]
        )
        for (st, _), res in zip(todo, results, strict=True):
            st.damage.apply_recheck(res)
    repairs: dict[str, list[dict[str, Any]]] = {}
    unreadable: dict[str, list[dict[str, Any]]] = {}
    for st in states:
        if done := st.damage.repairs_json():
            repairs[st.key] = done
        if listed := st.damage.unreadable_json():
            unreadable[st.key] = listed
    return {"repairs": repairs, "unreadableFolders": unreadable}
