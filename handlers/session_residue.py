"""What an evicted session leaves in memory, so that reopening it changes no answer.

Eviction (issue 21: a daemon that runs for months) unloads an idle session exactly as
`agent/disposed` does: its store, recall state, indexes and caches go, and the next
request reopens it from disk. Almost everything is on disk already, written on every
change: folders and index, `recall-state.json`, `archives-unreported.json` (unreported
archives, settled tokens). What is not is small, and would change later answers if it
were lost: whether the host still owes a new request series, the host's context window
and last turn, the scoring rounds counter, memory_recall's strikes of the turn, the
archive guards and the token counter, folder ids handed out but not on disk, the damage
already reported. That is the residue; reopening puts it back (:func:`restore`), so an
evicted session answers as if it had stayed loaded. `agent/disposed` keeps no residue:
the host is done with the session, and a later request starts it as a restart would.

Every field of `SessionState` is in exactly one of :data:`CARRIED`, :data:`RELOADED` or
:data:`REBUILT` (a test holds new fields to that), so state added later is not silently
dropped by an eviction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.recall import RecallState
from engine.recall_view import RecallBlockView
from handlers.damage import DamageLedger

if TYPE_CHECKING:
    from handlers.sessions import SessionState

__all__ = ["CARRIED", "REBUILT", "RELOADED", "Residue", "capture", "releasable", "restore"]

CARRIED = frozenset(
    {
        "new_series_pending",
        "recall_reloaded",
        "context_window",
        "last_turn",
        "scoring_rounds_unjudged",
        "damage",
        "recall_strikes",
        "member_floor",
    }
)
"""`SessionState` fields the residue keeps (with `archive`'s in-memory guards, and
`recall` when it lives in memory only: `recall.persistInjected` false)."""
RELOADED = frozenset({"key", "store", "load_report", "archive", "recall", "hygiene"})
"""Fields reopening reads back from disk (the store's recovery, `ArchiveState.load`,
`recall-state.json` and `memory-control.json` on first use)."""
REBUILT = frozenset(
    {
        "recall_index",
        "relevance_index",
        "time_index",
        "scoring_texts",
        "scoring_fake_window",
        "loaded_parts",
    }
)
"""Caches derived from the store, rebuilt on first use as a fresh build gives them (and
the count of them made, which starts again with them)."""


@dataclass(frozen=True, slots=True)
class Residue:
    """The in-memory-only facts of one evicted session (module docstring)."""

    new_series_pending: bool = False
    block_loaded: bool = False
    """Its (non-empty) recall block was loaded: the host holds it, reloading it is no
    restore to announce with a new request series."""
    recall: RecallBlockView | None = None
    """The recall state itself, when it is not persisted (it exists nowhere else)."""
    context_window: int | None = None
    last_turn: int | None = None
    scoring_rounds_unjudged: int = 0
    pressure_failures: int = 0
    hard_stopped: bool = False
    warned: frozenset[str] = frozenset()
    tokens_issued: int = 0
    folder_ids: tuple[str, ...] = ()
    """Folder ids handed out that no folder on disk carries (never handed out again)."""
    damage: DamageLedger | None = None
    """The damage ledger, when it holds anything (else a fresh one is the same)."""
    recall_misses: int = 0
    recall_disabled: bool = False
    """memory_recall's strikes of the current turn: an eviction between two calls of one
    turn must not hand the model six fresh misses (or re-enable a disabled tool)."""
    member_floor: float = 0.0
    """The current turn's QQ member gate: an eviction must not lift it mid-turn."""


EMPTY = Residue()


def releasable(state: SessionState) -> bool:
    """Whether the session can be unloaded without losing anything: no store transaction
    open, and every unreported archive answered (a `planned` or `aborting` record means a
    request stopped half-way; a reload would settle it as a restart does, which the
    loaded session would not)."""
    if state.store.in_transaction:
        return False
    return all(p.phase == "answered" for p in state.archive.pending.values())


def capture(state: SessionState) -> Residue | None:
    """The residue of a session about to be unloaded; None when a fresh load gives the
    same (nothing to keep)."""
    rs = state.recall
    persisted = isinstance(rs, RecallState) and rs.persist
    # a non-empty block the host was sent (any other view: count it as shown)
    shown = rs is not None and (not isinstance(rs, RecallState) or bool(rs.block))
    damage = state.damage
    has_damage = bool(damage.repairs_json() or damage.unreadable_ids())
    ast = state.archive
    residue = Residue(
        new_series_pending=state.new_series_pending,
        block_loaded=state.recall_reloaded or shown,
        recall=None if rs is None or persisted else rs,
        context_window=state.context_window,
        last_turn=state.last_turn,
        scoring_rounds_unjudged=state.scoring_rounds_unjudged,
        pressure_failures=ast.pressure_failures,
        hard_stopped=ast.hard_stopped,
        warned=frozenset(ast.warned),
        tokens_issued=ast.tokens_issued,
        folder_ids=state.store.unbacked_folder_ids(),
        damage=damage if has_damage else None,
        recall_misses=state.recall_strikes.misses,
        recall_disabled=state.recall_strikes.disabled,
        member_floor=state.member_floor,
    )
    return None if residue == EMPTY else residue


def restore(state: SessionState, residue: Residue) -> None:
    """Put a residue back into a freshly reopened session (before any request uses it)."""
    state.new_series_pending = residue.new_series_pending
    state.recall_reloaded = residue.block_loaded
    if residue.recall is not None:
        state.recall = residue.recall
    state.context_window = residue.context_window
    state.last_turn = residue.last_turn
    state.scoring_rounds_unjudged = residue.scoring_rounds_unjudged
    ast = state.archive
    ast.pressure_failures = residue.pressure_failures
    ast.hard_stopped = residue.hard_stopped
    ast.warned = set(residue.warned)
    ast.tokens_issued = max(ast.tokens_issued, residue.tokens_issued)
    state.store.observe_folder_ids(residue.folder_ids)
    if residue.damage is not None:
        state.damage = residue.damage
    state.recall_strikes.misses = residue.recall_misses
    state.recall_strikes.disabled = residue.recall_disabled
    state.member_floor = residue.member_floor
