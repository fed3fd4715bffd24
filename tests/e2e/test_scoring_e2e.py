"""Scoring end to end through the socket: task block, memory_judge, fallback, rules."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine import texts
from engine.scoring.budget import estimate_tokens
from engine.scoring.rules import rules_text
from engine.scoring.task_block import rubric_lines
from engine.store import SessionPaths, open_session, read_jsonl
from engine.store.indexfile import read_index, read_index_log, replay_index_log
from tests.e2e.harness import DaemonProcess, LineSocket, running_daemon, short_tmpdir
from tests.engine.scoring_fixtures import assistant, tool_result, user, write_pending

HOUR = 3_600_000
KW = ["星港项目", "接口网关", "端口"]
_ID = re.compile(r"^\d+\. id=(mem-\S+) ", re.M)


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProcess]:
    with running_daemon() as d:
        yield d


class Client:
    """One connection; request ids count up."""

    def __init__(self, d: DaemonProcess) -> None:
        self.sock = LineSocket(d.socket_path, timeout=60)
        self.n = 0

    def call(self, method: str, params: Any) -> Any:
        self.n += 1
        answer = self.sock.call(self.n, method, params)
        assert "error" not in answer, answer
        return answer["result"]

    def sections(self, session: str) -> dict[str, str]:
        result = self.call("prompt/sections", {"session": {"id": session}})
        return {s["name"]: s["text"] for s in result["sections"]}

    def tasks(self, session: str) -> str:
        return self.sections(session)["dsh-rofm:memory-tasks"]

    def judge(self, session: str, updates: Sequence[Mapping[str, Any]] | Any) -> Any:
        return self.call(
            "tools/call",
            {
                "session": {"id": session},
                "turn": 1,
                "callId": f"c{self.n}",
                "name": "memory_judge",
                "arguments": {"updates": updates},
            },
        )

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def client(daemon: DaemonProcess) -> Iterator[Client]:
    c = Client(daemon)
    yield c
    c.close()


def now_ms() -> int:
    return int(time.time() * 1000)


def store_dir(d: DaemonProcess, session: str) -> Path:
    return d.memory_root / "sessions" / session


def seed(
    d: DaemonProcess,
    session: str,
    folders: Sequence[tuple[str, Sequence[Mapping[str, Any]]]],
    **kw: Any,
) -> list[str]:
    store = open_session(d.memory_root, session)
    return write_pending(store, folders, **kw)


def seed_review(d: DaemonProcess, session: str, title: str, text: str, start: int) -> str:
    store = open_session(d.memory_root, session)
    [fid] = write_pending(store, [(title, [user(text)])], start_ms=start, txn="arc-review")
    store.update_metas(
        {
            fid: {
                "scored": True,
                "rescorePending": True,
                "alpha": 0.75,
                "beta": 2.0,
                "keywords": ["星港项目", "接口网关 8080"],
                "reason": "用户确认的端口",
                "alphaSource": "llm",
                "betaSource": "llm",
                "keywordsSource": "llm",
            }
        }
    )
    return fid


def metas(d: DaemonProcess, session: str) -> dict[str, dict[str, Any]]:
    out = {}
    for meta in store_dir(d, session).glob("mem-*/meta.json"):
        doc = orjson.loads(meta.read_bytes())
        out[doc["id"]] = doc
    return out


def index_rows(d: DaemonProcess, session: str) -> dict[str, dict[str, Any]]:
    """The index rows on disk as a load sees them: index.json, then the rows that
    memory_judge logged since (index.log.jsonl), read without writing anything."""
    paths = SessionPaths(root=d.memory_root, dir=store_dir(d, session))
    raw, _, status = read_index(paths)
    assert status == "ok"
    rows = {row["id"]: row for row in raw}
    assert not replay_index_log(rows, read_index_log(paths)).conflicts
    return rows


def test_initialize_lists_memory_judge(client: Client) -> None:
    result = client.call(
        "initialize",
        {"protocolVersion": 1, "capabilities": {"tools": True, "systemPrompt": True}},
    )
    [tool] = [t for t in result["tools"] if t["name"] == "memory_judge"]
    assert tool["description"].startswith(texts.JUDGE_DESCRIPTION)
    assert tool["parameters"]["required"] == ["updates"]


def test_task_block_byte_for_byte(daemon: DaemonProcess, client: Client) -> None:
    session = "session-block"
    start = now_ms() - 3 * HOUR
    [p1, p2] = seed(
        daemon,
        session,
        [
            ("日本旅行计划", [user("下周去东京"), assistant("好的")]),
            ("查询", [tool_result('{"error": "timeout"}')]),
        ],
        start_ms=start,
        step_ms=HOUR // 2,
    )
    r1 = seed_review(daemon, session, "接口网关", "网关端口定为 8080", start - HOUR)
    expected = "\n".join(
        [
            texts.TASKS_HEADING,
            "",
            texts.TASKS_INTRO,
            texts.TASKS_MUST_DO,
            texts.TASKS_PENDING_HEADING,
            f"1. id={p2} · 类型=tool · 已等待 2 小时 · 标题=查询",
            "   原文：",
            "   （无真实对话内容：纯工具输出 / 协议消息，按过程日志评分）",
            f"2. id={p1} · 类型=user · 已等待 3 小时 · 标题=日本旅行计划",
            "   原文：",
            "   user: 下周去东京",
            "   assistant: 好的",
            texts.TASKS_REVIEW_HEADING,
            f"1. id={r1} · 标题=接口网关 · 现有 α=0.75 β=+2.0 · 关键词=星港项目、接口网关 8080",
            "   上次评分理由：用户确认的端口",
            "   原文：",
            "   user: 网关端口定为 8080",
            *rubric_lines(channel=False),
        ]
    )
    assert client.tasks(session) == expected


def test_judge_scores_and_clears_the_block(daemon: DaemonProcess, client: Client) -> None:
    session = "session-judge"
    ids = seed(
        daemon, session, [(f"对话{i}", [user(f"第{i}段：项目参数是 {i}")]) for i in range(3)]
    )
    assert all(f"id={fid}" in client.tasks(session) for fid in ids)
    result = client.judge(
        session,
        [
            {
                "id": ids[0],
                "alpha": 0.5,
                "beta": 1,
                "keywords": KW,
                "events": ["星港项目"],
                "reason": "参数",
            },
            {"id": ids[1], "alpha": 0.3, "beta": 0, "keywords": ["参数", "第一段", "项目"]},
        ],
    )
    assert result["isError"] is False
    assert result["value"]["updated"] == ids[:2]
    assert result["content"][0]["text"].startswith(
        f"已更新 2 条（{ids[0]}、{ids[1]}）；保持 0 条；拒绝 0 条。"
    )
    assert result["startsRequestSeries"] is True
    tasks = next(s["text"] for s in result["sections"] if s["name"] == "dsh-rofm:memory-tasks")
    assert f"id={ids[0]}" not in tasks and f"id={ids[1]}" not in tasks and f"id={ids[2]}" in tasks
    assert "星港项目（1）" in tasks  # the label list offers the new event
    on_disk = metas(daemon, session)[ids[0]]
    assert on_disk["scored"] is True and on_disk["alpha"] == 0.5 and on_disk["keywords"] == KW
    assert on_disk["alphaSource"] == "llm" and on_disk["events"] == ["星港项目"]
    row = index_rows(daemon, session)[ids[0]]
    assert row["scored"] is True and row["event"] == "星港项目"
    judge = [
        r for r in read_jsonl(store_dir(daemon, session) / "stats.jsonl") if r["type"] == "judge"
    ]
    assert judge[-1]["updated"] == 2 and "elapsedMs" in judge[-1]
    # The next answer no longer asks for a new series.
    assert (
        client.call("prompt/sections", {"session": {"id": session}})["startsRequestSeries"] is False
    )
    client.judge(session, [{"id": ids[2], "alpha": 0.2, "beta": 0, "keywords": KW}])
    assert client.tasks(session) == ""


def test_rejections_through_the_socket(daemon: DaemonProcess, client: Client) -> None:
    [mine] = seed(daemon, "session-rej-a", [("甲", [user("甲的内容")])])
    [other] = seed(daemon, "session-rej-b", [("乙", [user("乙的内容")])], start_ms=now_ms())
    assert other != mine
    result = client.judge(
        "session-rej-a",
        [
            {"id": other, "alpha": 0.5, "beta": 0, "keywords": KW},
            {"id": "mem-20200101T000000Z-0001", "keep": True},
            {"id": mine, "alpha": 0.5, "keywords": KW},
            {"id": mine, "alpha": 0.5, "beta": 0, "keywords": KW},
            {"id": "", "alpha": 1},
        ],
    )
    assert result["isError"] is False
    assert result["value"]["rejected"] == [
        {"id": other, "reason": "unknown folder id"},
        {"id": "mem-20200101T000000Z-0001", "reason": "unknown folder id"},
        {"id": mine, "reason": "new folder needs alpha + beta + keywords (missing beta)"},
        {"id": mine, "reason": "duplicate id in batch"},
        {"id": "?", "reason": "missing id"},
    ]
    assert metas(daemon, "session-rej-b")[other]["scored"] is False
    assert result["startsRequestSeries"] is False
    too_many = client.judge("session-rej-a", [{"id": mine}] * 101)
    assert too_many["isError"] is True
    assert too_many["content"][0]["text"] == texts.JUDGE_ERROR_TOO_MANY.format(max=100, n=101)
    as_string = client.call(
        "tools/call",
        {
            "session": {"id": "session-rej-a"},
            "name": "memory_judge",
            "arguments": orjson.dumps(
                {"updates": [{"id": mine, "alpha": 0.4, "beta": 0, "keywords": KW}]}
            ).decode(),
        },
    )
    assert as_string["value"]["updated"] == [mine]


def test_event_merge_approval_across_and_within_batches(
    daemon: DaemonProcess, client: Client
) -> None:
    session = "session-events"
    ids = seed(daemon, session, [(f"旅行{i}", [user(f"东京第{i}天")]) for i in range(4)])
    base = {"beta": 1, "keywords": ["东京", "旅行", "行程"]}
    first = client.judge(session, [{"id": ids[0], "alpha": 0.4, "events": ["日本旅行"], **base}])
    assert first["value"]["eventStats"]["assigned"] == 1
    # Within one batch: the label written first is visible to the next item.
    second = client.judge(
        session,
        [
            {"id": ids[1], "alpha": 0.41, "events": ["日本 旅行"], **base},
            {"id": ids[2], "alpha": 0.42, "event": "日本旅行", **base},
        ],
    )
    value = second["value"]
    assert value["eventStats"] == {"assigned": 2, "merged": 0, "cleared": 0, "candidates": 1}
    assert value["eventMergeCandidates"] == [
        {"id": ids[1], "submitted": "日本 旅行", "existing": "日本旅行", "score": 0.8}
    ]
    text = second["content"][0]["text"]
    assert (
        "event-candidate: 事件「日本 旅行」与已有事件「日本旅行」高度相似（0.80），尚未归并" in text
    )
    assert metas(daemon, session)[ids[1]]["events"] == ["日本 旅行"]
    # Approval in a later batch: re-submit the existing label.
    third = client.judge(session, [{"id": ids[1], "event": "日本旅行"}])
    assert third["value"]["eventStats"]["merged"] == 1
    assert metas(daemon, session)[ids[1]]["event"] == "日本旅行"
    client.judge(session, [{"id": ids[3], "alpha": 0.4, "events": ["东京"], **base}])
    rows = index_rows(daemon, session)
    assert sorted(r.get("event", "") for r in rows.values()) == [
        "东京",
        "日本旅行",
        "日本旅行",
        "日本旅行",
    ]


def test_category_keyword_warnings(daemon: DaemonProcess, client: Client) -> None:
    session = "session-category"
    ids = seed(
        daemon,
        session,
        [
            ("口味", [user("我喜欢吃辣，以后都点川菜")]),
            ("规矩", [user("我们约定：每周一早上开例会")]),
            ("闲聊", [user("今天天气不错")]),
        ],
    )
    sixteen = [f"词{i}" for i in range(16)]
    result = client.judge(
        session,
        [
            {
                "id": ids[0],
                "alpha": 0.9,
                "beta": 3,
                "keywords": ["川菜", "辣", "点菜"],
                "events": ["饮食"],
            },
            {"id": ids[1], "alpha": 0.7, "beta": 3, "keywords": sixteen, "events": ["例会"]},
            {
                "id": ids[2],
                "alpha": 0.7,
                "beta": 0,
                "keywords": ["天气", "闲聊", "今天"],
                "events": ["空"],
            },
        ],
    )
    warnings = result["value"]["warnings"]
    assert any(w.startswith(f"category-keyword-added: {ids[0]}") for w in warnings)
    assert any(w.startswith(f"category-keyword-replaced: {ids[1]}") for w in warnings)
    assert any(w.startswith(f"category-keyword-missing: {ids[2]}") for w in warnings)
    on_disk = metas(daemon, session)
    assert on_disk[ids[0]]["keywords"] == ["川菜", "辣", "点菜", "喜好"]
    assert on_disk[ids[1]]["keywords"] == [*sixteen[:15], "约定"]
    assert on_disk[ids[2]]["keywords"] == ["天气", "闲聊", "今天"]
    assert (
        result["content"][0]["text"]
        .splitlines()[-1]
        .startswith("注意：α=0.9 超过 importance.warnAbove=0.8")
    )


def test_rules_section_verbatim(client: Client) -> None:
    assert client.sections("session-rules")["dsh-rofm:memory-rules"] == rules_text(
        compute_dates=True
    )


def test_scripted_model_drains_two_hundred_pending(daemon: DaemonProcess, client: Client) -> None:
    session = "session-scripted"
    seed(
        daemon,
        session,
        [(f"话题{i}", [user(f"第{i}个话题：参数 {i} 定为 {i * 7}")]) for i in range(200)],
    )
    rounds = 0
    block = client.tasks(session)
    while block:
        rounds += 1
        assert rounds <= 5, "the scripted model did not drain the backlog"
        listed = _ID.findall(block.split(texts.TASKS_RUBRIC_HEADING)[0])
        assert listed
        updates = [
            {
                "id": fid,
                "alpha": round(0.2 + (i % 5) / 10, 2),
                "beta": i % 3,
                "keywords": [f"话题{fid[-9:]}", "参数", f"编号{i}"],
                "events": ["脚本评分"],
                "reason": "scripted",
            }
            for i, fid in enumerate(listed)
        ]
        result = client.judge(session, updates)
        assert result["value"]["rejected"] == []
        block = next(s["text"] for s in result["sections"] if s["name"] == "dsh-rofm:memory-tasks")
    assert rounds == 2
    rows = index_rows(daemon, session)
    assert len(rows) == 200 and all(r["scored"] for r in rows.values())
    assert client.tasks(session) == ""


def test_small_window_budget_and_hundred_plus_hundred() -> None:
    base = short_tmpdir()
    config = {"compress": {"contextWindowTokens": 16000}}
    with running_daemon(config=config, base=base) as d:
        c = Client(d)
        try:
            long = "这是一段很长的对话内容，包含很多细节。" * 200
            seed(
                d,
                "session-small",
                [(f"长对话{i}", [user(long), assistant(long)]) for i in range(6)],
            )
            block = c.tasks("session-small")
            assert texts.TASKS_TRUNCATED in block
            assert estimate_tokens(block) <= 2400
            assert block.startswith(texts.TASKS_HEADING)
            assert block.endswith(texts.TASKS_RUBRIC_KEEP)
            many = "session-many"
            seed(d, many, [(f"p{i}", [user(f"待评分 {i}")]) for i in range(105)])
            store = open_session(d.memory_root, many)
            ids = [e.id for e in store.index][:101]
            store.update_metas(
                {fid: {"scored": True, "rescorePending": True, "alpha": 0.5} for fid in ids}
            )
            text = c.tasks(many)
            # 4 pending are left after the 101 re-reviews; the window is small, so the
            # re-review list is cut by the budget and says so.
            assert text.count(texts.TASKS_PENDING_HEADING) == 1
            assert "\n4. id=" in text.split(texts.TASKS_REVIEW_HEADING)[0]
        finally:
            c.close()


def test_hundred_plus_hundred_at_a_large_window() -> None:
    config = {"compress": {"contextWindowTokens": 1_000_000}, "scoring": {"taskMaxTokens": 100_000}}
    with running_daemon(config=config) as d:
        c = Client(d)
        try:
            session = "session-hundreds"
            seed(d, session, [(f"p{i}", [user(f"待评分 {i}")]) for i in range(230)])
            store = open_session(d.memory_root, session)
            ids = [e.id for e in store.index][:110]
            store.update_metas(
                {fid: {"scored": True, "rescorePending": True, "alpha": 0.5} for fid in ids}
            )
            text = c.tasks(session)
            pending, review = text.split(texts.TASKS_REVIEW_HEADING)
            assert len(_ID.findall(pending)) == 100 and "\n100. id=" in pending
            assert len(_ID.findall(review.split(texts.TASKS_RUBRIC_HEADING)[0])) == 100
        finally:
            c.close()


def test_heuristic_fallback_under_pressure() -> None:
    config = {"scoring": {"maxPending": 3}}
    with running_daemon(config=config) as d:
        c = Client(d)
        try:
            session = "session-fallback"
            ids = seed(
                d,
                session,
                [
                    (f"f{i}", [user(f"我决定以后都用 Postgres 16，端口 {5432 + i}")])
                    for i in range(5)
                ],
            )
            block = c.tasks(session)
            listed = _ID.findall(block)
            assert sorted(listed) == sorted(ids[2:])  # the two oldest were scored heuristically
            on_disk = metas(d, session)
            for fid in ids[:2]:
                meta = on_disk[fid]
                assert meta["scored"] is True and meta["scoreMode"] == "heuristic"
                assert meta["beta"] == 0 and meta["alphaSource"] == "heuristic"
                assert meta["alpha"] >= 0.01 and meta["keywords"]
            stats = list(read_jsonl(store_dir(d, session) / "stats.jsonl"))
            assert stats[-1]["type"] == "heuristic-score" and stats[-1]["reason"] == "maxPending"
        finally:
            c.close()


def test_fallback_always_and_rules_off() -> None:
    config = {"scoring": {"fallback": "always"}, "rules": {"enabled": False}}
    with running_daemon(config=config) as d:
        c = Client(d)
        try:
            ids = seed(d, "session-always", [("x", [user("随便聊聊")]), ("y", [tool_result("{}")])])
            sections = c.sections("session-always")
            assert sections["dsh-rofm:memory-tasks"] == ""
            assert sections["dsh-rofm:memory-rules"] == ""
            on_disk = metas(d, "session-always")
            assert all(on_disk[fid]["scoreMode"] == "heuristic" for fid in ids)
        finally:
            c.close()
