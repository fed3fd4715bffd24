"""memory_recall's event constraint (`engine.recall.events`) and its place in the search:
the four states plus disabled, the reference's texts, AND with the keywords, misses that
are never strikes."""

from __future__ import annotations

from typing import Any

import pytest

from engine import texts
from engine.config import ENGINE_DEFAULTS, MemoryConfig, deep_merge
from engine.recall import CandidateIndex
from engine.recall.events import resolve_events
from engine.recall.search_answer import render_answer, search_record
from engine.recall.search_args import parse_search_args
from engine.recall.strikes import RecallStrikes, counts_as_strike
from tests.engine.recall_fixtures import BASE_MS, Entry, tool_search


def cfg_of(**over: Any) -> MemoryConfig:
    tree = deep_merge(ENGINE_DEFAULTS, {"event": {"mode": "constrain"}})
    return MemoryConfig.model_validate(deep_merge(tree, over))


CFG = cfg_of(recall={"mode": "deterministic"})
ENTRIES = [
    Entry("mem-1", 0.9, BASE_MS + 1, ["酒店", "京都"], events=["日本旅行"]),
    Entry("mem-2", 0.8, BASE_MS + 2, ["酒店", "机场"], events=["日本旅行"]),
    Entry("mem-3", 0.7, BASE_MS + 3, ["酒店", "札幌"], events=["北海道滑雪"]),
    Entry("mem-4", 0.6, BASE_MS + 4, ["登录", "接口"], events=["登录重构项目"]),
    Entry("mem-5", 0.6, BASE_MS + 5, ["酒店"]),
]


def index(cfg: MemoryConfig = CFG) -> CandidateIndex:
    return CandidateIndex(ENTRIES, cfg)


def call(arguments: dict[str, Any], cfg: MemoryConfig = CFG) -> tuple[Any, Any, Any]:
    """(page, answer, telemetry record) of one memory_recall call, engine only."""
    args = parse_search_args(arguments, cfg)
    ix = index(cfg)
    constraint = resolve_events(args.events, ix.tags, cfg)
    page = tool_search(ix, args, cfg, constraints=[constraint])
    strikes = RecallStrikes()
    strikes.record(page.mode, len(page.picks), page.miss_type)
    answer = render_answer(args, page, [], cfg, strikes=strikes)
    record = search_record(
        args, page, [], now_ms=0, turn=1, round_=0, miss_type=page.miss_type, strikes=0
    )
    return page, answer, record


def test_exact_restricts_to_the_event_and_says_so() -> None:
    page, answer, record = call({"keywords": "酒店", "event": "「日本旅行」", "limit": 10})
    assert [p.id for p in page.picks] == ["mem-1", "mem-2"]
    assert "本次回忆已约束事件：「日本旅行」（该事件共 2 条记忆）" in answer.text
    assert answer.value["eventInfo"]["status"] == "exact"
    assert page.filtered == {"event": 2}  # mem-3 and mem-5 matched the keyword
    assert record["eventStatus"] == "exact" and record["eventLabel"] == "日本旅行"
    assert record["eventFiltered"] == 2
    # events OR-ed, merged with event
    page, answer, _ = call({"keywords": "酒店", "event": "北海道滑雪", "events": ["日本旅行"]})
    assert {p.id for p in page.picks} == {"mem-1", "mem-2", "mem-3"}
    item = texts.RECALL_EVENT_ITEM
    line = texts.RECALL_EVENT_CONSTRAINED.format(
        items=item.format(label="北海道滑雪", n=1) + "、" + item.format(label="日本旅行", n=2)
    )
    assert line in answer.text


def test_a_keyword_hit_outside_the_event_is_an_event_miss_not_a_strike() -> None:
    page, answer, record = call({"keywords": "登录", "event": "日本旅行"})
    assert page.picks == [] and page.miss_type == "event"
    assert texts.RECALL_TOOL_MISS_EVENT.format(labels="日本旅行") in answer.text
    assert answer.value["strikes"] == 0 and record["eventFiltered"] == 1
    # the keywords themselves wrong: a keyword miss (a strike), whatever the event
    page, _, _ = call({"keywords": "不存在", "event": "日本旅行"})
    assert page.miss_type == "keyword"
    assert counts_as_strike("fair", 0, "keyword")
    for miss in ("event", "event-ambiguous", "tag", "time", "time-tag"):
        assert not counts_as_strike("fair", 0, miss)
        assert not counts_as_strike("legacy", 0, miss)


