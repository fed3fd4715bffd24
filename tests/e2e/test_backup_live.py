"""`rofmd backup` of a live store while a client archives, and `rofmd restore` of it.

The client is a host bridge in a box (`rofmd.host.hostsim.HostSim`, the model's part played
by the demo's scorer) on a real daemon's socket, in a thread: pre-step → archive/commit
→ memory_judge, in a loop, on two sessions. The backup runs meanwhile, and is held after
it read the indexes until more archives and judge calls have landed: the race it must
win is certain to happen, not left to timing.
"""

from __future__ import annotations

import io
import os
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
import zstandard

from engine.store import list_session_dirs, open_session_dir, snapshot
from rofmd.cli.backup_archive import digest
from rofmd.host.client import RofmdClient
from rofmd.host.demo import scripted_scorer
from rofmd.host.hostsim import HostSim
from tests.e2e.harness import DaemonProcess, running_daemon

T0 = 1_791_311_000_000
WINDOW = 48_000
SESSIONS = ("bk-live-a", "bk-live-b")


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def rofmd(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Callable[..., Ran]:
    """`rofmd …` in this process: what the CLI prints and returns, without starting an
    interpreter per command."""
    from rofmd.cli.main import main

    for key in [k for k in os.environ if k.startswith("ROFMD_")]:
        monkeypatch.delenv(key)
    # the packaged config, not the machine user's
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))

    def run(*argv: str) -> Ran:
        capsys.readouterr()
        code = main(list(argv))
        out = capsys.readouterr()
        return Ran(code, out.out, out.err)

    return run


