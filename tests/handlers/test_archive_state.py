"""The durable unreported-archive record (``handlers.archive_state``)."""

from __future__ import annotations

from pathlib import Path

import orjson

from engine.jsonio import is_temp_name
from engine.store import JournalRecord, SessionStore, open_session
from handlers.archive_state import (
    MAX_SETTLED,
    RECORD_NAME,
    ArchiveState,
    PendingArchive,
    Settled,
    span_of,
    surface_ids,
)
from tests.engine.test_store_transaction import msgs, pending_meta

SPAN = ((1, "m1"), (2, "m2"), (3, None))


def _pending(token: str, journal: JournalRecord | None = None) -> PendingArchive:
    return PendingArchive(
        token=token,
        span=SPAN,
        journal=journal or JournalRecord(txnId=token, state="committed"),
        compaction={"token": token, "folders": []},
    )


def test_status_by_seq_and_message_id() -> None:
    pend = _pending("arc-1")
    assert pend.status({0: "s", 1: "m1", 2: "m2", 3: None, 4: "x"}) == "live"
    assert pend.status({0: "s", 9: "ckpt"}) == "landed"
    assert pend.status({1: "m1", 9: "ckpt"}) == "partial"
    # the same seqs holding other messages: not this span
    assert pend.status({1: "other", 2: "other", 3: "other"}) == "landed"
    surface = [
        {"seq": 1, "message": {"id": "m1"}},
        {"seq": 2, "message": {"id": "m2"}},
        {"seq": 3, "message": {}},
        {"seq": True, "message": {"id": "bool"}},
    ]
    ids = surface_ids(surface)
    assert ids == {1: "m1", 2: "m2", 3: None}
    assert span_of([1, 2, 3], ids) == SPAN


def _write(store: SessionStore, token: str) -> JournalRecord:
    with store.transaction(token) as txn:
        txn.add_folder(pending_meta(store, len(store) + 1), msgs(1))
        record = txn.record()
    return record


def test_answered_survives_a_restart_planned_is_rolled_back(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s")
    ast = ArchiveState(path=store.dir / RECORD_NAME)
    answered = _write(store, "arc-a")
    ast.begin(_pending("arc-a", answered))
    ast.answered("arc-a", answered.folders, {"token": "arc-a", "folders": answered.folders})
    planned = _write(store, "arc-p")
    ast.begin(_pending("arc-p", planned))  # crash: never answered
    ast.settle("arc-old", "committed")
    # restart
    store = open_session(tmp_path, "s")
    assert {e.id for e in store.index} == set(answered.folders) | set(planned.folders)
    ast = ArchiveState.load(store)
    assert list(ast.pending) == ["arc-a"] and ast.pending["arc-a"].phase == "answered"
    assert ast.pending["arc-a"].compaction == {"token": "arc-a", "folders": answered.folders}
    assert {e.id for e in store.index} == set(answered.folders)
    assert not any((store.dir / f).exists() for f in planned.folders)
    assert store.committed_transactions() == ("arc-a",)  # abort still works
    assert ast.settled["arc-old"].outcome == "committed"
    # the rolled-back token is remembered: never issued again, a report naming it is told
    assert ast.settled["arc-p"] == Settled("unanswered", tuple(planned.folders))
    doc = orjson.loads((store.dir / RECORD_NAME).read_bytes())
    assert [r["token"] for r in doc["unreported"]] == ["arc-a"]
    assert [r["token"] for r in doc["settled"]] == ["arc-old", "arc-p"]
    assert ArchiveState.load(open_session(tmp_path, "s")).settled == ast.settled
    stats = store.paths.stats.read_text()
    assert '"arc-p"' in stats and "never answered" in stats


def test_interrupted_abort_is_finished_at_load(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s")
    ast = ArchiveState(path=store.dir / RECORD_NAME)
    record = _write(store, "arc-a")
    ast.begin(_pending("arc-a", record))
    ast.answered("arc-a", record.folders, {"token": "arc-a"})
    ast.aborting("arc-a")  # crash before anything was removed
    store = open_session(tmp_path, "s")
    ast = ArchiveState.load(store)
    assert ast.pending == {} and len(store) == 0
    assert ast.settled["arc-a"].outcome == "aborted"
    assert list(ast.settled["arc-a"].rolled_back) == record.folders


def test_settled_is_capped_and_a_bad_record_is_ignored(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s")
    ast = ArchiveState(path=store.dir / RECORD_NAME)
    for i in range(MAX_SETTLED + 5):
        ast.settle(f"arc-{i}", "committed")
    assert len(ast.settled) == MAX_SETTLED and "arc-0" not in ast.settled
    assert len(ArchiveState.load(store).settled) == MAX_SETTLED
    (store.dir / RECORD_NAME).write_bytes(b"{not json")
    assert ArchiveState.load(store).pending == {}
    (store.dir / RECORD_NAME).write_bytes(
        orjson.dumps({"version": 1, "unreported": [{"token": "x"}], "settled": [{"a": 1}]})
    )
    assert ArchiveState.load(store).pending == {}


def test_every_transition_is_on_disk_before_it_returns(tmp_path: Path) -> None:
    """What a SIGKILL right after each transition leaves: the next load sees it."""
    store = open_session(tmp_path, "s")
    ast = ArchiveState(path=store.dir / RECORD_NAME)

    def on_disk() -> tuple[dict[str, str], dict[str, str]]:
        doc = orjson.loads((store.dir / RECORD_NAME).read_bytes())
        return (
            {r["token"]: r["phase"] for r in doc["unreported"]},
            {r["token"]: r["outcome"] for r in doc["settled"]},
        )

    record = _write(store, "arc-1")
    ast.begin(_pending("arc-1", record))
    assert on_disk() == ({"arc-1": "planned"}, {})
    ast.answered("arc-1", record.folders, {"token": "arc-1"})
    assert on_disk() == ({"arc-1": "answered"}, {})
    ast.aborting("arc-1")
    assert on_disk() == ({"arc-1": "aborting"}, {})
    ast.settle("arc-1", "aborted", record.folders)
    assert on_disk() == ({}, {"arc-1": "aborted"})
    # abandoned before its answer (a failed conservation check, a failed write)
    ast.begin(_pending("arc-2"))
    ast.discard("arc-2")
    assert on_disk() == ({}, {"arc-1": "aborted", "arc-2": "unanswered"})
    assert not [p for p in store.dir.iterdir() if is_temp_name(p.name)]  # atomic writes
