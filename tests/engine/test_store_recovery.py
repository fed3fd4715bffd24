"""Load-time recovery: rebuilt index, orphans, journals, corrupt folders."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine import jsonio
from engine.jsonio import FsOps, read_json, write_json_atomic
from engine.store import FolderMeta, SessionStore, make_idempotency_key, open_session

NOW = 1_767_225_600_000


def meta_for(store: SessionStore, n: int) -> FolderMeta:
    return FolderMeta(
        id=store.new_folder_id(NOW + n * 1000),
        createdAt=NOW + n * 1000,
        scored=False,
        title=f"t{n}",
        idempotencyKey=make_idempotency_key("s1", n, n, n, "h", 0),
    )


def commit(store: SessionStore, txn_id: str, *ns: int, keep: bool = False) -> list[FolderMeta]:
    metas = [meta_for(store, n) for n in ns]
    with store.transaction(txn_id, keep_record=keep) as txn:
        for m in metas:
            txn.add_folder(m, [{"role": "user", "content": m.title}])
    return metas


def index_ids(store: SessionStore) -> list[str]:
    return [e.id for e in store.index]


def disk_ids(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("mem-"))


def test_clean_open_reports_clean(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    commit(store, "a", 1, 2)
    again = open_session(tmp_path, "s1")
    assert again.load_report.clean
    assert index_ids(again) == index_ids(store)


@pytest.mark.parametrize("damage", ["missing", "garbage", "wrong-shape", "truncated"])
def test_missing_or_corrupt_index_is_rebuilt_from_folders(tmp_path: Path, damage: str) -> None:
    store = open_session(tmp_path, "s1")
    metas = commit(store, "a", 3, 1, 2)
    index = store.paths.index
    if damage == "missing":
        index.unlink()
    elif damage == "garbage":
        index.write_bytes(b"\x00\xffnot json")
    elif damage == "wrong-shape":
        index.write_bytes(b'{"version": 1, "folders": 7}')
    else:
        index.write_bytes(index.read_bytes()[:40])
    again = open_session(tmp_path, "s1")
    report = again.load_report
    assert report.index_status == ("missing" if damage == "missing" else "corrupt")
    assert report.index_rewritten
    # Rebuilt in (createdAt, id) order.
    assert index_ids(again) == [m.id for m in sorted(metas, key=lambda m: m.createdAt)]
    assert {e.id: e.idempotencyKey for e in again.index} == {m.id: m.idempotencyKey for m in metas}
    assert open_session(tmp_path, "s1").load_report.clean


def test_corrupt_folder_reported_skipped_never_deleted(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    good, bad = commit(store, "a", 1, 2)
    store.paths.index.unlink()
    bad_meta = store.paths.folder(bad.id) / "meta.json"
    bad_meta.write_bytes(b"{ this is not json")
    again = open_session(tmp_path, "s1")
    assert index_ids(again) == [good.id]
    assert [c.folder_id for c in again.load_report.corrupt_folders] == [bad.id]
    assert "meta.json" in again.load_report.corrupt_folders[0].reason
    assert bad_meta.read_bytes() == b"{ this is not json"  # untouched
    third = open_session(tmp_path, "s1")
    assert bad_meta.exists() and [c.folder_id for c in third.load_report.corrupt_folders] == [
        bad.id
    ]


def test_folder_with_mismatched_id_or_bad_context_is_corrupt(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    a, b = commit(store, "a", 1, 2)
    store.paths.index.unlink()
    meta = read_json(store.paths.folder(a.id) / "meta.json")
    meta["id"] = "mem-other"
    write_json_atomic(store.paths.folder(a.id) / "meta.json", meta)
    (store.paths.folder(b.id) / "context.json").write_bytes(b'{"messages": 5}')
    again = open_session(tmp_path, "s1")
    assert index_ids(again) == []
    assert sorted(c.folder_id for c in again.load_report.corrupt_folders) == sorted([a.id, b.id])
    assert disk_ids(again.dir) == sorted([a.id, b.id])


def test_orphan_folder_adopted_without_duplicates(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    a, b = commit(store, "a", 1, 2)
    # Simulate a crash between folder write and index write: drop b from the index.
    doc = read_json(store.paths.index)
    doc["folders"] = [r for r in doc["folders"] if r["id"] != b.id]
    write_json_atomic(store.paths.index, doc)
    again = open_session(tmp_path, "s1")
    assert again.load_report.adopted == [b.id]
    assert index_ids(again) == [a.id, b.id]
    # A copy of b under another id (same idempotency key) is not adopted twice.
    shutil.copytree(store.paths.folder(b.id), store.dir / "mem-20260101T000009Z-0001")
    copy_meta = read_json(store.dir / "mem-20260101T000009Z-0001" / "meta.json")
    copy_meta["id"] = "mem-20260101T000009Z-0001"
    write_json_atomic(store.dir / "mem-20260101T000009Z-0001" / "meta.json", copy_meta)
    third = open_session(tmp_path, "s1")
    assert index_ids(third) == [a.id, b.id]
    assert third.load_report.duplicate_folders == ["mem-20260101T000009Z-0001"]


def test_index_entries_without_folder_dropped_and_duplicates_removed(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    a, b = commit(store, "a", 1, 2)
    doc = read_json(store.paths.index)
    doc["folders"].append(dict(doc["folders"][0]))  # duplicate id
    doc["folders"].append({"id": "../../etc", "createdAt": 1})  # unsafe id
    doc["folders"].append({"id": "mem-x", "createdAt": "soon"})  # invalid entry
    write_json_atomic(store.paths.index, doc)
    shutil.rmtree(store.paths.folder(b.id))
    again = open_session(tmp_path, "s1")
    assert index_ids(again) == [a.id]
    assert again.load_report.missing_folders == [b.id]
    assert sorted(again.load_report.dropped_entries) == sorted([a.id, "../../etc", "mem-x"])


def test_pending_journal_adopts_complete_and_removes_half_written(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    (keep,) = commit(store, "a", 0)
    complete, half = meta_for(store, 1), meta_for(store, 2)
    # Hand-craft the state of a crash mid-commit.
    write_json_atomic(
        store.paths.journal("b"),
        {
            "version": 1,
            "txnId": "b",
            "state": "pending",
            "folders": [complete.id, half.id, "mem-x"],
            "images": [{"name": "half.png", "folderId": half.id}],
        },
    )
    for m in (complete, half):
        store.paths.folder(m.id).mkdir()
        write_json_atomic(store.paths.folder(m.id) / "context.json", {"messages": []})
    write_json_atomic(
        store.paths.folder(complete.id) / "meta.json", complete.model_dump(exclude_none=True)
    )
    store.paths.images_dir.mkdir()
    (store.paths.images_dir / "half.png").write_bytes(b"x")
    (store.dir / ".index.json.1-1.tmp").write_bytes(b"{")
    staging = store.paths.staging("mem-20260101T000000Z-0099")
    staging.mkdir()
    again = open_session(tmp_path, "s1")
    assert index_ids(again) == [keep.id, complete.id]
    assert again.load_report.adopted == [complete.id]
    assert again.load_report.removed_incomplete == [half.id]
    assert [(j.txn_id, j.action) for j in again.load_report.journals] == [("b", "adopted")]
    assert disk_ids(again.dir) == sorted([keep.id, complete.id])
    assert not (store.paths.images_dir / "half.png").exists()
    assert not staging.exists()
    assert sorted(p.name for p in again.dir.iterdir() if p.name.startswith(".")) == []


def test_committed_journal_is_finalized_at_load(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    metas = commit(store, "a", 1, keep=True)
    assert store.paths.journal("a").exists()
    again = open_session(tmp_path, "s1")
    assert index_ids(again) == [metas[0].id]
    assert not store.paths.journal("a").exists()
    assert [(j.txn_id, j.state, j.action) for j in again.load_report.journals] == [
        ("a", "committed", "finalized")
    ]


def test_aborting_journal_finishes_rollback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_session(tmp_path, "s1")
    (keep,) = commit(store, "a", 0)
    metas = commit(store, "b", 1, 2, keep=True)

    class CrashAfterIndex(FsOps):
        crashed = False

        def rmtree(self, path: Path) -> None:
            self.crashed = True
            raise OSError("crash")

    monkeypatch.setattr(jsonio, "fs", CrashAfterIndex())
    with pytest.raises(OSError):
        store.rollback_committed("b")
    monkeypatch.setattr(jsonio, "fs", FsOps())
    assert read_json(store.paths.journal("b"))["state"] == "aborting"
    again = open_session(tmp_path, "s1")
    assert index_ids(again) == [keep.id]
    assert disk_ids(again.dir) == [keep.id]
    assert [j.action for j in again.load_report.journals] == ["rolled-back"]
    assert all(not store.paths.folder(m.id).exists() for m in metas)


def test_corrupt_journal_discarded_and_its_folders_adopted(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    metas = commit(store, "a", 1, 2)
    store.paths.index.unlink()
    store.paths.journal("zz").write_bytes(b"garbage")
    again = open_session(tmp_path, "s1")
    assert [(j.txn_id, j.action) for j in again.load_report.journals] == [("zz", "discarded")]
    assert sorted(index_ids(again)) == sorted(m.id for m in metas)
    assert not store.paths.journal("zz").exists()


def test_lost_images_index_is_rebuilt_lazily(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    m = FolderMeta.model_validate(
        {
            **meta_for(store, 1).model_dump(),
            "images": [{"name": "img-1.png", "mediaType": "image/png"}],
        }
    )
    with store.transaction("a", keep_record=False) as txn:
        txn.add_folder(m, [], images=[("img-1.png", b"png")])
    store.paths.images_index.write_bytes(b"[[[")
    again = open_session(tmp_path, "s1")
    entries = again.image_entries()
    assert [(e.name, e.folderId, e.mediaType) for e in entries] == [
        ("img-1.png", m.id, "image/png")
    ]
    assert read_json(store.paths.images_index)["images"][0]["name"] == "img-1.png"


def test_unknown_index_fields_and_top_level_keys_preserved(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    (a,) = commit(store, "a", 1)
    doc: dict[str, Any] = read_json(store.paths.index)
    doc["generator"] = "dsh-rofm 1.5.6"
    doc["folders"][0]["pendingEra"] = "legacy"  # index-only marker (memory-audit --apply)
    doc["folders"][0]["futureField"] = {"x": [1, 2]}
    store.paths.index.write_bytes(orjson.dumps(doc))
    again = open_session(tmp_path, "s1")
    again.update_meta(a.id, {"alpha": 0.7, "scored": True})
    # the update is logged (index.log.jsonl) with the extras; the next index write has it
    replayed = open_session(tmp_path, "s1").get_entry(a.id)
    assert replayed.pendingEra == "legacy" and replayed.model_extra == {
        "futureField": {"x": [1, 2]}
    }
    assert replayed.alpha == 0.7
    commit(again, "b", 2)
    assert not again.paths.index_log.exists()
    out = read_json(store.paths.index)
    assert out["generator"] == "dsh-rofm 1.5.6"
    row = out["folders"][0]
    assert row["pendingEra"] == "legacy"
    assert row["futureField"] == {"x": [1, 2]}
    assert row["alpha"] == 0.7 and row["scored"] is True


def _passes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Which of recovery's passes over every folder id ran."""
    from engine.store import recovery

    ran: list[str] = []
    for name in ("orphans", "missing"):
        real = getattr(recovery._Recovery, name)

        def passed(self: Any, real: Any = real, name: str = name) -> None:
            ran.append(name)
            real(self)

        monkeypatch.setattr(recovery._Recovery, name, passed)
    return ran


