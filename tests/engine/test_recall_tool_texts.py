"""memory_recall's model-visible texts against the reference, after NFKC (DESIGN.md)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from engine import texts
from handlers.tool_recall import PARAMETERS

SPEC = Path("/work/shared/spec/dsh-rofm-reference.txt")

pytestmark = pytest.mark.skipif(not SPEC.exists(), reason="reference text not available")


def squash(text: str) -> str:
    """NFKC without whitespace: the extraction broke long lines with spaces."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text))


@pytest.fixture(scope="module")
def spec() -> str:
    """The reference, squashed, without its "见 §…" cross references (which the tool's
    texts leave out)."""
    text = squash(SPEC.read_text(encoding="utf-8"))
    text = re.sub(r"\(见§[\d.]+\)", "", text)
    return re.sub(r"[,;]见§[\d.]+", "", text)


def fragments(text: str) -> list[str]:
    return [f for f in re.split(r"[；;]", text) if f.strip()]


@pytest.mark.parametrize(
    "name",
    [
        "RECALL_PARAM_KEYWORDS",
        "RECALL_PARAM_LIMIT",
        "RECALL_PARAM_OFFSET",
        "RECALL_PARAM_TIME",
        "RECALL_PARAM_GRANULARITY",
        "RECALL_PARAM_EVENT",
        "RECALL_PARAM_EVENTS",
        "RECALL_PARAM_LOCATIONS",
        "RECALL_PARAM_PERSONS",
        "RECALL_PARAM_TIME_TEXT",
        "RECALL_PARAM_ASSISTANT_SAID",
    ],
)
def test_parameter_texts_are_the_tables(name: str, spec: str) -> None:
    """Each part of a parameter text is a cell of the reference's parameter table."""
    table = spec[spec.index("参数类型说明keywordsstring") : spec.index("•选择算法")]
    for part in fragments(getattr(texts, name)):
        assert squash(part) in table, part


def test_the_schema_uses_them() -> None:
    props = PARAMETERS["properties"]
    assert props["timeFrom"]["description"] == props["timeTo"]["description"]
    assert props["assistantSaid"]["description"] == texts.RECALL_PARAM_ASSISTANT_SAID
    assert props["granularity"]["enum"] == ["day", "month", "year"]


@pytest.mark.parametrize(
    "text",
    [
        texts.RECALL_TOOL_STRIKE_WARN,
        texts.RECALL_TOOL_STRIKE_DISABLED,
        texts.RECALL_TOOL_ASK_TIME_EVENT.rstrip("。"),
        "可以询问用户期望的事件名再用 event 重试",
        texts.RECALL_TOOL_MORE.format(next="…"),
        texts.RECALL_TOOL_FULL_PAGE.format(limit="N", found="N"),
        texts.RECALL_TOOL_TRUST_NOTE,
    ],
)
def test_quoted_texts_are_verbatim(text: str, spec: str) -> None:
    assert squash(text) in spec


def test_the_limit_twenty_variant_replaces_what_the_reference_says() -> None:
    normal = texts.RECALL_TOOL_FULL_PAGE.format(limit=20, found=20)
    at_max = texts.RECALL_TOOL_FULL_PAGE_AT_MAX.format(limit=20, found=20)
    assert at_max == normal.replace("把 limit 调大（最多 20）", "用 offset 翻页或换关键词")


def test_the_description_is_the_references_sentences(spec: str) -> None:
    sentences = re.split(r"(?<=。)", texts.RECALL_TOOL_DESCRIPTION)
    ours = sentences[0]
    assert ours.startswith("按关键词检索")
    for sentence in sentences[1:]:
        for part in fragments(sentence.rstrip("。")):
            # the reference's "可以调用" is followed by the tool's name in a bullet, its
            # "返回" is a label ("返回:命中的记忆…")
            part = part.removesuffix(" memory_recall").removeprefix("返回")
            assert squash(part) in spec, part
    assert "memory_recall 返回条数=limit" in texts.RECALL_TOOL_DESCRIPTION  # §1.14.3


def test_the_texts_that_name_memory_recall_name_a_listed_tool() -> None:
    """Rules 5-7, the empty-recall and full-quota hints and the task block's line tell the
    model to call memory_recall, with limit up to 20: the tool exists and takes it."""
    named = [
        texts.RECALL_EMPTY_HINT,
        texts.RECALL_FULL_QUOTA_HINT,
        texts.RECALL_FULL_QUOTA_TRIMMED,
        texts.TASKS_EMPTY_WITH_RECALL,
        *(body for _, body in texts.RULES),
    ]
    assert sum("memory_recall" in t for t in named) >= 6
    from handlers.tools import TOOLS

    tool = TOOLS["memory_recall"]
    assert tool.parameters["properties"]["limit"]["maximum"] == 20
    assert "event" in tool.parameters["properties"]
