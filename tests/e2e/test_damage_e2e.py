"""Damage made visible through a real daemon: warnings once, log lines once, `status`
(socket and `rofmd status`) until fixed, and nothing repeated after a clean restart."""

from __future__ import annotations

import shutil
from typing import Any

from engine.jsonio import read_json, write_json_atomic
from engine.store import open_session
from tests.e2e.harness import LineSocket, running_daemon, short_tmpdir
from tests.engine.recall_fixtures import BASE_MS, write_folders

SESSION = "session-damage-e2e"
CAPS = {"tokenMeter": True, "systemPrompt": True, "tools": True, "attachments": True}


def _inbox(s: LineSocket, rid: int, text: str) -> dict[str, Any]:
    message = {
        "id": f"m{rid}",
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }
    params = {"session": {"id": SESSION}, "message": message, "time": BASE_MS + 60_000}
    answer = s.call(rid, "agent/inbox/inserted", params)
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


def _codes(answer: dict[str, Any]) -> list[str]:
    return sorted(w.split(":", 1)[0] for w in answer["warnings"])


def test_damage_warned_once_logged_once_listed_until_fixed() -> None:
    base = short_tmpdir()
    try:
        store = open_session(base / "mem", SESSION)
        ids = write_folders(
            store,
            [
                {
                    "createdAt": BASE_MS,
                    "alpha": 0.85,
                    "keywords": ["星港项目", "接口网关"],
                    "messages": [{"role": "user", "content": "星港项目的接口网关端口是 8080。"}],
                },
                {
                    "createdAt": BASE_MS + 1000,
                    "alpha": 0.9,
                    "keywords": ["星港项目", "网关端口"],
                    "messages": [{"role": "user", "content": "星港项目网关端口改成 9090。"}],
                },
                {"createdAt": BASE_MS + 2000, "alpha": 0.6, "keywords": ["晚饭"]},
            ],
        )
        # a conversation recall cannot read (a damaged meta.json is no skip: recall reads
        # the index, `tests/handlers/test_damage.py`)
        context = store.paths.folder(ids[0]) / "context.json"
        good_context = context.read_bytes()
        context.write_bytes(b"\x00\x01 not json")
        doc = read_json(store.paths.index)  # an orphan: on disk, not indexed
        doc["folders"] = [r for r in doc["folders"] if r["id"] != ids[2]]
        write_json_atomic(store.paths.index, doc)
        store.paths.recall_state.write_bytes(b"{garbage")
        with running_daemon(base=base) as d:
            s = LineSocket(d.socket_path)
            s.call(1, "initialize", {"protocolVersion": 1, "capabilities": CAPS})
            first = _inbox(s, 2, "星港项目的接口网关端口是多少？")
            assert _codes(first) == ["recallStateDiscarded", "storeRepaired", "unreadableFolder"]
            assert ids[0] not in first["recalled"] and ids[1] in first["recalled"]
            again = _inbox(s, 3, "星港项目的接口网关还是 8080 吗？")
            assert again["warnings"] == []
            st = s.call(4, "status")["result"]
            assert [f["folder"] for f in st["unreadableFolders"][SESSION]] == [ids[0]]
            assert [r["code"] for r in st["repairs"][SESSION]] == [
                "storeRepaired",
                "recallStateDiscarded",
            ]
            assert st["repairs"][SESSION][0]["counts"]["adoptedFolders"] == 1
            out = d.cli("status", "--socket", str(d.socket_path))
            assert out.returncode == 0, out.stderr
            assert f"UNREADABLE   {SESSION}  1 memory folder(s) cannot be read: {ids[0]}" in (
                out.stdout
            )
            assert "1 folder(s) adopted into the index" in out.stdout
            assert "recall-state.json.corrupt-" in out.stdout
            context.write_bytes(good_context)
            assert s.call(5, "status")["result"]["unreadableFolders"] == {}
            s.close()
            records = d.log_records()
        for event in (
            "memory folder unreadable: skipped",
            "session store repaired at load",
            "recall state discarded: the recall block starts empty",
        ):
            lines = [r for r in records if r.get("event") == event]
            assert len(lines) == 1 and lines[0]["level"] == "warning", (event, lines)
        kept = list((base / "mem" / "sessions" / SESSION).glob("recall-state.json.corrupt-*"))
        assert [p.read_bytes() for p in kept] == [b"{garbage"]
        # after a restart the store loads clean: nothing is warned or listed again
        with running_daemon(base=base) as d:
            s = LineSocket(d.socket_path)
            s.call(1, "initialize", {"protocolVersion": 1, "capabilities": CAPS})
            assert _inbox(s, 2, "星港项目的接口网关端口是多少？")["warnings"] == []
            st = s.call(3, "status")["result"]
            assert st["repairs"] == {} and st["unreadableFolders"] == {}
            s.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)
