"""The user stays in control of what is remembered (issue 19), through a real daemon:
memory_forget suppresses a memory in this session (kept on disk, never recalled again,
also after a restart) or deletes it (folder, index, relevance index and block agree);
memory_control pauses recall injection, and status says so; `rofmd forget` is the same
tools from the shell."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine import texts
from engine.recall.hygiene import HYGIENE_FILE
from engine.recall.state import peek_state_file
from tests.e2e.client import GATEWAY, gateway_conversation, session_dir
from tests.e2e.client import Client as SharedClient
from tests.e2e.harness import DaemonProcess, running_daemon, short_tmpdir

QUESTION = "星港项目的接口网关端口是多少？"


class Client(SharedClient):
    """Tool calls at turn 40; the gateway question by default."""

    def __init__(self, d: DaemonProcess) -> None:
        super().__init__(d, tool_turn=40)

    def ask(self, sid: str, text: str = QUESTION, kind: str = "user") -> Any:
        return super().ask(sid, text, kind)

    def recall_ids(self, sid: str) -> list[str]:
        res = self.tool(
            sid, "memory_recall", {"keywords": "星港项目 接口网关 灰度比例", "offset": 0}
        )
        ids: list[str] = res["value"]["ids"]
        return ids


def block(answer: dict[str, Any]) -> str:
    text: str = next(s["text"] for s in answer["sections"] if s["name"] == "dsh-rofm:recall")
    return text


def archive_and_judge(d: DaemonProcess, c: Client, sid: str) -> str:
    """Archive a conversation and score it; the folder about the gateway's id."""
    comp = c.archive(gateway_conversation(24), sid)
    gateway = ""
    updates = []
    for i, fid in enumerate(comp["folders"]):
        meta = orjson.loads((session_dir(d, sid) / fid / "meta.json").read_bytes())
        if meta["title"].startswith("星港项目"):
            gateway = fid
            kw = ["星港项目", "接口网关", "端口 8080"]
            updates.append({"id": fid, "keywords": kw, "alpha": 0.9, "beta": 8})
        else:
            kw = ["配置文件", f"问题{i}", "读取文件"]
            updates.append({"id": fid, "keywords": kw, "alpha": 0.5, "beta": 1})
    assert c.tool(sid, "memory_judge", {"updates": updates})["isError"] is False
    assert gateway
    return gateway


class World:
    """One daemon for the module, restarted once on the same directories."""

    def __init__(self) -> None:
        self.base = short_tmpdir()
        self.gateways: dict[str, str] = {}
        self._cm: Any = None
        self.d: DaemonProcess
        self.c: Client

    def start(self) -> None:
        self._cm = running_daemon(base=self.base)
        self.d = self._cm.__enter__()
        self.c = Client(self.d)

    def stop(self) -> None:
        self.c.sock.close()
        self._cm.__exit__(None, None, None)


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    w = World()
    w.start()
    try:
        yield w
    finally:
        w.stop()
        shutil.rmtree(w.base, ignore_errors=True)


def test_initialize_lists_the_two_new_tools(world: World) -> None:
    tools = {t["name"]: t for t in world.c.init["tools"]}
    assert tools["memory_forget"]["description"] == texts.FORGET_DESCRIPTION
    assert tools["memory_control"]["description"] == texts.CONTROL_DESCRIPTION
    props = tools["memory_forget"]["parameters"]["properties"]
    assert set(props) == {"ids", "recalled", "keywords", "action"}