class Archiver:
    """Archives in a loop until stopped; records when each commit was answered."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self.stop = threading.Event()
        self.commits: list[tuple[float, str, list[str]]] = []
        """(monotonic time the archive/commit answer arrived, session, folders)."""
        self.judged = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            anyio.run(self._loop)
        except BaseException as exc:  # the test reports it
            self.error = exc

    async def _loop(self) -> None:
        async with RofmdClient.connect(self.socket) as client:
            await client.initialize(host={"name": "backup-test", "version": "1"})
            sims = [
                HostSim(client, {"id": sid}, WINDOW, scorer=scripted_scorer) for sid in SESSIONS
            ]
            for sim in sims:
                sim.add("system/message", _message("system", "You are a helpful agent."), T0)
            turn = 0
            while not self.stop.is_set() and turn < 400:
                turn += 1
                sim = sims[turn % len(sims)]
                now = T0 + turn * 60_000
                await sim.user_says(
                    f"第{turn}个问题：部署端口定为 {8000 + turn}，请记录。" + "背景" * 4000, now
                )
                report = await sim.assistant_says(f"好的，端口 {8000 + turn} 已记录。" * 500, now)
                if report.compaction:
                    folders = list(report.compaction.get("folders", []))
                    self.commits.append((time.monotonic(), str(sim.session["id"]), folders))
                self.judged = sum(len(s.judges) for s in sims)

    def committed_before(self, moment: float) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {sid: set() for sid in SESSIONS}
        for at, sid, folders in self.commits:
            if at < moment:
                out[sid].update(folders)
        return out


def _message(role: str, text: str) -> dict[str, Any]:
    return {
        "id": f"{role}-0",
        "role": role,
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "system-prompt"},
    }


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProcess]:
    with running_daemon() as d:
        yield d


def _wait(cond: Any, timeout: float, what: str, archiver: Archiver) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert archiver.error is None, archiver.error
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_a_backup_taken_while_a_client_archives_restores_clean_and_whole(
    daemon: DaemonProcess,
    tmp_path: Path,
    rofmd: Callable[..., Ran],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    archiver = Archiver(daemon.socket_path)
    held: list[tuple[int, int]] = []
    read_folder = snapshot._read_folder

    def held_read(paths: Any, folder_id: str) -> Any:
        if not held:  # the first folder copy: every index has been read by now
            held.append((len(archiver.commits), archiver.judged))
            _wait(
                lambda: len(archiver.commits) > held[0][0] and archiver.judged > held[0][1],
                20,
                "an archive and a judge call during the backup",
                archiver,
            )
        return read_folder(paths, folder_id)

    monkeypatch.setattr(snapshot, "_read_folder", held_read)
    archiver.thread.start()
    try:
        _wait(lambda: len(archiver.commits) >= 4 and archiver.judged >= 1, 20, "archives", archiver)
        before = archiver.committed_before(time.monotonic())
        backup = tmp_path / "live.tar.zst"
        out = rofmd(
            "backup", "--memory-dir", str(daemon.memory_root), "--output", str(backup), "--json"
        )
        assert out.returncode == 0, out.stderr
    finally:
        archiver.stop.set()
        archiver.thread.join(timeout=30)
    assert archiver.error is None, archiver.error
    assert held, "the backup copied no folder"
    summary = orjson.loads(out.stdout)
    assert summary["format"] == "tar.zst" and summary["scope"] == "root"

    served = rofmd(
        "restore",
        str(backup),
        "--memory-dir",
        str(daemon.memory_root),
        "--socket",
        str(daemon.socket_path),
        "--force",
    )
    assert served.returncode == 1 and "a running daemon serves" in served.stderr, served

    target = tmp_path / "restored"
    res = rofmd("restore", str(backup), "--memory-dir", str(target), "--json")
    assert res.returncode == 0, res.stderr
    assert orjson.loads(res.stdout)["movedAside"] is None
    for sid in SESSIONS:
        store = open_session_dir(target, sid)
        report = store.load_report
        assert report.clean and not report.adopted and not report.missing_folders, report
        assert not report.reindexed and not report.dropped_entries, report
        indexed = {e.id for e in store.index}
        on_disk = {p.name for p in store.dir.glob("mem-*")}
        assert indexed == on_disk
        assert before[sid] and before[sid] <= indexed, (sid, before[sid] - indexed)
        for _, owner, folders in archiver.commits:  # an archive is in whole or not at all
            if owner == sid:
                assert set(folders) <= indexed or not set(folders) & indexed, folders
        for entry in store.index:  # every folder whole, every row its meta's
            meta = store.get_meta(entry.id)
            assert store.read_context(entry.id)
            assert (entry.alpha, entry.scored, list(entry.keywords)) == (
                meta.alpha,
                meta.scored,
                list(meta.keywords),
            )
    check = rofmd(
        "selfcheck",
        "--memory-dir",
        str(target),
        "--sessions-dir",
        str(tmp_path / "no-logs"),
        "--json",
    )
    doc = orjson.loads(check.stdout)
    failed = [c for c in doc["checks"] if c["status"] == "FAIL"]
    assert check.returncode == 0 and failed == [], failed


# ---- restore: refusals and the checks before writing ----------------------------------


def _store_with_folders(rofmd: Callable[..., Ran], root: Path, tmp_path: Path) -> None:
    messages = []
    for i in range(10):
        messages.append({"role": "user", "content": f"第{i}轮：部署端口定为 {8000 + i}。"})
        messages.append({"role": "assistant", "content": f"好的，记下了端口 {8000 + i}。" * 30})
    conv = tmp_path / "conversation.json"
    conv.write_bytes(orjson.dumps({"messages": messages, "usedPercent": 63.2}))
    done = rofmd("engine", "compress", "--memory-root", str(root), "--input", str(conv))
    assert done.returncode == 0, done.stderr


def _backed_up(rofmd: Callable[..., Ran], tmp_path: Path, name: str) -> Path:
    """A store with folders at ``tmp_path/mem``, backed up to ``tmp_path/name`` (a name
    ending in .tar.zst is an archive, any other a directory)."""
    src = tmp_path / "mem"
    _store_with_folders(rofmd, src, tmp_path)
    backup = tmp_path / name
    assert rofmd("backup", "--memory-dir", str(src), "--output", str(backup)).returncode == 0
    return backup


def test_restore_refuses_a_non_empty_target_and_with_force_keeps_it_aside(
    tmp_path: Path, rofmd: Callable[..., Ran]
) -> None:
    backup = _backed_up(rofmd, tmp_path, "b.tar.zst")
    target = tmp_path / "target"
    (target / "sessions" / "other").mkdir(parents=True)
    (target / "sessions" / "other" / "keep.txt").write_text("precious")
    refused = rofmd("restore", str(backup), "--memory-dir", str(target))
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().count("\n") == 0 and "--force" in refused.stderr
    assert sorted(p.name for p in (target / "sessions").iterdir()) == ["other"]
    forced = rofmd("restore", str(backup), "--memory-dir", str(target), "--force", "--json")
    assert forced.returncode == 0, forced.stderr
    aside = Path(orjson.loads(forced.stdout)["movedAside"])
    assert aside.parent == tmp_path and aside.name.startswith("target.before-restore-")
    assert (aside / "sessions" / "other" / "keep.txt").read_text() == "precious"
    assert sorted(p.name for p in (target / "sessions").iterdir()) == ["cli"]
    assert open_session_dir(target, "cli").load_report.clean


def _evil_tar(path: Path, evil: tarfile.TarInfo, data: bytes = b"") -> None:
    manifest = {
        "format": "rofmd-backup",
        "version": 1,
        "scope": "root",
        "layout": "per-session",
        "sessions": [],
        "files": [],
        "bytes": 0,
    }
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        body = orjson.dumps(manifest)
        info = tarfile.TarInfo("rofmd-backup.json")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
        tar.addfile(evil, io.BytesIO(data) if evil.isreg() else None)
    path.write_bytes(zstandard.ZstdCompressor().compress(raw.getvalue()))


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("dotdot", "unsafe path"),
        ("absolute", "unsafe path"),
        ("symlink", "is a symlink"),
        ("hardlink", "is a hard link"),
        ("device", "is a device"),
        ("unlisted", "manifest"),
    ],
)
def test_a_malicious_archive_is_refused_before_anything_is_written(
    tmp_path: Path, kind: str, message: str, rofmd: Callable[..., Ran]
) -> None:
    evil = {
        "dotdot": ("memory/../../escaped.txt", tarfile.REGTYPE),
        "absolute": ("/tmp/escaped.txt", tarfile.REGTYPE),
        "symlink": ("memory/sessions", tarfile.SYMTYPE),
        "hardlink": ("memory/x", tarfile.LNKTYPE),
        "device": ("memory/dev", tarfile.CHRTYPE),
        "unlisted": ("memory/sessions/a/index.json", tarfile.REGTYPE),
    }[kind]
    info = tarfile.TarInfo(evil[0])
    info.type = evil[1]
    data = b"pwned"
    if info.isreg():
        info.size = len(data)
    else:
        info.linkname = "/etc/passwd"
    archive = tmp_path / "evil.tar.zst"
    _evil_tar(archive, info, data)
    target = tmp_path / "deep" / "target"
    out = rofmd("restore", str(archive), "--memory-dir", str(target))
    assert out.returncode == 1 and message in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1
    assert not (tmp_path / "deep").exists()  # nothing written, not even the parent
    assert not (tmp_path / "escaped.txt").exists() and not Path("/tmp/escaped.txt").exists()


def test_a_backup_whose_content_differs_from_its_manifest_is_refused(
    tmp_path: Path, rofmd: Callable[..., Ran]
) -> None:
    backup = _backed_up(rofmd, tmp_path, "b")
    meta = next(backup.glob("memory/sessions/cli/mem-*/meta.json"))
    data = meta.read_bytes()
    meta.write_bytes(data.replace(b'"alpha"', b'"alphA"'))  # same size, other bytes
    assert digest(meta.read_bytes()) != digest(data)
    out = rofmd("restore", str(backup), "--memory-dir", str(tmp_path / "t"))
    assert out.returncode == 1 and "differs from the manifest" in out.stderr, out.stderr
    assert not (tmp_path / "t").exists()
    meta.write_bytes(data)
    (backup / "memory" / "sessions" / "cli" / "link.json").symlink_to("/etc/passwd")
    out = rofmd("restore", str(backup), "--memory-dir", str(tmp_path / "t"))
    assert out.returncode == 1 and "symlink" in out.stderr, out.stderr


def _modes(tree: Path) -> set[tuple[str, int]]:
    return {
        ("dir" if p.is_dir() else "file", p.lstat().st_mode & 0o777)
        for p in [tree, *tree.rglob("*")]
    }


def test_a_session_backup_restores_that_session_only_and_privately(
    tmp_path: Path, rofmd: Callable[..., Ran]
) -> None:
    src = tmp_path / "mem"
    _store_with_folders(rofmd, src, tmp_path)
    backup = tmp_path / "cli-only"
    out = rofmd("backup", "--memory-dir", str(src), "--session", "cli", "--output", str(backup))
    assert out.returncode == 0, out.stderr
    assert _modes(backup) == {("dir", 0o700), ("file", 0o600)}
    target = tmp_path / "target"
    (target / "sessions" / "other").mkdir(parents=True)
    (target / "sessions" / "other" / "keep.txt").write_text("precious")
    done = rofmd("restore", str(backup), "--memory-dir", str(target), "--json")
    assert done.returncode == 0, done.stderr  # the session's directory was free: no --force
    assert orjson.loads(done.stdout)["restored"] == str(target / "sessions" / "cli")
    assert (target / "sessions" / "other" / "keep.txt").read_text() == "precious"
    assert _modes(target / "sessions" / "cli") == {("dir", 0o700), ("file", 0o600)}
    store = open_session_dir(target, "cli")
    assert store.load_report.clean and len(store) > 0
    again = rofmd("restore", str(backup), "--memory-dir", str(target), "--force", "--json")
    assert again.returncode == 0, again.stderr
    aside = Path(orjson.loads(again.stdout)["movedAside"])
    assert aside.parent == target / "sessions" and aside.name.startswith(".cli.before-restore-")
    assert [d.name for d in list_session_dirs(target / "sessions")] == ["cli", "other"]


def test_export_is_every_folder_as_a_readable_line(
    tmp_path: Path, rofmd: Callable[..., Ran]
) -> None:
    src = tmp_path / "mem"
    _store_with_folders(rofmd, src, tmp_path)
    out = rofmd("export", "--memory-dir", str(src))
    assert out.returncode == 0, out.stderr
    lines = [orjson.loads(line) for line in out.stdout.splitlines()]
    store = open_session_dir(src, "cli")
    assert [line["id"] for line in lines] == [e.id for e in store.index]
    for line in lines:
        assert line["session"] == "cli" and line["dir"] == "sessions/cli"
        assert line["meta"]["title"] == store.get_entry(line["id"]).title
        assert line["messages"] == store.read_context(line["id"])
    path = tmp_path / "export.jsonl"
    done = rofmd("export", "--memory-dir", str(src), "--output", str(path), "--json")
    assert done.returncode == 0 and orjson.loads(done.stdout)["folders"] == len(lines)
    assert path.read_text(encoding="utf-8") == out.stdout
    assert path.stat().st_mode & 0o777 == 0o600
    bad = rofmd("export", "--memory-dir", str(src), "--json")
    assert bad.returncode == 2 and "--output" in bad.stderr


def test_a_store_at_its_previous_name_travels_through_a_backup_and_is_renamed_on_open(
    tmp_path: Path, rofmd: Callable[..., Ran]
) -> None:
    """A session id ending in a line break had its directory at the id itself until the
    patterns compared whole ids. A store not opened since then still sits there: a backup
    holds it as it is (no other name in a backup may hold a line break), and the restored
    store moves to today's name when the session next opens."""
    from engine.store import open_session, safe_session_id
    from engine.store.session_dirs import SESSION_FILE

    src = tmp_path / "mem"
    _store_with_folders(rofmd, src, tmp_path)
    sid = "chat\n"
    old = src / "sessions" / sid
    (src / "sessions" / "cli").rename(old)
    (old / SESSION_FILE).write_bytes(orjson.dumps({"version": 1, "id": sid}))
    folders = sorted(p.name for p in old.iterdir() if p.name.startswith("mem-"))
    backup = tmp_path / "b.tar.zst"
    out = rofmd("backup", "--memory-dir", str(src), "--output", str(backup))
    assert out.returncode == 0, out.stderr
    target = tmp_path / "target"
    done = rofmd("restore", str(backup), "--memory-dir", str(target))
    assert done.returncode == 0, done.stderr
    assert (target / "sessions" / sid).is_dir()
    store = open_session(target, sid)
    assert store.dir.name == safe_session_id(sid) and not (target / "sessions" / sid).exists()
    assert sorted(e.id for e in store.index) == folders and store.load_report.clean


@pytest.mark.parametrize(
    "name",
    ["memory/sessions/a/index.json\n", "memory/sessions/a/mem-x\n/meta.json", "memory/a\n"],
)
def test_no_other_member_name_may_hold_a_line_break(
    tmp_path: Path, name: str, rofmd: Callable[..., Ran]
) -> None:
    info = tarfile.TarInfo(name)
    info.size = 5
    archive = tmp_path / "odd.tar.zst"
    _evil_tar(archive, info, b"pwned")
    out = rofmd("restore", str(archive), "--memory-dir", str(tmp_path / "t"))
    assert out.returncode == 1 and "unsafe path" in out.stderr, out.stderr
    assert not (tmp_path / "t").exists()
