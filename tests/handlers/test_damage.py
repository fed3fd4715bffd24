"""Damage made visible (handlers.damage) through the handlers, against a real store: each
damage is one warning in the next inbox / pre-step answer, one log line, an entry in
`status` until fixed."""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from structlog.testing import capture_logs

from engine.jsonio import read_json, write_json_atomic
from engine.store import SessionStore, open_session
from handlers.app import App
from handlers.context import RequestContext
from handlers.damage import MAX_FOLDER_WARNINGS, DamageLedger
from handlers.inbox import InboxParams, agent_inbox_inserted
from handlers.params import NoParams, SessionParams
from handlers.pre_step import PreStepParams, pre_step
from handlers.session_methods import agent_disposed
from handlers.system import status
from tests.engine.recall_fixtures import BASE_MS, write_folders
from tests.handlers import app_fixtures
from tests.handlers.app_fixtures import request_ctx

SESSION = "sess-damage"


def make_app(root: Path, recall: dict[str, Any] | None = None) -> App:
    return app_fixtures.make_app(root, {"recall": recall or {}}, info={"version": "test"})


def ctx(method: str) -> RequestContext:
    return request_ctx(method, BASE_MS + 60_000, SESSION)


_mid = [0]


async def inbox(app: App, text: str = "星港项目的网关端口是多少？") -> dict[str, Any]:
    _mid[0] += 1
    params = InboxParams.model_validate(
        {
            "session": {"id": SESSION},
            "message": {
                "id": f"m{_mid[0]}",
                "role": "user",
                "content": [{"type": "text", "text": text}],
                "source": {"kind": "user"},
            },
            "time": BASE_MS + 60_000,
        }
    )
    return await agent_inbox_inserted(app, params, ctx("agent/inbox/inserted"))


async def prestep(app: App) -> dict[str, Any]:
    params = PreStepParams.model_validate({"session": {"id": SESSION}, "turn": 2})
    return await pre_step(app, params, ctx("agent/pre-step"))


async def get_status(app: App) -> dict[str, Any]:
    return await status(app, NoParams.model_validate({}), ctx("status"))


async def dispose(app: App) -> None:
    await agent_disposed(app, SessionParams.model_validate({"session": {"id": SESSION}}), ctx("x"))


def seed(root: Path) -> tuple[SessionStore, list[str]]:
    """Two scored folders the query matches (the second more relevant), one it does not."""
    store = open_session(root, SESSION)
    ids = write_folders(
        store,
        [
            {
                "createdAt": BASE_MS,
                "alpha": 0.8,
                "beta": 6,
                "keywords": ["星港项目", "接口网关"],
                "messages": [{"role": "user", "content": "星港项目的接口网关端口是 8080。"}],
            },
            {
                "createdAt": BASE_MS + 1000,
                "alpha": 0.9,
                "beta": 8,
                "keywords": ["星港项目", "网关端口"],
                "messages": [{"role": "user", "content": "星港项目网关端口改成 9090。"}],
            },
            {
                "createdAt": BASE_MS + 2000,
                "alpha": 0.7,
                "keywords": ["晚饭"],
                "messages": [{"role": "user", "content": "今晚吃面条。"}],
            },
        ],
    )
    return store, ids


def damage_warnings(answer: dict[str, Any], code: str) -> list[str]:
    return [w for w in answer["warnings"] if isinstance(w, str) and w.startswith(f"{code}:")]


def events(logs: Sequence[Mapping[str, Any]], name: str) -> list[Mapping[str, Any]]:
    return [e for e in logs if e.get("event") == name]


