"""Archive transactions: ordering, rollback, idempotency, maxFolders."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import jsonio
from engine.jsonio import FsOps, read_json
from engine.store import (
    FolderMeta,
    ImageRef,
    MaxFoldersExceededError,
    SessionStore,
    TransactionError,
    UnknownTransactionError,
    make_idempotency_key,
    open_session,
)

NOW = 1_767_225_600_000


def pending_meta(store: SessionStore, n: int, **extra: Any) -> FolderMeta:
    key = make_idempotency_key(store.session_id, 1, n, n, f"h{n}", 0)
    return FolderMeta.model_validate(
        {
            "id": store.new_folder_id(NOW),
            "createdAt": NOW,
            "alpha": 0,
            "beta": 0,
            "scored": False,
            "rescorePending": False,
            "keywords": [],
            "title": f"第{n}段对话",
            "alphaSource": "pending",
            "betaSource": "pending",
            "keywordsSource": "pending",
            "pendingSince": NOW,
            "idempotencyKey": key,
            **extra,
        }
    )


def msgs(n: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"message {n}"}]


def disk_state(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() if p.is_file() else b"<dir>"
        for p in sorted(directory.rglob("*"))
    }


class Recorder(FsOps):
    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []

    def create_write_sync(self, path: Path, data: bytes) -> None:
        self.log.append(("create", path.name))
        super().create_write_sync(path, data)

    def create_write(self, path: Path, data: bytes) -> None:
        self.log.append(("create", path.name))
        super().create_write(path, data)

    def fsync_all(self, paths: Iterable[Path]) -> None:
        issued = list(paths)  # the writer's creates happen as its paths are produced
        self.log.append(("fsync-all", ",".join(p.name for p in issued)))
        super().fsync_all(issued)

    def replace(self, src: Path, dst: Path) -> None:
        self.log.append(("replace", str(dst)))
        super().replace(src, dst)

    def rename(self, src: Path, dst: Path) -> None:
        self.log.append(("rename", dst.name))
        super().rename(src, dst)

    def unlink(self, path: Path) -> None:
        self.log.append(("unlink", path.name))
        super().unlink(path)


def test_commit_writes_journal_first_then_folders_then_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_session(tmp_path, "s1")
    rec = Recorder()
    monkeypatch.setattr(jsonio, "fs", rec)
    with store.transaction("arc-1") as txn:
        m1, m2 = pending_meta(store, 1), pending_meta(store, 2)
        txn.add_folder(m1, msgs(1))
        txn.add_folder(m2, msgs(2), images=[("img-1-1-0.png", b"\x89PNG")])
    names = [
        str(Path(t).relative_to(store.dir)) if op == "replace" else t
        for op, t in rec.log
        if op not in ("create", "fsync-all")
    ]
    journal = ".commit-arc-1.json"
    assert names[0] == journal  # the journal lands before anything else
    first_folder = names.index(m1.id)
    assert names.index(m2.id) > first_folder
    index_at = names.index("index.json")
    assert index_at > names.index(m2.id)
    assert names.index("images/img-1-1-0.png") < names.index("images/index.json") < index_at
    assert names[index_at + 1 :] == [journal]  # committed record after the index
    assert read_json(store.paths.journal("arc-1"))["state"] == "committed"
    assert [e.id for e in store.index] == [m1.id, m2.id]


class Durability(FsOps):
    """Follows what is durable: a file or directory entry counts once an fsync covered
    it (the file itself, its directory, or an ``fsync_all`` naming either)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.written: list[Path] = []  # created or renamed into place, not yet synced
        self.published: list[Path] = []  # folders renamed into place, not yet synced
        self.events: list[tuple[str, str]] = []

    def _rel(self, path: Path) -> str:
        return str(path.relative_to(self.root))

    def _synced(self, path: Path) -> None:
        self.written = [w for w in self.written if w != path and w.parent != path]

    def create_write_sync(self, path: Path, data: bytes) -> None:
        super().create_write_sync(path, data)
        self.written.append(path.parent)  # its content is durable, its entry not yet

    def create_write(self, path: Path, data: bytes) -> None:
        super().create_write(path, data)
        self.events.append(("create", self._rel(path)))
        self.written += [path, path.parent]

    def fsync_all(self, paths: Iterable[Path]) -> None:
        issued: list[Path] = []

        def tracked() -> Iterator[Path]:
            for path in paths:
                issued.append(path)
                yield path

        super().fsync_all(tracked())
        for path in issued:  # durable once the call returns, not before
            self._synced(path)
        self.events.append(("synced", ",".join(sorted(self._rel(p) for p in issued))))

    def fsync_dir(self, path: Path) -> None:
        super().fsync_dir(path)
        self._synced(path)
        self.published = [p for p in self.published if p.parent != path]

    def replace(self, src: Path, dst: Path) -> None:
        assert src not in self.written, f"{dst} replaced by a file not yet durable"
        super().replace(src, dst)
        self.written.append(dst.parent)
        if dst.name == "index.json" and dst.parent == self.root:
            self.events.append(("index", ""))
            assert not self.published, f"the index names folders not yet durable: {self}"

    def rename(self, src: Path, dst: Path) -> None:
        # a folder is published only once all of it is durable
        assert not [w for w in self.written if w == src or w.parent == src], self.written
        super().rename(src, dst)
        self.events.append(("rename", dst.name))
        self.published.append(dst)


