"""The relevance index across a restart and an eviction, through the daemon's wiring
(real App, method table, dispatcher and eviction policy; `tests.rofmd.eviction_harness`):
the second start, or the reopen, loads the snapshot and reads no `context.json` of an
unchanged folder, and answers as the first start did; a damaged snapshot is rebuilt from
the folders with the same answer."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine.relevance import folder_text
from engine.relevance.folder_text import SNAPSHOT_NAME, FolderTexts
from engine.store import open_session
from handlers.relevance_snapshots import WRITER
from tests.engine.recall_fixtures import BASE_MS, write_folders
from tests.rofmd.eviction_harness import core

pytestmark = pytest.mark.anyio

SID = "snap-session"
QUESTION = "星港项目的网关端口和灰度比例是多少？"
_TOPICS = ["星港项目网关", "灰度比例", "杭州旅行", "预算会议", "数据库缓存", "部署监控"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    """Every folder text the relevance index reads: (session directory, folder id).
    Snapshots are written for any size (the daemon's floor is a few hundred folders)."""
    seen: list[tuple[str, str]] = []
    real = FolderTexts.__call__

    def counting(self: FolderTexts, folder_id: str) -> str | None:
        seen.append((self.store.dir.name, folder_id))
        return real(self, folder_id)

    monkeypatch.setattr(FolderTexts, "__call__", counting)
    monkeypatch.setattr(folder_text, "SNAPSHOT_MIN_DOCS", 1)
    yield seen
    assert WRITER.flush(30)


def _folder(n: int, *, scored: bool = True) -> dict[str, Any]:
    topic = _TOPICS[n % len(_TOPICS)]
    return {
        "createdAt": BASE_MS + n * 60_000,
        "alpha": 0.5 + (n % 5) / 10,
        "beta": 2,
        "keywords": [topic, f"编号{n}"],
        "scored": scored,
        "messages": [
            {"role": "user", "content": f"{topic}的第{n}次讨论：端口{8000 + n}，灰度{n % 10}0%。"},
            {"role": "assistant", "content": f"记下了：{topic}，端口{8000 + n}。"},
        ],
    }


def _seed(root: Path, sid: str, count: int, pending: int = 0) -> list[str]:
    store = open_session(root, sid)
    folders = [_folder(n) for n in range(count)]
    folders += [_folder(count + n, scored=False) for n in range(pending)]
    return write_folders(store, folders)


def _inbox(sid: str, mid: str, text: str = QUESTION, minute: int = 1) -> dict[str, Any]:
    return {
        "session": {"id": sid},
        "message": {
            "id": mid,
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"},
        },
        "time": BASE_MS + 10**7 + minute * 60_000,
    }


def _dir(root: Path, sid: str) -> Path:
    return root / "sessions" / sid


async def _start_and_ask(root: Path, mid: str = "m1") -> dict[str, Any]:
    """A daemon start, one user message, a shutdown (as SIGTERM runs it)."""
    async with core(root) as c:
        answer = await c.call("agent/inbox/inserted", _inbox(SID, mid))
        await c.app.shutdown(30)
    return answer


def _forget_recall_state(root: Path) -> None:
    """The next start's round starts from the state the first one did."""
    (_dir(root, SID) / "recall-state.json").unlink(missing_ok=True)


async def test_a_restart_reads_no_unchanged_folder_and_recalls_the_same(
    tmp_path: Path, reads: list[tuple[str, str]]
) -> None:
    root = tmp_path / "mem"
    ids = _seed(root, SID, 24)
    first = await _start_and_ask(root)
    assert first["recalled"] and first["sections"][0]["text"].startswith("## 记忆回忆")
    assert sorted(fid for _, fid in reads) == sorted(ids)  # built from the folders
    assert (_dir(root, SID) / SNAPSHOT_NAME).is_file()
    reads.clear()
    _forget_recall_state(root)
    second = await _start_and_ask(root)
    assert reads == []
    assert second == first


async def test_after_changes_a_restart_reads_only_the_new_folders(
    tmp_path: Path, reads: list[tuple[str, str]]
) -> None:
    root = tmp_path / "mem"
    ids = _seed(root, SID, 24)
    await _start_and_ask(root)
    # while the daemon is down: two new folders, one folder judged again, one judged
    # with an α only
    store = open_session(root, SID)
    added = write_folders(store, [_folder(40), _folder(41)], txn="arc-later")
    store.update_metas({ids[3]: {"keywords": ["数据库缓存", "重构"]}, ids[5]: {"alpha": 0.99}})
    del store
    reference = tmp_path / "ref"
    shutil.copytree(root, reference)
    (_dir(reference, SID) / SNAPSHOT_NAME).unlink()
    _forget_recall_state(root)
    _forget_recall_state(reference)
    reads.clear()
    restarted = await _start_and_ask(root, "m2")
    assert sorted(fid for _, fid in reads) == sorted(added)
    reads.clear()
    built = await _start_and_ask(reference, "m2")
    assert len(reads) == len(ids) + len(added)  # the reference read every folder
    assert restarted == built


async def test_a_shutdown_writes_what_changed_since_the_last_snapshot(
    tmp_path: Path, reads: list[tuple[str, str]]
) -> None:
    root = tmp_path / "mem"
    pending = _seed(root, SID, 20, pending=3)[20:]
    async with core(root) as c:
        await c.call("agent/inbox/inserted", _inbox(SID, "m1"))  # built, snapshot written
        assert WRITER.flush(30)
        written = (_dir(root, SID) / SNAPSHOT_NAME).read_bytes()
        judged = await c.call("tools/call", _judge(SID, pending))
        assert len(judged["value"]["updated"]) == 3
        asked = await c.call("agent/inbox/inserted", _inbox(SID, "m2", "灰度比例的回滚方案？", 2))
        assert WRITER.flush(30)
        # three changes: too few to rewrite the snapshot while the session is in use
        assert (_dir(root, SID) / SNAPSHOT_NAME).read_bytes() == written
        await c.app.shutdown(30)
    assert asked["recalled"]
    assert (_dir(root, SID) / SNAPSHOT_NAME).read_bytes() != written
    reference = tmp_path / "ref"
    shutil.copytree(root, reference)
    (_dir(reference, SID) / SNAPSHOT_NAME).unlink()
    _forget_recall_state(root)
    _forget_recall_state(reference)
    reads.clear()
    again = await _start_and_ask(root, "m3")
    assert reads == []  # the judged folders came with the snapshot written at shutdown
    assert again == await _start_and_ask(reference, "m3")


@pytest.mark.parametrize("damage", ["truncated", "garbage", "foreign"])
async def test_a_damaged_snapshot_is_rebuilt_from_the_folders(
    tmp_path: Path, reads: list[tuple[str, str]], damage: str
) -> None:
    root = tmp_path / "mem"
    ids = _seed(root, SID, 20)
    first = await _start_and_ask(root)
    path = _dir(root, SID) / SNAPSHOT_NAME
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) * 2 // 3])
    elif damage == "garbage":
        path.write_bytes(bytes(reversed(data)))
    else:  # another session's snapshot copied in
        other = tmp_path / "other"
        _seed(other, "someone-else", 20)
        async with core(other) as c:
            await c.call("agent/inbox/inserted", _inbox("someone-else", "m1"))
            await c.app.shutdown(30)
        shutil.copyfile(_dir(other, "someone-else") / SNAPSHOT_NAME, path)
    _forget_recall_state(root)
    reads.clear()
    again = await _start_and_ask(root)
    assert sorted(fid for d, fid in reads if d == SID) == sorted(ids)
    assert again == first
    # and the rebuilt index was written anew: the next start reads nothing
    reads.clear()
    _forget_recall_state(root)
    assert await _start_and_ask(root) == first
    assert reads == []


