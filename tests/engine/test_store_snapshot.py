"""A consistent copy of a store a writer changes meanwhile (engine.store.snapshot)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson

from engine.recall.forget import delete_folders
from engine.store import FolderMeta, ImageRef, SessionStore, make_idempotency_key, open_session
from engine.store.layout import SessionPaths
from engine.store.records import index_row_from_meta
from engine.store.snapshot import copy_snapshot, plan_snapshot, verify_store

NOW = 1_767_225_600_000
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 64


def _meta(store: SessionStore, n: int, **extra: Any) -> FolderMeta:
    return FolderMeta.model_validate(
        {
            "id": store.new_folder_id(NOW + n * 1000),
            "createdAt": NOW + n * 1000,
            "scored": False,
            "title": f"第{n}段对话",
            "idempotencyKey": make_idempotency_key(store.session_id, 1, n, n, f"h{n}", 0),
            **extra,
        }
    )


def _archive(store: SessionStore, n: int, *, image: bool = False) -> str:
    extra: dict[str, Any] = {}
    images: list[tuple[str, bytes]] = []
    if image:
        extra["images"] = [ImageRef(name=f"img-{n}.png", mediaType="image/png")]
        images = [(f"img-{n}.png", PNG)]
    meta = _meta(store, n, **extra)
    with store.transaction(f"arc-{n}", keep_record=False) as txn:
        txn.add_folder(meta, [{"role": "user", "content": f"message {n}"}], images)
    return meta.id


def _store(tmp_path: Path) -> SessionStore:
    return open_session(tmp_path / "mem", "snap-a")


def _dst(tmp_path: Path) -> SessionPaths:
    root = tmp_path / "copy"
    return SessionPaths(root=root, dir=root / "sessions" / "snap-a")


def _rows(paths: SessionPaths) -> dict[str, dict[str, Any]]:
    doc = orjson.loads(paths.index.read_bytes())
    return {row["id"]: row for row in doc["folders"]}


def test_copy_is_a_clean_store_with_every_indexed_folder(tmp_path: Path) -> None:
    store = _store(tmp_path)
    ids = [_archive(store, n, image=n == 2) for n in range(4)]
    store.append_stats({"type": "recall", "time": NOW})
    store.update_meta(ids[1], {"alpha": 0.7, "scored": True, "keywords": ["端口"]})  # logged
    plan = plan_snapshot(store.paths)
    dst = _dst(tmp_path)
    rep = copy_snapshot(plan, dst)
    assert rep.folders == ids and rep.gone == [] and rep.unreadable == [] and rep.images == 1
    assert verify_store(dst) == []
    reopened = open_session(dst.root, "snap-a")
    assert reopened.load_report.clean and [e.id for e in reopened.index] == ids
    assert reopened.get_entry(ids[1]).alpha == 0.7  # the judged row, from its meta
    assert (dst.dir / "stats.jsonl").read_bytes() == store.paths.stats.read_bytes()
    assert not dst.index_log.exists() and not dst.reindex_marker.exists()
    assert (dst.images_dir / "img-2.png").read_bytes() == PNG


def test_a_meta_judged_after_the_index_was_read_is_what_its_row_says(tmp_path: Path) -> None:
    store = _store(tmp_path)
    ids = [_archive(store, n) for n in range(3)]
    plan = plan_snapshot(store.paths)  # index and log read here
    store.update_meta(ids[0], {"alpha": 0.9, "scored": True})  # meta newer than the log read
    dst = _dst(tmp_path)
    copy_snapshot(plan, dst)
    assert verify_store(dst) == []
    meta = orjson.loads((dst.folder(ids[0]) / "meta.json").read_bytes())
    row = _rows(dst)[ids[0]]
    assert meta["alpha"] == row["alpha"] == 0.9
    assert row == index_row_from_meta(FolderMeta.model_validate(meta), row)


def test_state_files_are_read_before_the_index_and_telemetry_is_cut_at_whole_lines(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    _archive(store, 0)
    store.append_stats({"type": "recall", "time": NOW})
    with store.paths.stats.open("ab") as fh:
        fh.write(b'{"type": "recall", "ti')  # a line being appended
    (store.dir / "recall-state.json").write_bytes(b'{"version": 3}\n')
    (store.dir / ".relevance-index.snapshot").write_bytes(b"derived")
    plan = plan_snapshot(store.paths, leave_out={".relevance-index.snapshot"})
    later = _archive(store, 1)  # committed after the snapshot began: not in it
    dst = _dst(tmp_path)
    rep = copy_snapshot(plan, dst)
    assert later not in rep.folders and verify_store(dst) == []
    assert (dst.dir / "stats.jsonl").read_bytes().endswith(b"}\n")
    assert len((dst.dir / "stats.jsonl").read_bytes().splitlines()) == 1
    assert (dst.dir / "recall-state.json").read_bytes() == b'{"version": 3}\n'
    assert not (dst.dir / ".relevance-index.snapshot").exists()
    assert (dst.dir / "session.json").exists()


def test_a_folder_removed_while_copying_is_left_out_whole(tmp_path: Path) -> None:
    store = _store(tmp_path)
    ids = [_archive(store, n, image=True) for n in range(3)]
    plan = plan_snapshot(store.paths)
    # memory_forget's delete after the index was read: index first, files after
    assert delete_folders(store, [ids[1]], "del-1") == [ids[1]]
    dst = _dst(tmp_path)
    rep = copy_snapshot(plan, dst)
    assert rep.gone == [ids[1]] and rep.folders == [ids[0], ids[2]]
    assert verify_store(dst) == []
    assert not dst.folder(ids[1]).exists() and not (dst.images_dir / "img-1.png").exists()


def test_half_removed_folder_is_not_copied_half(tmp_path: Path) -> None:
    """The folder's context is gone and its row too (a rollback between its steps)."""
    store = _store(tmp_path)
    ids = [_archive(store, n) for n in range(2)]
    plan = plan_snapshot(store.paths)
    doc = orjson.loads(store.paths.index.read_bytes())
    doc["folders"] = [r for r in doc["folders"] if r["id"] != ids[0]]
    store.paths.index.write_bytes(orjson.dumps(doc))  # the rollback's index write …
    (store.paths.folder(ids[0]) / "context.json").unlink()  # … and half its rmtree
    dst = _dst(tmp_path)
    rep = copy_snapshot(plan, dst)
    assert rep.gone == [ids[0]] and rep.folders == [ids[1]] and verify_store(dst) == []


