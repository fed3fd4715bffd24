"""What an evicted session keeps (handlers.session_residue): nothing silently dropped."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from engine.recall import RecallState
from engine.store import JournalRecord, open_session
from handlers.archive_state import ArchiveState, PendingArchive
from handlers.session_residue import (
    CARRIED,
    REBUILT,
    RELOADED,
    Residue,
    capture,
    releasable,
    restore,
)
from handlers.sessions import SessionState


def test_every_session_field_is_carried_reloaded_or_rebuilt() -> None:
    """A field added to SessionState must say what an eviction does with it."""
    fields = {f.name for f in dataclasses.fields(SessionState)}
    groups = [CARRIED, RELOADED, REBUILT]
    assert set().union(*groups) == fields, "classify the new field in handlers.session_residue"
    assert sum(len(g) for g in groups) == len(fields), "a field is in two groups"


def test_every_archive_field_is_durable_or_carried() -> None:
    durable = {"pending", "settled", "path", "_snapshot_json"}  # archives-unreported.json
    carried = {f.name for f in dataclasses.fields(Residue)} & {
        f.name for f in dataclasses.fields(ArchiveState)
    }
    assert carried == {"pressure_failures", "hard_stopped", "warned", "tokens_issued"}
    assert {f.name for f in dataclasses.fields(ArchiveState)} == durable | carried


def _state(tmp_path: Path, sid: str = "s1") -> SessionState:
    store = open_session(tmp_path, sid)
    return SessionState(
        key=sid, store=store, load_report=store.load_report, archive=ArchiveState.load(store)
    )


def test_a_session_nothing_happened_to_leaves_no_residue(tmp_path: Path) -> None:
    state = _state(tmp_path)
    assert capture(state) is None
    state.recall = RecallState(path=state.store.paths.recall_state)  # loaded, empty block
    assert capture(state) is None


def test_capture_then_restore_gives_the_same_facts(tmp_path: Path) -> None:
    state = _state(tmp_path)
    state.new_series_pending = True
    state.context_window = 64_000
    state.last_turn = 7
    state.scoring_rounds_unjudged = 2
    state.archive.pressure_failures = 1
    state.archive.hard_stopped = True
    state.archive.warned.add("smallWindow")
    state.archive.tokens_issued = 5
    state.member_floor = 0.5
    memory_only = RecallState(path=state.store.paths.recall_state, persist=False, block="x")
    state.recall = memory_only
    residue = capture(state)
    assert residue is not None and residue.recall is memory_only and residue.block_loaded
    fresh = _state(tmp_path)
    restore(fresh, residue)
    assert fresh.new_series_pending and fresh.recall_reloaded and fresh.recall is memory_only
    assert (fresh.context_window, fresh.last_turn, fresh.scoring_rounds_unjudged) == (64_000, 7, 2)
    assert fresh.member_floor == 0.5  # a QQ member's gate survives an eviction mid-turn
    a = fresh.archive
    assert (a.pressure_failures, a.hard_stopped, a.warned, a.tokens_issued) == (
        1,
        True,
        {"smallWindow"},
        5,
    )
    # a persisted recall state is read back from its file instead
    state.recall = RecallState(path=state.store.paths.recall_state, persist=True, block="y")
    again = capture(state)
    assert again is not None and again.recall is None and again.block_loaded


@pytest.mark.parametrize("phase", ["planned", "aborting"])
def test_a_session_with_an_archive_half_way_is_not_released(tmp_path: Path, phase: str) -> None:
    state = _state(tmp_path)
    assert releasable(state)
    record = JournalRecord(txnId="arc-1", state="committed", folders=[], images=[])
    state.archive.pending["arc-1"] = PendingArchive(
        token="arc-1",
        span=(),
        journal=record,
        phase=phase,  # type: ignore[arg-type]
    )
    assert not releasable(state)
    state.archive.pending["arc-1"].phase = "answered"
    assert releasable(state)  # answered: the record on disk gives it back
    with state.store.transaction("arc-2"):
        assert not releasable(state)
