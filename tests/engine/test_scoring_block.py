"""The task block: layout byte for byte, budget, ordering, eras, readable text."""

from __future__ import annotations

import json

from engine import texts
from engine.scoring.budget import estimate_tokens, safe_slice, slice_to_tokens, to_well_formed
from engine.scoring.eras import LEGACY_BOUNDARY_MS, SessionEraFacts, fake_window, folder_era, listed
from engine.scoring.readable import readable_text
from engine.scoring.task_block import (
    MIN_ITEM_TOKENS,
    PendingItem,
    ReviewItem,
    TaskBlockInput,
    format_age,
    format_alpha,
    format_beta,
    order_pending,
    render_task_block,
    rubric_lines,
    task_budget,
)
from tests.engine.scoring_fixtures import assistant, tool_result, user

NOW = 1_795_000_000_000
RUBRIC = "\n".join(rubric_lines(channel=False))

EXPECTED_HEAD = """## 记忆评分任务（dsh-rofm）

本插件需要你结合**当前语境**（而不是只看片段）判断记忆的 α 与 β，并调用 memory_judge 提交（一次可提交多条；keep=true 表示保持原值）。
**这是本轮必须完成的工作：请直接调用 memory_judge 提交下面列出的条目，不要询问用户、不要等待用户确认；建议一次提交本轮列出的全部条目，提交后继续当前任务。**
"""

EXPECTED_ITEMS = """### 待评分的新归档记忆（需要 alpha / beta / keywords）
1. id=mem-20261118T110640Z-0001 · 类型=user · 已等待 2 小时 · 标题=日本旅行计划
   原文：
   user: 下周去东京
   assistant: 好的
2. id=mem-20261118T110740Z-0001 · 类型=tool · 已等待 3 天 · 标题=查询
   原文：
   （无真实对话内容：纯工具输出 / 协议消息，按过程日志评分）
### 已有事件标签（同一事件请复用，不要另造近义标签）
日本旅行（3）、登录重构项目（2）
### 待复核的已召回记忆（只需判断 alpha / beta 是否要修改，不新建记忆）
1. id=mem-20261101T000000Z-0001 · 标题=接口网关 · 现有 α=0.75 β=-2.5 · 关键词=星港项目、接口网关 8080
   上次评分理由：用户确认的端口
   原文：
   user: 网关端口定为 8080
"""


def _pending(i: int, text: str = "user: 你好", since: int = NOW) -> PendingItem:
    return PendingItem(f"mem-20261118T11{i:04d}Z-0001", f"标题{i}", "user", since, text)


def _review(i: int, text: str = "user: 旧的") -> ReviewItem:
    return ReviewItem(f"mem-20261101T00{i:04d}Z-0001", f"复核{i}", 0.5, 0, ["甲", "乙"], "", text)


def test_block_byte_for_byte() -> None:
    inp = TaskBlockInput(
        pending=[
            PendingItem(
                "mem-20261118T110640Z-0001",
                "日本旅行计划",
                "user",
                NOW - 2 * 3_600_000 - 5,
                "user: 下周去东京\nassistant: 好的",
            ),
            PendingItem("mem-20261118T110740Z-0001", "查询", "tool", NOW - 3 * 86_400_000, ""),
        ],
        review=[
            ReviewItem(
                "mem-20261101T000000Z-0001",
                "接口网关",
                0.75,
                -2.5,
                ["星港项目", "接口网关 8080"],
                "用户确认的端口",
                "user: 网关端口定为 8080",
            )
        ],
        labels=[("日本旅行", 3), ("登录重构项目", 2)],
        has_recall_block=False,
        now_ms=NOW,
        budget_tokens=12000,
    )
    block = render_task_block(inp)
    assert block.text == EXPECTED_HEAD + EXPECTED_ITEMS + RUBRIC
    assert block.pending_ids == ("mem-20261118T110640Z-0001", "mem-20261118T110740Z-0001")
    assert block.truncated_ids == ()


def test_empty_lists() -> None:
    base = TaskBlockInput([], [], [], has_recall_block=False, now_ms=NOW, budget_tokens=100)
    assert render_task_block(base).text == ""
    with_recall = TaskBlockInput([], [], [], has_recall_block=True, now_ms=NOW, budget_tokens=100)
    assert render_task_block(with_recall).text == texts.TASKS_EMPTY_WITH_RECALL


