"""Reopening a session waits for the snapshots still being written into its directory
(`handlers.relevance_snapshots.before_open`): the store's recovery at open removes the
temp files it finds as a crash's leftovers, and would pull a write in flight from under
its writer (seen in CI: an evicted session reopened while its relevance snapshot was
being written lost the newer snapshot and reported a repaired store)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import anyio

from engine import jsonio
from handlers.relevance_snapshots import WRITER, SnapshotWriter
from handlers.sessions import SessionRegistry


def _blocking_job(target: Path, started: threading.Event, release: threading.Event) -> int:
    """An atomic write that stops between its temp file and the rename."""
    tmp = jsonio.temp_path(target)
    tmp.write_bytes(b"newer")
    started.set()
    assert release.wait(30)
    os.replace(tmp, target)
    return 5


async def test_a_reopen_waits_for_the_write_in_flight_and_keeps_its_temp_file(
    tmp_path: Path,
) -> None:
    registry = SessionRegistry(lambda: tmp_path, lambda: True)
    state = await registry.get("s1")
    target = state.store.paths.dir / ".relevance-index.snapshot"
    assert registry.dispose("s1")
    started, release = threading.Event(), threading.Event()
    WRITER.request_job(target, lambda: _blocking_job(target, started, release), retry=True)
    try:
        assert started.wait(30)
        reopened: list[object] = []

        async def reopen() -> None:
            reopened.append(await registry.get("s1"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(reopen)
            await anyio.sleep(0.3)
            assert reopened == []  # still waiting for the write
            release.set()
    finally:
        release.set()
        assert WRITER.flush(30)
    assert target.read_bytes() == b"newer"
    again = await registry.get("s1")  # the reopened store found nothing to repair
    assert again.load_report.temp_removed == []
    assert not [p.name for p in target.parent.iterdir() if jsonio.is_temp_name(p.name)]


def test_wait_within_waits_only_for_files_of_that_directory(tmp_path: Path) -> None:
    writer = SnapshotWriter()
    mine, other = tmp_path / "mine", tmp_path / "other"
    mine.mkdir()
    other.mkdir()
    started, release = threading.Event(), threading.Event()
    target = mine / ".relevance-index.snapshot"
    writer.request_job(target, lambda: _blocking_job(target, started, release))
    try:
        assert started.wait(30)
        assert writer.wait_within(other, 0)
        assert not writer.wait_within(mine, 0.05)
    finally:
        release.set()
    assert writer.wait_within(mine, 30)
    assert target.read_bytes() == b"newer"
