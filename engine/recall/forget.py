"""`memory_forget` and `memory_control` in the engine: arguments, targets, deletion, texts.

Beyond the reference (README "Forgetting"). The model names what to forget the way it
sees memories: by the 「回忆 N」 number of the current recall block (``recalled``), by
folder id (``ids``: the task block and `memory_recall`'s value show them), or, unsure,
by ``keywords``, which only previews candidates with their ids and changes nothing. A
memory is then *suppressed* (`engine.recall.hygiene`: kept on disk, never recalled again
in this session) or *deleted*.

Deletion goes through the commit journal: the folders (and their image files) become
one transaction record, reinstated and rolled back (`SessionStore.reinstate`,
`SessionStore.rollback_committed`), so a crash part-way is finished by the store's
recovery (an ``aborting`` journal is completed at load) and the index never names a
folder that is gone. The recall block drops the entries it held
(:func:`remove_from_block`); the relevance index follows the store's version.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from engine import texts
from engine.recall.state import RecallState
from engine.store import CorruptFolderError, JournalImage, JournalRecord, SessionStore

__all__ = [
    "Action",
    "ControlCall",
    "ForgetCall",
    "Targets",
    "delete_folders",
    "parse_control_arguments",
    "parse_forget_arguments",
    "remove_from_block",
    "resolve_targets",
]

Action = Literal["suppress", "delete"]


@dataclass(frozen=True, slots=True)
class ForgetCall:
    """One memory_forget call's arguments, checked; ``problems`` non-empty: refused."""

    ids: tuple[str, ...] = ()
    recalled: tuple[int, ...] = ()
    keywords: tuple[str, ...] = ()
    action: Action = "suppress"
    problems: tuple[str, ...] = ()

    @property
    def preview(self) -> bool:
        """Only keywords: list candidates, change nothing."""
        return not self.ids and not self.recalled and bool(self.keywords)


def _strings(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return tuple(dict.fromkeys(v.strip() for v in value if v.strip()))


def parse_forget_arguments(arguments: Mapping[str, Any]) -> ForgetCall:
    """Check the arguments (the tool's schema, enforced here: the host may not)."""
    problems: list[str] = []
    ids = _strings(arguments.get("ids", []))
    if ids is None:
        problems.append(texts.FORGET_ARG_IDS)
        ids = ()
    raw_numbers = arguments.get("recalled", [])
    if isinstance(raw_numbers, int) and not isinstance(raw_numbers, bool):
        raw_numbers = [raw_numbers]
    recalled: tuple[int, ...] = ()
    if not isinstance(raw_numbers, list) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in raw_numbers
    ):
        problems.append(texts.FORGET_ARG_RECALLED)
    else:
        recalled = tuple(dict.fromkeys(raw_numbers))
    raw_keywords = arguments.get("keywords")
    keywords: tuple[str, ...] = ()
    if raw_keywords is not None:
        if not isinstance(raw_keywords, str):
            problems.append(texts.FORGET_ARG_KEYWORDS)
        else:
            keywords = tuple(w for w in raw_keywords.replace(",", " ").split() if w)
    action = arguments.get("action", "suppress")
    if action not in ("suppress", "delete"):
        problems.append(texts.FORGET_ARG_ACTION)
        action = "suppress"
    return ForgetCall(ids, recalled, keywords, action, tuple(problems))


@dataclass(frozen=True, slots=True)
class ControlCall:
    """One memory_control call: ``recall`` is pause / resume, None when missing."""

    recall: Literal["pause", "resume"] | None


def parse_control_arguments(arguments: Mapping[str, Any]) -> ControlCall:
    value = arguments.get("recall")
    if value == "pause":
        return ControlCall("pause")
    if value == "resume":
        return ControlCall("resume")
    return ControlCall(None)


@dataclass(slots=True)
class Targets:
    """The memories a call names: known ids in order, and what it named that is not."""

    ids: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    bad_numbers: list[int] = field(default_factory=list)


def resolve_targets(call: ForgetCall, rs: RecallState, store: SessionStore) -> Targets:
    """``recalled`` numbers through the current block, then ``ids``; only folders of
    this session's store count (another session's id is an unknown id)."""
    out = Targets()
    by_number = {a.number: a.id for a in rs.additions}
    for n in call.recalled:
        fid = by_number.get(n)
        if fid is None:
            out.bad_numbers.append(n)
        elif fid in store:
            out.ids.append(fid)
        else:
            out.unknown.append(fid)
    for fid in call.ids:
        (out.ids if fid in store else out.unknown).append(fid)
    out.ids = list(dict.fromkeys(out.ids))
    out.unknown = [f for f in dict.fromkeys(out.unknown) if f not in out.ids]
    return out


def remove_from_block(rs: RecallState, folder_ids: Iterable[str], *, forget: bool) -> int:
    """Take these memories out of the recall block (re-rendered, saved); ``forget`` also
    drops what the lanes and the ledger remember of them (deleted folders). Returns how
    many block entries went."""
    gone = set(folder_ids)
    before = len(rs.additions)
    rs.additions = [a for a in rs.additions if a.id not in gone]
    removed = before - len(rs.additions)
    if forget:
        for fid in gone:
            rs.ledger.pop(fid, None)
            rs.lanes.high_recycle.pop(fid, None)
            rs.lanes.recycle.pop(fid, None)
        rs.lanes.register = [r for r in rs.lanes.register if r.get("id") not in gone]
    if removed:
        rs.full_quota = None
        rs.clause_status = None
        rs.render()
    if removed or forget:
        rs.save()
    return removed


def delete_folders(store: SessionStore, folder_ids: Sequence[str], txn_id: str) -> list[str]:
    """Remove these folders and their images through the commit journal (module
    docstring); returns the ids removed. Blocking."""
    wanted = [fid for fid in dict.fromkeys(folder_ids) if fid in store]
    if not wanted:
        return []
    images: list[JournalImage] = []
    unread: set[str] = set()
    for fid in wanted:
        try:
            refs = store.get_meta(fid).images or []
        except (CorruptFolderError, OSError):
            unread.add(fid)
            continue
        images.extend(JournalImage(name=ref.name, folderId=fid) for ref in refs)
    if unread:  # an unreadable meta: its images by the image table
        images.extend(
            JournalImage(name=row.name, folderId=row.folderId)
            for row in store.image_entries()
            if row.folderId in unread
        )
    record = JournalRecord(txnId=txn_id, state="committed", folders=wanted, images=images)
    store.reinstate(record)
    return store.rollback_committed(txn_id)
