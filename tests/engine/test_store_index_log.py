"""`update_metas` (memory_judge) logs its rows: bytes that follow the folders judged,
crash-safe at every step, replayed at load, folded into index.json, safe against other
writers of index.json.

The crash tests interrupt one call at every filesystem operation (``FaultyFs``: the
operation alone fails, or it and everything after it, a torn append included), then
check the live store (exception) and a reopened one: every judged folder is exactly its
old row with its old meta or its new row with its new meta, the other folders did not
move, and the counters (``IndexStats``) equal a rebuild.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine.jsonio import FsOps, read_json, write_json_atomic
from engine.store import (
    FolderMeta,
    IndexEntry,
    SessionStore,
    indexfile,
    make_idempotency_key,
    open_session,
)
from engine.store.index_stats import IndexStats
from engine.store.records import index_row_from_meta, to_json_dict
from tests.engine.test_store_crash import FaultyFs, Injected, Mode, using
from tests.engine.test_store_index_stats import counted

NOW = 1_795_000_000_000
FOLDERS = 5
JUDGED = ("0", "1", "2")  # ordinal names of the folders one call judges


def _meta(store: SessionStore, n: int) -> FolderMeta:
    return FolderMeta.model_validate(
        {
            "id": store.new_folder_id(NOW + n * 1000),
            "createdAt": NOW + n * 1000,
            "scored": False,
            "title": f"第{n}段",
            "alphaSource": "pending",
            "pendingSince": NOW + n * 1000,
            "idempotencyKey": make_idempotency_key("s1", n, n, n, "h", 0),
        }
    )


def _archive(store: SessionStore, ns: range, txn: str = "arc-a") -> list[str]:
    with store.transaction(txn, keep_record=False) as t:
        metas = [_meta(store, n) for n in ns]
        for m in metas:
            t.add_folder(m, [{"role": "user", "content": m.title}])
    return [m.id for m in metas]


def _judgement(n: int) -> dict[str, Any]:
    """What a memory_judge plan writes for a folder (scored, sources, labels, time)."""
    return {
        "alpha": 0.4 + n / 10,
        "beta": n - 1,
        "scored": True,
        "keywords": ["星港项目", f"端口 {8080 + n}", "部署"],
        "alphaSource": "llm",
        "events": [f"事件{n % 2}"],
        "event": f"事件{n % 2}",
        "judgedAt": NOW + 99,
        "pendingSince": None,
    }


class _Setup:
    """A store of FOLDERS pending folders; ``earlier`` judge calls already logged."""

    def __init__(self, root: Path, earlier: int) -> None:
        self.root = root
        store = open_session(root, "s1")
        self.ids = _archive(store, range(FOLDERS))
        for k in range(earlier):  # the same folders judged before: chains of log rows
            store.update_metas({self.ids[k % 2]: {"alpha": 0.1 + k / 100, "scored": True}})
        self.store = store
        self.before = {fid: store.get_entry(fid) for fid in self.ids}
        self.metas_before = {fid: store.get_meta(fid) for fid in self.ids}
        self.changes = {self.ids[int(i)]: _judgement(int(i)) for i in JUDGED}

    def check(self, store: SessionStore, after: dict[str, IndexEntry] | None) -> None:
        """Each judged folder old or new (row and meta alike), the rest as before."""
        assert [e.id for e in store.index] == self.ids
        for fid in self.ids:
            entry, meta = store.get_entry(fid), store.get_meta(fid)
            if fid not in self.changes:
                assert entry == self.before[fid] and meta == self.metas_before[fid]
                continue
            derived = IndexEntry.model_validate(index_row_from_meta(meta, None))
            assert entry == derived, "the row is its meta's"
            old = entry == self.before[fid] and meta == self.metas_before[fid]
            new = after is not None and entry == after[fid]
            assert old or new, fid
        assert counted(store.index_stats) == counted(IndexStats(store.index))


def _reference_rows(earlier: int) -> dict[str, IndexEntry]:
    """The rows one uninterrupted call gives (the same setup in another directory)."""
    with tempfile.TemporaryDirectory() as tmp:
        setup = _Setup(Path(tmp), earlier)
        setup.store.update_metas(setup.changes)
        return {fid: setup.store.get_entry(fid) for fid in setup.ids}


def _count_ops(earlier: int) -> int:
    with tempfile.TemporaryDirectory() as tmp, using(FaultyFs()):
        setup = _Setup(Path(tmp), earlier)
        counter = FaultyFs()
        with using(counter):
            setup.store.update_metas(setup.changes)
        return counter.count


class TornAppendFs(FaultyFs):
    """Crash mode whose failing operation, an append, leaves half its line behind."""

    def append_sync(self, path: Path, data: bytes) -> None:
        if self.count == self.fail_at:
            self.count += 1
            with path.open("ab") as fh:
                fh.write(data[: len(data) // 2])
            raise Injected("torn append")
        super().append_sync(path, data)


@pytest.fixture(params=[0, 3, "over budget"])
def earlier(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """No log yet; a log of 3 calls; a log past its budget (the call folds it first)."""
    if request.param == "over budget":
        monkeypatch.setattr(indexfile, "LOG_MIN_BYTES", 1)
        monkeypatch.setattr(indexfile, "LOG_SHARE", 10**9)  # any log is past its budget
        return 4
    assert isinstance(request.param, int)
    return request.param


@pytest.mark.parametrize("mode", ["exception", "crash", "torn"])
def test_judge_write_interrupted_at_every_step(earlier: int, mode: str) -> None:
    after = _reference_rows(earlier)
    total = _count_ops(earlier)
    assert total >= 1 + 3 * len(JUDGED)  # the log append, then each meta (temp, rename, fsync)
    for fail_at in range(total):
        with tempfile.TemporaryDirectory() as tmp, using(FaultyFs()):
            setup = _Setup(Path(tmp) / "live", earlier)
            store = setup.store
            crash: Mode = "exception" if mode == "exception" else "crash"
            faulty = (TornAppendFs if mode == "torn" else FaultyFs)(fail_at, crash)
            with using(faulty), pytest.raises(Injected):
                store.update_metas(setup.changes)
            if mode == "exception":
                setup.check(store, after)  # the live store follows the metas on disk
                # a crash right after the failure (a copy: a load may repair the disk)
                shutil.copytree(setup.root, Path(tmp) / "copy")
                crashed = open_session(Path(tmp) / "copy", "s1")
                assert list(crashed.index) == list(store.index)
                # the store goes on: the next call is whole, and so is the next load
                store.update_metas({setup.ids[4]: _judgement(4)})
                assert list(open_session(setup.root, "s1").index) == list(store.index)
            else:
                reopened = open_session(setup.root, "s1")
                setup.check(reopened, after)
                assert not reopened.paths.reindex_marker.exists()


def test_bytes_written_do_not_grow_with_the_index(tmp_path: Path) -> None:
    """One call at 20 folders and at 2000 writes the same bytes; index.json is untouched."""

    class Counting(FsOps):
        def __init__(self) -> None:
            self.bytes = 0
            self.targets: list[str] = []

        def create_write_sync(self, path: Path, data: bytes) -> None:
            self.bytes += len(data)
            super().create_write_sync(path, data)

        def append_sync(self, path: Path, data: bytes) -> None:
            self.bytes += len(data)
            self.targets.append(path.name)
            super().append_sync(path, data)

        def replace(self, src: Path, dst: Path) -> None:
            self.targets.append(dst.name)
            super().replace(src, dst)

    written: dict[int, int] = {}
    for n in (20, 2000):
        store = open_session(tmp_path / str(n), "s1")
        ids = _archive(store, range(n))
        store.update_metas({ids[0]: _judgement(0)})  # the log exists from here on
        counter = Counting()
        with using(counter):
            store.update_metas({fid: _judgement(k) for k, fid in enumerate(ids[1:6])})
        assert "index.json" not in counter.targets
        assert counter.targets == ["index.log.jsonl"] + ["meta.json"] * 5
        written[n] = counter.bytes
    assert written[2000] <= written[20] * 1.05
    assert (tmp_path / "2000" / "sessions").exists()


def test_log_is_folded_in_past_its_budget_and_by_every_index_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(indexfile, "LOG_MIN_BYTES", 2048)
    store = open_session(tmp_path, "s1")
    ids = _archive(store, range(4))
    sizes = []
    for k in range(40):
        budget = indexfile.index_log_budget(indexfile.file_size(store.paths.index))
        store.update_metas({ids[k % 4]: {"alpha": (k + 1) / 100, "scored": True}})
        sizes.append(indexfile.file_size(store.paths.index_log))
        assert sizes[-1] <= budget + 1024  # past the budget by one record at most
    folds = sum(1 for before, now in itertools.pairwise(sizes) if now < before)
    assert folds >= 3 and max(sizes) > 2048
    reopened = open_session(tmp_path, "s1")
    assert list(reopened.index) == list(store.index)
    assert reopened.load_report.clean and reopened.load_report.reindexed == []
    assert reopened.load_report.log_records >= 1
    # an archive commit writes the whole index: the log is folded in and dropped
    _archive(store, range(10, 11), txn="arc-b")
    assert not store.paths.index_log.exists()
    rows = {r["id"]: r for r in read_json(store.paths.index)["folders"]}
    assert rows[ids[3]]["alpha"] == store.get_entry(ids[3]).alpha == 0.4
    assert list(open_session(tmp_path, "s1").index) == list(store.index)


def _older_writer(store: SessionStore, edit: Callable[[dict[str, Any]], None]) -> None:
    """What a version that does not know the log does: rewrite index.json as it reads it."""
    doc = read_json(store.paths.index)
    edit(doc)
    write_json_atomic(store.paths.index, doc)


def test_a_writer_that_does_not_know_the_log(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    a, b, c = _archive(store, range(3))
    store.update_metas({a: _judgement(0), b: _judgement(1)})
    store.update_metas({a: {"beta": 5.0}})  # last record: the meta decides anyway
    # older version: index.json is valid and as of the last index write
    raw, _, status = indexfile.read_index(store.paths)
    assert status == "ok" and all(r["scored"] is False for r in raw)

    # it re-judges b (meta + its index row) and archives nothing else
    def rejudge_b(doc: dict[str, Any]) -> None:
        meta = to_json_dict(store.get_meta(b)) | {"alpha": 0.99, "beta": -3.0}
        write_json_atomic(store.paths.folder(b) / "meta.json", meta)
        row = next(r for r in doc["folders"] if r["id"] == b)
        row.update(alpha=0.99, beta=-3.0, scored=True)

    _older_writer(store, rejudge_b)
    again = open_session(tmp_path, "s1")
    assert again.get_entry(b).alpha == 0.99 and again.get_entry(b).beta == -3.0  # not the log's
    assert again.get_entry(a) == store.get_entry(a)  # untouched by it: the log applies
    assert again.get_entry(a).beta == 5.0 and again.get_entry(c) == store.get_entry(c)
    assert again.load_report.reindexed == [b]
    assert not again.paths.index_log.exists()  # the disagreement was folded in at once
    assert read_json(again.paths.index)["folders"][0]["beta"] == 5.0


def test_a_crash_between_a_fold_and_the_log_removal(tmp_path: Path) -> None:
    """index.json has every row, the log is still there (its removal is not fsynced)."""
    store = open_session(tmp_path, "s1")
    a, b = _archive(store, range(2))
    store.update_metas({a: {"alpha": 0.2, "scored": True}})
    store.update_metas({a: {"alpha": 0.3}, b: {"alpha": 0.5, "scored": True}})
    log = store.paths.index_log.read_bytes()
    _archive(store, range(5, 6), txn="arc-b")  # the fold
    store.paths.index_log.write_bytes(log)
    again = open_session(tmp_path, "s1")
    assert list(again.index) == list(store.index)
    assert again.load_report.reindexed == []
    store.paths.index_log.write_bytes(log)  # again, and this time the store appends to it
    store.update_metas({b: {"alpha": 0.6}})
    third = open_session(tmp_path, "s1")
    assert list(third.index) == list(store.index) and third.get_entry(b).alpha == 0.6
    assert third.load_report.reindexed == []


def test_torn_and_foreign_lines_are_skipped(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    a, b = _archive(store, range(2))
    store.update_metas({a: {"alpha": 0.2, "scored": True}})
    with store.paths.index_log.open("ab") as fh:
        fh.write(b'{"v": 1, "rows": [{"id": "' + b.encode() + b'", "pr')  # a crash mid-append
    again = open_session(tmp_path, "s1")
    assert again.get_entry(a).alpha == 0.2 and again.get_entry(b).scored is False
    assert again.load_report.log_skipped == 1 and again.load_report.log_records == 1
    again.update_metas({b: {"alpha": 0.7, "scored": True}})
    lines = again.paths.index_log.read_bytes().split(b"\n")
    assert orjson.loads(lines[-2])["rows"][0]["id"] == b  # its own line after the torn one
    third = open_session(tmp_path, "s1")
    assert third.get_entry(b).alpha == 0.7 and third.get_entry(a).alpha == 0.2
    assert third.load_report.log_skipped == 1 and third.load_report.log_records == 2


def test_log_without_index_json_rebuilds_from_the_folders(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    a, _ = _archive(store, range(2))
    store.update_metas({a: _judgement(0)})
    store.paths.index.unlink()
    again = open_session(tmp_path, "s1")
    assert again.load_report.index_rewritten
    assert sorted(again.load_report.adopted) == sorted(e.id for e in store.index)
    assert again.get_entry(a) == store.get_entry(a)
    assert not again.paths.index_log.exists()