def test_labels_only_with_pending_and_channel_line() -> None:
    inp = TaskBlockInput(
        [], [_review(1)], [("日本旅行", 3)], has_recall_block=False, now_ms=NOW, budget_tokens=9000
    )
    text = render_task_block(inp).text
    assert texts.TASKS_LABELS_HEADING not in text
    assert texts.TASKS_PENDING_HEADING not in text
    assert texts.TASKS_RUBRIC_CHANNEL not in text
    chan = TaskBlockInput(
        [_pending(1)], [], [], has_recall_block=False, now_ms=NOW, budget_tokens=9000, channel=True
    )
    assert texts.TASKS_RUBRIC_CHANNEL in render_task_block(chan).text


def test_hundred_plus_hundred_listed_and_numbered() -> None:
    pending = [_pending(i) for i in range(150)]
    review = [_review(i) for i in range(120)]
    inp = TaskBlockInput(
        pending, review, [], has_recall_block=False, now_ms=NOW, budget_tokens=1_000_000
    )
    block = render_task_block(inp)
    assert len(block.pending_ids) == 100 and len(block.review_ids) == 100
    assert block.text.count("\n100. id=") == 2
    assert "\n101. id=" not in block.text
    assert texts.TASKS_OMITTED.format(n=50) not in block.text


def test_budget_truncates_and_marks() -> None:
    long = "user: " + "这是一段很长的对话内容。" * 400
    pending = [_pending(i, long) for i in range(3)]
    review = [_review(i, long) for i in range(2)]
    budget = task_budget(16000, max_tokens=12000, percent=15)
    assert budget == 2400
    block = render_task_block(
        TaskBlockInput(
            pending, review, [], has_recall_block=False, now_ms=NOW, budget_tokens=budget
        )
    )
    assert block.text.count(texts.TASKS_TRUNCATED) == len(block.truncated_ids) > 0
    assert block.tokens <= budget
    assert set(block.truncated_ids) <= set(block.pending_ids) | set(block.review_ids)
    assert block.review_ids  # the review list keeps its share


def test_budget_omits_items_below_the_minimum_share() -> None:
    long = "user: " + "内容" * 500
    pending = [_pending(i, long) for i in range(40)]
    budget = 2000
    block = render_task_block(
        TaskBlockInput(pending, [], [], has_recall_block=False, now_ms=NOW, budget_tokens=budget)
    )
    shown = len(block.pending_ids)
    assert 1 <= shown < 40
    assert block.omitted_pending == 40 - shown
    assert texts.TASKS_OMITTED.format(n=40 - shown) in block.text
    assert block.tokens <= budget
    # Each shown text got at least the minimum share.
    for item_text in block.text.split(texts.TASKS_TEXT_LABEL)[1:]:
        body = item_text.split("\n评分口径")[0].split("\n2. id=")[0]
        assert estimate_tokens(body) >= MIN_ITEM_TOKENS - 5


def test_pending_share_is_sixty_percent() -> None:
    long = "user: " + "字" * 3000
    pending = [_pending(i, long) for i in range(5)]
    review = [_review(i, long) for i in range(5)]
    block = render_task_block(
        TaskBlockInput(pending, review, [], has_recall_block=False, now_ms=NOW, budget_tokens=6000)
    )
    text = block.text
    p_part = text.split(texts.TASKS_REVIEW_HEADING)[0].split(texts.TASKS_PENDING_HEADING)[1]
    r_part = text.split(texts.TASKS_REVIEW_HEADING)[1].split(texts.TASKS_RUBRIC_HEADING)[0]
    fixed = estimate_tokens(text) - estimate_tokens(p_part) - estimate_tokens(r_part)
    items = 6000 - fixed
    assert estimate_tokens(p_part) <= items * 0.6 + 10
    assert estimate_tokens(r_part) > items * 0.3


def test_tiny_budget_still_lists_one_item() -> None:
    block = render_task_block(
        TaskBlockInput(
            [_pending(i, "user: " + "字" * 500) for i in range(3)],
            [],
            [("日本旅行", 3)],
            has_recall_block=False,
            now_ms=NOW,
            budget_tokens=10,
        )
    )
    assert len(block.pending_ids) == 1
    assert texts.TASKS_LABELS_HEADING not in block.text
    assert texts.TASKS_OMITTED.format(n=2) in block.text


def test_order_newest_oldest_mixed() -> None:
    items = [(i, f"id{i}") for i in range(5)]

    def key(x: tuple[int, str]) -> tuple[int, str]:
        return x

    assert [i for i, _ in order_pending(items, "newest", key)] == [4, 3, 2, 1, 0]
    assert [i for i, _ in order_pending(items, "oldest", key)] == [0, 1, 2, 3, 4]
    assert [i for i, _ in order_pending(items, "mixed", key)] == [4, 0, 3, 1, 2]


