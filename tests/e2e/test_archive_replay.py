"""Exactly-once archiving across crashes and replays (issue 18).

A bridge re-sends a request whose answer it never got. A pre-step whose folders were
written but whose answer was lost must not become a second, overlapping set of folders
when it is replayed after a restart, even when the replay would cut deeper (the surface
grew, the meter says more tokens, pass 0 already shrank the recall block, images gave
the first attempt run-stamped names). The daemon keeps a durable record of every
unreported archive (``handlers.archive_state``): an archive that may have been answered
is answered again as it is; one that certainly was not is rolled back at load.

Three layers:

* a crash at every filesystem step of one archive (pass 0, images, folders, index,
  journal, the record), in process: the directory as that step left it is opened by
  a fresh daemon state and the pre-step replayed deeper; then aborted;
* SIGKILL of a real daemon after the answer was written, replays that cut deeper,
  abort and commit of the replayed token, re-sent commit and abort;
* the property test: a real daemon SIGKILLed at random points (pre-step in flight or
  answered and lost, before / during / after commit and abort, judge, inbox, any time)
  while four hosts (``rofmd.host.hostsim``) play seeded conversations with tool calls,
  images and recall (pass 0); every unanswered request is re-sent, pre-steps often
  with a grown surface or a higher meter, and after every restart each host sends its
  last answered commit or abort again (a bridge's queued report outliving its answer):
  the same answer (an abort's with ``alreadyRolledBack``), and no report is ever
  answered -32602. After every restart, index == disk; at the
  end of each conversation every message is in exactly one folder or still on the
  host's surface, never both, never twice. ``ROFMD_REPLAY_KILLS`` sets the number of
  kills (default 200), ``ROFMD_REPLAY_SEED`` the seed, ``ROFMD_REPLAY_SPAWN=exec``
  starts every daemon with a fresh interpreter instead of forking a pre-imported one.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from anyio.abc import SocketStream, TaskGroup

from engine import jsonio
from engine.jsonio import FsOps
from engine.recall.state import peek_state_file
from engine.store import FolderMeta, open_session, session_paths
from handlers.app import App, Paths
from handlers.archive_state import RECORD_NAME
from handlers.config_state import ConfigState
from handlers.context import ConnectionState, RequestContext
from handlers.errors import HandlerError
from handlers.pre_step import (
    ArchiveAbortParams,
    ArchiveCommitParams,
    PreStepParams,
    archive_abort,
    archive_commit,
    pre_step,
)
from rofmd.host.client import RpcError
from rofmd.host.demo import _png, scripted_scorer
from rofmd.host.hostsim import HostSim, Node, StepReport
from tests.archive_fixtures import T0, Surface, pre_step_params
from tests.e2e.harness import LineSocket, Process, short_tmpdir, start_rofmd
from tests.e2e.test_archive_prestep import FULL_CAPS, params

KILLS = int(os.environ.get("ROFMD_REPLAY_KILLS", "200"))
SEED = int(os.environ.get("ROFMD_REPLAY_SEED", "20261201"))
SPAWN = os.environ.get("ROFMD_REPLAY_SPAWN", "fork")
HOSTS = 4
ROLLED_BACK = "archive never answered before the restart: rolled back"


# ---- what is on disk ---------------------------------------------------------------


@dataclass
class Tally:
    """Messages of one or more sessions against their folders."""

    messages: int = 0
    archived: int = 0
    live: int = 0
    lost: int = 0
    doubled: int = 0
    both: int = 0
    foreign: int = 0
    index_mismatch: int = 0
    problems: list[str] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        for name in (
            "messages",
            "archived",
            "live",
            "lost",
            "doubled",
            "both",
            "foreign",
            "index_mismatch",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.problems.extend(other.problems[:20])


def folder_docs(base: Path) -> dict[str, list[tuple[str, int, int]]]:
    """message id → [(folder, part, parts)] over every folder on disk."""
    out: dict[str, list[tuple[str, int, int]]] = {}
    for folder in sorted(base.glob("mem-*")):
        msgs = orjson.loads((folder / "context.json").read_bytes())["messages"]
        for m in msgs:
            mid = m.get("id")
            if isinstance(mid, str):
                out.setdefault(mid, []).append((folder.name, m.get("part", 1), m.get("parts", 1)))
    return out


def index_matches_disk(base: Path) -> bool:
    on_disk = {p.name for p in base.glob("mem-*")}
    index_path = base / "index.json"
    index = (
        {e["id"] for e in orjson.loads(index_path.read_bytes())["folders"]}
        if index_path.exists()
        else set()
    )
    return on_disk == index and not list(base.glob(".staging-*"))


def check_messages(
    base: Path,
    all_ids: list[str],
    live_ids: set[str],
    *,
    final: bool,
    ignore: frozenset[str] = frozenset(),
) -> Tally:
    """Every message in exactly one folder (all its parts once) or on the surface; at the
    end (``final``: nothing unreported) never both."""
    t = Tally(messages=len(all_ids))
    if not index_matches_disk(base):
        t.index_mismatch += 1
        t.problems.append(f"{base.name}: index.json != folders on disk")
    docs = folder_docs(base) if base.exists() else {}
    known = set(all_ids)
    for mid in all_ids:
        found = docs.get(mid, [])
        live = mid in live_ids
        t.live += live
        if not found:
            if not live:
                t.lost += 1
                t.problems.append(f"{base.name}: {mid} lost")
            continue
        t.archived += 1
        parts = sorted(p for _, p, _ in found)
        if parts != list(range(1, found[0][2] + 1)):
            t.doubled += 1
            t.problems.append(f"{base.name}: {mid} archived {parts} in {[f for f, _, _ in found]}")
        if final and live:
            t.both += 1
            t.problems.append(f"{base.name}: {mid} both archived and on the surface")
    for mid in docs:
        if mid not in known and mid not in ignore:
            t.foreign += 1
            t.problems.append(f"{base.name}: folder message {mid} is no message of the host")
    return t


def unreported(base: Path) -> list[dict[str, Any]]:
    path = base / RECORD_NAME
    if not path.exists():
        return []
    doc: list[dict[str, Any]] = orjson.loads(path.read_bytes())["unreported"]
    return doc


# ---- daemons: forked from a pre-imported interpreter, or exec'd ------------------------


class Daemons:
    """Successive `rofmd serve` processes on one memory root and socket.

    ``fork`` (default): forked from the harness's pre-imported interpreter (a real,
    separate daemon process, started in ~60 ms instead of ~450 ms); ``exec``:
    ``python -m rofmd serve`` each time (``tests.e2e.harness.start_rofmd``).
    """

    def __init__(self, base: Path, config: dict[str, Any] | None = None, spawn: str = SPAWN):
        self.base = base
        self.socket_path = base / "run" / "rofmd.sock"
        self.config_dir = base / "cfg"
        self.memory_root = base / "mem"
        self.log_path = base / "daemon.log"
        self.config_dir.mkdir(parents=True, exist_ok=True)
        if config is not None:
            (self.config_dir / "config.json").write_bytes(orjson.dumps(config))
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ROFMD_", "NOTIFY_", "LISTEN_"))
        }
        env.update({"ROFMD_DEBUG_METHODS": "1", "PYTHONUNBUFFERED": "1"})
        self.env = env
        self.args = [
            "serve",
            "--socket",
            str(self.socket_path),
            "--config-dir",
            str(self.config_dir),
            "--memory-root",
            str(self.memory_root),
            "--log-format",
            "json",
            "--log-level",
            "info",
        ]
        self.spawn = spawn
        self.pid: int | None = None
        self._proc: Process | None = None
        self.starts = 0

    def start(self) -> None:
        """Start a daemon and wait until it answers ping."""
        assert self.pid is None
        self._proc = start_rofmd(self.args, self.env, self.log_path, self.spawn)
        self.pid = self._proc.pid
        self.starts += 1
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not self._alive():
                raise RuntimeError("daemon exited early:\n" + self.log_tail())
            try:
                s = LineSocket(self.socket_path, timeout=5)
                try:
                    if s.call(0, "ping").get("result") == {"pong": True}:
                        return
                finally:
                    s.close()
            except OSError:
                time.sleep(0.003)
        raise TimeoutError("daemon did not become ready:\n" + self.log_tail())

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the daemon and wait until it is gone."""
        if self._proc is None:
            return
        if self._alive():
            self._proc.send_signal(sig)
        self._proc.wait(timeout=30)
        self.pid, self._proc = None, None

    def restart(self) -> None:
        self.kill()
        self.start()

    def close(self) -> None:
        self.kill(signal.SIGTERM)

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""

    def log_events(self) -> Counter[str]:
        out: Counter[str] = Counter()
        if self.log_path.exists():
            for line in self.log_path.read_bytes().splitlines():
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(rec, dict) and isinstance(rec.get("event"), str):
                    out[rec["event"]] += 1
        return out

    def session_dir(self, sid: str) -> Path:
        return session_paths(self.memory_root, sid, per_session=True).dir