def test_a_clean_open_skips_the_passes_that_find_orphans_and_missing_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index as loaded names exactly the folders listed, and nothing changed an
    entry since: no folder can be an orphan or missing, and the two passes over every
    id are not made. The store is what the passes would have left."""
    store = open_session(tmp_path, "s1")
    commit(store, "a", 1, 2, 3)
    ran = _passes(monkeypatch)
    again = open_session(tmp_path, "s1")
    assert ran == [] and again.load_report.clean
    assert index_ids(again) == index_ids(store)


@pytest.mark.parametrize("change", ["orphan", "missing", "journal", "marker", "log"])
def test_anything_that_may_change_which_folders_are_indexed_makes_both_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    store = open_session(tmp_path, "s1")
    a, b = commit(store, "a", 1, 2)
    if change == "orphan":  # a folder the index does not name
        doc = read_json(store.paths.index)
        doc["folders"] = [r for r in doc["folders"] if r["id"] != b.id]
        write_json_atomic(store.paths.index, doc)
    elif change == "missing":  # an indexed folder gone
        shutil.rmtree(store.paths.folder(b.id))
    elif change == "journal":  # an archive a crash left committed
        commit(store, "j", 3, keep=True)
    elif change == "marker":  # folders whose rows may lag their metas
        write_json_atomic(store.paths.reindex_marker, {"folders": [a.id]})
    else:  # a row changed since index.json was written
        store.update_meta(a.id, {"alpha": 0.9})
        assert store.paths.index_log.exists()
    ran = _passes(monkeypatch)
    again = open_session(tmp_path, "s1")
    assert ran == ["orphans", "missing"]
    if change == "orphan":
        assert again.load_report.adopted == [b.id]
    if change == "missing":
        assert again.load_report.missing_folders == [b.id]
