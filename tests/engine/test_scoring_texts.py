"""Model-visible scoring texts against the reference, after NFKC (DESIGN.md)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from engine import texts
from engine.scoring.judge import render_output
from engine.scoring.rules import rules_text
from engine.scoring.task_block import rubric_lines
from handlers.tool_judge import DESCRIPTION, PARAMETERS

SPEC = Path("/work/shared/spec/dsh-rofm-reference.txt")

pytestmark = pytest.mark.skipif(not SPEC.exists(), reason="reference text not available")


def nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def squash(text: str) -> str:
    """NFKC without whitespace: the extraction broke long lines with spaces."""
    return re.sub(r"\s+", "", nfkc(text))


@pytest.fixture(scope="module")
def spec() -> str:
    return nfkc(SPEC.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def block_lines(spec: str) -> list[str]:
    start = spec.index("## 记忆评分任务(dsh-rofm)")
    end = spec.index("无法判断或不需要修改时,对相应 id 提交 keep=true。", start)
    return [line.strip() for line in spec[start : end + 40].splitlines()]


@pytest.mark.parametrize(
    "name",
    [
        "TASKS_HEADING",
        "TASKS_INTRO",
        "TASKS_MUST_DO",
        "TASKS_PENDING_HEADING",
        "TASKS_LABELS_HEADING",
        "TASKS_REVIEW_HEADING",
        "TASKS_RUBRIC_HEADING",
        "TASKS_RUBRIC_ALPHA",
        "TASKS_RUBRIC_BETA",
        "TASKS_RUBRIC_CATEGORY",
        "TASKS_RUBRIC_EVENTS",
        "TASKS_RUBRIC_LOCATIONS",
        "TASKS_RUBRIC_TIME_TAGS",
        "TASKS_RUBRIC_TAGS_IN_KEYWORDS",
        "TASKS_RUBRIC_MERGE",
        "TASKS_RUBRIC_FULL_TEXT",
        "TASKS_RUBRIC_REVIEW",
        "TASKS_RUBRIC_KEEP",
    ],
)
def test_task_block_fixed_lines_are_verbatim(name: str, block_lines: list[str]) -> None:
    assert nfkc(getattr(texts, name)) in block_lines


@pytest.mark.parametrize(
    ("name", "added"),
    [
        ("TASKS_RUBRIC_KEYWORDS", "一条记忆含多个话题时"),
        ("TASKS_RUBRIC_PERSONS", "原文只有「他/她/TA/对方」等代词时"),
    ],
)
def test_rubric_lines_with_the_later_compact_rules(
    name: str, added: str, block_lines: list[str]
) -> None:
    """§1.18 / §1.14.4 add one compact sentence each to these two rubric lines."""
    text = nfkc(getattr(texts, name))
    head, _, tail = text.partition(nfkc(added))
    assert head in block_lines
    assert tail


def test_item_templates_follow_the_reference_example(block_lines: list[str]) -> None:
    pending = texts.TASKS_PENDING_ITEM.format(n=1, id="mem-…", kind="user", age="2 小时", title="…")
    review = texts.TASKS_REVIEW_ITEM.format(
        n=1, id="mem-…", title="…", alpha="0.75", beta="+2.0", keywords="…"
    )
    assert nfkc(pending) in block_lines
    assert nfkc(review) in block_lines
    assert nfkc(texts.TASKS_REVIEW_REASON.format(reason="…")).strip() in block_lines
    assert nfkc(texts.TASKS_TEXT_LABEL).strip() in block_lines
    label_line = texts.TASKS_LABEL_SEPARATOR.join(
        texts.TASKS_LABEL.format(label=a, count=b)
        for a, b in (("日本旅行", 3), ("登录重构项目", 2), ("方案评审", 1))
    )
    assert nfkc(label_line) in block_lines


def test_rubric_order_matches_the_reference(block_lines: list[str]) -> None:
    rubric = [nfkc(line) for line in rubric_lines(channel=False)]
    positions = [
        next(
            i for i, spec_line in enumerate(block_lines) if line.startswith(spec_line) and spec_line
        )
        for line in rubric
    ]
    assert positions == sorted(positions)


def test_empty_lists_line_and_truncation_marks(spec: str) -> None:
    first, _, second = nfkc(texts.TASKS_EMPTY_WITH_RECALL).partition("更新。")
    assert first + "更新。" in spec
    assert second.rstrip("。") in spec
    assert nfkc(texts.TASKS_TRUNCATED).lstrip("…") in spec
    assert nfkc(texts.TASKS_NO_CONVERSATION) in spec


def test_judge_description_is_verbatim(spec: str) -> None:
    line = next(
        line.strip()
        for line in spec.splitlines()
        if line.strip().startswith("更新 dsh-rofm 记忆的重要度 α、信赖度 β 和关键词。")
    )
    # The extraction lost the tildes of α（0.01～1） and β（-10～10） (DESIGN.md).
    line = line.replace("α(0.011)", "α(0.01~1)").replace("β(-1010)", "β(-10~10)")
    assert nfkc(texts.JUDGE_DESCRIPTION) == line
    assert DESCRIPTION.startswith(texts.JUDGE_DESCRIPTION)


def test_description_keyword_rules_come_from_the_v155_v156_notes(spec: str) -> None:
    squashed = squash(spec)
    for phrase in (
        "本条记忆里出现的所有人物、地点都必须包含",
        "persons/locations/events设置完后必须复查是否都写进了keywords",
        "keywords必须覆盖每个话题的关键事实(人物、地点、事件、决定、参数、结论)",
        "不得只覆盖第一个/最主要的话题,也不得用泛词凑数",
    ):
        assert phrase in squashed
        assert phrase in squash(texts.JUDGE_DESCRIPTION_KEYWORD_RULES)


def test_parameter_texts(spec: str) -> None:
    items = PARAMETERS["properties"]["updates"]["items"]["properties"]
    assert nfkc(items["alpha"]["description"]) in spec
    assert squash(items["event"]["description"]) in squash(spec)
    assert set(items) == {
        "id",
        "alpha",
        "beta",
        "keywords",
        "events",
        "event",
        "locations",
        "persons",
        "keep",
        "reason",
    }
    assert PARAMETERS["required"] == ["updates"]


def test_output_rendering_matches_the_example(spec: str) -> None:
    value = {
        "updated": ["mem-…", "mem-…"],
        "kept": ["mem-x"],
        "rejected": [{"id": "mem-…", "reason": "unknown folder id"}],
        "warnings": [],
        "eventStats": {"assigned": 0, "merged": 0, "cleared": 0, "candidates": 0},
        "tagStats": {"locations": 0, "persons": 0, "events": 0},
    }
    text = render_output(value)
    assert nfkc(text) in spec
    ev = texts.JUDGE_EVENT_SUMMARY.format(assigned="N", merged="N", cleared="N", candidates="N")
    tags = texts.JUDGE_TAG_SUMMARY.format(locations="N", persons="N", events="N")
    assert nfkc(ev) in spec
    assert nfkc(tags) in spec


def test_event_candidate_warning_matches_the_example(spec: str) -> None:
    text = texts.JUDGE_WARN_EVENT_CANDIDATE.format(
        submitted="旅行经历", existing="日本旅行", score="0.83"
    )
    assert nfkc(text) in spec


def test_warn_above_head_and_tail(spec: str) -> None:
    text = nfkc(texts.JUDGE_WARN_ABOVE.format(alpha="0.95", warn="0.8", id="mem-…"))
    head = nfkc("注意:α=0.95 超过 importance.warnAbove=0.8(mem-…):")
    assert head in spec and text.startswith(head)
    assert text.endswith("建议复核时下调(本次已按提交值生效,未拦截)")
    assert "建议复核时下调(本次已按提交值生效,未拦截)" in spec


def test_rules_are_nine_in_v156_order(spec: str) -> None:
    names = [name for name, _ in texts.RULES]
    assert names == [
        "多子问题",
        "同一件事",
        "冲突",
        "助手原话",
        "主动召回",
        "记忆相关问题",
        "满额重试",
        "人物称呼",
        "时间引用",
    ]
    squashed = squash(spec)
    for _, body in texts.RULES:
        assert squash(body).rstrip("。") in squashed, body


def test_rules_text_layout() -> None:
    text = rules_text(compute_dates=True)
    lines = text.split("\n")
    assert lines[0] == texts.RULES_HEADING
    assert [line.split("：", 1)[0] for line in lines[1:]] == [
        f"{i}. {name}" for i, (name, _) in enumerate(texts.RULES, 1)
    ]
    eight = rules_text(compute_dates=False)
    assert "时间引用" not in eight
    assert eight.count("\n") == 8