@contextmanager
def daemons(config: dict[str, Any] | None = None) -> Iterator[Daemons]:
    base = short_tmpdir()
    d = Daemons(base, config)
    try:
        d.start()
        yield d
    except BaseException:
        sys.stderr.write(d.log_tail())
        raise
    finally:
        d.close()
        shutil.rmtree(base, ignore_errors=True)


def connect(d: Daemons) -> LineSocket:
    c = LineSocket(d.socket_path)
    assert "result" in c.call(0, "initialize", {"protocolVersion": 1, "capabilities": FULL_CAPS})
    return c


def call(d: Daemons, method: str, p: dict[str, Any]) -> dict[str, Any]:
    c = connect(d)
    try:
        answer: dict[str, Any] = c.call(1, method, p)
    finally:
        c.close()
    return answer


def result(answer: dict[str, Any]) -> Any:
    assert "result" in answer, answer
    return answer["result"]


# ---- 1. a crash at every filesystem step of one archive, in process ------------------

SID = "crash-steps"


class SnapshotFs(FsOps):
    """Copies the memory root before every mutating step (what a SIGKILL right there
    leaves on disk: every earlier step is durable); fsyncs are skipped."""

    def __init__(self, root: Path, out: Path) -> None:
        self.root = root
        self.out = out
        self.steps: list[str] = []

    def _snap(self, what: str) -> None:
        shutil.copytree(self.root, self.out / f"{len(self.steps):04d}", symlinks=True)
        self.steps.append(what)

    def create_write_sync(self, path: Path, data: bytes) -> None:
        self._snap(f"create {path.name}")
        super().create_write_sync(path, data)

    def create_write(self, path: Path, data: bytes) -> None:
        self._snap(f"create {path.name}")
        super().create_write(path, data)

    def fsync(self, path: Path) -> None:
        pass

    def fsync_all(self, paths: Iterable[Path]) -> None:
        for _ in paths:  # a writer's generator makes its steps as it is consumed
            pass

    def append_sync(self, path: Path, data: bytes) -> None:
        self._snap(f"append {path.name}")
        super().append_sync(path, data)

    def replace(self, src: Path, dst: Path) -> None:
        self._snap(f"replace {dst.name}")
        super().replace(src, dst)

    def rename(self, src: Path, dst: Path) -> None:
        self._snap(f"rename {dst.name}")
        super().rename(src, dst)

    def fsync_dir(self, path: Path) -> None:
        pass

    def mkdir(self, path: Path) -> None:
        self._snap(f"mkdir {path.name}")
        super().mkdir(path)

    def unlink(self, path: Path) -> None:
        self._snap(f"unlink {path.name}")
        super().unlink(path)

    def rmtree(self, path: Path) -> None:
        self._snap(f"rmtree {path.name}")
        super().rmtree(path)


class _Info:
    def status_snapshot(self) -> dict[str, Any]:
        return {"version": "test"}


def _app(root: Path, cfg_dir: Path) -> App:
    """A fresh daemon state on ``root`` (a restart: nothing kept in memory)."""
    return App(
        ConfigState.start(cfg_dir, {}),
        Paths(memory_root_override=root, state_dir=root.parent / "state", home=root.parent),
        _Info(),
    )


def _ctx(now: int, method: str = "agent/pre-step") -> RequestContext:
    return RequestContext("1", method, SID, ConnectionState(conn_id=1), now)


SEEDS = [f"mem-20260101T000000Z-000{i}" for i in (1, 2, 3)]


