"""One passive archive against a session store (reference §3.2.6).

Order, and why:

1. the event: not a ``compaction/summary`` → nothing; rofmd's own provider → nothing
   (its archive already holds those messages);
2. the watermark: seqs of this DSH session handled before are dropped; none left →
   nothing (the same event again, from the socket, the tailer or after a restart);
3. the shadowed user and assistant messages (text only, ``engine.passive.events``),
   parsed as the pre-step parses a surface, minus any message an active archive of this
   store already holds (its message id in a folder whose event time overlaps: an archive
   kept on a maybe whose replacement never landed);
4. folders by the pre-step's own builder (``engine.archive.plan.plan_folders``), written
   in one store transaction (``engine.archive.commit.commit_plan``) with
   ``archivedFrom: "passive"``, pending or scored at creation, and finalized at once:
   there is no host checkpoint to wait for;
5. only then the watermark: a crash between 4 and 5 replays the same plan, whose
   idempotency keys name folders already written, so nothing is archived twice.

In a onebot QQ channel session (``channel``) the folders are what a pre-step archive
would make of the same messages: voice notes folded, and images staged when their
messages arrived (``engine.compat.media``) taken into ``images/``; those staged copies
are removed once the folders are final.

A failed write (disk, ``storage.maxFolders``) leaves the watermark as it was: the
caller may try the event again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from engine.archive.commit import archive_token, commit_plan
from engine.archive.images import PlannedImage, plan_staged_images, run_stamp
from engine.archive.plan import PreStepPlan, plan_folders
from engine.archive.surface import Node, parse_surface
from engine.compat.media import image_paths, release_staged, staged_messages
from engine.config.model import MemoryConfig
from engine.passive.events import Compaction, compaction_of, shadowed_surface
from engine.passive.watermark import WATERMARK_NAME, load_watermark, save_watermark
from engine.relevance.stats import TermStats
from engine.scoring.fallback import batch_scorer
from engine.store import SessionStore, StoreError
from engine.store.ids import safe_session_id

__all__ = ["Outcome", "PassiveInput", "PassiveOutcome", "archive_passive"]

Outcome = Literal[
    "not-a-compaction", "own-provider", "nothing-new", "no-messages", "archived", "failed"
]
ARCHIVED_FROM = "passive"


@dataclass(frozen=True, slots=True)
class PassiveInput:
    """One ``session/event`` (or the same event read from the session log)."""

    session_id: str
    """The DSH session id (the watermark's bucket, part of the idempotency keys)."""
    event: Mapping[str, Any]
    shadowed: Sequence[Mapping[str, Any]]
    now_ms: int
    cfg: MemoryConfig
    archiver_version: str
    score_mode: Literal["model", "heuristic"] = "model"
    session_stats: Callable[[], TermStats | None] = lambda: None
    """Document frequencies of the session's other folders, asked for only when
    folders are scored heuristically (their keywords are what sets them apart)."""
    channel: bool = False
    """A onebot QQ channel session (module docstring)."""


@dataclass(slots=True)
class PassiveOutcome:
    """What :func:`archive_passive` did."""

    outcome: Outcome
    compaction: Compaction | None = None
    folder_ids: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    messages: int = 0
    already_handled: int = 0
    """Shadowed seqs the watermark had."""
    already_archived: int = 0
    """Messages an active archive of this store holds."""
    warnings: list[tuple[str, str]] = field(default_factory=list)


def _actively_archived(store: SessionStore, nodes: Sequence[Node]) -> set[str]:
    """Message ids of ``nodes`` that a non-passive folder of ``store`` holds. Only folders
    whose event time overlaps the nodes' are read (a message's folder has its time)."""
    ids = {n.message_id for n in nodes if n.message_id}
    times = [n.time for n in nodes if n.time is not None and n.message_id]
    if not ids or not times:
        return set()
    lo, hi = min(times), max(times) + 1
    found: set[str] = set()
    for entry in store.index:
        if entry.archivedFrom == ARCHIVED_FROM or entry.eventStart is None:
            continue
        end = entry.eventEnd if entry.eventEnd is not None else entry.eventStart + 1
        if entry.eventStart >= hi or end <= lo:
            continue
        try:
            messages = store.read_context(entry.id)
        except StoreError:
            continue
        found.update(m["id"] for m in messages if isinstance(m.get("id"), str) and m["id"] in ids)
    return found


def archive_passive(store: SessionStore, inp: PassiveInput) -> PassiveOutcome:
    """Archive what a foreign compaction shadowed (see the module docstring)."""
    compaction = compaction_of(inp.event)
    if compaction is None:
        return PassiveOutcome("not-a-compaction")
    out = PassiveOutcome("nothing-new", compaction)
    if compaction.own:
        out.outcome = "own-provider"
        return out
    path = store.dir / WATERMARK_NAME
    wm = load_watermark(path, default_session=store.session_id)
    if wm.damage is not None:
        out.warnings.append(
            ("watermark-damaged", f"{WATERMARK_NAME} unreadable, rebuilt: {wm.damage}")
        )
    todo = wm.unhandled(inp.session_id, compaction.seqs)
    out.already_handled = len(compaction.seqs) - len(todo)
    if not todo:
        return out
    cfg = inp.cfg
    nodes = [
        n
        for n in parse_surface(
            shadowed_surface(inp.shadowed, todo), user_kinds=cfg.recall.trigger_source_kinds
        )
        if n.cls == "conversation" and n.text().strip()
    ]
    held = _actively_archived(store, nodes)
    if held:
        out.already_archived = sum(1 for n in nodes if n.message_id in held)
        nodes = [n for n in nodes if n.message_id not in held]
    nodes = [n._replace(pos=i) for i, n in enumerate(nodes)]
    if not nodes:
        out.outcome = "no-messages"
        if not store.materialized:
            store.materialize()
        wm.mark(inp.session_id, compaction.seqs)
        save_watermark(path, wm, inp.now_ms)
        return out
    images: dict[tuple[int, int], PlannedImage] = {}
    staged_dirs: list[Path] = []
    if inp.channel:
        ids = [n.message_id for n in nodes if n.is_user and n.message_id and image_paths(n.text())]
        staged = staged_messages(store.paths.root, safe_session_id(store.session_id), ids)
        if staged:
            nodes, images = plan_staged_images(nodes, staged, stamp=run_stamp(inp.now_ms))
            staged_dirs = [m.dir for m in staged.values()]
    built = plan_folders(
        nodes,
        session_id=inp.session_id,
        turn=compaction.turn,
        cfg=cfg.compress,
        images=images,
        secrets=cfg.secrets.mode,
        voice_notes=inp.channel,
    )
    plan = PreStepPlan(
        outcome="archive",
        shadowed_seqs=list(compaction.seqs),
        folders=built.folders,
        max_folders_capped=built.capped,
        content_hash=built.content_hash,
        archived_messages=len(nodes),
        start_seq=nodes[0].seq,
        end_seq=nodes[-1].seq,
        total_segments=len(built.folders),
        secrets=built.secrets,
    )
    token, _ = archive_token(store, inp.now_ms, built.content_hash, 0)
    commit = commit_plan(
        store,
        plan,
        cfg=cfg,
        token=token,
        now_ms=inp.now_ms,
        turn=compaction.turn,
        step=None,
        archiver_version=inp.archiver_version,
        archived_from=ARCHIVED_FROM,
        score_mode=inp.score_mode,
        scorer=(
            batch_scorer(built.folders, cfg, inp.now_ms, inp.session_stats())
            if inp.score_mode == "heuristic"
            else None
        ),
    )
    out.warnings.extend(commit.warnings)
    record = commit.record
    record["source"] = ARCHIVED_FROM
    record["compactionId"] = compaction.compaction_id
    record["provider"] = compaction.provider
    record["alreadyArchived"] = out.already_archived
    store.append_stats(record)
    if not commit.ok:
        out.outcome = "failed"
        return out
    store.finalize(token)
    out.outcome = "archived"
    out.folder_ids, out.written, out.messages = commit.folder_ids, commit.written, len(nodes)
    if inp.score_mode == "heuristic" and commit.written:
        store.append_stats(
            {
                "type": "heuristic-score",
                "time": inp.now_ms,
                "count": len(commit.written),
                "reason": ARCHIVED_FROM,
            }
        )
    wm.mark(inp.session_id, compaction.seqs)
    save_watermark(path, wm, inp.now_ms)
    release_staged(staged_dirs)
    return out
