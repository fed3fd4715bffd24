"""The engine returns what it skipped: unreadable picks, v1 ids and relevance texts, an
unusable recall-state file (kept aside), unreadable folders a load repair had to read."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from engine.jsonio import write_json_atomic
from engine.recall import (
    RecallState,
    prepare_state,
    read_state_file,
)
from engine.relevance.folder_text import synced_index
from engine.store import SessionStore, open_session
from tests.engine.recall_fixtures import config, disk_round, numbered_store


def _three(tmp_path: Path) -> tuple[SessionStore, list[str]]:
    return numbered_store(tmp_path, [0.8, 0.8, 0.8])


def test_unreadable_pick_is_skipped_and_returned_selection_unchanged(tmp_path: Path) -> None:
    store, ids = _three(tmp_path)
    cfg = config()

    def round_(rs: RecallState) -> tuple[list[str], list[tuple[str, str]], list[str]]:
        out = disk_round(store, rs, "星港项目", cfg)
        picked = [a["id"] for a in out.recall_record["added"]]
        return picked, [(u.folder_id, u.reason) for u in out.unreadable], out.readable

    clean_picked, unreadable, readable = round_(RecallState(persist=False))
    assert unreadable == [] and readable == clean_picked and ids[1] in clean_picked
    (store.paths.folder(ids[1]) / "context.json").write_bytes(b"{oops")
    picked, unreadable, readable = round_(RecallState(persist=False))
    assert picked == [f for f in clean_picked if f != ids[1]] == readable
    assert [u[0] for u in unreadable] == [ids[1]]
    assert unreadable[0][1].startswith("context.json:")


def test_a_pick_is_rendered_from_its_index_entry_not_its_meta_file(tmp_path: Path) -> None:
    """Recall reads the index (reference: "recall 读的是 index"; `rofmd selfcheck` compares
    each entry with its meta.json): a round reads a memory's conversation file alone, so
    a damaged or edited meta.json changes nothing it renders."""
    store, ids = _three(tmp_path)
    cfg = config()
    before, after = RecallState(persist=False), RecallState(persist=False)
    clean = disk_round(store, before, "星港项目", cfg)
    assert len(clean.readable) == 3 and before.block
    for fid in ids:
        (store.paths.folder(fid) / "meta.json").write_bytes(b"{oops")
    again = disk_round(store, after, "星港项目", cfg)
    assert again.unreadable == [] and again.readable == clean.readable
    assert after.block == before.block


def test_v1_ids_of_unreadable_folders_are_returned_gone_ones_are_not(tmp_path: Path) -> None:
    store, ids = _three(tmp_path)
    path = store.paths.recall_state
    path.write_bytes(orjson.dumps({"ids": [*ids, "mem-20990101T000000Z-0001"]}))
    (store.paths.folder(ids[0]) / "context.json").write_bytes(b"")
    rs, discarded = read_state_file(path)
    assert discarded is None
    prepared = prepare_state(rs, store, config())
    assert prepared.changed and rs.ids() == ids[1:]
    assert [u.folder_id for u in prepared.unreadable] == [ids[0]]


@pytest.mark.parametrize("content", [b"{garbage", b"42", b"\xff\xfe"])
def test_unusable_state_file_is_kept_aside_never_over_an_earlier_copy(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "recall-state.json"
    stamp_ms = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    names = []
    for n in range(2):
        path.write_bytes(content + str(n).encode())
        os.utime(path, ns=(stamp_ms * 1_000_000, stamp_ms * 1_000_000))
        rs, discarded = read_state_file(path)
        assert rs.block == "" and not path.exists()
        assert discarded is not None and discarded.keep_error is None
        assert discarded.kept_as is not None
        names.append(discarded.kept_as)
        assert (tmp_path / discarded.kept_as).read_bytes() == content + str(n).encode()
        rs.save()
    assert names == [
        "recall-state.json.corrupt-20260101T000000Z",
        "recall-state.json.corrupt-20260101T000000Z-2",
    ]


def test_missing_state_is_not_damage_and_an_unreadable_one_raises(tmp_path: Path) -> None:
    path = tmp_path / "recall-state.json"
    assert read_state_file(path)[1] is None
    path.mkdir()
    with pytest.raises(IsADirectoryError):
        read_state_file(path)
    assert path.is_dir()


def test_relevance_sync_returns_each_unreadable_text_once(tmp_path: Path) -> None:
    store, ids = _three(tmp_path)
    (store.paths.folder(ids[2]) / "context.json").write_bytes(b"[")
    index, unreadable = synced_index(None, store, ())
    assert [u.folder_id for u in unreadable] == [ids[2]]
    store.update_meta(ids[0], {"alpha": 0.3})
    again, unreadable = synced_index(index, store, ())
    assert again is index and unreadable == []
    assert ids[2] in index.by_id  # still found by its keywords and title


def test_reindex_of_an_unreadable_meta_is_reported_at_load(tmp_path: Path) -> None:
    store, ids = _three(tmp_path)
    write_json_atomic(store.paths.reindex_marker, {"folders": [ids[1]]})
    (store.paths.folder(ids[1]) / "meta.json").write_bytes(b"nope")
    again = open_session(tmp_path, "s1")
    report = again.load_report
    assert [c.folder_id for c in report.corrupt_folders] == [ids[1]]
    assert ids[1] in again and not report.clean  # still indexed: recall reports it on a pick