def _seed(root: Path) -> None:
    """Three scored folders, all three in the recall block (injected at turn 1)."""
    store = open_session(root, SID)
    with store.transaction("seed") as txn:
        for i, fid in enumerate(SEEDS):
            txn.add_folder(
                FolderMeta(
                    id=fid,
                    createdAt=T0 + i,
                    alpha=0.3,
                    beta=1,
                    scored=True,
                    title=f"seed {i}",
                    keywords=["部署", "配置", f"seed{i}"],
                ),
                [{"role": "user", "content": f"seed {i}", "seq": 0, "id": f"seed-{i}"}],
            )
    store.finalize("seed")
    additions = [
        {
            "id": fid,
            "alpha": 0.3,
            "beta": 1,
            "createdAt": T0 + i,
            "injectedTurn": 1,
            "injectedRound": 1,
            "keywords": ["部署", "配置"],
            "body": "回忆" * 150,
        }
        for i, fid in enumerate(SEEDS)
    ]
    jsonio.write_json_atomic(
        store.paths.recall_state, {"version": 3, "round": 1, "additions": additions}
    )


def _surface(media: Path) -> Surface:
    s = Surface()
    s.system()
    for i in range(14):
        if i in (1, 4):
            img = media / f"shot-{i}.png"
            img.write_bytes(_png(3 + i, 2))
            s.user(
                f"第{i}张截图，请看。" + "图" * 80,
                images=[
                    {"attachmentId": f"att-{i}", "mediaType": "image/png", "hostPath": str(img)}
                ],
            )
            s.assistant("看到了。" + "嗯" * 100)
        s.turn_pair(i, 300)
    return s


def _recall_ids(root: Path) -> list[str]:
    # the snapshot and its log, as the daemon reads them (engine.recall.state_log)
    return peek_state_file(open_session(root, SID).paths.recall_state).ids()


def _workspace(tmp_path: Path) -> tuple[Path, Path, Surface]:
    """A seeded memory root, a config dir allowing the small window, and the surface
    whose pre-step archives (its images in `tmp_path/media`)."""
    live = tmp_path / "live"
    cfg_dir = tmp_path / "cfg"
    cfg_dir.mkdir()
    (cfg_dir / "config.json").write_bytes(orjson.dumps({"compress": {"allowSmallWindow": True}}))
    media = tmp_path / "media"
    media.mkdir()
    _seed(live)
    return live, cfg_dir, _surface(media)


async def test_crash_at_every_step_of_an_archive_then_a_deeper_replay(tmp_path: Path) -> None:
    live, cfg_dir, s = _workspace(tmp_path)
    first_params = pre_step_params(s, session=SID, percent=80)
    snaps = tmp_path / "snaps"
    fs = SnapshotFs(live, snaps)
    saved = jsonio.fs
    jsonio.fs = fs
    try:
        first = await pre_step(
            _app(live, cfg_dir), PreStepParams.model_validate(first_params), _ctx(T0 + 10_000)
        )
    finally:
        jsonio.fs = saved
    comp1 = first["compaction"]
    assert comp1 is not None
    points = sorted(snaps.iterdir())
    shutil.copytree(live, snaps / "answered")  # the answer was written and lost
    points.append(snaps / "answered")
    # the archive did everything this test is about: pass 0, images, folders
    assert _recall_ids(live) != SEEDS
    assert any(live.glob("sessions/*/images/img-*"))
    assert len(comp1["folders"]) >= 3
    # the host grew the surface and its meter: a fresh plan cuts deeper
    s.turn_pair(20, 300)
    s.turn_pair(21, 300)
    replay_params = pre_step_params(s, session=SID, percent=85)
    host_ids = [str(n["message"]["id"]) for n in s.nodes]
    seed_ids = frozenset(f"seed-{i}" for i in range(3))
    reused = fresh = 0
    for n, point in enumerate(points):
        what = fs.steps[n] if n < len(fs.steps) else "answered"
        app = _app(point, cfg_dir)
        out = await pre_step(
            app, PreStepParams.model_validate(replay_params), _ctx(T0 + 20_000 + n)
        )
        comp = out["compaction"]
        assert comp is not None, what
        base = open_session(point, SID).paths.dir
        if comp["token"] == comp1["token"]:
            reused += 1
            assert comp == comp1, what
        else:
            fresh += 1
            assert comp["replace"]["endSeq"] > comp1["replace"]["endSeq"], what
        # exactly once: the replay's span is archived once, nothing else of the host's
        span_ids = {
            str(node["message"]["id"]) for node in s.nodes if node["seq"] in comp["shadowedSeqs"]
        }
        folders = {p.name for p in base.glob("mem-*")}
        assert folders == set(SEEDS) | set(comp["folders"]), what
        tally = check_messages(
            base, host_ids, set(host_ids) - span_ids, final=True, ignore=seed_ids
        )
        assert tally.index_mismatch == tally.doubled == tally.foreign == tally.lost == 0, (
            what,
            tally.problems,
        )
        arch = [m for m in host_ids if m in span_ids]
        assert tally.both == 0 and tally.archived == len(arch), (what, tally.problems)
        assert [r["token"] for r in unreported(base)] == [comp["token"]], what
        # abort of that token removes everything it stands for, first attempt included
        state = await app.sessions.get(SID)
        aborted = await archive_abort(
            app,
            ArchiveAbortParams.model_validate({"session": {"id": SID}, "token": comp["token"]}),
            _ctx(T0 + 30_000 + n, "archive/abort"),
        )
        assert set(aborted["rolledBack"]) == set(comp["folders"]), what
        assert {p.name for p in base.glob("mem-*")} == set(SEEDS), what
        assert index_matches_disk(base), what
        assert not list(base.glob("images/img-*")), what
        assert not list(base.glob(".commit-*")), what
        assert unreported(base) == [], what
        assert [a.id for a in state.recall.rearchive_candidates()] == SEEDS, what  # type: ignore[union-attr]
        assert _recall_ids(point) == SEEDS, what
        assert not any(state.store.get_entry(f).rescorePending for f in SEEDS), what
        # a re-sent abort is answered again, and says it was already rolled back
        again = await archive_abort(
            app,
            ArchiveAbortParams.model_validate({"session": {"id": SID}, "token": comp["token"]}),
            _ctx(T0 + 40_000 + n, "archive/abort"),
        )
        assert again == {**aborted, "alreadyRolledBack": True}
    # both ways were taken: before the answered record a crash rolls back, after it reuses
    assert reused >= 1 and fresh >= 40, (reused, fresh)


