"""`archive/commit` and `archive/abort` answer the same across restarts (issue 21).

Every phase an archive can be in when the daemon stops (``handlers.archive_state``) is
built with a real store transaction and the real record, the daemon state is thrown
away (a restart: a fresh ``App`` on the same memory root), and the host's report is
sent, then sent again after a second restart. Each answer must be what the first one
was or would have been, and the folders on disk exactly what that answer says.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import orjson
import pytest

from engine.store import JournalRecord, SessionStore, open_session
from handlers.app import App, Paths
from handlers.archive_state import (
    MAX_UNREPORTED,
    RECORD_NAME,
    ArchiveState,
    PendingArchive,
)
from handlers.config_state import ConfigState
from handlers.context import ConnectionState, RequestContext
from handlers.errors import HandlerError
from handlers.pre_step import ArchiveAbortParams, ArchiveCommitParams, archive_abort, archive_commit
from tests.archive_fixtures import T0
from tests.engine.test_store_transaction import msgs, pending_meta

SID = "reports"
Method = Literal["archive/commit", "archive/abort"]


class _Info:
    def status_snapshot(self) -> dict[str, Any]:
        return {"version": "test"}


def _restart(root: Path) -> App:
    """A fresh daemon state on ``root``: nothing of the previous one kept in memory."""
    (root.parent / "cfg").mkdir(exist_ok=True)
    return App(
        ConfigState.start(root.parent / "cfg", {}),
        Paths(memory_root_override=root, state_dir=root.parent / "state", home=root.parent),
        _Info(),
    )


async def _send(root: Path, method: Method, token: str) -> dict[str, Any]:
    app = _restart(root)
    p = {"session": {"id": SID}, "token": token}
    ctx = RequestContext("1", method, SID, ConnectionState(conn_id=1), T0)
    if method == "archive/commit":
        return await archive_commit(app, ArchiveCommitParams.model_validate(p), ctx)
    return await archive_abort(app, ArchiveAbortParams.model_validate(p), ctx)


async def _refused(root: Path, method: Method, token: str) -> HandlerError:
    with pytest.raises(HandlerError) as info:
        await _send(root, method, token)
    assert info.value.code == -32602
    return info.value


def _store(root: Path) -> SessionStore:
    return open_session(root, SID)


def _record(root: Path) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads((_store(root).dir / RECORD_NAME).read_bytes())
    return doc


def _folders(root: Path) -> set[str]:
    store = _store(root)
    on_disk = {p.name for p in store.dir.glob("mem-*")}
    assert on_disk == {e.id for e in store.index}, "index.json == folders on disk"
    return on_disk


def _archive(root: Path, token: str, phase: str) -> list[str]:
    """One archive of two folders written by a real transaction, its record left in
    ``phase`` (``planned``: the daemon stopped before the answer; ``answered``: after
    it; ``aborting``: in the middle of the host's abort); returns its folders."""
    store = _store(root)
    ast = ArchiveState.load(store)
    with store.transaction(token) as txn:
        txn.add_folder(pending_meta(store, len(store) + 1), msgs(1))
        txn.add_folder(pending_meta(store, len(store) + 2), msgs(2))
        journal = txn.record()
        ast.begin(_pending(token, journal))
    if phase != "planned":
        ast.answered(token, journal.folders, {"token": token, "folders": journal.folders})
    if phase == "aborting":
        ast.aborting(token)
    return list(journal.folders)


def _pending(token: str, journal: JournalRecord) -> PendingArchive:
    return PendingArchive(token=token, span=((1, "m1"), (2, "m2")), journal=journal)


async def test_never_answered_archive_is_refused_by_commit_and_rolled_back_for_abort(
    tmp_path: Path,
) -> None:
    root = tmp_path / "mem"
    folders = _archive(root, "arc-planned", "planned")
    assert _folders(root) == set(folders)  # written, its answer never left
    for _ in range(2):  # restart, and again
        err = await _refused(root, "archive/commit", "arc-planned")
        assert err.message == "archive token never answered"
        assert err.data is not None and err.data["outcome"] == "unanswered"
        assert "rolled the archive back" in err.data["errors"][0]["message"]
        assert _folders(root) == set()
    aborted = {"ok": True, "rolledBack": folders, "alreadyRolledBack": True}
    assert await _send(root, "archive/abort", "arc-planned") == aborted
    assert await _send(root, "archive/abort", "arc-planned") == aborted
    assert _record(root)["settled"] == [
        {"token": "arc-planned", "outcome": "unanswered", "rolledBack": folders}
    ]
    assert _record(root)["unreported"] == []


async def test_answered_archive_committed_after_a_restart_answers_the_same_after_another(
    tmp_path: Path,
) -> None:
    root = tmp_path / "mem"
    folders = _archive(root, "arc-a", "answered")
    assert await _send(root, "archive/commit", "arc-a") == {"ok": True}
    for _ in range(2):
        assert await _send(root, "archive/commit", "arc-a") == {"ok": True}
        err = await _refused(root, "archive/abort", "arc-a")
        assert err.message == "archive token already committed"
        assert err.data is not None and err.data["outcome"] == "committed"
        assert _folders(root) == set(folders)
    assert not list(_store(root).dir.glob(".commit-*"))


async def test_answered_archive_aborted_after_a_restart_answers_the_same_after_another(
    tmp_path: Path,
) -> None:
    root = tmp_path / "mem"
    folders = _archive(root, "arc-a", "answered")
    first = await _send(root, "archive/abort", "arc-a")
    assert first == {"ok": True, "rolledBack": folders}
    assert _folders(root) == set()
    for _ in range(2):
        assert await _send(root, "archive/abort", "arc-a") == {**first, "alreadyRolledBack": True}
        err = await _refused(root, "archive/commit", "arc-a")
        assert err.message == "archive token already aborted"
        assert err.data is not None and err.data["outcome"] == "aborted"
        assert _folders(root) == set()


async def test_abort_cut_short_is_finished_at_load_and_answered_as_rolled_back(
    tmp_path: Path,
) -> None:
    root = tmp_path / "mem"
    folders = _archive(root, "arc-x", "aborting")
    # the commit arrives first (a confused host): refused as the abort that it is
    err = await _refused(root, "archive/commit", "arc-x")
    assert err.data is not None and err.data["outcome"] == "aborted"
    assert _folders(root) == set()
    want = {"ok": True, "rolledBack": folders, "alreadyRolledBack": True}
    assert await _send(root, "archive/abort", "arc-x") == want
    assert await _send(root, "archive/abort", "arc-x") == want


async def test_commit_of_an_abort_cut_short_in_this_process_matches_after_restart(
    tmp_path: Path,
) -> None:
    """The record says ``aborting`` in memory (the abort's removal failed half-way): a
    commit is refused now exactly as it is after the restart that finishes the abort."""
    root = tmp_path / "mem"
    _archive(root, "arc-x", "answered")
    app = _restart(root)
    state = await app.sessions.get(SID)
    state.archive.aborting("arc-x")
    p = ArchiveCommitParams.model_validate({"session": {"id": SID}, "token": "arc-x"})
    ctx = RequestContext("1", "archive/commit", SID, ConnectionState(conn_id=1), T0)
    with pytest.raises(HandlerError) as now:
        await archive_commit(app, p, ctx)
    later = await _refused(root, "archive/commit", "arc-x")
    assert now.value.to_error() == later.to_error()


@pytest.mark.parametrize("outcome", ["landed", "kept"])
async def test_final_archives_commit_ok_and_refuse_abort(outcome: str, tmp_path: Path) -> None:
    root = tmp_path / "mem"
    if outcome == "landed":
        folders = _archive(root, "arc-l", "answered")
        store = _store(root)
        ast = ArchiveState.load(store)
        store.finalize("arc-l")  # what a pre-step whose surface lost the span does
        ast.settle("arc-l", "landed")
    else:
        folders = _archive(root, "arc-l", "answered")
        store = _store(root)
        ast = ArchiveState.load(store)
        for i in range(MAX_UNREPORTED):  # arc-l is the oldest: dropped, finalized, kept
            token = f"arc-n{i}"
            with store.transaction(token) as txn:
                txn.add_folder(pending_meta(store, len(store) + 1), msgs(i))
                journal = txn.record()
                ast.begin(_pending(token, journal))
            for old in ast.answered(token, journal.folders, {"token": token}):
                store.finalize(old.token)
        assert "arc-l" not in ast.pending
    for _ in range(2):
        assert await _send(root, "archive/commit", "arc-l") == {"ok": True}
        err = await _refused(root, "archive/abort", "arc-l")
        assert err.message == "archive token already committed"
        assert err.data is not None and err.data["outcome"] == outcome
        assert set(folders) <= _folders(root)


async def test_the_record_decides_even_while_a_journal_lingers(tmp_path: Path) -> None:
    """Settled as kept while its journal is still undoable in this process (the
    finalize after the drop failed): an abort is refused now as after a restart, and
    nothing is removed."""
    root = tmp_path / "mem"
    folders = _archive(root, "arc-k", "answered")
    app = _restart(root)
    state = await app.sessions.get(SID)
    assert "arc-k" in state.store.committed_transactions()
    state.archive.settle("arc-k", "kept")
    p = ArchiveAbortParams.model_validate({"session": {"id": SID}, "token": "arc-k"})
    ctx = RequestContext("1", "archive/abort", SID, ConnectionState(conn_id=1), T0)
    with pytest.raises(HandlerError) as now:
        await archive_abort(app, p, ctx)
    assert now.value.data is not None and now.value.data["outcome"] == "kept"
    assert _folders(root) == set(folders)
    later = await _refused(root, "archive/abort", "arc-k")
    assert now.value.to_error() == later.to_error()
    assert _folders(root) == set(folders)


async def test_an_unreadable_record_entry_keeps_its_token(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    folders = _archive(root, "arc-u", "answered")
    path = _store(root).dir / RECORD_NAME
    doc = orjson.loads(path.read_bytes())
    doc["unreported"][0]["journal"] = "not a journal"
    path.write_bytes(orjson.dumps(doc))
    # recovery finalized its journal, the folders stay: so does a commit's success
    assert await _send(root, "archive/commit", "arc-u") == {"ok": True}
    err = await _refused(root, "archive/abort", "arc-u")
    assert err.data is not None and err.data["outcome"] == "kept"
    assert _folders(root) == set(folders)


@pytest.mark.parametrize("method", ["archive/commit", "archive/abort"])
async def test_a_truly_unknown_token_is_refused_clearly(method: Method, tmp_path: Path) -> None:
    root = tmp_path / "mem"
    folders = _archive(root, "arc-a", "answered")
    for _ in range(2):
        err = await _refused(root, method, "arc-nope")
        assert err.message == "unknown archive token"
        assert err.data is not None and "outcome" not in err.data
        assert err.data["errors"] == [
            {
                "field": "token",
                "message": "unknown archive token 'arc-nope': never issued for this session,"
                " or settled longer ago than the last 64 archives",
            }
        ]
    assert _folders(root) == set(folders)
