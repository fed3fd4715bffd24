"""A recall round asks the disk for its picks' files at once before it reads them one by
one (`engine.store.folders.read_ahead`): the conversation file of every pick not rendered
before (its fields are its index entry's: no meta.json),
before the first is read, each opened once (the read takes the open file) and none left
open; none for a pick the render cache holds; a missing file is left to the read that
reports it; nothing where the system has no such advice. `memory_recall` reads its
results the same way, and `memory_group_recall` the one file it reads of each memory it
shows."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from engine import jsonio
from engine.recall import RecallState
from engine.recall.fair import Pick
from engine.recall.group_recall import GroupCall
from engine.recall.group_stores import query_groups
from engine.recall.search import load_entries
from engine.store import folders
from engine.store.layout import SessionPaths
from tests.engine.recall_fixtures import config, disk_round, numbered_store


class _Disk:
    """What reached the disk, in order: ("ahead", file) for each advice, ("read", file)
    for each file read."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[tuple[str, str]] = []
        real_advise, real_read, real_decode = os.posix_fadvise, jsonio.read_json, jsonio.decode_json
        names: dict[int, str] = {}
        real_open = os.open

        def opened(path: Any, flags: int, *args: Any, **kw: Any) -> int:
            fd = real_open(path, flags, *args, **kw)
            names[fd] = _short(str(path))
            self.events.append(("open", names[fd]))
            return fd

        def advise(fd: int, offset: int, length: int, advice: int) -> None:
            assert advice == os.POSIX_FADV_WILLNEED and (offset, length) == (0, 0)
            self.events.append(("ahead", names[fd]))
            real_advise(fd, offset, length, advice)

        def read(path: Path) -> Any:
            self.events.append(("read", _short(str(path))))
            self.events.append(("open", _short(str(path))))  # read_json opens it
            return real_read(path)

        def decode(data: bytes, path: Path) -> Any:
            self.events.append(("read", _short(str(path))))  # from the file opened ahead
            return real_decode(data, path)

        monkeypatch.setattr(os, "open", opened)
        monkeypatch.setattr(os, "posix_fadvise", advise)
        monkeypatch.setattr(folders, "read_json", read)  # the names folders reads with
        monkeypatch.setattr(folders, "decode_json", decode)

    def of(self, kind: str) -> list[str]:
        """The folder files of that kind of event, in order."""
        return [n for k, n in self.events if k == kind and n.endswith(folders.FOLDER_FILES)]


def _short(path: str) -> str:
    return "/".join(path.split("/")[-2:])


def test_a_round_asks_for_every_uncached_pick_before_reading_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = numbered_store(tmp_path, [0.8, 0.8, 0.8, 0.8])
    cfg = config()
    rs = RecallState(persist=False)
    disk = _Disk(monkeypatch)
    fds_before = _open_fds()
    out = disk_round(store, rs, "星港项目", cfg)
    assert _open_fds() == fds_before  # every file opened ahead was read or closed
    picked = [a["id"] for a in out.recall_record["added"]]
    assert len(picked) >= 2
    # a memory's conversation file alone: its fields are its index entry's (recall
    # reads the index), so no meta.json is asked for, opened or read
    files = [f"{fid}/{folders.CONTEXT_FILE}" for fid in picked]
    assert sorted(disk.of("ahead")) == sorted(files)
    assert sorted(disk.of("read")) == sorted(files)
    assert sorted(disk.of("open")) == sorted(files)  # once each: the reads took them
    first_read = disk.events.index(("read", disk.of("read")[0]))
    asked_first = {n for k, n in disk.events[:first_read] if k == "ahead"}
    assert asked_first == set(files)  # all asked for before the first is read
    # the same question from a state sharing the render cache: nothing asked, nothing read
    disk.events.clear()
    again = RecallState(persist=False, render_cache=rs.render_cache)
    out = disk_round(store, again, "星港项目", cfg)
    assert [a["id"] for a in out.recall_record["added"]] == picked
    assert disk.of("ahead") == disk.of("read") == disk.of("open") == []


def test_a_missing_file_is_left_to_the_read_that_reports_it(tmp_path: Path) -> None:
    store, ids = numbered_store(tmp_path, [0.8, 0.8])
    (store.paths.folder(ids[0]) / "context.json").unlink()
    fds_before = _open_fds()
    with store.read_ahead([*ids, ids[1], "mem-20990101T000000Z-0001"]) as ahead:
        assert len(ahead) == 3  # twice: once; not indexed: skipped; missing: left to its read
    assert _open_fds() == fds_before  # none taken: all closed
    with folders.read_ahead(store.paths, ["../escape", ids[1]]) as ahead:
        assert len(ahead) == 2  # an unsafe name is left to the read that refuses it
    out = disk_round(store, RecallState(persist=False), "星港项目", config())
    assert [(u.folder_id, u.reason) for u in out.unreadable] == [(ids[0], "context.json missing")]


def test_without_the_advice_nothing_is_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(os, "posix_fadvise")
    paths = SessionPaths.__new__(SessionPaths)  # never touched: nothing to ask with
    assert len(folders.read_ahead(paths, ["mem-20990101T000000Z-0001"])) == 0


def _open_fds() -> int:
    return len(os.listdir("/dev/fd"))


def test_memory_recall_reads_its_results_the_same_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, ids = numbered_store(tmp_path, [0.8, 0.8, 0.8])
    disk = _Disk(monkeypatch)
    picks = [Pick(n, fid, "search") for n, fid in enumerate(ids)]
    loaded, unreadable = load_entries(store, picks, config())
    assert [p.id for p, _ in loaded] == ids and unreadable == []
    files = [f"{fid}/{folders.CONTEXT_FILE}" for fid in ids]
    assert disk.of("ahead") == disk.of("open") == files  # asked first, opened once each
    assert disk.of("read") == files


def test_group_recall_asks_for_the_shown_memories_context_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`memory_group_recall` reads one file of each memory it shows (its snippet): each
    store's shown ones are asked for at once, none twice, none left open, and nothing of
    a memory it does not show."""
    stores = {"onebot-group-123456": 3, "qqb-g-987654": 2}
    for sid, n in stores.items():
        store, _ = numbered_store(tmp_path / sid, [0.8] * n)
        (tmp_path / "sessions").mkdir(exist_ok=True)
        os.replace(store.dir, tmp_path / "sessions" / sid)
    disk = _Disk(monkeypatch)
    fds = _open_fds()
    answer = query_groups(tmp_path, GroupCall(words=("星港项目",), limit=4), config())
    assert _open_fds() == fds
    assert not answer.is_error
    # (reading a store reads the metas its index log's last record names: not snippets)
    shown = [n for n in disk.of("read") if n.endswith("/context.json")]
    assert len(shown) == 4  # the page's four, not the fifth
    assert sorted(disk.of("ahead")) == sorted(shown)  # their contexts only
    assert sorted(n for n in disk.of("open") if n.endswith("/context.json")) == sorted(shown)
    assert answer.text.count("星港项目第") >= 4  # each snippet read