@pytest.mark.parametrize("method", ["archive/abort", "archive/commit"])
async def test_crash_at_every_step_of_an_abort_or_commit_then_resent(
    method: str, tmp_path: Path
) -> None:
    """The archive was answered, the daemon restarted; the host's abort (commit) is cut
    short at any step; after the next restart the host re-sends it and gets the answer it
    would have got, and the store is as a finished abort (commit) leaves it."""
    live, cfg_dir, s = _workspace(tmp_path)
    comp = (
        await pre_step(
            _app(live, cfg_dir),
            PreStepParams.model_validate(pre_step_params(s, session=SID, percent=80)),
            _ctx(T0 + 10_000),
        )
    )["compaction"]
    assert comp is not None
    report: dict[str, Any] = {"session": {"id": SID}, "token": comp["token"]}

    async def send(root: Path, n: int) -> dict[str, Any]:
        app = _app(root, cfg_dir)  # a restart
        if method == "archive/abort":
            return await archive_abort(
                app, ArchiveAbortParams.model_validate(report), _ctx(T0 + 20_000 + n, method)
            )
        return await archive_commit(
            app, ArchiveCommitParams.model_validate(report), _ctx(T0 + 20_000 + n, method)
        )

    snaps = tmp_path / "snaps"
    fs = SnapshotFs(live, snaps)
    saved = jsonio.fs
    jsonio.fs = fs
    try:
        expected = await send(live, 0)
    finally:
        jsonio.fs = saved
    if method == "archive/abort":
        assert expected == {"ok": True, "rolledBack": comp["folders"]}
        want = set(SEEDS)
    else:
        assert expected == {"ok": True}
        want = set(SEEDS) | set(comp["folders"])
    points = [*sorted(snaps.iterdir()), live]
    assert len(points) > 3
    flagged: set[bool] = set()
    for n, point in enumerate(points, start=1):
        what = fs.steps[n - 1] if n <= len(fs.steps) else "done, answer lost"
        # an abort that had begun (the record says aborting, or it is settled) was
        # finished at load: the re-sent one says it was already rolled back
        started = method == "archive/abort" and _abort_started(point, comp["token"])
        flagged.add(started)
        want_answer = {**expected, "alreadyRolledBack": True} if started else expected
        assert await send(point, n) == want_answer, what
        base = open_session(point, SID).paths.dir
        assert {f.name for f in base.glob("mem-*")} == want, what
        assert index_matches_disk(base), what
        assert unreported(base) == [] and not list(base.glob(".commit-*")), what
        # the other report is refused the same way at every point, after a restart too
        app = _app(point, cfg_dir)
        with pytest.raises(HandlerError) as refused:
            if method == "archive/abort":
                await archive_commit(
                    app, ArchiveCommitParams.model_validate(report), _ctx(T0, "archive/commit")
                )
            else:
                await archive_abort(
                    app, ArchiveAbortParams.model_validate(report), _ctx(T0, "archive/abort")
                )
        assert refused.value.code == -32602, what
        assert refused.value.data is not None, what
        assert refused.value.data["outcome"] == (
            "aborted" if method == "archive/abort" else "committed"
        ), what
        if method == "archive/abort":
            assert _recall_ids(point) == SEEDS, what
            assert not list(base.glob("images/img-*")), what
            again = await pre_step(
                _app(point, cfg_dir),
                PreStepParams.model_validate(pre_step_params(s, session=SID, percent=80)),
                _ctx(T0 + 30_000 + n),
            )
            assert again["compaction"]["token"] != comp["token"], what
            assert set(again["compaction"]["folders"]).isdisjoint(comp["folders"]), what
    # both: crashes before the abort began, and after (finished at load)
    assert flagged == ({False, True} if method == "archive/abort" else {False})


def _abort_started(root: Path, token: str) -> bool:
    """The record on disk shows ``token``'s abort begun (``aborting``) or finished."""
    path = session_paths(root, SID, per_session=True).dir / RECORD_NAME
    if not path.exists():
        return False
    doc = orjson.loads(path.read_bytes())
    aborting = any(r["token"] == token and r["phase"] == "aborting" for r in doc["unreported"])
    return aborting or any(r["token"] == token for r in doc["settled"])


