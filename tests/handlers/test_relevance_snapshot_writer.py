"""The snapshot writer thread: one file at a time, the newest index per file, no retry
storm after a failed write, and `wait`/`flush` that return once the work is done."""

from __future__ import annotations

import threading
from pathlib import Path

from engine.relevance.folder_text import FolderTexts, snapshot_path
from engine.relevance.index import RelevanceIndex
from engine.store import open_session
from handlers.relevance_snapshots import RETRY_AFTER_S, SnapshotWriter


def _index(root: Path, sid: str) -> RelevanceIndex:
    return RelevanceIndex(FolderTexts(open_session(root, sid)))


def test_the_newest_index_of_a_file_is_written_once(tmp_path: Path) -> None:
    gate = threading.Event()
    written: list[RelevanceIndex] = []

    def save(index: RelevanceIndex) -> int:
        assert gate.wait(5)
        written.append(index)
        return 1

    writer = SnapshotWriter(save)
    a, b, c = _index(tmp_path, "a"), _index(tmp_path, "b"), _index(tmp_path, "b")
    writer.request(a)
    writer.request(b)
    writer.request(c)  # b's file again, before b was written: c replaces it
    assert isinstance(b.text_of, FolderTexts)
    assert writer.pending(snapshot_path(b.text_of.store))
    assert not writer.wait(snapshot_path(b.text_of.store), timeout=0.05)
    gate.set()
    assert writer.flush(5)
    assert written == [a, c]
    assert not writer.pending(snapshot_path(b.text_of.store))
    assert writer.written == 2 and writer.failed == 0


def test_a_failed_write_is_not_retried_on_every_request(tmp_path: Path) -> None:
    now = [0.0]
    calls: list[RelevanceIndex] = []

    def save(index: RelevanceIndex) -> int:
        calls.append(index)
        raise OSError(28, "No space left on device")

    writer = SnapshotWriter(save, clock=lambda: now[0])
    index = _index(tmp_path, "full")
    for _ in range(3):
        writer.request(index)
        assert writer.flush(5)
    assert len(calls) == 1 and writer.failed == 1
    writer.request(index, retry=True)  # being unloaded: its last chance
    assert writer.flush(5)
    assert len(calls) == 2
    now[0] = RETRY_AFTER_S + 1
    writer.request(index)
    assert writer.flush(5)
    assert len(calls) == 3
