"""Pass-0 re-archive of the recall block through the pre-step handler (reference §1.4),
with a fake recall state implementing `engine.recall_view.RecallBlockView`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from engine.store import FolderMeta
from handlers.app import App, Paths
from handlers.config_state import ConfigState
from handlers.context import ConnectionState, RequestContext
from handlers.pre_step import ArchiveAbortParams, PreStepParams, archive_abort, pre_step
from tests.archive_fixtures import T0, Surface, pre_step_params
from tests.engine.test_archive_plan import FakeAddition as Addition


class _Info:
    def status_snapshot(self) -> dict[str, Any]:
        return {"version": "test"}


@dataclass
class FakeRecall:
    adds: list[Addition]
    recycled: list[str] = field(default_factory=list)
    restored: int = 0

    def rearchive_candidates(self) -> list[Addition]:
        return list(self.adds)

    def remove_for_rearchive(self, removed: Any, recycle_high: Any, turn: int) -> None:
        self.adds = [a for a in self.adds if a.id not in set(removed)]
        self.recycled.extend(recycle_high)

    def snapshot(self) -> object:
        return (list(self.adds), list(self.recycled))

    def restore(self, snapshot: object) -> None:
        assert isinstance(snapshot, tuple)
        adds: list[Addition] = list(snapshot[0])
        recycled: list[str] = list(snapshot[1])
        self.adds, self.recycled = adds, recycled
        self.restored += 1


def _app(tmp_path: Path, config: dict[str, Any]) -> App:
    cfg_dir = tmp_path / "cfg"
    cfg_dir.mkdir()
    (cfg_dir / "config.json").write_bytes(orjson.dumps(config))
    return App(
        ConfigState.start(cfg_dir, {}),
        Paths(memory_root_override=tmp_path / "mem", state_dir=tmp_path / "state", home=tmp_path),
        _Info(),
    )


def _ctx(now: int) -> RequestContext:
    conn = ConnectionState(conn_id=1)
    return RequestContext("1", "agent/pre-step", "s", conn, now)


async def test_rearchive_marks_low_alpha_recycles_high_and_abort_restores(tmp_path: Path) -> None:
    app = _app(tmp_path, {"compress": {"allowSmallWindow": True}})
    state = await app.sessions.get("rs")
    with state.store.transaction("seed") as txn:
        for fid, alpha in (("mem-20260101T000000Z-0001", 0.2), ("mem-20260101T000000Z-0002", 0.9)):
            txn.add_folder(
                FolderMeta(id=fid, createdAt=T0, alpha=alpha, scored=True, title=fid),
                [{"role": "user", "content": "x"}],
            )
    state.store.finalize("seed")
    s = Surface()
    s.system()
    for i in range(30):
        s.turn_pair(i, 300)
    recall = FakeRecall(
        [
            Addition("mem-20260101T000000Z-0002", 0.9, "2026-01-01", 1, "高" * 600),
            Addition("mem-20260101T000000Z-0001", 0.2, "2026-01-02", 2, "低" * 600),
            Addition("mem-gone", 0.1, "2026-01-03", 3, "无" * 600),
            Addition("mem-now", 0.1, "2026-01-01", s.turn, "今" * 600),
        ]
    )
    state.recall = recall
    p = pre_step_params(s, session="rs", percent=70)
    answer = await pre_step(app, PreStepParams.model_validate(p), _ctx(T0 + 5000))
    comp = answer["compaction"]
    assert comp is not None
    assert answer["startsRequestSeries"] is True
    assert [a.id for a in recall.adds] == ["mem-now"]  # current-turn addition protected
    assert recall.recycled == ["mem-20260101T000000Z-0002"]  # high α: recycle lane
    assert state.store.get_entry("mem-20260101T000000Z-0001").rescorePending is True
    assert state.store.get_entry("mem-20260101T000000Z-0002").rescorePending is False
    assert any("mem-gone" in w for w in answer["warnings"])
    rec = [
        orjson.loads(line)
        for line in state.store.paths.stats.read_bytes().splitlines()
        if b'"rearchive"' in line
    ]
    assert rec[0]["removedIds"][0] == "mem-20260101T000000Z-0001"
    assert set(rec[0]) >= {"removedIds", "removedTokens", "targetTokens", "beforePercent", "turn"}
    assert len(state.store) == 2 + len(comp["folders"])  # no folder for re-archived recalls
    out = await archive_abort(
        app,
        ArchiveAbortParams.model_validate({"session": {"id": "rs"}, "token": comp["token"]}),
        _ctx(T0 + 6000),
    )
    assert out["rolledBack"] == comp["folders"]
    assert recall.restored == 1 and len(recall.adds) == 4 and recall.recycled == []
    assert state.store.get_entry("mem-20260101T000000Z-0001").rescorePending is False
    assert len(state.store) == 2


async def test_rearchive_alone_when_the_share_is_used_up(tmp_path: Path) -> None:
    app = _app(tmp_path, {"compress": {"allowSmallWindow": True, "releaseFloorEnabled": False}})
    state = await app.sessions.get("rs2")
    s = Surface()
    s.system()
    for i in range(10):
        s.turn_pair(i, 100)
    recall = FakeRecall(
        [Addition(f"mem-x{i}", 0.1, f"2026-01-0{i + 1}", 0, "回" * 4000) for i in range(5)]
    )
    state.recall = recall
    p = pre_step_params(s, session="rs2", percent=70)
    answer = await pre_step(app, PreStepParams.model_validate(p), _ctx(T0))
    assert answer["compaction"] is None
    assert len(recall.adds) < 5 and len(state.store) == 0