class _FailRecordWrite(FsOps):
    """The ``n``-th write of the unreported-archive record fails with ENOSPC."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.seen = 0

    def create_write_sync(self, path: Path, data: bytes) -> None:
        if RECORD_NAME in path.name:
            self.seen += 1
            if self.seen == self.n:
                raise OSError(errno.ENOSPC, "No space left on device", str(path))
        super().create_write_sync(path, data)


@pytest.mark.parametrize("n", [1, 2])
async def test_a_failed_record_write_leaves_nothing(n: int, tmp_path: Path) -> None:
    """The record cannot be written (disk full) before (1) or after (2) the folders: the
    pre-step fails, nothing of the archive stays, the replay archives exactly once."""
    live, cfg_dir, s = _workspace(tmp_path)
    p = PreStepParams.model_validate(pre_step_params(s, session=SID, percent=80))
    app = _app(live, cfg_dir)
    saved = jsonio.fs
    jsonio.fs = _FailRecordWrite(n)
    try:
        # answered without a compaction (commit-failed) or a storage error: never a
        # compaction the daemon could not record
        try:
            failed = await pre_step(app, p, _ctx(T0 + 10_000))
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        else:
            assert failed["compaction"] is None
            assert any("No space" in w for w in failed["warnings"])
    finally:
        jsonio.fs = saved
    state = await app.sessions.get(SID)
    base = state.store.paths.dir
    assert {f.name for f in base.glob("mem-*")} == set(SEEDS) == {e.id for e in state.store.index}
    assert state.archive.pending == {} and unreported(base) == []
    assert not list(base.glob("images/img-*")) and not list(base.glob(".commit-*"))
    assert _recall_ids(live) == SEEDS
    comp = (await pre_step(app, p, _ctx(T0 + 20_000)))["compaction"]
    host_ids = [str(node["message"]["id"]) for node in s.nodes]
    span = {str(node["message"]["id"]) for node in s.nodes if node["seq"] in comp["shadowedSeqs"]}
    tally = check_messages(
        base,
        host_ids,
        set(host_ids) - span,
        final=True,
        ignore=frozenset(f"seed-{i}" for i in range(3)),
    )
    assert tally.problems == [] and tally.archived > 0
    assert [r["token"] for r in unreported(base)] == [comp["token"]]


async def test_restart_commit_and_landed(tmp_path: Path) -> None:
    """An answered archive survives restarts: a commit after one is accepted (and again
    when re-sent); a span that left the surface (commit lost) is final."""
    root = tmp_path / "mem"
    cfg_dir = tmp_path / "cfg"
    cfg_dir.mkdir()
    s = Surface()
    s.system()
    for i in range(30):
        s.turn_pair(i, 300)
    p = pre_step_params(s, session=SID, percent=75)
    comp = (await pre_step(_app(root, cfg_dir), PreStepParams.model_validate(p), _ctx(T0)))[
        "compaction"
    ]
    app = _app(root, cfg_dir)
    commit = ArchiveCommitParams.model_validate({"session": {"id": SID}, "token": comp["token"]})
    assert await archive_commit(app, commit, _ctx(T0 + 1, "archive/commit")) == {"ok": True}
    app = _app(root, cfg_dir)
    assert await archive_commit(app, commit, _ctx(T0 + 2, "archive/commit")) == {"ok": True}
    with pytest.raises(HandlerError, match="already committed"):
        await archive_abort(
            app,
            ArchiveAbortParams.model_validate({"session": {"id": SID}, "token": comp["token"]}),
            _ctx(T0 + 3, "archive/abort"),
        )
    # a second archive whose commit is lost: the host applied it, the next pre-step no
    # longer shows the span
    for i in range(30, 45):
        s.turn_pair(i, 300)
    nodes = [n for n in s.nodes if n["seq"] > comp["replace"]["endSeq"] or n["seq"] == 0]
    s2 = Surface(nodes=nodes, seq=s.seq, time=s.time, turn=s.turn)
    second = (
        await pre_step(
            _app(root, cfg_dir),
            PreStepParams.model_validate(pre_step_params(s2, session=SID, percent=75)),
            _ctx(T0 + 10),
        )
    )["compaction"]
    assert second is not None and second["token"] != comp["token"]
    landed = [n for n in s2.nodes if n["seq"] > second["replace"]["endSeq"] or n["seq"] == 0]
    s3 = Surface(nodes=landed, seq=s2.seq, time=s2.time, turn=s2.turn)
    app = _app(root, cfg_dir)
    await pre_step(
        app,
        PreStepParams.model_validate(pre_step_params(s3, session=SID, percent=30)),
        _ctx(T0 + 20),
    )
    base = open_session(root, SID).paths.dir
    assert unreported(base) == []
    assert await archive_commit(
        app,
        ArchiveCommitParams.model_validate({"session": {"id": SID}, "token": second["token"]}),
        _ctx(T0 + 21, "archive/commit"),
    ) == {"ok": True}
    assert {p.name for p in base.glob("mem-*")} == set(comp["folders"]) | set(second["folders"])


# ---- 2. SIGKILL of a real daemon, replays that cut deeper --------------------------------


def _image_conversation(media: Path) -> Surface:
    s = Surface()
    s.system()
    for i in range(30):
        if i % 7 == 1:
            img = media / f"pic-{i}.png"
            img.write_bytes(_png(2 + i, 3))
            s.user(
                f"第{i}张图。" + "看" * 60,
                images=[{"attachmentId": f"a{i}", "mediaType": "image/png", "hostPath": str(img)}],
            )
            s.assistant("收到图片。" + "好" * 80)
        s.turn_pair(i, 300)
    return s


@pytest.mark.parametrize("replay", ["same", "grown", "tokens", "images"])
def test_lost_answer_then_replay_after_sigkill(replay: str, tmp_path: Path) -> None:
    sid = f"lost-{replay}"
    if replay in ("images", "grown"):
        s = _image_conversation(tmp_path)
    else:
        s = Surface()
        s.system()
        for i in range(30):
            s.turn_pair(i, 300)
    with daemons() as d:
        first = result(call(d, "agent/pre-step", params(s, sid, percent=80)))["compaction"]
        d.restart()  # SIGKILL: the answer never reached the host
        p = params(s, sid, percent=80)
        if replay == "grown":
            for i in range(30, 36):
                s.turn_pair(i, 300)
            p = params(s, sid, percent=90)
        elif replay == "tokens":
            p = params(s, sid, percent=92)
        second = result(call(d, "agent/pre-step", p))["compaction"]
        assert second == first  # the same archive, answered again as it is
        base = d.session_dir(sid)
        host_ids = [str(n["message"]["id"]) for n in s.nodes]
        span = {str(n["message"]["id"]) for n in s.nodes if n["seq"] in first["shadowedSeqs"]}
        tally = check_messages(base, host_ids, set(host_ids) - span, final=True)
        assert tally.doubled == tally.lost == tally.both == tally.index_mismatch == 0, tally
        assert {f.name for f in base.glob("mem-*")} == set(first["folders"])
        # every image copied once, each named by the one folder that holds it
        images = sorted(f.name for f in base.glob("images/img-*"))
        refs = sorted(
            img["name"]
            for f in base.glob("mem-*")
            for img in orjson.loads((f / "meta.json").read_bytes()).get("images", [])
        )
        assert images == refs and (bool(images) == (replay in ("images", "grown")))
        # again: a second kill, a second replay
        d.restart()
        assert result(call(d, "agent/pre-step", p))["compaction"] == first
        d.restart()
        token = first["token"]
        if replay in ("grown", "images"):
            # abort of the replayed token removes everything, first attempt included
            out = result(call(d, "archive/abort", {"session": {"id": sid}, "token": token}))
            assert out == {"ok": True, "rolledBack": first["folders"]}
            assert not list(base.glob("mem-*")) and not list(base.glob("images/img-*"))
            assert index_matches_disk(base)
            d.restart()  # the abort's answer was lost too: re-sent, same answer
            again = result(call(d, "archive/abort", {"session": {"id": sid}, "token": token}))
            assert again == {**out, "alreadyRolledBack": True}
            third = result(call(d, "agent/pre-step", p))["compaction"]
            assert third["token"] != token
            span = {str(n["message"]["id"]) for n in s.nodes if n["seq"] in third["shadowedSeqs"]}
            tally = check_messages(base, host_ids, set(host_ids) - span, final=True)
            assert tally.doubled == tally.lost == tally.both == 0, tally
            token = third["token"]
        assert result(call(d, "archive/commit", {"session": {"id": sid}, "token": token})) == {
            "ok": True
        }
        d.restart()  # the commit's answer was lost: re-sent, accepted
        assert result(call(d, "archive/commit", {"session": {"id": sid}, "token": token})) == {
            "ok": True
        }
        assert unreported(base) == [] and not list(base.glob(".commit-*"))


# ---- 3. the property test: random SIGKILLs, four hosts, replays ----------------------------

WINDOW = 4_000
KILL_CONFIG = {"compress": {"allowSmallWindow": True, "hardLimitStop": False}}
TOPICS = [
    ("部署", "生产环境部署在周五晚上，回滚脚本放在 ops/rollback.sh"),
    ("数据库", "主库是 PostgreSQL 16，连接池上限 200，从库两台"),
    ("预算", "第三季度预算批了 48 万，其中云资源 30 万"),
    ("面试", "候选人周二下午三点面试，考察分布式缓存设计"),
    ("旅行", "十月去京都，住在四条河原町附近的旅馆"),
    ("监控", "告警阈值 CPU 85%，延迟 P99 超过 300ms 就报警"),
    ("合同", "供应商合同 12 月 31 日到期，续约要提前 30 天通知"),
    ("体检", "体检安排在下周一早上八点，需要空腹"),
    ("release", "version 2.4 ships with the new importer and drops python 3.9"),
    ("garden", "the tomatoes need watering every second day, basil on the balcony"),
]
FILLER = "这段话只是为了让上下文变长一些，没有别的意思。"


@dataclass(frozen=True)
class Kill:
    point: str
    when: str  # "before" (sending), "in-flight" (after `delay`), "lose" (the answer)
    delay: float = 0.0


class Lost(Exception):
    """No answer: the connection closed (the daemon was killed) or it was thrown away."""


class World:
    """The daemon under test, the kill budget and what was seen."""

    def __init__(self, d: Daemons, target: int, rng: random.Random, tg: TaskGroup) -> None:
        self.d = d
        self.target = target
        self.rng = rng
        self.tg = tg
        self.generation = 0
        self.lock = anyio.Lock()
        self.kills = 0
        self.points: Counter[str] = Counter()
        self.replays: Counter[str] = Counter()
        self.deeper: Counter[str] = Counter()
        self.latency: dict[str, float] = {}
        self.tally = Tally()
        """The end of every conversation."""
        self.restarts = Tally()
        """The first answer of every session after every restart."""
        self.restart_checks = 0
        self.sessions = 0
        self.aborts = 0
        self.reports_resent = 0
        """Answered commits / aborts sent again after a restart (a bridge's queued report)."""
        self.refused: Counter[str] = Counter()
        """Reports answered -32602 (must stay 0: the host never reports a wrong token)."""
        self.commits = 0
        self.started = time.monotonic()

    @property
    def killing(self) -> bool:
        return self.kills < self.target

    async def kill(self, point: str, gen: int | None) -> bool:
        """SIGKILL the daemon of generation ``gen`` (None: whichever runs) and start the
        next one; False when that daemon is already gone or the budget is used up."""
        async with self.lock:
            if (gen is not None and gen != self.generation) or not self.killing:
                return False
            self.kills += 1
            self.points[point] += 1
            await anyio.to_thread.run_sync(self.d.restart)
            self.generation += 1
            return True

    def observe(self, method: str, seconds: float) -> None:
        old = self.latency.get(method)
        self.latency[method] = seconds if old is None else old * 0.8 + seconds * 0.2

    def plan(self, method: str, p: Any) -> Kill | None:
        if not self.killing:
            return None
        rng = self.rng
        if method == "agent/pre-step":
            ctx = p["context"]
            over = ctx["totalTokens"] * 100 > 60 * ctx["contextWindow"]
            chance = 0.3 if over else 0.02
        elif method in ("archive/commit", "archive/abort"):
            chance = 0.3
        elif method == "tools/call":
            chance = 0.12
        elif method == "agent/inbox/inserted":
            chance = 0.06
        else:
            return None
        if rng.random() >= chance:
            return None
        kinds = ["in-flight", "in-flight", "lose"]
        if method in ("archive/commit", "archive/abort"):
            kinds.append("before")
        when = rng.choice(kinds)
        delay = rng.uniform(0, 1.3 * self.latency.get(method, 0.01))
        return Kill(f"{method} {when}", when, delay)

    async def random_killer(self) -> None:
        """Kills at any moment, whatever is running."""
        while self.killing:
            await anyio.sleep(self.rng.uniform(0.1, 1.2))
            await self.kill("any time", None)


class Link:
    """A host's connection as a bridge has it: reconnects after a restart and re-sends
    the request whose answer it never got (HostSim's ``client``)."""

    def __init__(self, world: World, sid: str) -> None:
        self.world = world
        self.sid = sid
        self.stream: SocketStream | None = None
        self.gen = -1
        self.checked_gen = 0
        self.buf = b""
        self.next_id = 0
        self.host: KillHost | None = None

    async def aclose(self) -> None:
        if self.stream is not None:
            await self.stream.aclose()
            self.stream = None

    async def _connect(self) -> None:
        await self.aclose()
        deadline = time.monotonic() + 30
        while True:
            async with self.world.lock:  # no restart under way
                gen = self.world.generation
            try:
                self.stream = await anyio.connect_unix(str(self.world.d.socket_path))
                self.gen, self.buf = gen, b""
                await self._roundtrip(
                    "initialize", {"protocolVersion": 1, "capabilities": FULL_CAPS}
                )
                return
            except (OSError, Lost):
                if time.monotonic() > deadline:
                    raise
                await anyio.sleep(0.005)

    async def _line(self) -> bytes:
        assert self.stream is not None
        while b"\n" not in self.buf:
            try:
                with anyio.fail_after(60):
                    chunk = await self.stream.receive(1 << 20)
            except (
                anyio.EndOfStream,
                anyio.BrokenResourceError,
                anyio.ClosedResourceError,
                OSError,
            ):
                raise Lost from None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    async def _roundtrip(self, method: str, p: Any, kill: Kill | None = None) -> dict[str, Any]:
        assert self.stream is not None
        self.next_id += 1
        rid = self.next_id
        data = orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": p}) + b"\n"
        try:
            await self.stream.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            raise Lost from None
        if kill is not None and kill.when == "in-flight":
            self.world.tg.start_soon(self._kill_later, kill, self.gen)
        while True:
            msg = orjson.loads(await self._line())
            if isinstance(msg, dict) and msg.get("id") == rid:
                return msg

    async def _kill_later(self, kill: Kill, gen: int) -> None:
        await anyio.sleep(kill.delay)
        await self.world.kill(kill.point, gen)

    async def call(self, method: str, p: Any = None) -> Any:
        world = self.world
        resend = False
        while True:
            if self.stream is None or self.gen != world.generation:
                await self._connect()
            if resend and self.host is not None:
                self.host.before_resend(method, p)
            kill = world.plan(method, p)
            if kill is not None and kill.when == "before":
                await world.kill(kill.point, self.gen)
                continue
            t0 = time.monotonic()
            try:
                msg = await self._roundtrip(method, p, kill)
            except Lost:
                # a kill holds the lock from before the SIGKILL until the next daemon runs
                assert self.gen != world.generation or world.lock.locked(), (
                    f"{method}: the connection closed without a kill"
                )
                resend = True
                world.replays[method] += 1
                await self.aclose()
                continue
            world.observe(method, time.monotonic() - t0)
            if kill is not None and kill.when == "lose":
                gen = self.gen
                if await world.kill(kill.point, gen) or world.generation != gen:
                    resend = True
                    world.replays[method] += 1
                    continue
            if "error" in msg:
                err = msg["error"]
                raise RpcError(int(err["code"]), str(err["message"]), err.get("data"))
            if self.gen != self.checked_gen and self.host is not None:
                # the first answer of this session from a restarted daemon: its store was
                # opened (recovered) and the session is idle now
                self.checked_gen = self.gen
                world.restart_checks += 1
                world.restarts.add(self.host.check(final=False))
                self.host.resend_due = True
            return msg["result"]


@dataclass
class KillHost(HostSim):
    """HostSim that sometimes cannot apply a compaction (``archive/abort``) and, when a
    pre-step must be re-sent, often sends it with a grown surface or a higher meter."""

    rng: random.Random = field(default_factory=random.Random)
    memory: Path = Path()
    extra_tokens: int = 0
    aborted: list[dict[str, Any]] = field(default_factory=list)
    all_ids: list[str] = field(default_factory=list)
    """Every message ever added to the surface (checkpoints are not added, they replace)."""
    last_report: tuple[str, dict[str, Any], dict[str, Any]] | None = None
    """The last archive/commit or archive/abort answered: method, params, answer."""
    resend_due: bool = False
    """The daemon restarted since: the next step sends ``last_report`` again."""

    def _params(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "turn": self.turn,
            "step": self.step,
            "messages": [n.message for n in self.surface if n.type == "user/message"][-1:],
            "context": {
                "totalTokens": self.total_tokens() + self.extra_tokens,
                "contextWindow": self.context_window,
                "nodes": [{"seq": n.seq, "tokens": n.tokens} for n in self.surface],
            },
            "surface": [n.wire() for n in self.surface],
        }

    def before_resend(self, method: str, p: Any) -> None:
        """The answer never came; the host went on before asking again."""
        if method != "agent/pre-step":
            return
        world = self.client.world  # type: ignore[attr-defined]
        r = self.rng.random()
        if r < 0.4:
            # the step ran without archiving: a tool call and its result were added
            call_id = self._next_id("call")
            self.add(
                "assistant/message",
                {
                    "id": self._next_id("a"),
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "先查一下。" + FILLER * self.rng.randint(1, 4)},
                        {"type": "tool-call", "id": call_id, "name": "grep", "arguments": "{}"},
                    ],
                    "source": {"kind": "model"},
                },
                self.surface[-1].time,
            )
            self.add(
                "tool/result",
                {
                    "id": self._next_id("t"),
                    "role": "tool",
                    "toolCallId": call_id,
                    "content": [
                        {"type": "text", "text": "match: " + "x" * self.rng.randint(300, 2400)}
                    ],
                    "source": {"kind": "tool"},
                },
                self.surface[-1].time,
            )
            world.deeper["grown surface"] += 1
        elif r < 0.7:
            self.extra_tokens += self.rng.randint(200, 900)
            world.deeper["more tokens"] += 1
        else:
            world.deeper["same request"] += 1
        p.clear()
        p.update(self._params())
        self.extra_tokens = 0

    async def report(self, method: str, p: dict[str, Any]) -> dict[str, Any] | None:
        """Send a commit or abort; a -32602 answer is counted (it must never come)."""
        world = self.client.world  # type: ignore[attr-defined]
        try:
            out: dict[str, Any] = await self.client.call(method, p)
        except RpcError as exc:
            if exc.code != -32602:
                raise
            world.refused[method] += 1
            world.tally.problems.append(f"{method} {p['token']}: -32602 {exc}")
            return None
        self.last_report = (method, p, out)
        return out

    async def resend_report(self) -> None:
        """After a restart, report the last archive again, as a bridge whose queued
        report outlived the answer does: the same answer, or an abort's with
        ``alreadyRolledBack``."""
        self.resend_due = False
        if self.last_report is None:
            return
        method, p, first = self.last_report
        world = self.client.world  # type: ignore[attr-defined]
        world.reports_resent += 1
        again = await self.report(method, p)
        if again is None:
            return
        want = first if method == "archive/commit" else {**first, "alreadyRolledBack": True}
        if again != want:
            world.tally.problems.append(f"{method} {p['token']} re-sent: {again} != {want}")

    async def pre_step(self, time_ms: int) -> StepReport:
        if self.resend_due:
            await self.resend_report()
        self.step += 1
        before = self.total_tokens()
        answer: dict[str, Any] = await self.client.call("agent/pre-step", self._params())
        self._apply_sections(answer)
        compaction = answer.get("compaction")
        world = self.client.world  # type: ignore[attr-defined]
        if compaction:
            token = compaction["token"]
            if self.rng.random() < 0.15:
                out = await self.report(
                    "archive/abort", {"session": self.session, "token": token, "reason": "x"}
                )
                assert out is None or (
                    out["ok"] is True and set(out["rolledBack"]) == set(compaction["folders"])
                )
                self.aborted.append(compaction)
                world.aborts += 1
            else:
                self._apply_compaction(compaction, time_ms)
                await self.report("archive/commit", {"session": self.session, "token": token})
                self.archived_folders.extend(compaction["folders"])
                world.commits += 1
        report = StepReport(
            self.turn, self.step, before, self.total_tokens(), compaction, answer["warnings"]
        )
        self.steps.append(report)
        return report

    def add(
        self, node_type: str, message: dict[str, Any], time_ms: int, *, seq: int | None = None
    ) -> Node:
        node = super().add(node_type, message, time_ms, seq=seq)
        self.all_ids.append(str(message["id"]))
        return node

    def check(self, *, final: bool) -> Tally:
        base = session_paths(self.memory, str(self.session["id"]), per_session=True).dir
        live = {str(n.message["id"]) for n in self.surface}
        checkpoints = {
            str(n.message["id"])
            for n in self.surface
            if n.message.get("source", {}).get("kind") == "compact-checkpoint"
        }
        ids = [m for m in self.all_ids if m not in checkpoints]
        tally = check_messages(base, ids, live, final=final)
        if final:
            left = unreported(base)
            journals = list(base.glob(".commit-*"))
            if left or journals:
                tally.problems.append(f"{base.name}: unreported archives left {left}")
                tally.index_mismatch += 1
        return tally


