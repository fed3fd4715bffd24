"""The recall candidate index and ``index.json`` across a restart, through the daemon's
wiring (`tests.rofmd.eviction_harness`): a shutdown leaves their snapshots, brought to
the store first (an archive after the last recall included); the next start builds no
candidate index and parses no ``index.json``, and answers exactly as a start without
any snapshot; a stale or damaged one is rebuilt with the same answer."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.recall import candidate_snapshot
from engine.recall.candidates import CandidateIndex
from engine.store import index_snapshot, open_session
from engine.store.index_snapshot import DERIVED_SNAPSHOTS
from handlers.relevance_snapshots import WRITER
from tests.engine.recall_fixtures import write_folders
from tests.handlers.test_relevance_snapshot_restart import (
    SID,
    _dir,
    _folder,
    _forget_recall_state,
    _inbox,
    _seed,
)
from tests.rofmd.eviction_harness import core

pytestmark = pytest.mark.anyio

CANDIDATES = candidate_snapshot.SNAPSHOT_NAME
ROWS = index_snapshot.SNAPSHOT_NAME


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """How each start made its indexes: candidate index builds, ``index.json`` parses
    and snapshot hits. Snapshots are written for any size."""
    seen = {"built": 0, "parsed": 0, "rows from snapshot": 0}
    build = CandidateIndex.__init__

    def counting(self: CandidateIndex, *args: Any, **kwargs: Any) -> None:
        seen["built"] += 1
        build(self, *args, **kwargs)

    cached = index_snapshot._cached

    def rows(*args: Any) -> Any:
        out = cached(*args)
        seen["rows from snapshot" if out is not None else "parsed"] += 1
        return out

    monkeypatch.setattr(CandidateIndex, "__init__", counting)
    monkeypatch.setattr(index_snapshot, "_cached", rows)
    monkeypatch.setattr(candidate_snapshot, "SNAPSHOT_MIN_DOCS", 1)
    monkeypatch.setattr(index_snapshot, "SNAPSHOT_MIN_ROWS", 1)
    yield seen
    assert WRITER.flush(30)


async def _start(root: Path, mid: str, text: str | None = None) -> dict[str, Any]:
    """A start, one user message, a shutdown (as SIGTERM runs it)."""
    async with core(root) as c:
        params = _inbox(SID, mid) if text is None else _inbox(SID, mid, text)
        answer: dict[str, Any] = await c.call("agent/inbox/inserted", params)
        await c.app.shutdown(30)
    return answer


def _reference(tmp_path: Path, root: Path) -> Path:
    """A copy of the memory root without any derived snapshot."""
    ref = tmp_path / "ref"
    shutil.rmtree(ref, ignore_errors=True)
    shutil.copytree(root, ref)
    for name in DERIVED_SNAPSHOTS:
        (_dir(ref, SID) / name).unlink(missing_ok=True)
    return ref


async def test_a_restart_builds_nothing_and_answers_as_a_cold_start(
    tmp_path: Path, made: dict[str, int]
) -> None:
    root = tmp_path / "mem"
    _seed(root, SID, 30, pending=2)
    await _start(root, "m1")
    assert made["built"] == 1
    assert (_dir(root, SID) / CANDIDATES).is_file() and (_dir(root, SID) / ROWS).is_file()
    # while the daemon is down nothing changes; the next start restores both
    ref = _reference(tmp_path, root)
    _forget_recall_state(root)
    _forget_recall_state(ref)
    made.update(built=0, parsed=0)
    restarted = await _start(root, "m2")
    assert made["built"] == 0 and made["parsed"] == 0 and made["rows from snapshot"] >= 1
    cold = await _start(ref, "m2")
    assert made["built"] == 1  # the reference built its index
    assert restarted == cold and restarted["recalled"]


async def test_an_archive_after_the_last_recall_is_in_the_shutdown_snapshot(
    tmp_path: Path, made: dict[str, int]
) -> None:
    root = tmp_path / "mem"
    _seed(root, SID, 30)
    async with core(root) as c:
        await c.call("agent/inbox/inserted", _inbox(SID, "m1"))
        assert WRITER.flush(30)
        # the store moves on after the recall (a commit the index has not seen yet)
        state = await c.app.sessions.get(SID)
        write_folders(state.store, [_folder(60), _folder(61)], txn="arc-late")
        await c.app.shutdown(30)
    ref = _reference(tmp_path, root)
    _forget_recall_state(root)
    _forget_recall_state(ref)
    made.update(built=0, parsed=0)
    restarted = await _start(root, "m2", "灰度比例的回滚方案？")
    assert made["built"] == 0 and made["parsed"] == 0
    assert restarted == await _start(ref, "m2", "灰度比例的回滚方案？")


@pytest.mark.parametrize("what", ["stale", "damaged"])
async def test_a_stale_or_damaged_snapshot_is_rebuilt_with_the_same_answer(
    tmp_path: Path, made: dict[str, int], what: str
) -> None:
    root = tmp_path / "mem"
    _seed(root, SID, 30)
    await _start(root, "m1")
    if what == "stale":  # another writer while the daemon is down
        store = open_session(root, SID)
        write_folders(store, [_folder(70)], txn="arc-offline")
        del store
    else:
        for name in (CANDIDATES, ROWS):
            path = _dir(root, SID) / name
            path.write_bytes(path.read_bytes()[:-7])
    ref = _reference(tmp_path, root)
    _forget_recall_state(root)
    _forget_recall_state(ref)
    made.update(built=0, parsed=0)
    again = await _start(root, "m2")
    assert made["built"] == 1 and made["parsed"] >= 1
    assert again == await _start(ref, "m2")
    # and both were written anew: the next start makes neither
    _forget_recall_state(root)
    made.update(built=0, parsed=0)
    assert await _start(root, "m2") == again
    assert made["built"] == 0 and made["parsed"] == 0