def test_each_step_is_durable_before_the_next_and_fsyncs_are_batched_within_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_session(tmp_path, "s1")
    fs = Durability(store.dir)
    monkeypatch.setattr(jsonio, "fs", fs)
    with store.transaction("arc-1") as txn:
        metas = [pending_meta(store, n) for n in range(5)]
        for n, meta in enumerate(metas):
            images = [(f"img-{n}.png", b"\x89PNG" + bytes([n]))] if n % 2 else []
            txn.add_folder(meta, msgs(n), images=images)
    kinds = [kind for kind, _ in fs.events]
    # images: all temp files, one batch of fsyncs; folders: all files, one batch, renames
    syncs = [i for i, kind in enumerate(kinds) if kind == "synced"]
    assert len(syncs) == 2
    image_batch, folder_batch = (fs.events[i][1].split(",") for i in syncs)
    assert len(image_batch) == 2 and all(p.startswith("images/.img-") for p in image_batch)
    staged = [f".staging-{m.id}" for m in metas]
    assert sorted(folder_batch) == sorted(
        [*staged, *(f"{s}/{f}" for s in staged for f in ("context.json", "meta.json"))]
    )
    renames = [i for i, kind in enumerate(kinds) if kind == "rename"]
    assert len(renames) == 5 and min(renames) > syncs[1]
    assert kinds.index("index") > max(renames)
    assert [e.id for e in store.index] == [m.id for m in metas]