@pytest.mark.parametrize("mode", ["fair", "ranked"])
async def test_a_damaged_meta_file_changes_no_recall(tmp_path: Path, mode: str) -> None:
    """Recall reads the index, not the folders' meta.json (their fields are the index
    entry's; `rofmd selfcheck` compares the two): a memory whose meta file is damaged is
    recalled as before. The damage stays listed where something that reads the file saw
    it (here the load, which reads the metas the index log's last record names): a round
    that read the memory's conversation proves nothing about its meta."""
    store, ids = seed(tmp_path)
    clean_root = tmp_path / "clean"
    shutil.copytree(tmp_path / "sessions", clean_root / "sessions")
    expected = await inbox(make_app(clean_root, {"mode": mode}))
    (store.paths.folder(ids[0]) / "meta.json").write_bytes(b'{"this is": not json')
    app = make_app(tmp_path, {"mode": mode})
    with capture_logs() as logs:
        first = await inbox(app)
        again = await inbox(app, "星港项目的接口网关呢？")
    assert first["recalled"] == expected["recalled"] and ids[0] in first["recalled"]
    assert ids[0] in again["recalled"] or ids[0] in first["recalled"]
    [warning] = damage_warnings(first, "unreadableFolder")
    assert ids[0] in warning and "meta.json" in warning
    assert damage_warnings(again, "unreadableFolder") == []
    assert events(logs, "memory folder readable again") == []
    [listed] = (await get_status(app))["unreadableFolders"][SESSION]
    assert listed["folder"] == ids[0] and listed["reason"].startswith("meta.json")


@pytest.mark.parametrize("mode", ["fair", "ranked"])
@pytest.mark.parametrize("damaged", ["context.json"])
async def test_unreadable_folder_warned_once_listed_until_fixed(
    tmp_path: Path, mode: str, damaged: str
) -> None:
    store, ids = seed(tmp_path)
    # a clean run on a copy: the folders recall selects from readable data
    clean_root = tmp_path / "clean"
    shutil.copytree(tmp_path / "sessions", clean_root / "sessions")
    expected = (await inbox(make_app(clean_root, {"mode": mode})))["recalled"]
    assert set(ids[:2]) <= set(expected)
    bad = ids[0]
    path = store.paths.folder(bad) / damaged
    original = path.read_bytes()
    path.write_bytes(b'{"this is": not json')
    app = make_app(tmp_path, {"mode": mode})
    with capture_logs() as logs:
        first = await inbox(app)
        assert first["recalled"] == [f for f in expected if f != bad]
        [warning] = damage_warnings(first, "unreadableFolder")
        assert bad in warning and damaged in warning
        # recall trips over it again: no second warning, no second log line
        again = await inbox(app, "星港项目的接口网关呢？")
        assert damage_warnings(again, "unreadableFolder") == []
        assert damage_warnings(await prestep(app), "unreadableFolder") == []
    lines = events(logs, "memory folder unreadable: skipped")
    assert [(e["folder"], e["log_level"]) for e in lines] == [(bad, "warning")]
    st = await get_status(app)
    [listed] = st["unreadableFolders"][SESSION]
    assert listed["folder"] == bad and listed["reason"].startswith(damaged)
    assert st["repairs"] == {}
    # fixed by hand: the status re-check drops it; broken again, it is warned again
    path.write_bytes(original)
    assert (await get_status(app))["unreadableFolders"] == {}
    path.write_bytes(b"")
    state = await app.sessions.get(SESSION)
    state.relevance_index = None  # ranked: a fresh index reads the text again
    state.recall_index = None
    rewarned = await inbox(app, "星港项目的网关端口到底是多少？")
    assert [bad in w for w in damage_warnings(rewarned, "unreadableFolder")] == [True]


async def test_garbage_recall_state_is_kept_aside_and_warned_once(tmp_path: Path) -> None:
    store, _ = seed(tmp_path)
    garbage = b'{"version": 3, "block": "## \xe8\xae\xb0\xe5\xbf\x86'
    store.paths.recall_state.write_bytes(garbage)
    app = make_app(tmp_path)
    with capture_logs() as logs:
        first = await prestep(app)
        [warning] = damage_warnings(first, "recallStateDiscarded")
        assert damage_warnings(await inbox(app), "recallStateDiscarded") == []
        assert damage_warnings(await prestep(app), "recallStateDiscarded") == []
    assert len(events(logs, "recall state discarded: the recall block starts empty")) == 1
    kept = sorted(p.name for p in store.dir.glob("recall-state.json.corrupt-*"))
    assert len(kept) == 1 and kept[0] in warning
    assert (store.dir / kept[0]).read_bytes() == garbage
    assert read_json(store.paths.recall_state)["version"] == 3  # a fresh, valid state
    [repair] = (await get_status(app))["repairs"][SESSION]
    assert repair["code"] == "recallStateDiscarded" and repair["keptAs"] == kept[0]
    assert "not JSON" in repair["reason"] and kept[0] in repair["summary"]
    # the next load finds a good file: nothing to report, and the kept copy stays
    await dispose(app)
    assert damage_warnings(await prestep(app), "recallStateDiscarded") == []
    assert (await get_status(app))["repairs"] == {}
    assert (store.dir / kept[0]).read_bytes() == garbage


