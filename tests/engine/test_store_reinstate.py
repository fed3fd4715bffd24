"""A committed transaction made undoable again after a restart (``Transaction.record``,
``SessionStore.reinstate``), and ``commit_plan``'s ``before_write`` seam."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from engine.archive import PreStepInput, PreStepPlan, plan_pre_step
from engine.archive.commit import commit_plan
from engine.config import MemoryConfig, build_config
from engine.store import JournalRecord, Transaction, UnknownTransactionError, open_session
from tests.archive_fixtures import T0, Surface, pre_step_params
from tests.engine.test_store_transaction import NOW, msgs, pending_meta


def _commit_two(root: Path) -> tuple[JournalRecord, list[str]]:
    store = open_session(root, "s")
    with store.transaction("old") as txn:
        keep = pending_meta(store, 0)
        txn.add_folder(keep, msgs(0))
    store.finalize("old")
    with store.transaction("arc-1") as txn:
        a, b = pending_meta(store, 1), pending_meta(store, 2)
        txn.add_folder(a, msgs(1), images=[("img-a.png", b"\x89PNG a")])
        txn.add_folder(b, msgs(2))
        record = txn.record()
        assert record.folders == [a.id, b.id]
        assert [(i.name, i.folderId) for i in record.images] == [("img-a.png", a.id)]
        assert not store.paths.journal("arc-1").exists()  # known before anything is written
    return record, [keep.id, a.id, b.id]


def test_reinstated_transaction_rolls_back_exactly_what_it_wrote(tmp_path: Path) -> None:
    record, (keep, a, b) = _commit_two(tmp_path)
    store = open_session(tmp_path, "s")  # a restart: recovery finalized the journal
    assert store.committed_transactions() == ()
    assert not store.paths.journal("arc-1").exists()
    with pytest.raises(UnknownTransactionError):
        store.rollback_committed("arc-1")
    store.reinstate(record)
    assert store.committed_transactions() == ("arc-1",)
    assert store.rollback_committed("arc-1") == [a, b]
    assert [e.id for e in store.index] == [keep]
    assert not store.paths.image("img-a.png").exists()
    assert [i.name for i in store.image_entries()] == []
    assert sorted(p.name for p in store.dir.glob("mem-*")) == [keep]
    assert not list(store.dir.glob(".commit-*"))
    reopened = open_session(tmp_path, "s")
    assert [e.id for e in reopened.index] == [keep] and reopened.load_report.clean


def test_reinstate_then_finalize_and_ids_never_reused(tmp_path: Path) -> None:
    record, (_, a, b) = _commit_two(tmp_path)
    store = open_session(tmp_path, "s")
    store.reinstate(record)
    assert store.finalize("arc-1") is True
    assert store.committed_transactions() == ()
    assert {a, b} <= {e.id for e in store.index}
    # a record naming folders that never reached the disk still reserves their ids
    ghost = record.model_copy(update={"txnId": "arc-2", "folders": ["mem-20991231T000000Z-0007"]})
    store.reinstate(ghost)
    assert store.new_folder_id(4_102_358_400_000) == "mem-20991231T000000Z-0008"
    assert store.rollback_committed("arc-2") == []


def _plan(tmp_path: Path) -> tuple[MemoryConfig, PreStepPlan]:
    s = Surface()
    s.system()
    for i in range(30):
        s.turn_pair(i, 300)
    p = pre_step_params(s, session="s", percent=75)
    cfg = build_config([("test", {"compress": {"allowSmallWindow": True}})]).config
    plan = plan_pre_step(
        PreStepInput(
            session_id="s",
            turn=p["turn"],
            surface=p["surface"],
            node_tokens={n["seq"]: n["tokens"] for n in p["context"]["nodes"]},
            total_tokens=p["context"]["totalTokens"],
            host_window=p["context"]["contextWindow"],
            now_ms=T0,
            cfg=cfg,
        )
    )
    assert plan.archives and len(plan.folders) > 1
    return cfg, plan


def test_before_write_sees_the_record_before_the_journal(tmp_path: Path) -> None:
    cfg, plan = _plan(tmp_path)
    store = open_session(tmp_path, "s")
    seen: list[JournalRecord] = []

    def before_write(txn: Transaction) -> None:
        assert not store.paths.journal("arc-x").exists()
        assert not list(store.dir.glob("mem-*"))
        seen.append(txn.record())

    out = commit_plan(
        store,
        plan,
        cfg=cfg,
        token="arc-x",
        now_ms=NOW,
        turn=1,
        step=1,
        archiver_version="t",
        before_write=before_write,
    )
    assert out.ok and len(seen) == 1
    assert seen[0].folders == out.written == out.folder_ids


def test_before_write_failing_writes_nothing(tmp_path: Path) -> None:
    cfg, plan = _plan(tmp_path)
    store = open_session(tmp_path, "s")

    def before_write(txn: Transaction) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    out = commit_plan(
        store,
        plan,
        cfg=cfg,
        token="arc-y",
        now_ms=NOW,
        turn=1,
        step=1,
        archiver_version="t",
        before_write=before_write,
    )
    assert not out.ok and out.warnings[0][0] == "commit-failed"
    assert not list(store.dir.glob("mem-*")) and not list(store.dir.glob(".commit-*"))
    assert len(store) == 0 and store.committed_transactions() == ()