def test_a_suppressed_memory_never_comes_back_in_the_session(world: World) -> None:
    d, c, sid = world.d, world.c, "forget-suppress"
    gateway = world.gateways[sid] = archive_and_judge(d, c, sid)
    first = c.ask(sid)
    assert gateway in first["recalled"]
    m = re.search(r"### 回忆 (\d+) · [^\n]*关键词：星港项目", block(first))
    assert m is not None
    # a preview by keywords changes nothing
    preview = c.tool(sid, "memory_forget", {"keywords": "星港项目"})
    assert preview["isError"] is False
    assert gateway in [r["id"] for r in preview["value"]["candidates"]]
    assert not (d.memory_root / "sessions" / sid / HYGIENE_FILE).exists()
    # the model names it by its number in the block
    res = c.tool(sid, "memory_forget", {"recalled": [int(m.group(1))]})
    assert res["isError"] is False, res
    assert res["value"]["suppressed"] == [gateway] and res["value"]["blockRemoved"] == 1
    assert res["startsRequestSeries"] is True
    assert GATEWAY[0] not in block(res)
    assert gateway not in c.recall_ids(sid)
    # nor by a browse of its month (the time filters select through the same index)
    month = c.tool(sid, "memory_recall", {"timeFrom": "2026-10", "limit": 20, "offset": 0})
    assert month["value"]["ids"] and gateway not in month["value"]["ids"]
    again = c.ask(sid, "接口网关和灰度比例是怎么定的？星港项目")
    assert gateway not in again["recalled"] and GATEWAY[0] not in block(again)
    # kept on disk
    assert (d.memory_root / "sessions" / sid / gateway / "context.json").exists()
    assert c.call("status", {})["memoryControl"][sid]["suppressed"] == 1


def test_a_deleted_memory_is_gone_from_disk_index_relevance_and_block(world: World) -> None:
    d, c, sid = world.d, world.c, "forget-delete"
    gateway = world.gateways[sid] = archive_and_judge(d, c, sid)
    session = d.memory_root / "sessions" / sid
    assert gateway in c.ask(sid)["recalled"]
    res = c.tool(sid, "memory_forget", {"ids": [gateway, "mem-nope"], "action": "delete"})
    assert res["isError"] is False, res
    assert res["value"]["deleted"] == [gateway] and res["value"]["unknown"] == ["mem-nope"]
    assert res["value"]["blockRemoved"] == 1 and GATEWAY[0] not in block(res)
    assert not (session / gateway).exists()
    index = orjson.loads((session / "index.json").read_bytes())
    assert gateway not in [r["id"] for r in index["folders"]]
    assert not list(session.glob(".commit-forget-*"))
    # ranked recall (the relevance index) and the keyword index agree
    assert gateway not in c.recall_ids(sid)
    assert gateway not in c.ask(sid, "灰度比例是多少？接口网关")["recalled"]
    state = peek_state_file(session / "recall-state.json")  # with its log
    assert gateway not in state.ids() and GATEWAY[0] not in state.block


def test_pause_stops_injection_and_shows_in_status(world: World) -> None:
    d, c, sid = world.d, world.c, "forget-pause"
    gateway = archive_and_judge(d, c, sid)
    paused = c.tool(sid, "memory_control", {"recall": "pause"})
    assert paused["isError"] is False and paused["value"]["recallPaused"] is True
    assert paused["content"][0]["text"] == texts.CONTROL_PAUSED
    asked = c.ask(sid)
    assert asked["recalled"] == [] and block(asked) == ""
    assert c.call("status", {})["memoryControl"][sid]["recallPaused"] is True
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    sock = str(d.socket_path)
    shown = d.cli("status", "--socket", sock, env=env)
    assert re.search(rf"memory\s+{sid}\s+recall PAUSED since ", shown.stdout), shown.stdout
    # the shell's forget is the same tool: resume through it
    resumed = d.cli("forget", "--socket", sock, "--session", sid, "--resume", env=env)
    assert resumed.returncode == 0 and texts.CONTROL_RESUMED in resumed.stdout
    assert gateway in c.ask(sid)["recalled"]


def test_both_survive_a_restart(world: World) -> None:
    # the suppression and the deletion to restart over: those of the tests above when
    # they ran on this worker's daemon, else made here (xdist may run this test alone)
    if "forget-suppress" not in world.gateways:
        test_a_suppressed_memory_never_comes_back_in_the_session(world)
    if "forget-delete" not in world.gateways:
        test_a_deleted_memory_is_gone_from_disk_index_relevance_and_block(world)
    world.stop()
    world.start()
    c = world.c
    suppressed, deleted = world.gateways["forget-suppress"], world.gateways["forget-delete"]
    assert suppressed not in c.ask("forget-suppress", "星港项目接口网关端口多少来着")["recalled"]
    assert suppressed not in c.recall_ids("forget-suppress")
    again = c.tool("forget-suppress", "memory_forget", {"ids": [suppressed]})
    assert again["value"]["already"] == [suppressed]
    assert deleted not in c.recall_ids("forget-delete")
    status = c.call("status", {})
    assert not (status.get("repairs") or {}).get("forget-delete")
