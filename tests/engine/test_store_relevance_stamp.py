"""The relevance snapshot stamped with the store's `loaded_from` (issue 10): a snapshot
written while its index is synced to the store's entries as opened carries the stamp of
those entries, and a store opened again with the same stamp takes the stored keys
without comparing every entry; the restored index is still a fresh build, bit for bit,
and reads no folder. A store changed since (a judge, an archive, another writer's
``index.json``) opens with another stamp, or none, and its entries are compared as
ever; a snapshot written after the store changed carries no stamp."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.relevance import snapshot
from engine.relevance.folder_text import (
    FolderTexts,
    save_index,
    snapshot_path,
    synced_index,
)
from engine.relevance.index import RelevanceIndex
from engine.store import SessionStore, open_session
from engine.store.indexfile import remove_index_log, write_index
from handlers.relevance_snapshots import _stamp_due
from tests.engine.recall_fixtures import BASE_MS, write_folders

SID = "stamp"
_TOPICS = ["星港网关", "灰度比例", "tokyo budget", "deploy port", "杭州旅行", "sushi guitar"]
QUERIES = (["星港网关"], ["tokyo", "budget"], ["deploy", "杭州旅行", "x"], ["guitar", "port"])


def _folder(n: int) -> dict[str, Any]:
    topic = _TOPICS[n % len(_TOPICS)]
    return {
        "createdAt": BASE_MS + n * 60_000,
        "alpha": 0.3 + (n % 6) / 10,
        "beta": 1,
        "keywords": [topic, f"k{n % 4}"],
        "messages": [
            {"role": "user", "content": f"{topic} talk {n}"},
            {"role": "assistant", "content": f"{_TOPICS[(n * 5) % 6]} x {'port ' * (n % 3)}"},
        ],
    }


def _header(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    _, size = struct.unpack_from("<8sQ", data)
    header: dict[str, Any] = orjson.loads(data[16 : 16 + size])
    return header


def _fresh(store: SessionStore) -> RelevanceIndex:
    index = RelevanceIndex(FolderTexts(store))
    index.sync(store.index)
    return index


def _assert_same(a: RelevanceIndex, b: RelevanceIndex) -> None:
    for q in QUERIES:
        for pw in (0.0, 0.5):
            for prior in (0.0, 0.2):
                got = a.rank(q, limit=30, alpha_prior=prior, passage_weight=pw)
                assert got == b.rank(q, limit=30, alpha_prior=prior, passage_weight=pw)
    assert a.docs == b.docs
    for word in ["星港网关", "tokyo", "budget", "port", "x", "talk", "k0", "k3"]:
        assert a.df(word) == b.df(word)


def _restored(store: SessionStore) -> tuple[RelevanceIndex, int]:
    """The store's index as a session load makes it, and how many folders it read."""
    index, _ = synced_index(None, store, ())
    texts = index.text_of
    assert isinstance(texts, FolderTexts)
    return index, texts.reads


def _seed(root: Path, count: int) -> list[str]:
    """Scored folders, their index log folded into ``index.json`` (as a compaction
    leaves it: a store opened with a log to replay has no stamp)."""
    ids = write_folders(open_session(root, SID), [_folder(n) for n in range(count)])
    _fold(root)
    return ids


def _fold(root: Path) -> None:
    store = open_session(root, SID)
    write_index(store.paths, [e.row() for e in store.index], {})
    remove_index_log(store.paths)


def _saved_as_opened(root: Path) -> SessionStore:
    """A restart's store with its index synced and saved (as a shutdown saves it)."""
    store = open_session(root, SID)
    index, _ = synced_index(None, store, ())
    assert save_index(index) is not None
    return store


def test_a_snapshot_over_the_store_as_opened_is_stamped_and_restores_without_a_read(
    tmp_path: Path,
) -> None:
    _seed(tmp_path, 12)
    store = _saved_as_opened(tmp_path)
    assert store.loaded_from is not None
    assert _header(snapshot_path(store))["source"] == store.loaded_from
    again = open_session(tmp_path, SID)
    assert again.loaded_from == store.loaded_from
    index, reads = _restored(again)
    assert reads == 0
    assert index.stamp == again.loaded_from
    _assert_same(index, _fresh(again))


def test_a_snapshot_written_after_the_store_changed_carries_no_stamp(tmp_path: Path) -> None:
    store = open_session(tmp_path, SID)
    write_folders(store, [_folder(n) for n in range(6)])
    assert store.loaded_from is None
    index, _ = synced_index(None, store, ())
    save_index(index)
    assert "source" not in _header(snapshot_path(store))
    assert index.stamp is None


def _judge(root: Path, ids: list[str], picks: list[int]) -> None:
    store = open_session(root, SID)
    store.update_metas(
        {ids[i % len(ids)]: {"alpha": 0.91, "keywords": ["deploy port", "新"]} for i in picks}
    )


def _archive(root: Path, ids: list[str], picks: list[int]) -> None:
    write_folders(open_session(root, SID), [_folder(100 + i) for i in picks], txn="arc-more")


def _rewrite(root: Path, ids: list[str], picks: list[int]) -> None:
    """Another writer rewrites ``index.json`` (its rows' α, nothing else): the metas
    stay, the rows the store opens change."""
    store = open_session(root, SID)
    rows = [e.row() for e in store.index]
    for i in picks:
        rows[i % len(rows)]["alpha"] = 0.05
    write_index(store.paths, rows, {})


_CHANGES = {"judge": _judge, "archive": _archive, "rewrite": _rewrite}


@settings(max_examples=8, deadline=None)
@given(
    st.integers(4, 14),
    st.sampled_from(sorted(_CHANGES)),
    st.lists(st.integers(0, 40), min_size=1, max_size=4),
)
def test_a_store_changed_since_its_stamp_is_compared_and_restores_a_fresh_build(
    count: int, change: str, picks: list[int]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ids = _seed(root, count)
        stamped = _saved_as_opened(root).loaded_from
        _CHANGES[change](root, ids, picks)
        store = open_session(root, SID)
        assert store.loaded_from != stamped
        index, _ = _restored(store)
        assert index.stamp is None
        _assert_same(index, _fresh(open_session(root, SID)))


def test_an_unstamped_snapshot_of_an_unchanged_store_is_due_once_for_its_stamp(
    tmp_path: Path,
) -> None:
    _seed(tmp_path, 10)
    store = open_session(tmp_path, SID)
    index, _ = synced_index(None, store, ())
    snapshot.write_snapshot(  # as a daemon before stamps wrote it
        snapshot_path(store), index, owner=str(store.dir), text_version=_text_version()
    )
    store = open_session(tmp_path, SID)
    index, _ = synced_index(None, store, ())
    assert index.stamp is None and not index.unsaved
    monkey_min = index.docs  # the floor is a few hundred folders; these are fewer
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("handlers.relevance_snapshots.SNAPSHOT_MIN_DOCS", monkey_min)
        assert _stamp_due(store, index)
        save_index(index)
        assert index.stamp == store.loaded_from
        assert not _stamp_due(store, index)
        write_folders(store, [_folder(50)], txn="arc-new")
        index, _ = synced_index(index, store, ())
        assert not _stamp_due(store, index)  # changed: no stamp to give


def _text_version() -> str:
    from engine.relevance.folder_text import text_version

    return text_version()
