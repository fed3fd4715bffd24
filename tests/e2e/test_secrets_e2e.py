"""Secrets never come back (issue 19), through a real daemon on a real socket.

A conversation with seeded secrets of every kind the detector knows (English and Chinese,
chat, config pastes, code blocks, tool output, tool-call arguments) and ordinary text of
similar shape is archived, scored and recalled. Then no secret byte is anywhere under the
memory root, nor in the task block, the recall block or a memory_recall answer, while the
ordinary text is stored exactly as written and the text around each secret is recalled.
``drop`` mode; a secret-looking query is not searched.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine import texts
from tests.archive_fixtures import Surface, floored_params
from tests.e2e.client import Client as SharedClient
from tests.e2e.harness import DaemonProcess, running_daemon
from tests.secrets_corpus import ORDINARY, PLACEHOLDER_LINE, PLANTED, SECRET_VALUES, Planted


class Client(SharedClient):
    """Tool calls at turn 90, user messages at turn 91 (after the archived ones)."""

    def __init__(self, d: DaemonProcess) -> None:
        super().__init__(d, tool_turn=90, message_turn=91)


def _plant(s: Surface, p: Planted, i: int) -> None:
    if p.role == "user":
        s.user(p.text)
        s.assistant(f"好的，第{i}条我记下了。")
    elif p.role == "assistant":
        s.user(f"第{i}条配置怎么写？")
        s.assistant(p.text)
    elif p.role == "tool":
        s.user(f"帮我读第{i}个配置文件")
        s.assistant("我来读取文件。", [(f"sec-{i}", "read_file", '{"path":"conf.txt"}')])
        s.tool(f"sec-{i}", p.text)
        s.assistant(f"第{i}个文件读好了。")
    else:  # the secret in a tool call's JSON arguments
        s.user(f"把第{i}个密钥文件写进去")
        s.assistant("写入文件。", [(f"sec-{i}", "write_file", p.text)])
        s.tool(f"sec-{i}", "ok")
        s.assistant("写好了。")


def conversation() -> tuple[Surface, int]:
    """Planted secrets and ordinary text first (archived), then filler; and the seq of
    the last node that must be archived."""
    s = Surface()
    s.system()
    for i, p in enumerate(PLANTED):
        _plant(s, p, i)
    for text in ORDINARY:
        s.user(text)
        s.assistant("明白。")
    last = s.seq - 1
    for i in range(40):
        s.turn_pair(i, 400)
    return s, last


def archive(c: Client, sid: str) -> dict[str, Any]:
    s, last = conversation()
    answer = c.call("agent/pre-step", floored_params(s, sid, percent=80))
    comp = answer["compaction"]
    assert comp is not None, answer["warnings"]
    assert comp["replace"]["endSeq"] >= last, "the seeded span must be archived"
    assert c.call("archive/commit", {"session": {"id": sid}, "token": comp["token"]})["ok"]
    result: dict[str, Any] = answer
    return result


def forms(value: str) -> set[bytes]:
    """How a value can appear in a file: as is, JSON-escaped, line by line (a PEM body)."""
    out = {value.encode(), orjson.dumps(value)[1:-1]}
    out.update(line.encode() for line in value.split("\n") if len(line) >= 12)
    return out


def leaks(root: Path, values: tuple[str, ...]) -> list[tuple[str, str]]:
    """Every (file, value) where a value's bytes occur under ``root``."""
    found = []
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        for value in values:
            if any(f in data for f in forms(value)):
                found.append((str(path.relative_to(root)), value[:12]))
    return found


def stored_contents(session: Path) -> str:
    out: list[str] = []
    for ctx in sorted(session.glob("mem-*/context.json")):
        doc = orjson.loads(ctx.read_bytes())
        messages = doc["messages"] if isinstance(doc, dict) else doc
        out.extend(m["content"] for m in messages)
    return "\n".join(out)


def judge_all(c: Client, session: Path, sid: str) -> None:
    updates = [
        {"id": meta.parent.name, "alpha": 0.7, "beta": 5, "keywords": ["配置", "密钥管理", "部署"]}
        for meta in sorted(session.glob("mem-*/meta.json"))
    ]
    judged = c.tool(sid, "memory_judge", {"updates": updates})
    assert judged["isError"] is False, judged