@pytest.mark.parametrize("damage", ["orphan", "garbage-index"])
async def test_repair_at_load_warned_once_and_listed_until_a_clean_load(
    tmp_path: Path, damage: str
) -> None:
    store, ids = seed(tmp_path)
    if damage == "orphan":
        doc = read_json(store.paths.index)
        doc["folders"] = [r for r in doc["folders"] if r["id"] != ids[2]]
        write_json_atomic(store.paths.index, doc)
        phrase, count = "1 folder(s) adopted into the index", ("adoptedFolders", 1)
    else:
        store.paths.index.write_bytes(b"\x00garbage")
        phrase, count = "index.json rebuilt from the folders (it was corrupt)", ("indexRebuilt", 1)
    app = make_app(tmp_path)
    with capture_logs() as logs:
        first = await inbox(app)
        [warning] = damage_warnings(first, "storeRepaired")
        assert phrase in warning
        assert damage_warnings(await prestep(app), "storeRepaired") == []
        assert damage_warnings(await inbox(app), "storeRepaired") == []
    [line] = events(logs, "session store repaired at load")
    assert line["log_level"] == "warning" and line[count[0]] == count[1]
    [repair] = (await get_status(app))["repairs"][SESSION]
    assert repair["code"] == "storeRepaired" and repair["counts"][count[0]] == count[1]
    assert isinstance(repair["at"], int) and repair["summary"] in warning
    # reloaded: the store is clean now, the repair leaves status; the warning is not repeated
    await dispose(app)
    assert (await prestep(app))["warnings"] == []
    st = await get_status(app)
    assert st["repairs"] == {} and st["sessionsLoaded"] == 1


async def test_unreadable_orphan_found_at_load_listed_until_removed(tmp_path: Path) -> None:
    store, ids = seed(tmp_path)
    doc = read_json(store.paths.index)
    doc["folders"] = [r for r in doc["folders"] if r["id"] != ids[2]]
    write_json_atomic(store.paths.index, doc)
    (store.paths.folder(ids[2]) / "context.json").write_bytes(b"[1, 2")
    app = make_app(tmp_path)
    first = await prestep(app)
    [warning] = damage_warnings(first, "unreadableFolder")
    assert ids[2] in warning and "context.json" in warning
    assert damage_warnings(first, "storeRepaired") == []  # nothing was repaired
    assert [f["folder"] for f in (await get_status(app))["unreadableFolders"][SESSION]] == [ids[2]]
    assert (await prestep(app))["warnings"] == []
    # still broken: stays listed; removed by hand: leaves the list
    assert SESSION in (await get_status(app))["unreadableFolders"]
    shutil.rmtree(store.paths.folder(ids[2]))
    assert (await get_status(app))["unreadableFolders"] == {}
    assert (store.paths.dir / "index.json").exists()


def test_ledger_caps_folder_warnings_per_answer_and_keeps_every_folder() -> None:
    from engine.store import CorruptFolder

    ledger = DamageLedger(clock_ms=lambda: 7)
    folders = [
        CorruptFolder(f"mem-20260101T000000Z-{n:04d}", "meta.json missing") for n in range(50)
    ]
    ledger.note_unreadable(folders)
    ledger.note_unreadable(folders[:3])
    warnings = ledger.take_warnings()
    assert len(warnings) == MAX_FOLDER_WARNINGS + 1
    assert warnings[-1].startswith("unreadableFolder: 30 more memory folders")
    assert ledger.take_warnings() == []
    assert len(ledger.unreadable_json()) == 50
    assert ledger.unreadable_json()[0]["since"] == 7
    ledger.note_readable([folders[0].folder_id])
    assert len(ledger.unreadable_ids()) == 49


def test_status_json_shape_is_orjson_serialisable(tmp_path: Path) -> None:
    ledger = DamageLedger(clock_ms=lambda: 1)
    from engine.recall import DiscardedState

    ledger.note_recall_state_discarded(DiscardedState("not JSON: x", None, "EACCES"))
    [warning] = ledger.take_warnings()
    assert warning.startswith("recallStateDiscarded:") and "could not be kept aside" in warning
    orjson.dumps(ledger.repairs_json())
