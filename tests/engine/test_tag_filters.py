"""Location and person filters (`engine.recall.tags`): memory_recall's five states and
tagInfo, OR within a kind, AND across kinds and with the keywords and the event; the
automatic recall of a message naming a known place or person, in every mode."""

from __future__ import annotations

from typing import Any

import pytest

from engine import texts
from engine.config import ENGINE_DEFAULTS, MemoryConfig, deep_merge
from engine.recall import CandidateIndex
from engine.recall.events import resolve_events
from engine.recall.search_answer import render_answer
from engine.recall.search_args import parse_search_args
from engine.recall.tags import resolve_tags
from tests.engine.recall_fixtures import BASE_MS, Entry, Sim, tool_search

CONSTRAIN = {"mode": "constrain"}


def cfg_of(mode: str = "deterministic", **over: Any) -> MemoryConfig:
    tree = deep_merge(
        ENGINE_DEFAULTS,
        {"recall": {"mode": mode}, "event": CONSTRAIN, "location": CONSTRAIN, "person": CONSTRAIN},
    )
    return MemoryConfig.model_validate(deep_merge(tree, over))


CFG = cfg_of()


def e(fid: str, kws: list[str], **tags: Any) -> Entry:
    return Entry(fid, 0.7, BASE_MS + int(fid[-1]), kws, **tags)


ENTRIES = [
    e("mem-1", ["火锅", "小明"], locations=["杭州"], persons=["小明"], events=["杭州出差"]),
    e("mem-2", ["火锅", "周岑"], locations=["杭州"], persons=["周岑"]),
    e("mem-3", ["火锅", "小周"], locations=["北京"], persons=["小周"]),
    e("mem-4", ["火锅"], locations=["北京"]),
    e("mem-5", ["火锅", "岑哥"], persons=["岑哥"]),
]


def call(arguments: dict[str, Any], cfg: MemoryConfig = CFG) -> tuple[Any, Any]:
    args = parse_search_args(arguments, cfg)
    ix = CandidateIndex(ENTRIES, cfg)
    tags = {"location": args.locations, "person": args.persons}
    constraints = [resolve_events(args.events, ix.tags, cfg), resolve_tags(tags, ix.tags, cfg)]
    page = tool_search(ix, args, cfg, limit=10, offset=None, constraints=constraints)
    return page, render_answer(args, page, [], cfg)


def ids(page: Any) -> set[str]:
    return {p.id for p in page.picks}


def test_or_within_a_kind_and_across_kinds() -> None:
    page, answer = call({"keywords": "火锅", "locations": ["杭州", "北京"]})
    assert ids(page) == {"mem-1", "mem-2", "mem-3", "mem-4"}
    page, answer = call({"keywords": "火锅", "locations": ["杭州"], "persons": ["周岑"]})
    assert ids(page) == {"mem-2"}
    info = answer.value["tagInfo"]
    assert info == {
        "status": "exact",
        "requested": {"locations": ["杭州"], "persons": ["周岑"]},
        "matched": {"locations": ["杭州"], "persons": ["周岑"]},
        "unknown": {"locations": [], "persons": []},
        "enforced": ["location", "person"],
    }
    assert "标签过滤：地点：杭州（2 条） / 人物：周岑（1 条）" in answer.text
    # several names of one person: OR, never narrowing each other
    page, answer = call({"keywords": "火锅", "persons": ["周岑", "小周", "岑哥"]})
    assert ids(page) == {"mem-2", "mem-3", "mem-5"}
    # and with the event
    page, _ = call({"keywords": "火锅", "locations": ["杭州"], "event": "杭州出差"})
    assert ids(page) == {"mem-1"}


def test_partial_unknown_and_the_tag_miss() -> None:
    page, answer = call({"keywords": "火锅", "persons": ["周岑", "阿强"]})
    assert ids(page) == {"mem-2"} and answer.value["tagInfo"]["status"] == "partial"
    warning = (
        texts.RECALL_TAG_UNKNOWN_PARTIAL.format(kind="人物", labels="阿强")
        + texts.RECALL_TAG_PERSON_ALIAS
    )
    assert warning in answer.value["warnings"]
    page, answer = call({"keywords": "火锅", "locations": ["上海"], "persons": ["周岑"]})
    assert page.picks == [] and page.miss_type == "tag"
    assert answer.value["tagInfo"]["status"] == "unknown"
    assert texts.RECALL_TOOL_MISS_TAG in answer.text
    assert texts.RECALL_TAG_UNKNOWN_ALL.format(kind="地点", labels="上海") in answer.text
    # known tags, but no keyword candidate carries both
    page, _ = call({"keywords": "火锅", "locations": ["北京"], "persons": ["周岑"]})
    assert page.miss_type == "tag" and page.filtered == {"tag": 5}


