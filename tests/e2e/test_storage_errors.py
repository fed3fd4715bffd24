"""Storage failures answer -32003 (PROTOCOL.md §2), never -32603, and recover.

A full disk (the filesystem seam of `engine.jsonio` failing writes with ENOSPC, in an
in-process daemon), and a store whose files have the wrong type (a directory where
`index.json` or `recall-state.json` should be, a file where the session directory
should be) in a real daemon process: the session answers a clear error, every other
session keeps serving, nothing half-written stays, and the session works again once
the cause is gone.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import engine.jsonio as jsonio
from engine.store import open_session
from handlers.errors import STORAGE_UNAVAILABLE, storage_failure
from rofmd.host.client import RofmdClient, RpcError
from rofmd.host.private_daemon import private_daemon
from tests.e2e.harness import DaemonProcess, running_daemon
from tests.e2e.test_archive_prestep import FULL_CAPS, connect, conversation, params

INBOX = {"role": "user", "content": [{"type": "text", "text": "hello"}]}


def inbox(sid: str, n: int = 1) -> dict[str, Any]:
    return {"session": {"id": sid}, "message": {**INBOX, "id": f"u-{sid}-{n}"}}


def test_storage_failure_maps_errnos_and_causes() -> None:
    err = storage_failure(OSError(errno.ENOSPC, "No space left on device", "/m/x.json"))
    assert err is not None and err.code == STORAGE_UNAVAILABLE == -32003
    assert err.data == {"path": "/m/x.json", "reason": "ENOSPC"}
    try:
        try:
            raise IsADirectoryError(errno.EISDIR, "Is a directory", "/m/index.json")
        except OSError as exc:
            raise ValueError("store failed") from exc
    except ValueError as wrapped:
        chained = storage_failure(wrapped)
    assert chained is not None and chained.data == {"path": "/m/index.json", "reason": "EISDIR"}
    assert storage_failure(OSError(errno.ECONNRESET, "reset")) is None
    assert storage_failure(KeyError("x")) is None


class _FullDisk(jsonio.FsOps):
    """Writes fail with ENOSPC while `full` is set."""

    full = False

    def create_write_sync(self, path: Path, data: bytes) -> None:
        if self.full:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        super().create_write_sync(path, data)

    def append_sync(self, path: Path, data: bytes) -> None:
        if self.full:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        super().append_sync(path, data)


async def test_disk_full_answers_storage_unavailable_and_archiving_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = _FullDisk()
    monkeypatch.setattr(jsonio, "fs", disk)
    surface = conversation(30, 300)
    async with (
        private_daemon(tmp_path) as settings,
        RofmdClient.connect(settings.socket_path) as client,
    ):
        await client.initialize(host={"name": "t", "version": "1"}, capabilities=FULL_CAPS)
        disk.full = True
        with pytest.raises(RpcError) as info:
            await client.call("agent/pre-step", params(surface, "full"))
        assert info.value.code == STORAGE_UNAVAILABLE
        assert info.value.data["reason"] == "ENOSPC"
        # other sessions keep serving what needs no write
        assert (await client.call("ping"))["pong"] is True
        disk.full = False
        answer = await client.call("agent/pre-step", params(surface, "full"))
        assert answer["compaction"] is not None
        await client.call(
            "archive/commit",
            {"session": {"id": "full"}, "token": answer["compaction"]["token"]},
        )
    store = open_session(settings.memory_root or tmp_path / "memory", "full")
    on_disk = {p.name for p in store.paths.dir.glob("mem-*")}
    assert on_disk == {e.id for e in store.index}
    assert len(on_disk) > 0


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProcess]:
    with running_daemon() as d:
        yield d


def _session_path(d: DaemonProcess, sid: str) -> Path:
    c = connect(d)
    assert "result" in c.call(1, "agent/inbox/inserted", inbox(sid))
    c.call(2, "agent/disposed", {"session": {"id": sid}})
    c.close()
    dirs = [p for p in (d.memory_root / "sessions").iterdir() if p.name.startswith(sid)]
    assert len(dirs) == 1, dirs
    return dirs[0]


def _call(d: DaemonProcess, method: str, p: dict[str, Any]) -> dict[str, Any]:
    c = connect(d)
    try:
        r: dict[str, Any] = c.call(7, method, p)
    finally:
        c.close()
    return r


@pytest.mark.parametrize(
    ("case", "reason"),
    [("index-dir", {"EISDIR", "ENOTDIR"}), ("state-dir", {"EISDIR", "ENOTDIR"})],
)
def test_a_directory_where_a_file_should_be(
    daemon: DaemonProcess, case: str, reason: set[str]
) -> None:
    sid = f"wrongtype{case.replace('-', '')}"
    root = _session_path(daemon, sid)
    name = "index.json" if case == "index-dir" else "recall-state.json"
    target = root / name
    saved = target.read_bytes() if target.is_file() else None
    target.unlink(missing_ok=True)
    target.mkdir()
    try:
        r = _call(daemon, "agent/inbox/inserted", inbox(sid, 2))
        assert r["error"]["code"] == STORAGE_UNAVAILABLE, r
        assert r["error"]["data"]["reason"] in reason
        assert r["error"]["data"]["path"].endswith(name)
        assert "result" in _call(daemon, "agent/inbox/inserted", inbox(f"{sid}other"))
    finally:
        target.rmdir()
        if saved is not None:
            target.write_bytes(saved)
    # the cause is gone: the session serves again
    _call(daemon, "agent/disposed", {"session": {"id": sid}})
    assert "result" in _call(daemon, "agent/inbox/inserted", inbox(sid, 3))


def test_a_file_where_the_session_directory_should_be(daemon: DaemonProcess) -> None:
    sid = "wrongtypesessionfile"
    root = _session_path(daemon, sid)
    backup = root.with_name(root.name + ".bak")
    root.rename(backup)
    root.write_bytes(b"not a directory")
    try:
        r = _call(daemon, "agent/inbox/inserted", inbox(sid, 2))
        assert r["error"]["code"] == STORAGE_UNAVAILABLE, r
        assert r["error"]["data"]["reason"] in {"ENOTDIR", "EEXIST"}
        assert "result" in _call(daemon, "agent/inbox/inserted", inbox("anothersession"))
    finally:
        root.unlink()
        backup.rename(root)
    assert "result" in _call(daemon, "agent/inbox/inserted", inbox(sid, 3))


def test_errors_name_the_target_not_the_temp_file() -> None:
    assert jsonio.temp_target("/m/s/.index.json.123-4.tmp") == "/m/s/index.json"
    assert jsonio.temp_target("/m/s/index.json") == "/m/s/index.json"
    err = OSError(errno.EISDIR, "Is a directory", "/m/.a.json.1-2.tmp", "/m/a.json")
    got = storage_failure(err)
    assert got is not None and got.data == {"path": "/m/a.json", "reason": "EISDIR"}


def test_a_symlinked_session_directory(daemon: DaemonProcess, tmp_path: Path) -> None:
    sid = "symlinkedsession"
    root = _session_path(daemon, sid)
    elsewhere = tmp_path / "elsewhere"
    root.rename(elsewhere)
    root.symlink_to(elsewhere, target_is_directory=True)
    try:
        r = _call(daemon, "agent/inbox/inserted", inbox(sid, 2))
        assert r["error"]["code"] == STORAGE_UNAVAILABLE, r
        assert r["error"]["data"]["path"] == str(root.parent.resolve() / root.name)
        assert r["error"]["data"]["reason"] == "OUTSIDE_ROOT"
        assert "result" in _call(daemon, "agent/inbox/inserted", inbox("notsymlinked"))
    finally:
        root.unlink()
        elsewhere.rename(root)
    assert "result" in _call(daemon, "agent/inbox/inserted", inbox(sid, 3))