def test_a_folder_damaged_in_the_store_is_copied_as_it_is_and_reported(tmp_path: Path) -> None:
    store = _store(tmp_path)
    ids = [_archive(store, n) for n in range(2)]
    (store.paths.folder(ids[0]) / "context.json").write_bytes(b"{not json")
    dst = _dst(tmp_path)
    rep = copy_snapshot(plan_snapshot(store.paths), dst)
    assert [f for f, _ in rep.unreadable] == [ids[0]] and rep.folders == ids
    assert (dst.folder(ids[0]) / "context.json").read_bytes() == b"{not json"
    assert verify_store(dst, damaged={ids[0]}) == []
    assert verify_store(dst) != []


def test_verify_names_what_keeps_a_store_from_opening_cleanly(tmp_path: Path) -> None:
    store = _store(tmp_path)
    ids = [_archive(store, n) for n in range(3)]
    dst = _dst(tmp_path)
    copy_snapshot(plan_snapshot(store.paths), dst)
    meta_path = dst.folder(ids[2]) / "meta.json"
    meta = orjson.loads(meta_path.read_bytes())
    meta["alpha"] = 0.5  # the meta changed, its row not
    meta_path.write_bytes(orjson.dumps(meta))
    problems = verify_store(dst)
    assert problems == [f"index rows differ from their meta: {ids[2]}"], problems
    shutil.rmtree(dst.folder(ids[0]))
    assert any("indexed folders missing" in p and ids[0] in p for p in verify_store(dst))
