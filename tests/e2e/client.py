"""A test client of a daemon started by `tests.e2e.harness`: one initialised connection
whose request ids count up and whose answers must be results (an error answer fails
the test where it happened); and what the recall tests archive and read back."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

import orjson

from tests.archive_fixtures import Surface, floored_params
from tests.e2e.harness import DaemonProcess, LineSocket

FULL_CAPS = {"tokenMeter": True, "systemPrompt": True, "tools": True, "attachments": True}

GATEWAY = ("星港项目的接口网关端口是 8080，灰度比例 10%。", "收到，接口网关 8080，灰度 10%。")
"""The exchange the recall tests look for: the 星港项目 gateway port (user, assistant)."""


def session_dir(d: DaemonProcess, sid: str) -> Path:
    return d.memory_root / "sessions" / sid


def folder_messages(d: DaemonProcess, sid: str, fid: str) -> list[dict[str, Any]]:
    """The archived messages of folder `fid` (context.json, either of its layouts)."""
    doc = orjson.loads((session_dir(d, sid) / fid / "context.json").read_bytes())
    messages: list[dict[str, Any]] = doc["messages"] if isinstance(doc, dict) else doc
    return messages


def folder_text(d: DaemonProcess, sid: str, fid: str) -> str:
    return "\n".join(str(m.get("content")) for m in folder_messages(d, sid, fid))


def stats_records(d: DaemonProcess, sid: str) -> list[dict[str, Any]]:
    """The session's telemetry records (stats.jsonl), oldest first."""
    lines = (session_dir(d, sid) / "stats.jsonl").read_bytes().splitlines()
    return [orjson.loads(line) for line in lines]


def judge_topics(
    d: DaemonProcess,
    c: Client,
    sid: str,
    folders: list[str],
    topics: Mapping[str, tuple[str, dict[str, Any]]],
) -> dict[str, str]:
    """Judge every folder in one memory_judge call (β 2): a folder whose text holds a
    topic's line gets that topic's keywords, labels and α (the first topic that matches),
    any other a config file's (α 0.3). Every topic must be found; topic -> folder."""
    found: dict[str, str] = {}
    updates = []
    for i, fid in enumerate(folders):
        text = folder_text(d, sid, fid)
        update: dict[str, Any] = {"keywords": ["配置文件", f"问题{i}", "读取文件"], "alpha": 0.3}
        for topic, (line, judged) in topics.items():
            if line in text:
                found[topic] = fid
                update = judged
                break
        updates.append({"id": fid, **update, "beta": 2, "reason": "测试"})
    answer = c.tool(sid, "memory_judge", {"updates": updates})
    assert answer["isError"] is False, answer
    assert set(found) == set(topics), found
    return found


def file_turn(s: Surface, i: int, question: str, size: int = 300) -> None:
    """Turn `i` about a config file: `question`, a read_file tool call and an answer,
    each padded to about `size` characters."""
    s.user(f"第{i}个问题：{question}" + "内容" * (size // 2))
    s.assistant("我来读取文件。", [(f"call-{i}", "read_file", '{"path":"a.txt"}')])
    s.tool(f"call-{i}", f"file {i}: " + "x" * size)
    s.assistant(f"第{i}个回答：配置没问题。" + "好的" * (size // 2))


def gateway_conversation(pairs: int) -> Surface:
    """The gateway exchange, then `pairs` filler turn pairs that push it out."""
    s = Surface()
    s.system()
    s.user(GATEWAY[0])
    s.assistant(GATEWAY[1])
    for i in range(pairs):
        s.turn_pair(i, 300)
    return s


class Client:
    """``tool_turn`` / ``message_turn``: the turn tool calls and user messages carry
    (None: user messages carry none, as a host that does not count turns)."""

    def __init__(
        self,
        d: DaemonProcess,
        *,
        caps: Mapping[str, bool] = FULL_CAPS,
        tool_turn: int = 1,
        message_turn: int | None = None,
    ) -> None:
        self.d = d
        self.sock = LineSocket(d.socket_path, timeout=60)
        self.n = 0
        self.tool_turn = tool_turn
        self.message_turn = message_turn
        self.configured = False
        self.init = self.call("initialize", {"protocolVersion": 1, "capabilities": dict(caps)})

    def call(self, method: str, params: Any) -> Any:
        self.n += 1
        answer = self.sock.call(self.n, method, params)
        assert "result" in answer, answer
        return answer["result"]

    def tool(self, sid: str, name: str, arguments: Any, turn: int | None = None) -> Any:
        params = {
            "session": {"id": sid},
            "turn": self.tool_turn if turn is None else turn,
            "callId": f"c{self.n}",
        }
        return self.call("tools/call", {**params, "name": name, "arguments": arguments})

    def recall(self, sid: str, **arguments: Any) -> Any:
        return self.tool(sid, "memory_recall", arguments)

    def ask(self, sid: str, text: str, kind: str = "user") -> Any:
        """A user message (`agent/inbox/inserted`): the automatic recall's answer."""
        message = {
            "id": f"u{self.n}",
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": kind},
        }
        params: dict[str, Any] = {"session": {"id": sid}, "message": message}
        if self.message_turn is not None:
            params["turn"] = self.message_turn
        return self.call("agent/inbox/inserted", params)

    def archive(self, s: Surface, sid: str) -> dict[str, Any]:
        """Pre-step `s` at the archiving floor and commit what it proposes (it must
        propose something); the compaction."""
        comp: dict[str, Any] | None = self.call("agent/pre-step", floored_params(s, sid))[
            "compaction"
        ]
        assert comp is not None
        assert self.call("archive/commit", {"session": {"id": sid}, "token": comp["token"]})["ok"]
        return comp

    def configure(self, config: dict[str, Any]) -> None:
        """Write the user config and reload it (it must load). Leaving the `with` block
        puts the defaults back, for the next test on the same daemon."""
        self.configured = True
        (self.d.config_dir / "config.json").write_bytes(orjson.dumps(config))
        reloaded = self.call("config/reload", {})
        assert reloaded["ok"], reloaded

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            if self.configured:
                self.configure({})
        finally:
            self.close()
