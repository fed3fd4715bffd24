"""The whole pre-step archive plan: from a surface and a token count to folders and a
replacement (reference §1.1, §1.1.1, §1.4, §1.7, §1.8).

Pure: no disk, no clock (``now_ms`` is an input), no store; the caller allocates folder
ids, copies images and commits. The plan is deterministic: the same input gives the
same folders, titles, idempotency keys and note, which is what makes a replayed
pre-step archive nothing twice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from engine.archive.chunks import chunk_messages, content_hash, titles
from engine.archive.cut import CutPlan, effective_window, plan_cut, protected_limit, window_guard
from engine.archive.images import PlannedImage, plan_images, plan_staged_images, run_stamp
from engine.archive.messages import archive_messages
from engine.archive.note import NoteParts, classify_span, extend_backwards, render_note
from engine.archive.rearchive import RearchivePlan, plan_rearchive
from engine.archive.surface import Node, conversation, parse_surface
from engine.archive.tokens import MESSAGE_OVERHEAD, estimate_text_tokens
from engine.compat.media import StagedMessage, image_paths
from engine.config.model import CompressConfig, MemoryConfig
from engine.recall_view import AdditionView
from engine.secrets.redact import Mode
from engine.store.ids import make_idempotency_key

__all__ = [
    "FolderSet",
    "Outcome",
    "PlannedFolder",
    "PreStepInput",
    "PreStepPlan",
    "Switches",
    "below_trigger",
    "plan_folders",
    "plan_pre_step",
    "switch_off_reason",
]

Outcome = Literal["below-trigger", "skipped", "refused", "rearchive-only", "archive"]

NOTE_TOKENS_ESTIMATE = 32
"""What the note costs before it is rendered (the cut needs it to aim at the floor)."""


@dataclass(frozen=True, slots=True)
class Switches:
    """The on/off facts that decide whether a pre-step may archive at all."""

    compress_enabled: bool
    pre_step_enabled: bool
    is_subagent: bool
    apply_to_subagents: bool
    apply_to_main_sessions: bool
    token_meter: bool
    tools: bool


def switch_off_reason(s: Switches) -> str | None:
    """Why automatic archiving is off for this request (None: it is on)."""
    if not s.compress_enabled:
        return "compress.enabled is false"
    if not s.pre_step_enabled:
        return "compress.preStepEnabled is false"
    if s.is_subagent and not s.apply_to_subagents:
        return "subagent session (compress.applyToSubagents is false)"
    if not s.is_subagent and not s.apply_to_main_sessions:
        return "main session (compress.applyToMainSessions is false)"
    if not s.token_meter:
        return "the host has no tokenMeter capability"
    if not s.tools:
        return "the host has no tools capability (pending memories could never be scored)"
    return None


@dataclass(frozen=True, slots=True)
class PreStepInput:
    """Everything a pre-step plan depends on."""

    session_id: str
    turn: int
    surface: Sequence[Mapping[str, Any]]
    node_tokens: Mapping[int, int]
    total_tokens: int
    host_window: int
    now_ms: int
    cfg: MemoryConfig
    recall: Sequence[AdditionView] | None = None
    readable_images: Mapping[str, str] = field(default_factory=dict)
    """Host paths that hold an image, with its format by the first bytes (`image_kind`)."""
    attachments: bool = True
    hard_stopped: bool = False
    channel: bool = False
    """A onebot QQ channel session (reference §3.2.7): voice notes folded, and the
    ``[图片:<path>]`` images of ``staged_images`` archived from the staging area."""
    staged_images: Mapping[str, StagedMessage] = field(default_factory=dict)
    """Staged onebot images by message id (``engine.compat.media.staged_messages``)."""


@dataclass(slots=True)
class PlannedFolder:
    """One folder to write (its id is allocated at commit)."""

    ordinal: int
    title: str
    messages: list[dict[str, Any]]
    event_range: tuple[int, int] | None
    images: list[PlannedImage]
    chars: int
    idempotency_key: str


@dataclass(slots=True)
class PreStepPlan:
    """The outcome of :func:`plan_pre_step`."""

    outcome: Outcome
    window: int = 0
    total_tokens: int = 0
    percent_before: float = 0.0
    emergency: bool = False
    warnings: list[tuple[str, str]] = field(default_factory=list)
    rearchive: RearchivePlan | None = None
    cut: CutPlan | None = None
    turn_protected: bool = False
    start_seq: int = 0
    end_seq: int = 0
    shadowed_seqs: list[int] = field(default_factory=list)
    shadowed_tokens: int = 0
    note: str = ""
    note_parts: NoteParts = field(default_factory=NoteParts)
    folders: list[PlannedFolder] = field(default_factory=list)
    max_folders_capped: bool = False
    archived_messages: int = 0
    content_hash: str = ""
    projected_tokens: int = 0
    total_segments: int = 0
    guarded: bool = False
    """Skipped by a guard (window, hard stop, size): not a pressure episode."""
    secrets: Counter[str] = field(default_factory=Counter)
    """Secret values kept out of the folders (``secrets.mode``), by kind."""
    image_paths: tuple[str, ...] = ()
    """Host paths of the images in the archived span, the only ones ``readable_images``
    is consulted for: a caller checks those files only when there are any."""
    image_message_ids: tuple[str, ...] = ()
    """With ``channel``: ids of the archived user messages that name an image path, the
    only ones whose staged copies ``staged_images`` is consulted for."""
    staged_dirs: tuple[Path, ...] = ()
    """The staging directories the folders take images from (removed once final)."""

    @property
    def archives(self) -> bool:
        return self.outcome == "archive"

    @property
    def percent_after(self) -> float:
        return self.projected_tokens * 100 / self.window if self.window else 0.0


def node_token_counts(nodes: Sequence[Node], measured: Mapping[int, int]) -> list[int]:
    """Host-measured tokens per node, estimated where the host did not measure."""
    out: list[int] = []
    for node in nodes:
        value = measured.get(node.seq)
        if value is None or value < 0:
            value = estimate_text_tokens(node.text()) + MESSAGE_OVERHEAD
        out.append(int(value))
    return out


def below_trigger(total_tokens: int, host_window: int, cfg: MemoryConfig) -> bool:
    """The context is at or below ``compress.triggerPercent`` of a known window: the plan
    is ``below-trigger``, with no warning, whatever the surface (known without it)."""
    window = effective_window(host_window, cfg.compress)
    return window > 0 and total_tokens * 100 / window <= cfg.compress.trigger_percent


@dataclass(slots=True)
class FolderSet:
    """The folders of one archive run, whether they were chunked into fewer than asked
    (``compress.maxFoldersPerRun``), and the content hash of what they hold."""

    folders: list[PlannedFolder]
    capped: bool
    content_hash: str
    secrets: Counter[str] = field(default_factory=Counter)
    """Secret values kept out of the folders (``secrets.mode``), by kind."""


def plan_folders(
    archived_nodes: Sequence[Node],
    *,
    session_id: str,
    turn: int,
    cfg: CompressConfig,
    images: Mapping[tuple[int, int], PlannedImage] | None = None,
    secrets: Mode = "redact",
    voice_notes: bool = False,
) -> FolderSet:
    """The folders of archived conversation nodes: their readable text (image
    placeholders named by ``images``, keyed by node position and image index), chunks,
    titles and idempotency keys. One builder for every path that archives (the
    pre-step here, the passive path in ``engine.passive``), so a folder is the same
    whichever path wrote it, and a replay of either keys the same folders. ``secrets``
    is ``secrets.mode`` (`engine.archive.messages`: no secret value reaches a folder;
    the default is the safe one). ``voice_notes``: a QQ channel session's voice marks and
    transcripts are folded (``engine.compat.voice``)."""
    images = images or {}
    archived = archive_messages(
        archived_nodes,
        {key: img.name for key, img in images.items()},
        secrets,
        voice_notes=voice_notes,
    )
    msgs = archived.messages
    folders: list[PlannedFolder] = []
    max_folders = max(1, min(cfg.max_folders_per_run, cfg.max_folders_per_step))
    chunks, capped = chunk_messages(
        msgs,
        target_chars=cfg.target_chunk_chars,
        min_chars=cfg.min_chunk_chars,
        max_folders=max_folders,
    )
    folder_titles = titles(chunks, msgs)
    digest = content_hash(chunks, msgs)
    first_seq, last_seq = archived_nodes[0].seq, archived_nodes[-1].seq
    by_pos_images: dict[int, list[PlannedImage]] = {}
    for (p, _), img in sorted(images.items()):
        by_pos_images.setdefault(p, []).append(img)
    seq_to_pos = {n.seq: n.pos for n in archived_nodes}
    for ordinal, (chunk, title) in enumerate(zip(chunks, folder_titles, strict=True)):
        docs = chunk.documents(msgs)
        folder_images: list[PlannedImage] = []
        for doc in docs:
            for img in by_pos_images.get(seq_to_pos[doc["seq"]], []):
                if img.placeholder in doc["content"] and img not in folder_images:
                    folder_images.append(img)
        folders.append(
            PlannedFolder(
                ordinal=ordinal,
                title=title,
                messages=docs,
                event_range=chunk.event_range(msgs),
                images=folder_images,
                chars=chunk.chars,
                idempotency_key=make_idempotency_key(
                    session_id, turn, first_seq, last_seq, digest, ordinal
                ),
            )
        )
    return FolderSet(folders, capped, digest, archived.secrets)


def plan_pre_step(inp: PreStepInput) -> PreStepPlan:
    """Plan one pre-step: guards, re-archive (pass 0), passes, chunks, note."""
    cfg = inp.cfg.compress
    window = effective_window(inp.host_window, cfg)
    plan = PreStepPlan(outcome="below-trigger", window=window, total_tokens=inp.total_tokens)
    plan.projected_tokens = inp.total_tokens
    if window <= 0:
        plan.outcome = "skipped"
        plan.warnings.append(("no-window", "no context window known: archiving skipped"))
        plan.guarded = True
        return plan
    plan.percent_before = inp.total_tokens * 100 / window
    if below_trigger(inp.total_tokens, inp.host_window, inp.cfg):
        return plan
    pct = plan.percent_before
    if inp.total_tokens < cfg.min_context_tokens:
        plan.outcome = "skipped"
        plan.guarded = True
        return plan
    guard = window_guard(inp.host_window, inp.total_tokens, cfg)
    if guard.key is not None:
        plan.outcome = "skipped"
        plan.warnings.append((guard.key, guard.message))
        plan.guarded = True
        return plan
    if inp.hard_stopped:
        plan.outcome = "skipped"
        plan.guarded = True
        return plan
    plan.emergency = pct > cfg.emergency_percent
    if cfg.release_floor_enabled and not cfg.release_floor_active:
        plan.warnings.append(
            (
                "release-floor-disabled",
                f"compress.releaseTargetPercent {cfg.release_target_percent:g} is not below"
                f" compress.triggerPercent {cfg.trigger_percent:g}: the release floor is disabled",
            )
        )

    # pass 0, first half: the recall block (§1.4)
    if inp.recall:
        plan.rearchive = plan_rearchive(
            inp.recall,
            target_tokens=int(inp.total_tokens * cfg.compress_percent / 100),
            turn=inp.turn,
            theta_high=inp.cfg.recall.fairness.theta_high,
            emergency=plan.emergency,
        )
    rearchived = plan.rearchive.removed_tokens if plan.rearchive else 0
    plan.projected_tokens = inp.total_tokens - rearchived
    plan.outcome = "rearchive-only" if rearchived else "skipped"

    nodes = parse_surface(inp.surface, user_kinds=inp.cfg.recall.trigger_source_kinds)
    tokens = node_token_counts(nodes, inp.node_tokens)
    conv = conversation(nodes)
    limit, plan.turn_protected = protected_limit(conv, inp.turn, cfg)
    if limit < max(1, cfg.min_messages_to_compress):
        unprotected, _ = protected_limit(
            conv, inp.turn, cfg.model_copy(update={"protect_current_turn": False})
        )
        if plan.turn_protected and unprotected >= max(1, cfg.min_messages_to_compress):
            plan.outcome = "refused" if not rearchived else "rearchive-only"
            plan.warnings.append(
                (
                    "no-legal-cut",
                    "archive refused: no legal cut (the current turn is protected by"
                    " compress.protectCurrentTurn)",
                )
            )
        return plan
    prefix = [0] * (len(conv) + 1)
    running = 0
    pos = conv[0].pos
    for k, node in enumerate(conv, start=1):
        while pos <= node.pos:
            running += tokens[pos]
            pos += 1
        prefix[k] = running
    cut = plan_cut(
        conv,
        prefix,
        limit,
        total_tokens=inp.total_tokens,
        window=window,
        rearchive_removed=rearchived,
        cfg=cfg,
        note_tokens=NOTE_TOKENS_ESTIMATE,
    )
    plan.cut = cut
    if cut.refused:
        plan.outcome = "refused" if not rearchived else "rearchive-only"
        why = (
            "the current turn is protected (compress.protectCurrentTurn)"
            if plan.turn_protected
            else "no complete turn or tool-safe message boundary before the kept messages"
        )
        plan.warnings.append(("no-legal-cut", f"archive refused: no legal cut ({why})"))
        return plan
    if cut.cut == 0:
        return plan

    archived_nodes = conv[: cut.cut]
    stamp = run_stamp(inp.now_ms)
    if inp.channel:
        plan.image_message_ids = tuple(
            n.message_id
            for n in archived_nodes
            if n.is_user and n.message_id and image_paths(n.text())
        )
    plan.image_paths = tuple(
        dict.fromkeys(
            path for node in archived_nodes for img in node.images if (path := img.host_path)
        )
    )
    start_pos = extend_backwards(nodes, archived_nodes[0].pos)
    end_pos = archived_nodes[-1].pos
    parts = classify_span(nodes, start_pos, end_pos)
    images, image_warnings = plan_images(
        archived_nodes,
        stamp=stamp,
        readable=inp.readable_images,
        attachments=inp.attachments,
    )
    plan.warnings.extend(("image-placeholder", w) for w in image_warnings)
    folder_nodes = archived_nodes
    if inp.channel and inp.staged_images:
        folder_nodes, staged = plan_staged_images(archived_nodes, inp.staged_images, stamp=stamp)
        images.update(staged)
        plan.staged_dirs = tuple(
            dict.fromkeys(Path(img.host_path).parent for img in staged.values() if img.host_path)
        )
    built = plan_folders(
        folder_nodes,
        session_id=inp.session_id,
        turn=inp.turn,
        cfg=cfg,
        images=images,
        secrets=inp.cfg.secrets.mode,
        voice_notes=inp.channel,
    )
    plan.folders, plan.max_folders_capped, plan.content_hash = (
        built.folders,
        built.capped,
        built.content_hash,
    )
    plan.secrets = built.secrets
    plan.archived_messages = len(archived_nodes)
    plan.total_segments = len(plan.folders) + (parts.merged_segments if parts.merged_notes else 0)
    plan.note = render_note(plan.total_segments, parts.appendix)
    plan.note_parts = parts
    span = nodes[start_pos : end_pos + 1]
    plan.start_seq, plan.end_seq = span[0].seq, span[-1].seq
    plan.shadowed_seqs = [n.seq for n in span]
    plan.shadowed_tokens = sum(tokens[start_pos : end_pos + 1])
    note_tokens = estimate_text_tokens(plan.note) + MESSAGE_OVERHEAD
    if note_tokens >= plan.shadowed_tokens:
        plan.outcome = "rearchive-only" if rearchived else "skipped"
        plan.folders = []
        plan.warnings.append(
            (
                "note-too-large",
                f"archive skipped: the checkpoint note (~{note_tokens} tokens) is not smaller"
                f" than the {plan.shadowed_tokens} tokens it would replace",
            )
        )
        return plan
    plan.projected_tokens = cut.projected_tokens + note_tokens
    plan.outcome = "archive"
    return plan