def test_number_and_age_formats() -> None:
    assert [format_alpha(a) for a in (0.75, 1.0, 0.01, 0.123456, -0.0)] == [
        "0.75",
        "1",
        "0.01",
        "0.1235",
        "0",
    ]
    assert [format_beta(b) for b in (2, -3.54, 0.0, -0.0)] == ["+2.0", "-3.5", "+0.0", "+0.0"]
    assert format_age(30_000) == "不到 1 分钟"
    assert format_age(5 * 60_000) == "5 分钟"
    assert format_age(2 * 3_600_000 + 1) == "2 小时"
    assert format_age(3 * 86_400_000) == "3 天"


def test_task_budget() -> None:
    assert task_budget(131072, max_tokens=12000, percent=15) == 12000
    assert task_budget(8000, max_tokens=12000, percent=15) == 1200
    assert task_budget(None, max_tokens=12000, percent=15) == 12000


def test_surrogate_safe_cuts() -> None:
    text = "ab\ud83d\ude00cd\ud83d"
    assert to_well_formed(text) == "ab😀cd\ufffd"
    assert safe_slice("a😀b", 2) == "a😀"
    assert safe_slice("a\u200db", 2) == "a"
    cut = slice_to_tokens("字" * 50 + "😀" * 50, 60)
    assert cut.encode("utf-8")  # encodable: no lone surrogates
    assert estimate_tokens(cut) <= 60
    block = render_task_block(
        TaskBlockInput(
            [_pending(1, "user: " + "😀" * 3000 + "\ud83d")],
            [],
            [],
            has_recall_block=False,
            now_ms=NOW,
            budget_tokens=2000,
        )
    )
    block.text.encode("utf-8")
    assert texts.TASKS_TRUNCATED in block.text


def test_readable_text_drops_tools_and_renders_qq_payloads() -> None:
    payload = {
        "ok": True,
        "key": "qqb-p-1",
        "messages": [
            {"seq": 5, "messageId": "m1", "sender": "私聊", "text": "明天下午三点开会"},
            {"seq": 6, "messageId": "m2", "sender": "小明", "text": "收到"},
        ],
    }
    messages = [
        user("帮我看看消息"),
        {
            "role": "assistant",
            "content": [
                {"type": "reasoning", "text": "思考"},
                {"type": "tool-call", "id": "c1", "name": "qq_get", "arguments": "{}"},
                {"type": "text", "text": "[tool-call qq_get {}]"},
            ],
        },
        tool_result(json.dumps(payload, ensure_ascii=False)),
        tool_result('{"error": "timeout"}'),
        {"role": "system", "content": "系统提示"},
        {
            "role": "user",
            "content": "[memory] 3 段更早的对话已归档",
            "source": {"kind": "compact-checkpoint"},
        },
        assistant("已读完。"),
    ]
    out = readable_text(messages)
    assert out.text == "user: 帮我看看消息\n私聊: 明天下午三点开会\n小明: 收到\nassistant: 已读完。"
    assert out.kind == "user"
    assert readable_text([tool_result('{"error": "timeout"}')]).kind == "tool"
    snapshot = "本次消息快照：" + json.dumps(
        {"newMessages": [{"sender": "主人", "text": "以后都叫我老王"}]}, ensure_ascii=False
    )
    out2 = readable_text([user(snapshot)])
    assert out2.text == "user: 本次消息快照：\n主人: 以后都叫我老王"
    assert out2.kind == "decision"


def test_era_rules() -> None:
    assert (
        folder_era(created_at=LEGACY_BOUNDARY_MS - 1, pending_era=None, session_synthetic=False)
        == "legacy"
    )
    assert (
        folder_era(created_at=LEGACY_BOUNDARY_MS, pending_era=None, session_synthetic=False)
        == "current"
    )
    assert (
        folder_era(created_at=LEGACY_BOUNDARY_MS, pending_era=None, session_synthetic=True)
        == "synthetic"
    )
    assert folder_era(created_at=0, pending_era="current", session_synthetic=True) == "current"
    assert fake_window([{"type": "compress-applied", "contextWindow": 8000}])
    assert fake_window([{"windowTokens": 400_000, "beforePercent": 900}])
    assert not fake_window([{"contextWindow": 131072, "beforePercent": 70}])
    assert not SessionEraFacts(True, 10, 2).synthetic  # QQ channel with a small window
    assert not SessionEraFacts(False, 359, 0).synthetic  # a long real session
    assert SessionEraFacts(True, 500, 0).synthetic
    assert listed("current", include_legacy=False)
    assert not listed("legacy", include_legacy=False)
    assert listed("synthetic", include_legacy=True)
