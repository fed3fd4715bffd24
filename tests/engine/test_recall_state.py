"""recall-state.json v3 / v2 / v1 and the re-archive view (reference §3.1, §1.4)."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson

from engine.recall import (
    RecallState,
    load_state_file,
    prepare_state,
)
from engine.recall_view import RecallBlockView
from engine.store import SessionStore
from tests.engine.recall_fixtures import config, disk_round, numbered_store


def _setup(tmp_path: Path) -> tuple[SessionStore, RecallState, list[str]]:
    store, ids = numbered_store(tmp_path, [0.9, 0.3, 0.8], beta=1)
    cfg = config()
    rs = RecallState(path=store.paths.recall_state)
    prepare_state(rs, store, cfg)
    disk_round(store, rs, "星港项目", cfg, turn=3)
    rs.save()
    return store, rs, ids


def test_v3_round_trip_survives_deleted_folders(tmp_path: Path) -> None:
    store, rs, ids = _setup(tmp_path)
    assert len(rs.additions) == 3
    for fid in ids:
        shutil.rmtree(store.paths.folder(fid))
    again = load_state_file(store.paths.recall_state)
    assert again.block == rs.block
    assert again.ids() == rs.ids()
    assert again.round == 1
    assert again.ledger.keys() == rs.ledger.keys()
    doc = orjson.loads(store.paths.recall_state.read_bytes())
    assert doc["version"] == 3
    assert {
        "block",
        "ids",
        "additions",
        "round",
        "configFingerprint",
        "lanes",
        "ledger",
        "counters",
    } <= set(doc)
    assert doc["additions"][0]["injectedTurn"] == 3
    assert doc["additions"][0]["messages"][0]["content"].startswith("星港项目")


def test_v2_restores_block_and_resets_lanes(tmp_path: Path) -> None:
    store, rs, _ = _setup(tmp_path)
    doc = rs.to_json()
    v2 = {"version": 2, "block": doc["block"], "ids": doc["ids"], "additions": doc["additions"]}
    path = store.paths.recall_state
    path.write_bytes(orjson.dumps(v2))
    again = load_state_file(path)
    assert again.block == rs.block
    assert again.ledger == {}
    assert again.round == 0


def test_v1_rebuilds_from_present_folders(tmp_path: Path) -> None:
    store, _, ids = _setup(tmp_path)
    path = store.paths.recall_state
    path.write_bytes(orjson.dumps({"ids": ids}))
    shutil.rmtree(store.paths.folder(ids[1]))
    again = load_state_file(path)
    prepare_state(again, store, config())
    assert again.ids() == [ids[0], ids[2]]
    assert "### 回忆 2" in again.block


def test_rearchive_view_shrinks_and_restores(tmp_path: Path) -> None:
    store, rs, ids = _setup(tmp_path)
    view: RecallBlockView = rs
    cands = view.rearchive_candidates()
    assert [c.id for c in cands] == rs.ids()
    assert all(c.injected_turn == 3 and c.text.startswith("### 回忆") for c in cands)
    assert cands[0].created_at.endswith("Z")
    snap = view.snapshot()
    view.remove_for_rearchive([ids[0], ids[1]], [ids[0]], turn=4)
    assert rs.ids() == [ids[2]]
    assert ids[0] in rs.lanes.high_recycle
    on_disk = load_state_file(store.paths.recall_state)
    assert on_disk.ids() == [ids[2]]
    assert "### 回忆 1" in on_disk.block and "### 回忆 2" not in on_disk.block
    view.restore(snap)
    assert rs.ids() == [a["id"] for a in snap["additions"]]  # type: ignore[index]
    assert load_state_file(store.paths.recall_state).block == rs.block


def test_corrupt_file_gives_empty_state(tmp_path: Path) -> None:
    path = tmp_path / "recall-state.json"
    path.write_bytes(b"{not json")
    assert load_state_file(path).block == ""
