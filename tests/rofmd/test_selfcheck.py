"""`rofmd selfcheck`'s checks on stores and logs made here (fast; no daemon): each check
fails on the damage it names, and the whole command writes nothing, even where the
store's own recovery would repair something."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine.scoring.era_audit import era_totals, pending_verdict, store_eras
from engine.sessionlog import compress_frames
from engine.store import FolderMeta, SessionStore, open_session
from engine.store.readonly import ReadonlyStore, read_store
from rofmd.cli.main import main
from rofmd.cli.selfcheck import (
    check_recall_state,
    check_session_logs,
    check_store,
    check_time,
)
from tests.engine.recall_fixtures import BASE_MS, config

SESSION = "sc"
CURRENT_MS = 1_800_000_000_000  # after the v1.2.0 era boundary: current unless marked


def _store(root: Path, n: int = 3, **fields: Any) -> tuple[SessionStore, list[str]]:
    """A store of ``n`` scored folders, committed in one transaction (no index log)."""
    store = open_session(root, SESSION)
    ids = []
    with store.transaction("arc-sc") as t:
        for i in range(n):
            fid = store.new_folder_id(BASE_MS + i * 1000)
            meta = FolderMeta(
                id=fid,
                createdAt=BASE_MS + i * 1000,
                scored=True,
                alpha=0.5,
                beta=2.0,
                keywords=["星港项目", "接口网关", f"第{i}段"],
                keywordsSource="llm",
                alphaSource="llm",
                title=f"第{i}段对话",
                **fields,
            )
            t.add_folder(meta, [{"role": "user", "content": f"星港项目第{i}段：端口 {8000 + i}"}])
            ids.append(fid)
    store.finalize("arc-sc")
    return store, ids


def _read(store: SessionStore) -> ReadonlyStore:
    return read_store(store.paths, SESSION)


def _edit_index(store: SessionStore, fid: str, **changes: Any) -> None:
    doc = orjson.loads(store.paths.index.read_bytes())
    for row in doc["folders"]:
        if row["id"] == fid:
            row.update(changes)
    store.paths.index.write_bytes(orjson.dumps(doc))


def test_a_clean_store_passes(tmp_path: Path) -> None:
    store, _ = _store(tmp_path)
    check = check_store([_read(store)])
    assert check.status == "PASS", check.detail
    assert "1 store(s), 3 folder(s), 3 index entr(y/ies); 0 pending (unscored), 3 scored" in (
        check.detail
    )


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"alpha": 0.9}, "alpha index 0.9 ≠ meta 0.5"),
        ({"keywords": ["别的"]}, "keywords index ['别的'] ≠ meta"),
        ({"scored": False}, "scored index False ≠ meta True"),
        ({"title": "改过"}, "title index '改过' ≠ meta '第1段对话'"),
        ({"eventTimeSource": "judge"}, "eventTimeSource index 'judge' ≠ meta None"),
    ],
)
def test_an_index_row_that_disagrees_with_its_meta_fails_naming_the_folder(
    tmp_path: Path, changes: dict[str, Any], expected: str
) -> None:
    store, ids = _store(tmp_path)
    _edit_index(store, ids[1], **changes)
    check = check_store([_read(store)])
    assert check.status == "FAIL"
    assert f"{SESSION}/{ids[1]}: index.json disagrees with meta.json: {expected}" in check.detail
    assert ids[0] not in check.detail and ids[2] not in check.detail


def test_index_and_disk_are_reconciled_both_ways(tmp_path: Path) -> None:
    store, ids = _store(tmp_path)
    doc = orjson.loads(store.paths.index.read_bytes())
    doc["folders"] = [r for r in doc["folders"] if r["id"] != ids[0]]
    doc["folders"].append({"id": "../escape", "createdAt": BASE_MS})
    store.paths.index.write_bytes(orjson.dumps(doc))
    for p in store.paths.folder(ids[2]).iterdir():
        p.unlink()
    store.paths.folder(ids[2]).rmdir()
    check = check_store([_read(store)])
    assert check.status == "FAIL"
    problems = check.data["problems"]
    assert f"{SESSION}/{ids[0]}: on disk but not in index.json" in problems
    assert f"{SESSION}/{ids[2]}: in index.json but its folder is gone" in problems
    assert f"{SESSION}: index row ../escape: not a safe folder id" in problems


def test_bad_metas_images_and_stats_lines_fail(tmp_path: Path) -> None:
    store, ids = _store(tmp_path)
    meta_path = store.paths.folder(ids[0]) / "meta.json"
    meta = orjson.loads(meta_path.read_bytes())
    meta["beta"] = 12
    meta["images"] = [{"name": "img-1.png"}]
    meta_path.write_bytes(orjson.dumps(meta))
    (store.paths.folder(ids[1]) / "meta.json").write_bytes(b"{not json")
    store.paths.stats.write_bytes(b'{"type": "recall"}\nnot json\n{"type": "x"}\n{"torn')
    problems = check_store([_read(store)]).data["problems"]
    assert f"{SESSION}/{ids[0]}: meta.json β 12.0 outside [-10, 10]" in problems
    assert f"{SESSION}/{ids[0]}: image img-1.png is missing from images/" in problems
    assert any(p.startswith(f"{SESSION}/{ids[1]}: meta.json:") for p in problems)
    assert f"{SESSION}: stats.jsonl line(s) 2 not JSON objects" in problems
    assert any("torn line" in w for w in check_store([_read(store)]).data["warnings"])


def test_recall_state_and_time_tags_are_validated(tmp_path: Path) -> None:
    store, ids = _store(tmp_path)
    state = {"version": 3, "block": "b", "ids": [ids[0], "../x"], "additions": [{"id": ids[0]}]}
    store.paths.recall_state.write_bytes(orjson.dumps(state))
    check = check_recall_state([_read(store)])
    assert check.status == "FAIL"
    assert "unsafe id '../x'" in check.detail and "ids and additions differ" in check.detail
    store.paths.recall_state.write_bytes(
        orjson.dumps({"version": 3, "block": "b", "ids": [ids[0]], "additions": [{"id": ids[0]}]})
    )
    assert check_recall_state([_read(store)]).status == "PASS"
    # what the log commits on top of the snapshot is what a load reads: judged too
    log = store.paths.recall_state.with_name("recall-state.log.jsonl")
    bad = {"base": 0, "n": 1, "additions": [{"id": ids[0], "beta": 12}]}
    log.write_bytes(orjson.dumps(bad) + b"\n")
    check = check_recall_state([_read(store)])
    assert check.status == "FAIL" and f"{ids[0]}: β 12 outside [-10, 10]" in check.detail
    log.write_bytes(orjson.dumps(bad)[:-3])  # torn: never committed, as after a crash
    assert check_recall_state([_read(store)]).status == "PASS"
    log.unlink()
    cfg = config()
    assert check_time([_read(store)], cfg).status == "PASS"
    _edit_index(store, ids[1], timeTags=[{"from": 5, "to": 2, "label": "x"}])
    check = check_time([_read(store)], cfg)
    assert check.status == "FAIL" and f"{SESSION}/{ids[1]}: tag 0 window 5..2" in check.detail


def _entries(n: int, pending: int, *, created: int = CURRENT_MS) -> list[Any]:
    from engine.store import IndexEntry

    return [IndexEntry(id=f"mem-{i:04d}", createdAt=created, scored=i >= pending) for i in range(n)]


@pytest.mark.parametrize(
    ("folders", "pending", "status"),
    [
        (100, 6, "PASS"),  # 6 % but not more than 20 pending
        (200, 21, "WARN"),  # 10.5 % and more than 20
        (100, 21, "FAIL"),  # 21 %
        (15, 15, "PASS"),  # fewer than 20 current folders: FAIL not judged
    ],
)
def test_pending_era_thresholds_judge_current_pending_only(
    folders: int, pending: int, status: str
) -> None:
    current = store_eras("a", _entries(folders, pending), [])
    legacy = store_eras("b", _entries(500, 500, created=1_700_000_000_000), [])
    verdict, detail = pending_verdict(era_totals([current, legacy]))
    assert verdict == status, detail
    assert "INFO: legacy pending 500 + synthetic pending 0" in detail


def test_a_fake_window_session_with_a_backlog_is_synthetic() -> None:
    records = [{"type": "compress-applied", "contextWindow": 8000}]
    eras = store_eras("stress", _entries(120, 110), records)
    assert eras.synthetic and len(eras.pending_by_era["synthetic"]) == 110
    assert set(eras.unmarked.values()) == {"synthetic"}
    small = store_eras("qq", _entries(10, 2), records)  # channel behaviour, not a test
    assert not small.synthetic and len(small.pending_by_era["current"]) == 2


def _note(seq: int, n: int, appendix: str = "") -> dict[str, Any]:
    text = f"[memory] {n} 段更早的对话已归档到 memory/" + appendix
    return {
        "type": "user/message",
        "seq": seq,
        "surfaceOp": {"op": "replace", "startSeq": 1, "endSeq": seq - 1},
        "data": {
            "id": f"n{seq}",
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "compact-checkpoint"},
        },
    }


def _msg(seq: int) -> dict[str, Any]:
    return {
        "type": "user/message",
        "seq": seq,
        "surfaceOp": "append",
        "data": {"id": f"m{seq}", "role": "user", "content": [{"type": "text", "text": "hi"}]},
    }


def _log(path: Path, sid: str, events: list[dict[str, Any]], *, zstd: bool) -> None:
    header = {"type": "session", "version": 4, "id": sid, "createdAt": BASE_MS}
    path.parent.mkdir(parents=True)
    if zstd:
        (path.parent / "session.v4.jsonl.zstd").write_bytes(compress_frames([[header], events]))
    else:
        lines = b"".join(orjson.dumps(e) + b"\n" for e in [header, *events])
        (path.parent / "session.v4.jsonl").write_bytes(lines)


def test_session_logs_count_our_notes_on_the_final_surface(tmp_path: Path) -> None:
    merged = [_msg(0), *(_msg(i) for i in range(1, 5)), _note(5, 1), _msg(6), _note(7, 2)]
    _log(tmp_path / "ws" / "merged" / "x", "merged", merged, zstd=True)
    check = check_session_logs(tmp_path, None, 0)
    assert check.status == "PASS", check.detail
    assert "1 log(s), 1 note(s) of ours, 0 foreign checkpoint(s)" in check.detail
    # an older note left beside the newer one (no merge): WARN, naming the session
    two = [_msg(0), _msg(1), _msg(2), _note(3, 1), _msg(4), _msg(5)]
    two.append({**_note(6, 1), "surfaceOp": {"op": "replace", "startSeq": 4, "endSeq": 5}})
    _log(tmp_path / "ws" / "two" / "x", "two", two, zstd=False)
    check = check_session_logs(tmp_path, None, 0)
    assert check.status == "WARN" and "two has 2 notes of ours" in check.detail
    assert check_session_logs(tmp_path, "merged", 0).status == "PASS"
    # an appendix carrying what the host injects again: FAIL
    bad = [
        _msg(0),
        _msg(1),
        _note(2, 1, "\n[memory] 本次归档区间内还有 1 条非对话上下文 ## 记忆回忆"),
    ]
    _log(tmp_path / "ws" / "bad" / "x", "bad", bad, zstd=True)
    check = check_session_logs(tmp_path, "bad", 0)
    assert check.status == "FAIL" and "re-injected host text ('## 记忆回忆')" in check.detail
    assert check_session_logs(tmp_path / "none", None, 0).status == "WARN"


def _tree(root: Path) -> dict[str, tuple[str, int]]:
    out = {}
    for p in sorted(root.rglob("*")):
        data = p.read_bytes() if p.is_file() else b"dir"
        out[str(p.relative_to(root))] = (hashlib.sha1(data).hexdigest(), p.stat().st_mtime_ns)
    return out


def test_selfcheck_writes_nothing_where_recovery_would_repair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "mem"
    store, ids = _store(root)
    (store.dir / ".index.json.999-1.tmp").write_bytes(b"half")
    (store.dir / ".staging-mem-20990101T000000Z-0001").mkdir()
    journal = {"version": 1, "txnId": "arc-x", "state": "pending", "folders": [ids[0]]}
    (store.dir / ".commit-arc-x.json").write_bytes(orjson.dumps(journal))
    store.paths.index_log.write_bytes(b'{"v": 1, "rows": [')  # a torn line
    before = _tree(root)
    argv = ["selfcheck", "--memory-dir", str(root), "--config-dir", str(tmp_path / "cfg")]
    code = main([*argv, "--sessions-dir", str(tmp_path / "logs")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert _tree(root) == before
    [line] = [x for x in out.splitlines() if x.startswith("[WARN] memory store")]
    assert "3 unfinished write(s)" in line and "1 unreadable line(s) in index.log.jsonl" in line
    code = main([*argv, "--max-sessions", "-1"])
    assert code == 2 and "--max-sessions must be 0 (all) or more" in capsys.readouterr().err


def test_selfcheck_json_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "mem"
    store, ids = _store(root)
    _edit_index(store, ids[0], alpha=0.1)
    argv = ["selfcheck", "--json", "--memory-dir", str(root), "--config-dir", str(tmp_path)]
    code = main([*argv, "--sessions-dir", str(tmp_path / "logs"), "--now-ms", "1"])
    doc = orjson.loads(capsys.readouterr().out)
    assert code == 1
    assert doc["tool"] == "rofmd selfcheck" and doc["generatedAt"] == 1
    assert doc["summary"]["failed"] == 1
    [store_check] = [c for c in doc["checks"] if c["name"] == "memory store"]
    assert store_check["status"] == "FAIL"
    assert any(ids[0] in p for p in store_check["problems"])
