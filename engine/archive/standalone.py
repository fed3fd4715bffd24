"""Archiving without a host or a model: the engine CLI and the simulation (reference
"独立运行引擎": ``compress --input conversation.json --used-percent 63``).

A plain conversation (``{"messages": [{"role", "content"}], "usedPercent"}``) becomes a
DSH v4 surface, its nodes get token counts that add up to the used share of the
window (the host's token meter is what the CLI stands in for), and the same pre-step
plan the daemon uses decides what to archive. There is no "current model" to score
the folders, so they are written ``scored:true`` with heuristic α and keywords
(``engine.scoring.fallback.heuristic_fields``; ``scored:false`` is only for the
daemon's pending archives). There is no host to apply the replacement either, so the
transaction is finalized at once.

Pure of clock and environment: ``now_ms`` and every message time are inputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.archive.commit import CommitOutcome, archive_token, commit_plan
from engine.archive.plan import PreStepInput, PreStepPlan, node_token_counts
from engine.archive.plan import plan_pre_step as _plan_pre_step
from engine.archive.surface import parse_surface
from engine.config.model import MemoryConfig
from engine.scoring.fallback import batch_scorer
from engine.store import SessionStore

__all__ = [
    "ROLES",
    "StandaloneArchive",
    "archive_conversation",
    "conversation_errors",
    "scaled_node_tokens",
    "surface_from_messages",
]

ROLES = {
    "user": "user/message",
    "assistant": "assistant/message",
    "tool": "tool/result",
    "system": "system/message",
}
"""Message roles a conversation file may use, and the surface node type of each."""

MESSAGE_TIME_STEP_MS = 1000
"""Spacing of synthesized message times when a message has none."""


def conversation_errors(doc: Any) -> list[str]:
    """What is wrong with a conversation document (empty: usable)."""
    if not isinstance(doc, Mapping):
        return ["the top-level JSON value must be an object with a messages array"]
    messages = doc.get("messages")
    if not isinstance(messages, list):
        return ['"messages" must be an array of {"role", "content"} objects']
    errors: list[str] = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, Mapping):
            errors.append(f"{where} is not an object")
            continue
        if m.get("role") not in ROLES:
            errors.append(f"{where}.role must be one of {', '.join(ROLES)}, got {m.get('role')!r}")
        content = m.get("content")
        if not isinstance(content, str | list):
            errors.append(f"{where}.content must be a string or an array of content blocks")
        t = m.get("time")
        if t is not None and (isinstance(t, bool) or not isinstance(t, int) or t < 0):
            errors.append(f"{where}.time must be epoch milliseconds")
    used = doc.get("usedPercent")
    if used is not None and (isinstance(used, bool) or not isinstance(used, int | float)):
        errors.append('"usedPercent" must be a number')
    return errors[:10]


def surface_from_messages(
    messages: Sequence[Mapping[str, Any]], *, start_ms: int | None = None
) -> tuple[list[dict[str, Any]], int]:
    """A DSH v4 surface for ``messages`` (validated by :func:`conversation_errors`) and
    the current turn (each user message opens one).

    A message may carry a DSH ``source`` (``{"kind": "compact-checkpoint"}`` marks an
    earlier archive note, which the next archive merges). Messages without ``time`` get ``start_ms`` + 1 s per message when ``start_ms`` is
    given (then folders carry an event range), else none.
    """
    surface: list[dict[str, Any]] = []
    turn = 0
    for seq, m in enumerate(messages):
        role = str(m["role"])
        source = m.get("source")
        if role == "user" and (not isinstance(source, Mapping) or source.get("kind") == "user"):
            turn += 1
        content = m["content"]
        message: dict[str, Any] = {
            "id": m.get("id") if isinstance(m.get("id"), str) else f"m{seq}",
            "role": role,
            "content": content,
        }
        if isinstance(source, Mapping):
            message["source"] = dict(source)
        elif role == "user":
            message["source"] = {"kind": "user"}
        elif role == "system":
            message["source"] = {"kind": "system-prompt"}
        elif role == "tool" and isinstance(m.get("toolCallId"), str):
            message["toolCallId"] = m["toolCallId"]
        t = m.get("time")
        if not isinstance(t, int) and start_ms is not None:
            t = start_ms + seq * MESSAGE_TIME_STEP_MS
        node: dict[str, Any] = {"seq": seq, "type": ROLES[role], "turn": turn, "message": message}
        if isinstance(t, int):
            node["time"] = t
        surface.append(node)
    return surface, turn


def scaled_node_tokens(
    surface: Sequence[Mapping[str, Any]], total_tokens: int, cfg: MemoryConfig
) -> dict[int, int]:
    """Token counts per node seq, proportional to the estimate, adding up to
    ``total_tokens`` (largest remainder), so that "the earliest ``compressPercent``"
    means the earliest share of *this* conversation."""
    nodes = parse_surface(surface, user_kinds=cfg.recall.trigger_source_kinds)
    estimates = node_token_counts(nodes, {})
    est_total = sum(estimates)
    if not nodes or est_total <= 0 or total_tokens <= 0:
        return {n.seq: e for n, e in zip(nodes, estimates, strict=True)}
    exact = [e * total_tokens / est_total for e in estimates]
    counts = [int(x) for x in exact]
    short = total_tokens - sum(counts)
    order = sorted(range(len(exact)), key=lambda i: (counts[i] - exact[i], i))
    for i in order[:short]:
        counts[i] += 1
    return {n.seq: c for n, c in zip(nodes, counts, strict=True)}


@dataclass(slots=True)
class StandaloneArchive:
    """The plan, and what its commit did (``None``: nothing to archive)."""

    plan: PreStepPlan
    commit: CommitOutcome | None = None

    @property
    def archived(self) -> bool:
        return self.commit is not None and self.commit.ok


def archive_conversation(
    store: SessionStore,
    messages: Sequence[Mapping[str, Any]],
    *,
    used_percent: float,
    window: int,
    now_ms: int,
    cfg: MemoryConfig,
    archiver_version: str,
    start_ms: int | None = None,
) -> StandaloneArchive:
    """Plan and commit one archive of ``messages`` at ``used_percent`` of ``window``.

    Folders are scored heuristically at creation; ``stats.jsonl`` gets the
    ``compress-applied`` record (``scoreMode: "heuristic"``) and a ``heuristic-score``
    record.
    """
    surface, turn = surface_from_messages(messages, start_ms=start_ms)
    total = round(window * used_percent / 100)
    inp = PreStepInput(
        session_id=store.session_id,
        turn=turn,
        surface=surface,
        node_tokens=scaled_node_tokens(surface, total, cfg),
        total_tokens=total,
        host_window=window,
        now_ms=now_ms,
        cfg=cfg,
        attachments=False,
    )
    plan = _plan_pre_step(inp)
    if not plan.archives:
        return StandaloneArchive(plan)
    token, _ = archive_token(store, now_ms, plan.content_hash, 0)
    score = batch_scorer(plan.folders, cfg, now_ms, None)
    out = commit_plan(
        store,
        plan,
        cfg=cfg,
        token=token,
        now_ms=now_ms,
        turn=turn,
        step=None,
        archiver_version=archiver_version,
        archived_from="engine",
        score_mode="heuristic",
        scorer=score,
    )
    out.record["source"] = "engine"
    store.append_stats(out.record)
    if out.ok:
        store.finalize(token)
        if out.written:
            store.append_stats(
                {
                    "type": "heuristic-score",
                    "time": now_ms,
                    "count": len(out.written),
                    "reason": "engine",
                }
            )
    return StandaloneArchive(plan, out)