def test_committed_files_and_fields(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    meta = pending_meta(
        store,
        1,
        images=[ImageRef(name="img-a.png", mediaType="image/png", bytes=4).model_dump()],
        eventStart=NOW - 1000,
        eventEnd=NOW,
        eventTimeSource="messages",
    )
    with store.transaction("arc-1", keep_record=False) as txn:
        txn.add_folder(meta, msgs(1), images=[("img-a.png", b"\x89PNG")])
    folder = store.paths.folder(meta.id)
    on_disk = read_json(folder / "meta.json")
    assert on_disk["scored"] is False
    assert on_disk["alphaSource"] == on_disk["betaSource"] == on_disk["keywordsSource"] == "pending"
    assert on_disk["idempotencyKey"] == meta.idempotencyKey
    assert "event" not in on_disk and "persons" not in on_disk  # only set fields
    assert read_json(folder / "context.json") == {"messages": msgs(1)}
    index = read_json(store.paths.index)
    assert index["version"] == 1
    assert index["folders"][0]["eventTimeSource"] == "messages"
    assert "alphaSource" not in index["folders"][0]
    assert (store.paths.images_dir / "img-a.png").read_bytes() == b"\x89PNG"
    images = read_json(store.paths.images_index)["images"]
    assert images == [
        {"name": "img-a.png", "folderId": meta.id, "mediaType": "image/png", "bytes": 4}
    ]
    assert not store.paths.journal("arc-1").exists()
    assert store.read_context(meta.id) == msgs(1)
    assert store.get_meta(meta.id) == meta


def test_image_from_source_path(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    src = tmp_path / "upload.bin"
    jpeg = b"\xff\xd8\xff\xe0\x00\x10JFIF" + bytes(range(256)) * 9000  # > 2 copy chunks
    src.write_bytes(jpeg)
    with store.transaction("arc-1") as txn:
        txn.add_folder(pending_meta(store, 1), msgs(1), images=[("qq-1-1-0.jpg", src)])
    assert store.image_path("qq-1-1-0.jpg").read_bytes() == jpeg
    assert [e.name for e in store.image_entries()] == ["qq-1-1-0.jpg"]
    assert txn.warnings == []
    assert sorted(p.name for p in store.paths.images_dir.iterdir()) == [
        "index.json",
        "qq-1-1-0.jpg",
    ]


def test_exception_inside_with_block_writes_nothing(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    before = disk_state(store.dir)
    with pytest.raises(RuntimeError), store.transaction("arc-1") as txn:
        txn.add_folder(pending_meta(store, 1), msgs(1))
        raise RuntimeError("cancelled")
    assert disk_state(store.dir) == before
    assert len(store) == 0
    # The id is free again for a new transaction.
    with store.transaction("arc-1") as txn:
        txn.add_folder(pending_meta(store, 1), msgs(1))
    assert len(store) == 1


def test_failure_mid_commit_rolls_back_exactly_what_it_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_session(tmp_path, "s1")
    with store.transaction("arc-0", keep_record=False) as txn:
        old = pending_meta(store, 0, images=[{"name": "old.png"}])
        txn.add_folder(old, msgs(0), images=[("old.png", b"old")])
    before = disk_state(store.dir)
    index_before = store.index

    class FailOnIndex(FsOps):
        failed = False

        def replace(self, src: Path, dst: Path) -> None:
            if dst == store.paths.index and not self.failed:
                self.failed = True
                raise OSError("injected")
            super().replace(src, dst)

    monkeypatch.setattr(jsonio, "fs", FailOnIndex())
    with pytest.raises(OSError, match="injected"), store.transaction("arc-1") as txn:
        txn.add_folder(
            pending_meta(store, 1, images=[{"name": "new.png"}]),
            msgs(1),
            images=[("new.png", b"new")],
        )
        txn.add_folder(pending_meta(store, 2), msgs(2))
    assert disk_state(store.dir) == before
    assert store.index == index_before
    assert [e.name for e in store.image_entries()] == ["old.png"]
    assert not store.needs_recovery


def test_rollback_committed_removes_exactly_that_transaction(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    with store.transaction("arc-0") as txn:
        keep = pending_meta(store, 0, images=[{"name": "keep.png"}])
        txn.add_folder(keep, msgs(0), images=[("keep.png", b"k")])
    store.finalize("arc-0")
    before = disk_state(store.dir)
    with store.transaction("arc-1") as txn:
        a = pending_meta(store, 1, images=[{"name": "a.png"}])
        b = pending_meta(store, 2)
        txn.add_folder(a, msgs(1), images=[("a.png", b"a")])
        txn.add_folder(b, msgs(2))
    assert store.committed_transactions() == ("arc-1",)
    assert store.rollback_committed("arc-1") == [a.id, b.id]
    assert disk_state(store.dir) == before
    assert [e.id for e in store.index] == [keep.id]
    assert [e.name for e in store.image_entries()] == ["keep.png"]
    with pytest.raises(UnknownTransactionError):
        store.rollback_committed("arc-1")
    assert store.finalize("arc-1") is False


def test_finalize_keeps_data_and_forgets_record(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    with store.transaction("arc-1") as txn:
        txn.add_folder(pending_meta(store, 1), msgs(1))
    assert store.finalize("arc-1") is True
    assert not store.paths.journal("arc-1").exists()
    assert len(store) == 1
    with pytest.raises(UnknownTransactionError):
        store.rollback_committed("arc-1")


def test_idempotent_retry_skips_already_archived_folder(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    with store.transaction("arc-1", keep_record=False) as txn:
        first = pending_meta(store, 1)
        txn.add_folder(first, msgs(1))
    with store.transaction("arc-2") as txn:
        again = pending_meta(store, 1)  # same span → same key, fresh id
        other = pending_meta(store, 2)
        assert txn.add_folder(again, msgs(1)) is False
        assert txn.add_folder(other, msgs(2)) is True
        assert [(s.folder_id, s.existing_id) for s in txn.skipped] == [(again.id, first.id)]
    assert txn.result is not None
    assert txn.result.written == (other.id,)
    assert [e.id for e in store.index] == [first.id, other.id]
    assert not store.paths.folder(again.id).exists()


def test_same_key_twice_in_one_transaction_is_skipped(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    with store.transaction("arc-1") as txn:
        a = pending_meta(store, 1)
        b = pending_meta(store, 1)
        assert txn.add_folder(a, msgs(1))
        assert not txn.add_folder(b, msgs(1))
    assert [e.id for e in store.index] == [a.id]


def test_chunk_ordinal_distinguishes_split_message(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    with store.transaction("arc-1") as txn:
        for chunk in range(3):
            key = make_idempotency_key("s1", 4, 10, 10, "same-hash", chunk)
            meta = pending_meta(store, 9).model_copy(update={"idempotencyKey": key})
            assert txn.add_folder(meta, msgs(chunk))
    assert len(store) == 3


def test_max_folders_refuses_whole_transaction_before_writing(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    with store.transaction("arc-0", max_folders=3, keep_record=False) as txn:
        txn.add_folder(pending_meta(store, 0), msgs(0))
        txn.add_folder(pending_meta(store, 1), msgs(1))
    before = disk_state(store.dir)
    with (
        pytest.raises(MaxFoldersExceededError) as info,
        store.transaction("arc-1", max_folders=3) as txn,
    ):
        txn.add_folder(pending_meta(store, 2), msgs(2))
        txn.add_folder(pending_meta(store, 3), msgs(3))
    assert (info.value.current, info.value.adding, info.value.limit) == (2, 2, 3)
    assert disk_state(store.dir) == before
    assert len(store) == 2
    with store.transaction("arc-2", max_folders=3) as txn:  # reaching the cap exactly is fine
        txn.add_folder(pending_meta(store, 4), msgs(4))
    with store.transaction("arc-3", max_folders=0) as txn:  # 0: unlimited
        txn.add_folder(pending_meta(store, 5), msgs(5))
    assert len(store) == 4


def test_misuse_is_refused(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    txn = store.transaction("arc-1")
    with pytest.raises(TransactionError):
        store.transaction("arc-2")
    meta = pending_meta(store, 1)
    txn.add_folder(meta, msgs(1))
    with pytest.raises(ValueError, match="already used"):
        txn.add_folder(meta.model_copy(update={"idempotencyKey": None}), msgs(1))
    # an unusable image name drops that image, never the folder
    assert txn.add_folder(pending_meta(store, 2), msgs(2), images=[("../x.png", b"")])
    assert "unusable file name" in txn.warnings[-1]
    with pytest.raises(ValueError, match="folder id"):
        txn.add_folder(meta.model_copy(update={"id": "../evil", "idempotencyKey": None}), [])
    txn.commit()
    with pytest.raises(TransactionError):
        txn.commit()
    with pytest.raises(TransactionError, match="on record"):
        store.transaction("arc-1")
    with pytest.raises(ValueError, match="transaction id"):
        store.transaction("../x")
    with pytest.raises(ValueError):
        store.transaction("arc-9", max_folders=-1)


def test_empty_transaction_writes_nothing(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    before = disk_state(store.dir)
    with store.transaction("arc-1"):
        pass
    assert disk_state(store.dir) == before
    assert store.rollback_committed("arc-1") == []


def test_while_syncing_runs_for_each_folder_once_its_files_are_handed_to_the_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_session(tmp_path, "s1")
    fs = Durability(store.dir)
    monkeypatch.setattr(jsonio, "fs", fs)
    with store.transaction("arc-1") as txn:
        metas = [pending_meta(store, n) for n in range(4)]
        for n, meta in enumerate(metas):
            txn.add_folder(meta, msgs(n))
        txn.while_syncing = lambda fid: fs.events.append(("hook", fid))
    order = [(kind, what) for kind, what in fs.events if kind in ("create", "hook", "rename")]
    for n, meta in enumerate(metas):
        at = order.index(("hook", meta.id))
        staged = f".staging-{meta.id}"
        assert order[at - 2 : at] == [
            ("create", f"{staged}/context.json"),
            ("create", f"{staged}/meta.json"),
        ]
        if n + 1 < len(metas):  # before the next folder is written
            assert order[at + 1] == ("create", f".staging-{metas[n + 1].id}/context.json")
    assert [kind for kind, _ in order[-4:]] == ["rename"] * 4  # all before any rename
