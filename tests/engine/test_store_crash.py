"""Interrupt store operations at EVERY filesystem step and prove recovery.

All mutations go through ``engine.jsonio.fs``; :class:`FaultyFs` counts them
and fails the n-th one. Two failure kinds:

* ``exception``: only that operation fails; the store's own rollback runs;
* ``crash``: that operation and every later one fail (the process is gone:
  no cleanup happens; a failing file write leaves a torn temp file).

After each interruption the directory is reopened with a healthy filesystem
and the invariants are checked.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import jsonio
from engine.jsonio import FsOps, is_temp_name, read_json
from engine.store import FolderMeta, SessionStore, make_idempotency_key, open_session

NOW = 1_767_225_600_000
Mode = Literal["exception", "crash"]


class Injected(OSError):
    """The injected failure."""


class FaultyFs(FsOps):
    """Counts operations; fails at ``fail_at`` (and after it in crash mode).

    fsyncs are skipped: durability is the kernel's job, not what is tested here,
    and skipping keeps hundreds of reopen cycles fast.
    """

    def __init__(self, fail_at: int | None = None, mode: Mode = "exception") -> None:
        self.count = 0
        self.fail_at = fail_at
        self.mode = mode

    def _step(self) -> bool:
        n = self.count
        self.count += 1
        if self.fail_at is None:
            return False
        return n == self.fail_at or (self.mode == "crash" and n > self.fail_at)

    def create_write_sync(self, path: Path, data: bytes) -> None:
        if self._step():
            if self.count - 1 == self.fail_at:
                path.write_bytes(data[: len(data) // 2])  # torn temp file
            raise Injected(f"create {path.name}")
        path.write_bytes(data)

    def create_write(self, path: Path, data: bytes) -> None:
        if self._step():
            if self.count - 1 == self.fail_at:
                path.write_bytes(data[: len(data) // 2])  # torn file
            raise Injected(f"create {path.name}")
        path.write_bytes(data)

    def fsync(self, path: Path) -> None:
        if self._step():
            raise Injected(f"fsync {path.name}")

    def fsync_all(self, paths: Iterable[Path]) -> None:
        # one step per path, in order (a writer's generator makes its own steps between
        # them); like the real one, every fsync is tried before the first failure is raised
        first: Injected | None = None
        for path in paths:
            try:
                self.fsync(path)
            except Injected as exc:
                first = first or exc
        if first is not None:
            raise first

    def append_sync(self, path: Path, data: bytes) -> None:
        if self._step():
            raise Injected("append")
        with path.open("ab") as fh:
            fh.write(data)

    def replace(self, src: Path, dst: Path) -> None:
        if self._step():
            raise Injected(f"replace {dst.name}")
        super().replace(src, dst)

    def rename(self, src: Path, dst: Path) -> None:
        if self._step():
            raise Injected(f"rename {dst.name}")
        super().rename(src, dst)

    def fsync_dir(self, path: Path) -> None:
        if self._step():
            raise Injected("fsync dir")

    def mkdir(self, path: Path) -> None:
        if self._step():
            raise Injected("mkdir")
        super().mkdir(path)

    def unlink(self, path: Path) -> None:
        if self._step():
            raise Injected(f"unlink {path.name}")
        super().unlink(path)

    def rmtree(self, path: Path) -> None:
        if self._step():
            raise Injected(f"rmtree {path.name}")
        super().rmtree(path)


@contextmanager
def using(fs: FsOps) -> Iterator[None]:
    saved = jsonio.fs
    jsonio.fs = fs
    try:
        yield
    finally:
        jsonio.fs = saved


def make_meta(store: SessionStore, n: int, images: int) -> FolderMeta:
    return FolderMeta.model_validate(
        {
            "id": store.new_folder_id(NOW + n),
            "createdAt": NOW + n,
            "scored": False,
            "title": f"chunk {n}",
            "idempotencyKey": make_idempotency_key("s1", 7, 1, 9, "hash", n),
            "images": [{"name": f"img-{n}-{i}.png"} for i in range(images)] or None,
        }
    )


def plan(store: SessionStore, ns: range, images: int) -> list[tuple[FolderMeta, Any, Any]]:
    out = []
    for n in ns:
        meta = make_meta(store, n, images)
        msgs = [{"role": "user", "content": f"text {n}"}]
        imgs = [(f"img-{n}-{i}.png", f"png{n}{i}".encode()) for i in range(images)]
        out.append((meta, msgs, imgs))
    return out


def run_txn(store: SessionStore, txn_id: str, planned: list[Any], keep: bool) -> None:
    with store.transaction(txn_id, keep_record=keep) as txn:
        for meta, msgs, imgs in planned:
            txn.add_folder(meta, msgs, images=imgs)


def check_invariants(store: SessionStore, committed: list[Any], attempted: list[Any]) -> None:
    root = store.dir
    index_ids = [e.id for e in store.index]
    disk = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name.startswith("mem-"))
    # index equals the folders on disk, nothing duplicated
    assert sorted(index_ids) == disk
    assert len(set(index_ids)) == len(index_ids)
    keys = [e.idempotencyKey for e in store.index]
    assert len(set(keys)) == len(keys)
    on_disk_index = [r["id"] for r in read_json(store.paths.index)["folders"]]
    assert on_disk_index == index_ids
    # nothing committed earlier is lost, content intact
    for meta, msgs, imgs in committed:
        assert meta.id in index_ids
        assert store.get_meta(meta.id) == meta
        assert store.read_context(meta.id) == msgs
        for name, data in imgs:
            assert store.image_path(name).read_bytes() == data
    # an interrupted transaction's folders are complete if they survived
    by_id = {m.id: (m, msgs, imgs) for m, msgs, imgs in attempted}
    allowed = {m.id for m, _, _ in committed} | set(by_id)
    assert set(index_ids) <= allowed
    for fid in set(index_ids) & set(by_id):
        meta, msgs, imgs = by_id[fid]
        assert store.get_meta(fid) == meta
        assert store.read_context(fid) == msgs
        for name, data in imgs:
            assert store.image_path(name).read_bytes() == data
    # images table equals image files, each pointing at an indexed folder
    entries = store.image_entries() if store.paths.images_dir.exists() else []
    files = (
        sorted(p.name for p in store.paths.images_dir.iterdir() if p.name != "index.json")
        if store.paths.images_dir.exists()
        else []
    )
    assert sorted(e.name for e in entries) == files
    assert all(e.folderId in index_ids for e in entries)
    # no journal, no temp file, no staging folder anywhere
    for p in root.rglob("*"):
        assert not p.name.startswith(".commit-"), p
        assert not p.name.startswith(".staging-"), p
        assert not is_temp_name(p.name), p


def count_ops(images: int, folders: int, keep: bool) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        store = open_session(Path(tmp), "s1")
        planned = plan(store, range(100, 100 + folders), images)
        counter = FaultyFs()
        with using(counter):
            run_txn(store, "arc-b", planned, keep)
        return counter.count


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    folders=st.integers(1, 3),
    images=st.integers(0, 2),
    keep=st.booleans(),
    earlier_record=st.booleans(),
)
def test_commit_interrupted_at_every_step(
    folders: int, images: int, keep: bool, earlier_record: bool
) -> None:
    total = count_ops(images, folders, keep)
    assert total > 10
    modes: tuple[Mode, ...] = ("exception", "crash")
    for mode in modes:
        for fail_at in range(total):
            with tempfile.TemporaryDirectory() as tmp, using(FaultyFs()):
                root = Path(tmp)
                store = open_session(root, "s1")
                earlier = plan(store, range(2), 1)
                run_txn(store, "arc-a", earlier, keep=earlier_record)
                attempted = plan(store, range(100, 100 + folders), images)
                faulty = FaultyFs(fail_at, mode)
                with using(faulty), pytest.raises(Injected):
                    run_txn(store, "arc-b", attempted, keep)
                if mode == "exception":
                    # only one step failed: the store's own rollback completed
                    assert not store.needs_recovery
                    assert [e.id for e in store.index] == [m.id for m, _, _ in earlier]
                reopened = open_session(root, "s1")
                check_invariants(reopened, earlier, attempted)
                if mode == "exception":
                    assert [e.id for e in reopened.index] == [m.id for m, _, _ in earlier]
                # Retrying the same spans archives each exactly once.
                retry: list[tuple[FolderMeta, Any, Any]] = [
                    (m.model_copy(update={"id": reopened.new_folder_id(NOW)}), msgs, [])
                    for m, msgs, _ in attempted
                ]
                with reopened.transaction("arc-c", keep_record=False) as txn:
                    for meta, msgs, _ in retry:
                        txn.add_folder(meta, msgs)
                keys = [e.idempotencyKey for e in reopened.index]
                assert len(keys) == len(set(keys)) == len(earlier) + folders


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(folders=st.integers(1, 3), images=st.integers(0, 2))
def test_rollback_committed_interrupted_at_every_step_is_all_or_nothing(
    folders: int, images: int
) -> None:
    fail_at = 0
    while True:
        with tempfile.TemporaryDirectory() as tmp, using(FaultyFs()):
            root = Path(tmp)
            store = open_session(root, "s1")
            earlier = plan(store, range(2), 1)
            run_txn(store, "arc-a", earlier, keep=False)
            target = plan(store, range(100, 100 + folders), images)
            run_txn(store, "arc-b", target, keep=True)
            faulty = FaultyFs(fail_at, "crash")
            with using(faulty):
                try:
                    store.rollback_committed("arc-b")
                except Injected:
                    pass
                else:
                    return  # fail_at is past the last operation: every step covered
            reopened = open_session(root, "s1")
            ids = {e.id for e in reopened.index}
            target_ids = {m.id for m, _, _ in target}
            assert target_ids <= ids or not (target_ids & ids)
            survived = target if target_ids <= ids else []
            check_invariants(reopened, earlier + survived, [])
        fail_at += 1