@pytest.fixture(scope="module")
def redacting() -> Iterator[tuple[DaemonProcess, Client, dict[str, Any]]]:
    with running_daemon() as d:
        c = Client(d)
        answer = archive(c, "secrets-redact")
        yield d, c, answer
        c.sock.close()


def test_no_secret_byte_under_the_memory_root_and_ordinary_text_intact(
    redacting: tuple[DaemonProcess, Client, dict[str, Any]],
) -> None:
    d, c, answer = redacting
    sid = "secrets-redact"
    session = d.memory_root / "sessions" / sid
    # the task block of the pending folders shows redacted text only
    tasks = next(x["text"] for x in answer["sections"] if x["name"] == "dsh-rofm:memory-tasks")
    assert "[secret:" in tasks
    assert not [v for v in SECRET_VALUES if any(f.decode() in tasks for f in forms(v))]
    contents = stored_contents(session)
    for kind in {p.kind for p in PLANTED}:
        assert f"[secret:{kind}" in contents, kind
    for text in ORDINARY:
        assert text in contents, text[:40]
    # the words around each secret are kept: the context is what memory is for
    assert "region us-east-1" in contents and "别外传" in contents and "帮我记一下" in contents
    judge_all(c, session, sid)
    # automatic recall on a message that itself carries a secret: the block, its clause
    # line and the recall state never see the value
    block = c.ask(sid, f"部署的密钥管理怎么做？顺便 password={PLANTED[0].value}")
    recall = block["sections"][0]["text"]
    assert block["recalled"] and "[secret:" in recall
    assert not [v for v in SECRET_VALUES if any(f.decode() in recall for f in forms(v))]
    for keywords in ("密钥管理", "连接串 postgres", "token"):
        res = c.tool(sid, "memory_recall", {"keywords": keywords, "limit": 20, "offset": 0})
        text = res["content"][0]["text"]
        assert not [v for v in SECRET_VALUES if any(f.decode() in text for f in forms(v))]
    # the whole tree, every file: folders, index, stats, recall state, snapshots
    assert leaks(d.memory_root, SECRET_VALUES) == []


def test_a_secret_looking_query_is_not_searched(
    redacting: tuple[DaemonProcess, Client, dict[str, Any]],
) -> None:
    d, c, _ = redacting
    sid = "secrets-redact"
    stats = d.memory_root / "sessions" / sid / "stats.jsonl"
    before = stats.read_bytes()
    for keywords in (PLANTED[2].value, f"DB_PASSWORD={PLANTED[0].value}"):
        res = c.tool(sid, "memory_recall", {"keywords": keywords})
        assert res["isError"] is True
        assert res["content"][0]["text"] == texts.RECALL_TOOL_SECRET_QUERY
    assert stats.read_bytes() == before  # nothing searched, nothing recorded
    # a message that is nothing but a secret runs no recall round at all
    only = c.ask(sid, PLANTED[2].value)
    assert only["recalled"] == []


def test_drop_mode_keeps_neither_value_nor_placeholder(
    redacting: tuple[DaemonProcess, Client, dict[str, Any]],
) -> None:
    # (off archives verbatim: tests/engine/test_secrets_archive.py) The same daemon,
    # switched by a hot reload: the mode applies to the next archive.
    d, c, _ = redacting
    (d.config_dir / "config.json").write_bytes(orjson.dumps({"secrets": {"mode": "drop"}}))
    assert c.call("config/reload", {})["ok"] is True
    try:
        archive(c, "secrets-drop")
    finally:
        (d.config_dir / "config.json").write_bytes(b"{}")
        c.call("config/reload", {})
    session = d.memory_root / "sessions" / "secrets-drop"
    # (one ordinary line holds placeholders of its own: it is kept as written)
    contents = stored_contents(session).replace(PLACEHOLDER_LINE, "")
    assert leaks(session, SECRET_VALUES) == []
    assert "[secret:" not in contents
    assert texts.SECRET_DROPPED_NOTE.format(n=1) in contents
    assert "region us-east-1" in contents