def _user_message(host: KillHost, rng: random.Random, media: Path, n: int) -> dict[str, Any]:
    topic, fact = rng.choice(TOPICS)
    text = f"关于{topic}：{fact}。" + FILLER * rng.randint(2, 20)
    if rng.random() < 0.25:
        earlier, _ = rng.choice(TOPICS)
        text += f"还记得{earlier}的事吗？"
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if rng.random() < 0.12:
        img = media / f"{host.session['id']}-{n}.png"
        img.write_bytes(_png(2 + n % 9, 2 + n % 5))
        content.append(
            {
                "type": "image",
                "attachment": {
                    "attachmentId": f"att-{n}",
                    "mediaType": "image/png",
                    "bytes": img.stat().st_size,
                    "name": img.name,
                    "hostPath": str(img),
                },
            }
        )
    return {
        "id": host._next_id("u"),
        "role": "user",
        "content": content,
        "source": {"kind": "user"},
    }


async def _conversation(world: World, sid: str, rng: random.Random, media: Path) -> None:
    link = Link(world, sid)
    host = KillHost(
        link,  # type: ignore[arg-type]
        {"id": sid},
        WINDOW,
        scorer=scripted_scorer,
        rng=rng,
        memory=world.d.memory_root,
    )
    link.host = host
    now = T0 + rng.randint(0, 10**9)
    try:
        for n in range(rng.randint(10, 35)):
            now += 60_000
            await host.user_message(_user_message(host, rng, media, n), now)
            for _ in range(rng.choice((1, 1, 2))):
                topic, fact = rng.choice(TOPICS)
                reply = f"好的，{topic}这件事我记下了：{fact}。" + FILLER * rng.randint(0, 10)
                calls: list[tuple[str, dict[str, Any], str]] = []
                if rng.random() < 0.4:
                    calls.append(
                        ("read_file", {"path": f"{topic}.md"}, "内容：" + fact * rng.randint(1, 8))
                    )
                await host.assistant_says(reply, now, tool_calls=calls)
        world.tally.add(host.check(final=True))
        world.sessions += 1
    finally:
        await link.aclose()


