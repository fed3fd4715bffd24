"""Where to cut: trigger, window guards, protected tail, legal boundaries, passes.

Reference §1.1 steps 2-3 and §1.1.1. Everything here works on the conversation nodes
(``surface.conversation``) and a prefix sum of surface-node tokens, so a plan for a
400-message surface is a few linear scans.

Boundaries. Cutting at ``k`` archives conversation nodes ``0..k-1``. ``k`` is a *turn
boundary* when node ``k`` is a user message (a complete user turn ends before it) and
a *message boundary* when no tool call before ``k`` is still waiting for its result
and node ``k`` is not a tool result. Turn boundaries are preferred; message boundaries
only serve a single turn too large for the target ("超大单回合"). The target is the
``compressPercent`` share, raised by the release floor; a turn boundary overshooting
it by more than ``maxBoundaryOvershoot`` falls back to the previous boundary.

Passes. Pass 0 uses ``compressPercent`` (minus what re-archiving the recall block
already freed); while the projected context stays above the trigger, up to
``maxExtraPasses`` more passes follow, with ``emergencyCompressPercent`` while above
``emergencyPercent``. Each pass continues where the previous one ended, so all of
them together are one contiguous span.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.archive.surface import Node
from engine.config.model import CompressConfig

__all__ = [
    "CutPlan",
    "PassRecord",
    "WindowGuard",
    "boundaries",
    "choose_cut",
    "effective_window",
    "plan_cut",
    "protected_limit",
    "window_guard",
]

FAKE_WINDOW_RATIO = 4.0
"""Configured window vs host window beyond this factor: a fake window (§1.1.1)."""
FAKE_USAGE_PERCENT = 500.0
"""Context above this share of the window: a fake window or a stress test (§1.1.1)."""


def effective_window(host_window: int, cfg: CompressConfig) -> int:
    """``compress.contextWindowTokens`` > 0 overrides the host's window."""
    return cfg.context_window_tokens if cfg.context_window_tokens > 0 else host_window


@dataclass(frozen=True, slots=True)
class WindowGuard:
    """Why the window is not trusted for archiving (None: it is)."""

    key: str | None
    message: str = ""


def window_guard(host_window: int, total_tokens: int, cfg: CompressConfig) -> WindowGuard:
    """Small / fake window checks; ``allowSmallWindow`` turns them all off."""
    if cfg.allow_small_window:
        return WindowGuard(None)
    window = effective_window(host_window, cfg)
    if window < cfg.small_window_tokens:
        return WindowGuard(
            "small-window",
            f"context window {window} < compress.smallWindowTokens {cfg.small_window_tokens}:"
            " automatic archiving skipped (set compress.allowSmallWindow to archive anyway)",
        )
    if cfg.context_window_tokens > 0 and host_window > 0:
        ratio = max(cfg.context_window_tokens, host_window) / min(
            cfg.context_window_tokens, host_window
        )
        if ratio > FAKE_WINDOW_RATIO:
            return WindowGuard(
                "fake-window",
                f"compress.contextWindowTokens {cfg.context_window_tokens} differs from the"
                f" host window {host_window} by more than {FAKE_WINDOW_RATIO:g}x:"
                " automatic archiving skipped",
            )
    if window > 0 and total_tokens * 100 / window > FAKE_USAGE_PERCENT:
        return WindowGuard(
            "fake-window",
            f"context {total_tokens} tokens is over {FAKE_USAGE_PERCENT:g}% of the window"
            f" {window}: automatic archiving skipped",
        )
    return WindowGuard(None)


def protected_limit(conv: Sequence[Node], turn: int, cfg: CompressConfig) -> tuple[int, bool]:
    """(K, turn_protected): conversation nodes from index K on are never archived.

    ``keepRecentMessages`` keeps the tail; ``protectCurrentTurn`` keeps the current
    turn's user message and everything after it (its tool pairs included). The current
    turn is recognised by ``turn`` on the nodes, else as the last user message.
    """
    m = len(conv)
    k_keep = max(0, m - max(0, cfg.keep_recent_messages))
    if not cfg.protect_current_turn:
        return k_keep, False
    k_turn = m
    if any(n.turn is not None for n in conv):
        k_turn = next((i for i, n in enumerate(conv) if n.turn is not None and n.turn >= turn), m)
    else:
        k_turn = next((i for i in range(m - 1, -1, -1) if conv[i].is_user), m)
    return min(k_keep, k_turn), k_turn < m


