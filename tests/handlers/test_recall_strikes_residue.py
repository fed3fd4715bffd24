"""memory_recall's strikes live on the session and survive an eviction (they are the
turn's, and the host does not see an eviction); `agent/disposed` drops them."""

from __future__ import annotations

from pathlib import Path

from engine.store import open_session
from handlers.archive_state import ArchiveState
from handlers.session_residue import CARRIED, capture, restore
from handlers.sessions import SessionState


def _state(tmp_path: Path) -> SessionState:
    store = open_session(tmp_path, "s1")
    return SessionState(
        key="s1", store=store, load_report=store.load_report, archive=ArchiveState.load(store)
    )


def test_strikes_are_carried_across_an_eviction(tmp_path: Path) -> None:
    assert "recall_strikes" in CARRIED
    state = _state(tmp_path)
    assert capture(state) is None  # no strikes: nothing to keep
    for _ in range(6):
        state.recall_strikes.record("ranked", 0, "keyword")
    assert state.recall_strikes.disabled
    residue = capture(state)
    assert residue is not None
    fresh = _state(tmp_path)
    restore(fresh, residue)
    assert (fresh.recall_strikes.misses, fresh.recall_strikes.disabled) == (6, True)
    assert fresh.recall_strikes is not state.recall_strikes


def test_three_misses_are_carried_too(tmp_path: Path) -> None:
    state = _state(tmp_path)
    for _ in range(3):
        state.recall_strikes.record("fair", 0, "keyword")
    residue = capture(state)
    assert residue is not None and (residue.recall_misses, residue.recall_disabled) == (3, False)
    fresh = _state(tmp_path)
    restore(fresh, residue)
    assert fresh.recall_strikes.warn