async def _host(world: World, k: int, media: Path) -> None:
    n = 0
    while world.killing:
        rng = random.Random(SEED * 1000 + k * 100_003 + n)
        await _conversation(world, f"kill-{k}-{n}", rng, media)
        n += 1


def _stats(memory: Path) -> Counter[str]:
    out: Counter[str] = Counter()
    for path in memory.glob("sessions/*/stats.jsonl"):
        for line in path.read_bytes().splitlines():
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(rec, dict):
                out[str(rec.get("type"))] += 1
    out["images"] = sum(1 for _ in memory.glob("sessions/*/images/img-*"))
    out["folders"] = sum(1 for _ in memory.glob("sessions/*/mem-*"))
    return out


@pytest.mark.timeout(90 + KILLS)
async def test_sigkill_and_replay_property() -> None:
    base = short_tmpdir()
    d = Daemons(base, KILL_CONFIG)
    media = base / "media"
    media.mkdir()
    try:
        await anyio.to_thread.run_sync(d.start)
        async with anyio.create_task_group() as tg:
            world = World(d, KILLS, random.Random(SEED), tg)
            tg.start_soon(world.random_killer)
            async with anyio.create_task_group() as hosts:
                for k in range(HOSTS):
                    hosts.start_soon(_host, world, k, media)
        t, r = world.tally, world.restarts
        stats = _stats(d.memory_root)
        events = d.log_events()
        summary = {
            "kills": world.kills,
            "seconds": round(time.monotonic() - world.started, 1),
            "sessions": world.sessions,
            "messages": t.messages,
            "archived": t.archived,
            "live": t.live,
            "lost": t.lost + r.lost,
            "doubled": t.doubled + r.doubled,
            "both": t.both,
            "foreign": t.foreign + r.foreign,
            "index != disk": t.index_mismatch + r.index_mismatch,
            "restart checks": world.restart_checks,
            "commits": world.commits,
            "aborts": world.aborts,
            "reports re-sent after a restart": world.reports_resent,
            "reports answered -32602": dict(world.refused),
            "folders": stats["folders"],
            "pass-0 re-archives": stats["rearchive"],
            "images": stats["images"],
            "re-sent": dict(world.replays),
            "re-sent pre-steps": dict(world.deeper),
            "kill points": dict(world.points),
            "replays answered again": events["pre-step replayed: same compaction answered"],
            "never answered, rolled back at load": events[ROLLED_BACK],
        }
        print(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode())
        assert world.kills == KILLS
        assert sum(world.refused.values()) == 0, world.refused
        problems = t.problems + r.problems
        assert problems == [], problems[:20]
        assert summary["lost"] == summary["doubled"] == summary["both"] == 0
        assert summary["foreign"] == summary["index != disk"] == 0
        assert t.archived > 0 and world.restart_checks > 0
        assert t.archived + t.live == t.messages
        if KILLS >= 100:  # the interesting paths were all taken
            assert stats["rearchive"] > 0 and stats["images"] > 0, summary
            assert events["pre-step replayed: same compaction answered"] > 0, summary
            assert events[ROLLED_BACK] > 0, summary
            assert world.deeper["grown surface"] > 0 and world.deeper["more tokens"] > 0
            assert world.aborts > 0 and world.reports_resent > 0
            for point in (
                "agent/pre-step in-flight",
                "agent/pre-step lose",
                "archive/commit before",
                "archive/commit in-flight",
            ):
                assert world.points[point] > 0, world.points
    finally:
        await anyio.to_thread.run_sync(d.close)
        shutil.rmtree(base, ignore_errors=True)