def boundaries(conv: Sequence[Node]) -> tuple[list[bool], list[bool]]:
    """(turn_ok, msg_ok) for every cut position 0..m (see the module docstring)."""
    m = len(conv)
    turn_ok = [False] * (m + 1)
    msg_ok = [False] * (m + 1)
    open_calls: set[str] = set()
    for k in range(1, m + 1):
        prev = conv[k - 1]
        if prev.is_user:
            open_calls.clear()
        open_calls.update(prev.tool_call_ids)
        if prev.tool_result_id is not None:
            open_calls.discard(prev.tool_result_id)
        nxt = conv[k] if k < m else None
        if nxt is None:
            turn_ok[k] = True
            msg_ok[k] = not open_calls
        elif nxt.is_user:
            turn_ok[k] = True
            msg_ok[k] = True
        else:
            msg_ok[k] = not open_calls and not nxt.is_tool_result
    return turn_ok, msg_ok


def choose_cut(
    prefix: Sequence[int],
    k_from: int,
    limit: int,
    target: float,
    overshoot: float,
    turn_ok: Sequence[bool],
    msg_ok: Sequence[bool],
) -> int | None:
    """The cut for one pass (None: no legal cut in ``(k_from, limit]``)."""
    base = prefix[k_from]
    cap = target * max(1.0, overshoot)
    turns = [k for k in range(k_from + 1, limit + 1) if turn_ok[k]]
    first = next((k for k in turns if prefix[k] - base >= target), None)
    if first is not None and prefix[first] - base <= cap:
        return first
    prev = None
    for k in turns:
        if first is not None and k >= first:
            break
        if prefix[k] - base < target:
            prev = k
    lo = prev if prev is not None else k_from
    hi = first if first is not None else limit
    msgs = [k for k in range(lo + 1, hi + 1) if msg_ok[k]]
    m_first = next((k for k in msgs if prefix[k] - base >= target), None)
    if m_first is not None and prefix[m_first] - base <= cap:
        return m_first
    if prev is not None and prefix[prev] > base:
        return prev
    m_last = None
    for k in msgs:
        if prefix[k] - base < target and prefix[k] > base:
            m_last = k
    if m_last is not None:
        return m_last
    if first is not None:
        return first
    return m_first


@dataclass(frozen=True, slots=True)
class PassRecord:
    """One pass of the plan, for telemetry."""

    index: int
    emergency: bool
    percent_before: float
    target_tokens: int
    removed_tokens: int
    cut: int


@dataclass(slots=True)
class CutPlan:
    """The outcome of planning the cut."""

    cut: int = 0
    """Conversation nodes ``0..cut-1`` are archived (0: none)."""
    passes: list[PassRecord] = field(default_factory=list)
    projected_tokens: int = 0
    refused: bool = False
    release_capped: bool = False
    floor_tokens: int | None = None
    conversation_target: int = 0
    stopped_for_rearchive: bool = False


def plan_cut(
    conv: Sequence[Node],
    prefix: Sequence[int],
    limit: int,
    *,
    total_tokens: int,
    window: int,
    rearchive_removed: int,
    cfg: CompressConfig,
    note_tokens: int,
) -> CutPlan:
    """Run pass 0 and the extra / emergency passes over conversation ``0..limit``."""
    turn_ok, msg_ok = boundaries(conv)
    plan = CutPlan(projected_tokens=total_tokens - rearchive_removed)
    floor = None
    if cfg.release_floor_active:
        floor = int(window * cfg.release_target_percent / 100)
        plan.floor_tokens = floor
    trigger = window * cfg.trigger_percent / 100
    k = 0
    for p in range(1 + max(0, cfg.max_extra_passes)):
        pct = plan.projected_tokens * 100 / window
        emergency = p > 0 and pct > cfg.emergency_percent
        if p > 0 and plan.projected_tokens <= trigger:
            break
        share = cfg.emergency_compress_percent if emergency else cfg.compress_percent
        if p == 0:
            target = total_tokens * share / 100 - rearchive_removed
            if target <= 0:
                plan.stopped_for_rearchive = True
                break
        else:
            target = plan.projected_tokens * share / 100
        if floor is not None:
            target = max(target, plan.projected_tokens - floor + note_tokens)
        if p == 0:
            plan.conversation_target = int(target)
        cut = choose_cut(prefix, k, limit, target, cfg.max_boundary_overshoot, turn_ok, msg_ok)
        if cut is None or cut <= k:
            if p == 0:
                plan.refused = True
            break
        removed = prefix[cut] - prefix[k]
        plan.passes.append(PassRecord(p, emergency, pct, int(target), removed, cut))
        plan.projected_tokens -= removed
        k = cut
    plan.cut = k
    if floor is not None and k > 0 and plan.projected_tokens + note_tokens > floor:
        plan.release_capped = True
    return plan