def _judge(sid: str, folders: list[str]) -> dict[str, Any]:
    updates = [
        {
            "id": fid,
            "alpha": 0.9,
            "beta": 5,
            "keywords": ["灰度比例", "回滚方案", "发布评审"],
            "reason": "发布的决定",
        }
        for fid in folders
    ]
    return {
        "session": {"id": sid},
        "turn": 3,
        "callId": "judge-1",
        "name": "memory_judge",
        "arguments": {"updates": updates},
    }


def _same(a: dict[str, Any], b: dict[str, Any], sid: str, other: str) -> bool:
    def norm(x: dict[str, Any], s: str) -> str:
        return orjson.dumps(x, option=orjson.OPT_SORT_KEYS).decode().replace(s, "X")

    return norm(a, sid) == norm(b, other)


async def test_an_evicted_session_reloads_its_snapshot_and_answers_as_if_kept(
    tmp_path: Path, reads: list[tuple[str, str]]
) -> None:
    root = tmp_path / "mem"
    kept, gone = "twin-kept", "twin-gone"
    pending = {sid: _seed(root, sid, 20, pending=3)[20:] for sid in (kept, gone)}
    async with core(root, idle_seconds=0, max_loaded=0) as c:
        registry = c.app.sessions
        steps: list[Callable[[str], tuple[str, dict[str, Any]]]] = [
            lambda sid: ("agent/inbox/inserted", _inbox(sid, "u1", minute=1)),
            lambda sid: ("tools/call", _judge(sid, pending[sid])),  # 3 folders scored
            lambda sid: ("agent/inbox/inserted", _inbox(sid, "u2", "灰度比例的回滚方案？", 2)),
            lambda sid: ("agent/inbox/inserted", _inbox(sid, "u3", "杭州旅行的预算会议？", 3)),
        ]
        per_step: list[dict[str, list[str]]] = []
        for n, step in enumerate(steps):
            answers = {}
            before = len(reads)
            for sid in (kept, gone):
                method, params = step(sid)
                answers[sid] = await c.call(method, params)
            assert _same(answers[gone], answers[kept], gone, kept), f"step {n}"
            per_step.append(
                {s: sorted(f for d, f in reads[before:] if d == s) for s in (kept, gone)}
            )
            # the evicted twin's index leaves memory (its snapshot written first, if due)
            assert WRITER.flush(30)
            assert registry.evict(registry.key_for(gone), "idle")
            if n == 1:
                assert len(answers[kept]["value"]["updated"]) == 3, answers[kept]["value"]
        assert answers[kept]["recalled"]
    # every reopen loaded the snapshot: the evicted twin read, step by step, what the kept
    # one read (the build, then the folders the judge scored), nothing more
    assert [len(s[kept]) for s in per_step] == [20, 0, 3, 0]
    assert [s[gone] for s in per_step] == [s[kept] for s in per_step]