def test_home_labels_meet_in_one_form() -> None:
    entries = [e("mem-1", ["晚饭"], locations=["家"]), e("mem-2", ["晚饭"], locations=["公司"])]
    ix = CandidateIndex(entries, CFG)
    args = parse_search_args({"keywords": "晚饭", "locations": ["我家里"]}, CFG)
    assert args.locations == ("家",)
    c = resolve_tags({"location": args.locations}, ix.tags, CFG)
    assert c.allowed == frozenset({"mem-1"})


@pytest.mark.parametrize(
    ("mode", "status"),
    [("index", "disabled"), ("off", "disabled")],
)
def test_index_and_off_modes(mode: str, status: str) -> None:
    cfg = cfg_of(location={"mode": mode})
    page, answer = call({"keywords": "火锅", "locations": ["杭州"]}, cfg)
    assert len(page.picks) == 5 and answer.value["tagInfo"]["status"] == status
    if mode == "index":
        note = texts.RECALL_TAG_INDEX_ONLY.format(
            kind="地点", mode_key="location.mode", labels="杭州", n=2
        )
        assert answer.value["tagInfo"]["matched"] == {"locations": ["杭州"]}
    else:
        note = texts.RECALL_TAG_OFF.format(kind="地点", mode_key="location.mode", param="locations")
    assert note in answer.value["warnings"]
    assert "标签过滤：" not in answer.text


# -- automatic recall: a message naming a known person ---------------------------------
@pytest.mark.parametrize("mode", ["fair", "deterministic", "legacy"])
def test_a_named_person_filters_automatic_recall(mode: str) -> None:
    cfg = cfg_of(mode, recall={"mode": mode, "seed": 7})
    sim = Sim(list(ENTRIES), cfg)
    out = sim.ask("周岑上次吃火锅说了什么")
    first = [a["id"] for a in out.recall_record["added"] if a["generation"] == 1]
    assert first == ["mem-2"]  # legacy's later generations bridge on, unfiltered
    assert out.recalled == ["mem-2"] or mode == "legacy"
    assert out.recall_record["tagInfo"]["matched"] == {"persons": ["周岑"]}
    assert out.recall_record["tagFiltered"] == 4
    # no mention: every keyword candidate, exactly as with the mentions switched off
    plain = Sim(list(ENTRIES), cfg).ask("上次吃火锅说了什么")
    off = cfg_of(mode, recall={"mode": mode, "seed": 7, "tagMentions": {"enabled": False}})
    assert plain.recalled == Sim(list(ENTRIES), off).ask("上次吃火锅说了什么").recalled
    assert plain.recall_record["tagInfo"] is None
    assert len(plain.recalled) == 5 or mode == "legacy"  # legacy rolls its dice


def test_mentions_follow_the_switches() -> None:
    text = "周岑在杭州吃的火锅怎么样"
    both = Sim(list(ENTRIES), CFG).ask(text)
    assert both.recalled == ["mem-2"]  # 杭州 AND 周岑
    for over in (
        {"person": {"autoMention": False}},
        {"person": {"mode": "index"}},
        {"recall": {"mode": "deterministic", "tagMentions": {"maxTagsPerKind": 1}}},
    ):
        out = Sim(list(ENTRIES), cfg_of(**over)).ask(text)
        if "recall" in over:
            assert out.recalled == ["mem-2"]
            continue
        assert set(out.recalled) == {"mem-1", "mem-2"}  # 杭州 only
    index_only = Sim(list(ENTRIES), cfg_of(person={"mode": "index"}, location={"mode": "index"}))
    out = index_only.ask(text)
    assert len(out.recalled) == 5
    assert out.recall_record["tagInfo"]["enforced"] == []
    assert out.recall_record["tagInfo"]["status"] == "disabled"
