"""agent/pre-step → archive/commit / archive/abort through the real socket (PROTOCOL §4)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine.archive.surface import parse_surface
from tests.archive_fixtures import Surface, floored_params
from tests.e2e.harness import DaemonProcess, LineSocket, request_line, running_daemon

FULL_CAPS = {"tokenMeter": True, "systemPrompt": True, "tools": True, "attachments": True}


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProcess]:
    with running_daemon() as d:
        yield d


def connect(d: DaemonProcess, caps: dict[str, bool] | None = None) -> LineSocket:
    c = LineSocket(d.socket_path)
    r = c.call(0, "initialize", {"protocolVersion": 1, "capabilities": caps or FULL_CAPS})
    assert "result" in r, r
    return c


def session_dir(d: DaemonProcess, sid: str) -> Path:
    return d.memory_root / "sessions" / sid


def conversation(turns: int = 30, size: int = 300) -> Surface:
    s = Surface()
    s.system()
    for i in range(turns):
        s.turn_pair(i, size)
    return s


params = floored_params  # the pre-step params of these tests (other test modules import it)


def result(r: dict[str, Any]) -> dict[str, Any]:
    assert "result" in r, r
    out: dict[str, Any] = r["result"]
    return out


def disk_folders(d: DaemonProcess, sid: str) -> set[str]:
    base = session_dir(d, sid)
    return {p.name for p in base.glob("mem-*")} if base.exists() else set()


def index_ids(d: DaemonProcess, sid: str) -> set[str]:
    path = session_dir(d, sid) / "index.json"
    if not path.exists():
        return set()
    return {f["id"] for f in orjson.loads(path.read_bytes())["folders"]}


def stats(d: DaemonProcess, sid: str) -> list[dict[str, Any]]:
    path = session_dir(d, sid) / "stats.jsonl"
    if not path.exists():
        return []
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def test_archive_answer_folders_and_commit(daemon: DaemonProcess) -> None:
    sid = "e2e-basic"
    s = conversation()
    c = connect(daemon)
    res = result(c.call(1, "agent/pre-step", params(s, sid)))
    assert set(res) == {"compaction", "sections", "startsRequestSeries", "warnings"}
    comp = res["compaction"]
    assert set(comp) == {
        "token",
        "replace",
        "shadowedSeqs",
        "shadowedTokenCount",
        "checkpoint",
        "folders",
    }
    assert comp["token"].startswith("arc-")
    start, end = comp["replace"]["startSeq"], comp["replace"]["endSeq"]
    assert start == 1
    by_seq = {n["seq"]: n for n in s.nodes}
    assert by_seq[end + 1]["type"] == "user/message"  # a complete user-turn boundary
    assert comp["shadowedSeqs"] == list(range(start, end + 1))
    text = comp["checkpoint"]["content"][0]["text"]
    assert text == f"[memory] {len(comp['folders'])} 段更早的对话已归档到 memory/"
    # folders are on disk and indexed before the answer
    assert set(comp["folders"]) == disk_folders(daemon, sid) == index_ids(daemon, sid)
    # byte for byte: the archived messages are the surface messages, in order
    nodes = {n.seq: n for n in parse_surface(s.nodes)}
    seen: list[int] = []
    for fid in comp["folders"]:
        folder = session_dir(daemon, sid) / fid
        meta = orjson.loads((folder / "meta.json").read_bytes())
        assert meta["scored"] is False and meta["alpha"] == 0 and meta["beta"] == 0
        assert meta["keywords"] == []
        assert meta["alphaSource"] == meta["betaSource"] == meta["keywordsSource"] == "pending"
        assert meta["pendingSince"] == meta["createdAt"]
        assert meta["archivedFrom"] == "adapter" and meta["scoreMode"] == "model"
        assert meta["archivedByVersion"].startswith("rofmd-")
        assert meta["eventTimeSource"] == "messages"
        msgs = orjson.loads((folder / "context.json").read_bytes())["messages"]
        assert meta["eventStart"] == min(m["time"] for m in msgs)
        assert meta["eventEnd"] == max(m["time"] for m in msgs) + 1
        first_user = next(m for m in msgs if m["role"] == "user")
        assert meta["title"] == re.sub(r"\s+", " ", first_user["content"]).strip()[:24]
        for m in msgs:
            assert m["content"] == nodes[m["seq"]].text()
            assert m["time"] == by_seq[m["seq"]]["time"]
            seen.append(m["seq"])
    assert seen == list(range(1, end + 1))
    rec = [r for r in stats(daemon, sid) if r["type"] == "compress-applied"][-1]
    for key in [
        "beforeTokens",
        "afterTokens",
        "beforePercent",
        "afterPercent",
        "pass",
        "emergency",
        "source",
        "folderMetadata",
        "pinnedShadowed",
        "pinnedRecorded",
        "pinnedChars",
        "mergedCheckpoints",
        "archiveSegments",
        "pendingAtArchive",
        "pendingCount",
        "smallWindow",
        "protectedTurn",
        "foldersPlanned",
        "foldersCommitted",
        "rollback",
        "maxFoldersCapped",
        "eventTimeSourceCounts",
        "scoreMode",
        "archivedByVersion",
        "foldersSkipped",
        "releaseCapped",
        "releaseFloor",
        "releaseTargetPercent",
        "trickleArchive",
    ]:
        assert key in rec, key
    assert rec["source"] == "pre-step" and rec["foldersCommitted"] == len(comp["folders"])
    assert all(f["pending"] for f in rec["folderMetadata"])
    assert rec["pendingAtArchive"] == 0 and rec["pendingCount"] == len(comp["folders"])
    assert list(session_dir(daemon, sid).glob(".commit-*.json"))
    assert result(
        c.call(2, "archive/commit", {"session": {"id": sid}, "token": comp["token"]})
    ) == {"ok": True}
    assert not list(session_dir(daemon, sid).glob(".commit-*.json"))
    # a re-sent commit (its answer was lost) is answered again; an abort after it is refused
    again = c.call(3, "archive/commit", {"session": {"id": sid}, "token": comp["token"]})
    assert result(again) == {"ok": True}
    err = c.call(4, "archive/abort", {"session": {"id": sid}, "token": comp["token"]})
    assert err["error"]["code"] == -32602 and err["error"]["data"]["errors"][0]["field"] == "token"
    err = c.call(5, "archive/commit", {"session": {"id": sid}, "token": "arc-never-issued"})
    assert err["error"]["code"] == -32602 and err["error"]["data"]["errors"][0]["field"] == "token"
    c.close()


def test_replay_answers_the_same_compaction(daemon: DaemonProcess) -> None:
    sid = "e2e-replay"
    s = conversation()
    c = connect(daemon)
    p = params(s, sid)
    first = result(c.call(1, "agent/pre-step", p))["compaction"]
    second = result(c.call(2, "agent/pre-step", p))["compaction"]
    assert second == first
    p["step"] = 2
    p["context"]["totalTokens"] += 500  # the next step, replacement still not applied
    third = result(c.call(3, "agent/pre-step", p))["compaction"]
    assert third == first
    assert disk_folders(daemon, sid) == set(first["folders"])
    c.close()


def test_abort_rolls_back_exactly_that_archive(daemon: DaemonProcess, tmp_path: Path) -> None:
    sid = "e2e-abort"
    img = tmp_path / "shot.png"
    img.write_bytes(b"\x89PNG\r\n\x1a\nfake")
    s = Surface()
    s.system()
    s.user(
        "看看这张截图",
        images=[
            {
                "attachmentId": "att-9",
                "mediaType": "image/png",
                "bytes": 12,
                "width": 3,
                "height": 4,
                "name": "shot.png",
                "hostPath": str(img),
            },
            {"attachmentId": "att-10", "mediaType": "image/png"},
        ],
    )
    for i in range(30):
        s.turn_pair(i, 300)
    c = connect(daemon)
    res = result(c.call(1, "agent/pre-step", params(s, sid)))
    comp = res["compaction"]
    assert any("placeholder" in w for w in res["warnings"])
    base = session_dir(daemon, sid)
    first = base / comp["folders"][0]
    meta = orjson.loads((first / "meta.json").read_bytes())
    (ref,) = meta["images"]
    assert re.fullmatch(r"img-\d{8}T\d{9}Z-1-0\.png", ref["name"])
    assert ref["attachmentId"] == "att-9" and ref["width"] == 3
    assert ref["placeholder"] == f"[图片：（{ref['name']}）]"
    assert (base / "images" / ref["name"]).read_bytes() == img.read_bytes()
    table = orjson.loads((base / "images" / "index.json").read_bytes())["images"]
    assert [(r["name"], r["folderId"]) for r in table] == [(ref["name"], first.name)]
    ctx = orjson.loads((first / "context.json").read_bytes())["messages"]
    assert ctx[0]["content"].startswith("看看这张截图\n[图片：（img-")
    assert "-1-1.png）]" in ctx[0]["content"]
    out = result(
        c.call(2, "archive/abort", {"session": {"id": sid}, "token": comp["token"], "reason": "x"})
    )
    assert out == {"ok": True, "rolledBack": comp["folders"]}
    assert disk_folders(daemon, sid) == set() == index_ids(daemon, sid)
    assert not (base / "images" / ref["name"]).exists()
    assert orjson.loads((base / "images" / "index.json").read_bytes())["images"] == []
    assert not list(base.glob(".commit-*.json"))
    err = c.call(3, "archive/abort", {"session": {"id": sid}, "token": "arc-nope"})
    assert err["error"]["code"] == -32602
    # after an abort the same span can be archived again (new folders)
    again = result(c.call(4, "agent/pre-step", params(s, sid)))["compaction"]
    assert again["token"] != comp["token"] and disk_folders(daemon, sid) == set(again["folders"])
    c.close()


def test_note_merge_and_foreign_checkpoints(daemon: DaemonProcess) -> None:
    c = connect(daemon)
    s = Surface()
    s.system()
    s.checkpoint("[memory] 7 段更早的对话已归档到 memory/")
    s.pinned("system-prompt", "", ntype="system/message")
    s.pinned("subagent-settled", "子代理 build 完成，退出码 0")
    s.pinned("runtime-context", "Current runtime context: cwd=/w")
    for i in range(30):
        s.turn_pair(i, 300)
    comp = result(c.call(1, "agent/pre-step", params(s, "e2e-merge")))["compaction"]
    assert comp["replace"]["startSeq"] == 1
    n = len(comp["folders"])
    assert comp["checkpoint"]["content"][0]["text"] == (
        f"[memory] {7 + n} 段更早的对话已归档到 memory/\n\n"
        "[memory] 本次归档区间内还有 1 条非对话上下文（子代理/后台任务/审批等一次性通知，"
        "宿主不会重新注入），已并入本说明以免丢失：\n"
        "[subagent-settled] 子代理 build 完成，退出码 0"
    )
    rec = [r for r in stats(daemon, "e2e-merge") if r["type"] == "compress-applied"][-1]
    assert rec["mergedCheckpoints"] == 1 and rec["archiveSegments"] == 7 + n
    assert rec["pinnedShadowed"] == 2 and rec["pinnedRecorded"] == 1
    s2 = Surface()
    s2.system()
    s2.checkpoint("[memory] 7 段更早的对话已归档到 memory/")
    s2.checkpoint("Earlier conversation summary (another compressor).")
    for i in range(30):
        s2.turn_pair(i, 300)
    comp2 = result(c.call(2, "agent/pre-step", params(s2, "e2e-foreign")))["compaction"]
    assert comp2["replace"]["startSeq"] == 3
    text = comp2["checkpoint"]["content"][0]["text"]
    assert text == f"[memory] {len(comp2['folders'])} 段更早的对话已归档到 memory/"
    c.close()


def test_switches_and_capabilities(daemon: DaemonProcess) -> None:
    s = conversation()
    c = connect(daemon)
    sub = params(s, "e2e-sub", session_extra={"origin": "subagent"})
    assert result(c.call(1, "agent/pre-step", sub))["compaction"] is None
    deep = params(s, "e2e-sub2", session_extra={"delegationDepth": 2})
    assert result(c.call(2, "agent/pre-step", deep))["compaction"] is None
    assert disk_folders(daemon, "e2e-sub") == set()
    c.close()
    for i, caps in enumerate(({**FULL_CAPS, "tokenMeter": False}, {**FULL_CAPS, "tools": False})):
        c = connect(daemon, caps)
        res = result(c.call(1, "agent/pre-step", params(s, f"e2e-caps{i}")))
        assert res["compaction"] is None
        assert any("capability" in w for w in res["warnings"])
        c.close()
    assert disk_folders(daemon, "e2e-caps0") == set() == disk_folders(daemon, "e2e-caps1")
    c = connect(daemon)
    below = result(c.call(1, "agent/pre-step", params(s, "e2e-below", percent=50)))
    assert below["compaction"] is None and below["warnings"] == []
    small = params(s, "e2e-small")
    small["context"]["contextWindow"] = 10_000
    small["context"]["totalTokens"] = 8_000
    first = result(c.call(2, "agent/pre-step", small))
    assert first["compaction"] is None and any("smallWindowTokens" in w for w in first["warnings"])
    assert result(c.call(3, "agent/pre-step", small))["warnings"] == []  # once per session
    c.close()


def test_config_switches(tmp_path: Path) -> None:
    s = conversation()
    config = {"compress": {"applyToSubagents": True, "applyToMainSessions": False}}
    with running_daemon(config=config) as d:
        c = connect(d)
        main = result(c.call(1, "agent/pre-step", params(s, "cfg-main")))
        assert main["compaction"] is None
        sub = result(
            c.call(2, "agent/pre-step", params(s, "cfg-sub", session_extra={"origin": "subagent"}))
        )
        assert sub["compaction"] is not None
        c.close()
        (d.config_dir / "config.json").write_bytes(orjson.dumps({"compress": {"enabled": False}}))
        c = connect(d)
        r = result(c.call(3, "config/reload"))
        assert r["ok"], r
        sub2 = result(
            c.call(4, "agent/pre-step", params(s, "cfg-sub3", session_extra={"origin": "subagent"}))
        )
        assert sub2["compaction"] is None
        c.close()


def test_cancel_before_commit_writes_nothing(daemon: DaemonProcess) -> None:
    sid = "e2e-cancel"
    s = conversation()
    c = connect(daemon)
    c.send(request_line(1, "debug/sleep", {"ms": 400, "session": {"id": sid}}))
    c.send(request_line(2, "agent/pre-step", params(s, sid)))
    c.send(
        orjson.dumps({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 2}}) + b"\n"
    )
    answers = {a["id"]: a for a in (c.recv_json(), c.recv_json())}
    assert answers[2]["error"]["code"] == -32800
    time.sleep(0.1)
    assert disk_folders(daemon, sid) == set() and index_ids(daemon, sid) == set()
    assert [r for r in stats(daemon, sid) if r["type"] == "compress-applied"] == []
    c.close()


def test_invalid_params(daemon: DaemonProcess) -> None:
    c = connect(daemon)
    r = c.call(1, "agent/pre-step", {"session": {"id": "x"}, "context": {"totalTokens": -1}})
    assert r["error"]["code"] == -32602
    r = c.call(2, "archive/commit", {"session": {"id": "x"}})
    assert r["error"]["code"] == -32602
    c.close()


def test_no_context_is_no_archive(daemon: DaemonProcess) -> None:
    c = connect(daemon)
    s = conversation(3)
    res = result(c.call(1, "agent/pre-step", {"session": {"id": "nc"}, "surface": s.nodes}))
    assert res["compaction"] is None
    assert os.path.exists(daemon.memory_root)
    c.close()


def _current_turn_only(size: int = 6000) -> Surface:
    s = Surface()
    s.system()
    s.user("请读取这个很大的日志文件并总结。")
    s.assistant("读取中。", [("call-big", "read_file", '{"path":"big.log"}')])
    s.tool("call-big", "日志行 " * size)
    return s


def _hard_stop_run(d: DaemonProcess, sid: str) -> list[dict[str, Any]]:
    c = connect(d)
    answers = []
    s = _current_turn_only()
    for step in (1, 2):  # two pressure episodes that cannot get below 95%
        answers.append(
            result(c.call(step, "agent/pre-step", params(s, sid, percent=97, step=step)))
        )
    # a later, archivable surface: older turns before a new current turn
    later = conversation(turns=12, size=400)
    later.user("新的问题")
    answers.append(result(c.call(3, "agent/pre-step", params(later, sid, percent=97, step=3))))
    c.close()
    return answers


def test_hard_limit_stop_after_two_pressure_episodes(daemon: DaemonProcess) -> None:
    first, second, later = _hard_stop_run(daemon, "hard-stop")
    assert first["compaction"] is None and second["compaction"] is None
    assert not any("hardLimitPercent" in w for w in first["warnings"])
    assert any("compress.hardLimitPercent 95%" in w for w in second["warnings"])
    # stopped: no retry on every pre-step, even when a cut would now be possible
    assert later["compaction"] is None
    assert not session_dir(daemon, "hard-stop").joinpath("index.json").exists() or not any(
        p.name.startswith("mem-") for p in session_dir(daemon, "hard-stop").iterdir()
    )


def test_hard_limit_stop_switch_off_keeps_trying() -> None:
    with running_daemon(config={"compress": {"hardLimitStop": False}}) as d:
        first, second, later = _hard_stop_run(d, "no-hard-stop")
        assert not any("hardLimitPercent" in w for w in first["warnings"] + second["warnings"])
        assert later["compaction"] is not None and later["compaction"]["folders"]