def test_similar_returns_candidates_and_no_memory() -> None:
    page, answer, record = call({"keywords": "酒店", "event": "日本旅行计划"})
    assert page.picks == [] and page.miss_type == "event-ambiguous"
    info = answer.value["eventInfo"]
    assert info["status"] == "similar"
    assert info["candidates"] == [{"label": "日本旅行", "count": 2, "score": 0.75}]
    text = answer.text
    assert "候选事件：「日本旅行」（2 条记忆，相似度 0.75）" in text
    assert texts.RECALL_EVENT_ASK_USER in text
    assert answer.value["strikes"] == 0 and record["eventStatus"] == "similar"
    quiet = cfg_of(recall={"mode": "deterministic"}, event={"askUserHint": False})
    _, answer, _ = call({"keywords": "酒店", "event": "日本旅行计划"}, quiet)
    assert texts.RECALL_EVENT_ASK_USER not in answer.text


def test_unknown_lists_near_labels_and_asks_nothing_of_the_store() -> None:
    page, answer, record = call({"keywords": "酒店", "event": "日本旅游"})
    assert page.picks == [] and page.miss_type == "event"
    info = answer.value["eventInfo"]
    assert info["status"] == "unknown"
    assert [c["label"] for c in info["candidates"]] == ["日本旅行"]
    assert info["candidates"][0]["score"] < CFG.event.similarity.threshold
    unknown = texts.RECALL_EVENT_UNKNOWN.format(
        label="日本旅游", ask=texts.RECALL_EVENT_UNKNOWN_ASK
    )
    assert unknown in answer.text and "③ 询问用户属于哪个事件" in unknown
    assert record["eventStatus"] == "unknown" and answer.value["strikes"] == 0
    _, answer, _ = call({"keywords": "酒店", "event": "体检"})
    assert answer.value["eventInfo"]["candidates"] == []
    assert "相近的已有事件" not in answer.text


@pytest.mark.parametrize("empty", ["空", "none", "N/A", "  ", "-", "「无」"])
def test_empty_is_no_constraint(empty: str) -> None:
    page, answer, record = call({"keywords": "酒店", "event": empty, "limit": 10})
    assert len(page.picks) == 4 and record["eventStatus"] == "empty"
    assert "本次回忆已约束事件" not in answer.text


def test_index_and_off_modes_do_not_constrain_and_say_so() -> None:
    for mode, note in (
        ("index", texts.RECALL_EVENT_INDEX_ONLY.format(labels="日本旅行")),
        ("off", texts.RECALL_EVENT_OFF),
    ):
        cfg = cfg_of(recall={"mode": "deterministic"}, event={"mode": mode})
        page, answer, record = call({"keywords": "酒店", "event": "日本旅行", "limit": 10}, cfg)
        assert len(page.picks) == 4 and page.miss_type is None
        assert note in answer.value["warnings"] and note in answer.text
        assert record["eventStatus"] == "disabled"
    # off: not even indexed
    assert index(cfg_of(event={"mode": "off"})).tags.counts("event") == {}


def test_one_exact_label_is_enough_the_others_are_named() -> None:
    page, answer, _ = call({"keywords": "酒店", "events": ["日本旅游", "北海道滑雪"]})
    assert [p.id for p in page.picks] == ["mem-3"]
    warning = texts.RECALL_EVENT_IGNORED_NEAR.format(
        label="日本旅游", candidates="「日本旅行」（2 条记忆，相似度 0.67）"
    )
    assert warning in answer.value["warnings"]


def test_browse_by_event_lists_it_in_event_order() -> None:
    from engine.recall.browse import browse

    args = parse_search_args({"event": "日本旅行"}, CFG)
    ix = index()
    page = browse(ix, [resolve_events(args.events, ix.tags, CFG)], CFG, limit=1, offset=None)
    assert page.mode == "browse" and [p.id for p in page.picks] == ["mem-1"]
    assert page.has_more and page.next_offset == 1 and page.candidates == 2
    answer = render_answer(args, page, [], CFG)
    assert texts.RECALL_TOOL_BROWSE in answer.text


def test_the_reference_words_are_verbatim() -> None:
    """The exact line and the ask-user sentence, as the reference quotes them (after
    NFKC, which its extraction applied)."""
    import re
    import unicodedata
    from pathlib import Path

    spec = Path("/work/shared/spec/dsh-rofm-reference.txt")
    if not spec.exists():
        pytest.skip("reference text not available")
    text = re.sub(r"\s+", "", spec.read_text(encoding="utf-8"))

    def squash(s: str) -> str:
        return re.sub(r"\s+", "", unicodedata.normalize("NFKC", s))

    line = texts.RECALL_EVENT_CONSTRAINED.format(
        items=texts.RECALL_EVENT_ITEM.format(label="X", n="N")
    )
    assert squash(line) in text
    assert squash(texts.RECALL_EVENT_ASK_USER.rstrip("。")) in text
