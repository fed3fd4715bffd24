"""Rendered recall entries kept between rounds (`engine.recall.render_cache`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.recall import Addition, load_addition
from engine.recall.render_cache import RenderCache
from engine.store import CorruptFolder, SessionStore
from engine.store.folders import ReadAhead
from tests.engine.recall_fixtures import BASE_MS, config, new_store, write_folders


def _store(tmp: Path) -> tuple[SessionStore, list[str]]:
    store = new_store(tmp)
    ids = write_folders(
        store,
        [
            {
                "createdAt": BASE_MS + i * 60_000,
                "alpha": 0.5 + i / 10,
                "keywords": ["星港", f"词{i}"],
                "messages": [
                    {"role": "user", "content": f"第{i}条：昨天讨论了发布计划", "time": BASE_MS},
                    {"role": "assistant", "content": "好的" if i else "看图[图片:(a.png)]"},
                ],
            }
            for i in range(3)
        ],
    )
    return store, ids


class _Reads:
    """Counts the folder reads of a store."""

    def __init__(self, store: SessionStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        real = store.read_context

        def counted(fid: str, ahead: ReadAhead | None = None) -> list[dict[str, Any]]:
            self.n += 1
            return real(fid, ahead)

        monkeypatch.setattr(store, "read_context", counted)


def _text(add: Addition | CorruptFolder | None) -> str:
    assert isinstance(add, Addition)
    return add.entry(1)


def test_a_rendered_folder_is_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, ids = _store(tmp_path)
    cfg = config()
    cache = RenderCache()
    plain = _text(load_addition(store, ids[1], cfg))
    reads = _Reads(store, monkeypatch)
    first = load_addition(store, ids[1], cfg, cache=cache, round_=3, lane="a")
    again = load_addition(store, ids[1], cfg, cache=cache, round_=4, generation=2, lane="b")
    assert reads.n == 1 and cache.hits == 1
    assert _text(first) == plain
    assert isinstance(again, Addition) and isinstance(first, Addition)
    assert (again.injected_round, again.generation, again.lane) == (4, 2, "b")
    assert again.to_json() | {"injectedRound": 3, "generation": 1, "lane": "a"} == first.to_json()
    assert again.messages == first.messages and again.messages is not first.messages


def test_a_changed_meta_or_other_settings_render_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, ids = _store(tmp_path)
    cfg = config()
    cache = RenderCache()
    load_addition(store, ids[1], cfg, cache=cache)
    store.update_metas({ids[1]: {"alpha": 0.95, "persons": ["小林"]}})
    reads = _Reads(store, monkeypatch)
    judged = load_addition(store, ids[1], cfg, cache=cache)
    assert reads.n == 1 and isinstance(judged, Addition) and judged.alpha == 0.95
    assert _text(judged) == _text(load_addition(store, ids[1], cfg))  # (a read: no cache)
    no_dates = config(computeDates=False)
    other = load_addition(store, ids[1], no_dates, cache=cache)
    assert reads.n == 3
    assert _text(other) == _text(load_addition(store, ids[1], no_dates)) != _text(judged)


def test_images_gone_or_unreadable_folders_are_read_every_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, ids = _store(tmp_path)
    cfg = config()
    cache = RenderCache()
    reads = _Reads(store, monkeypatch)
    for _ in range(2):
        load_addition(store, ids[0], cfg, cache=cache)  # an image placeholder: checked anew
    assert reads.n == 2 and len(cache) == 0
    (store.paths.folder(ids[2]) / "context.json").write_bytes(b"{torn")
    for _ in range(2):
        assert isinstance(load_addition(store, ids[2], cfg, cache=cache), CorruptFolder)
    assert len(cache) == 0
    assert load_addition(store, "mem-20000101T000000Z-0001", cfg, cache=cache) is None


def test_the_cache_is_bounded_least_recently_used_first(tmp_path: Path) -> None:
    store, ids = _store(tmp_path)
    cfg = config()
    cache = RenderCache(max_entries=1)
    load_addition(store, ids[1], cfg, cache=cache)
    load_addition(store, ids[2], cfg, cache=cache)
    assert len(cache) == 1
    load_addition(store, ids[2], cfg, cache=cache)
    assert cache.hits == 1
    load_addition(store, ids[1], cfg, cache=cache)
    assert cache.hits == 1
