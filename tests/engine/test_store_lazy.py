"""Issue 21: opening a session that has no directory creates nothing until it writes.

`open_session(create=False)` gives an empty store, exactly what a fresh directory would
give, without touching the disk; its first write makes the directory as
`create=True` would have (record, then the files). A directory that is already there
(or an old-mapping store of the id) is opened as always.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.jsonio import read_json
from engine.store import FolderMeta, open_session, safe_session_id
from engine.store.ids import legacy_session_dir_name
from engine.store.session_dirs import SESSION_FILE, session_dir_exists
from tests.engine.test_session_dirs import _legacy_store

NOW = 1_767_225_600_000


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def _folder(store_id: str, n: int) -> FolderMeta:
    return FolderMeta(id=store_id, createdAt=NOW + n, scored=False, title=f"t{n}")


@pytest.mark.parametrize("sid", ["session-8f2c", "chat/a", "会话一", "x" * 300])
def test_a_new_id_opens_empty_and_creates_nothing(tmp_path: Path, sid: str) -> None:
    root = tmp_path / "mem"
    lazy = open_session(root, sid, create=False)
    assert _tree(tmp_path) == []  # not even the memory root
    assert not lazy.materialized and len(lazy) == 0 and lazy.index == ()
    assert lazy.image_entries() == [] and lazy.committed_transactions() == ()
    assert lazy.dir == (root / "sessions" / safe_session_id(sid)).resolve()
    # what an eager open of a new id reports, for another new id
    eager = open_session(tmp_path / "other", sid)
    assert lazy.load_report == eager.load_report
    assert lazy.dir_outcome is None and eager.dir_outcome is not None
    assert _tree(tmp_path / "mem") == []


def test_the_first_write_makes_the_directory_as_an_eager_open(tmp_path: Path) -> None:
    lazy = open_session(tmp_path / "lazy", "chat/a", create=False)
    eager = open_session(tmp_path / "eager", "chat/a")
    folder_id = lazy.new_folder_id(NOW)  # ids may be handed out before the directory
    assert not lazy.materialized and _tree(tmp_path / "lazy") == []
    for store in (lazy, eager):
        with store.transaction("arc-1") as txn:
            txn.add_folder(_folder(folder_id, 1), [{"role": "user", "content": "你好"}])
        store.append_stats({"type": "test"})
    assert lazy.materialized
    assert lazy.dir_outcome is not None and lazy.dir_outcome.action == "created"
    assert _tree(tmp_path / "lazy") == _tree(tmp_path / "eager")
    assert read_json(lazy.dir / SESSION_FILE) == read_json(eager.dir / SESSION_FILE)
    assert [e.id for e in lazy.index] == [folder_id]
    assert lazy.new_folder_id(NOW) == eager.new_folder_id(NOW)
    # and it reopens as any store does
    again = open_session(tmp_path / "lazy", "chat/a", create=False)
    assert again.materialized and [e.id for e in again.index] == [folder_id]


@pytest.mark.parametrize("write", ["stats", "metas", "transaction"])
def test_every_kind_of_write_materializes_first(tmp_path: Path, write: str) -> None:
    store = open_session(tmp_path, "s1", create=False)
    if write == "stats":
        store.append_stats({"type": "judge"})
        assert (store.dir / "stats.jsonl").is_file()
    elif write == "metas":
        assert store.update_metas({}) == {}  # nothing to change: nothing written
        assert not store.materialized
        store.append_stats({"type": "x"})
    else:
        with store.transaction("arc-t", keep_record=False) as txn:
            txn.add_folder(_folder(store.new_folder_id(NOW), 0), [{"role": "user", "content": "x"}])
    assert store.materialized
    assert read_json(store.dir / SESSION_FILE) == {"version": 1, "id": "s1"}


def test_an_existing_directory_is_opened_as_always(tmp_path: Path) -> None:
    eager = open_session(tmp_path, "s1")
    with eager.transaction("arc-1", keep_record=False) as txn:
        txn.add_folder(_folder(eager.new_folder_id(NOW), 0), [{"role": "user", "content": "x"}])
    store = open_session(tmp_path, "s1", create=False)
    assert store.materialized and len(store) == 1
    assert store.dir_outcome is not None and store.dir_outcome.action == "ok"


def test_an_old_store_of_the_id_is_migrated_not_ignored(tmp_path: Path) -> None:
    sid = "chat/a"
    old = _legacy_store(tmp_path, legacy_session_dir_name(sid), [(sid, 1)])
    assert session_dir_exists(tmp_path / "sessions", sid)
    store = open_session(tmp_path, sid, create=False)
    assert store.materialized and len(store) == 1 and not old.exists()
    assert store.dir_outcome is not None and store.dir_outcome.action == "migrated"


def test_an_old_store_of_another_id_is_left_alone(tmp_path: Path) -> None:
    # `chat_a` (no folders) belongs to the id `chat_a` by its name, not to `chat/a`
    _legacy_store(tmp_path, "chat_a", [])
    before = _tree(tmp_path)
    assert not session_dir_exists(tmp_path / "sessions", "chat/a")
    store = open_session(tmp_path, "chat/a", create=False)
    assert not store.materialized and _tree(tmp_path) == before
    store.append_stats({"type": "x"})
    assert store.dir.name == safe_session_id("chat/a") and store.dir.is_dir()


def test_the_global_layout_is_lazy_too(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    store = open_session(root, "any", per_session=False, create=False)
    assert not root.exists() and not store.materialized
    store.append_stats({"type": "x"})
    assert store.dir == root.resolve() and (root / "stats.jsonl").is_file()
    assert not (root / "sessions").exists()


def test_a_file_at_the_name_is_reported_as_always(tmp_path: Path) -> None:
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / "s1").write_bytes(b"not a directory")
    with pytest.raises(NotADirectoryError):
        open_session(tmp_path, "s1", create=False)


def test_ids_handed_out_but_not_on_disk_are_never_handed_out_again(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    kept = store.new_folder_id(NOW)
    with store.transaction("arc-1") as txn:
        txn.add_folder(_folder(kept, 0), [{"role": "user", "content": "x"}])
    gone = store.new_folder_id(NOW)
    with store.transaction("arc-2") as txn:
        txn.add_folder(_folder(gone, 1), [{"role": "user", "content": "y"}])
    assert store.rollback_committed("arc-2") == [gone]
    unbacked = store.unbacked_folder_ids()
    assert unbacked == (gone,)
    reopened = open_session(tmp_path, "s1")
    assert reopened.new_folder_id(NOW) == gone  # what a plain reopen would reuse
    again = open_session(tmp_path, "s1")
    again.observe_folder_ids(unbacked)
    assert again.new_folder_id(NOW) == store.new_folder_id(NOW) != gone
