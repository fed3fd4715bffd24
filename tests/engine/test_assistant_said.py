"""The 「你说过」 channel (reference §1.13.5, §1.17): archive-side extraction with the v1.5.5
filters, quote detection, the channel's own postings, the 2 reserved slots before normal
ranking in fair and ranked, memory_recall's assistantSaid, re-score and back-fill."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from engine.assistant_keywords import (
    ASSISTANT_KEYWORDS_MAX,
    FIELD,
    assistant_keywords,
    backfill_store,
    channel_terms,
    phrases,
    with_assistant_keywords,
)
from engine.recall import CandidateIndex, RecallState, analyze_query
from engine.recall.assistant_said import detect_quote, swap_speaker, tool_assistant_query
from engine.recall.search import keyword_query, search
from engine.recall.select import ASSISTANT_LANE
from tests.engine.recall_fixtures import (
    BASE_MS,
    Entry,
    Sim,
    config,
    new_store,
    nickname_folders,
    write_folders,
)
from tests.engine.test_recall_ranked import RankedSim, ranked

# ---- extraction -----------------------------------------------------------------------------


def test_phrases_keep_who_promised_what_to_whom() -> None:
    assert phrases("好呀，以后我就叫你小鲸。") == ["叫你小鲸"]
    assert phrases("好的，我周三提醒你去取快递。") == ["我周三提醒你去取快递"]
    assert phrases("Okay, from now on I'll call you Little Whale.") == ["call", "Little", "Whale"]
    assert "叫你" in channel_terms("叫你小鲸") and "小" not in channel_terms("叫你小鲸")
    assert channel_terms("什么") == ()  # a stopword says nothing by itself


def test_only_real_conversation_with_the_v155_filters() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "给我起个外号吧"},
        {
            "role": "assistant",
            "content": [
                {"type": "reasoning", "text": "想一个外号"},
                {"type": "text", "text": '[tool-call memory_judge {"keywords": ["x"]}]'},
                {"type": "tool-call", "id": "c1", "name": "lookup", "arguments": "{}"},
                {"type": "text", "text": "好呀，以后我就叫你小鲸。"},
            ],
        },
        {"role": "tool", "content": "工具说：叫你大鲸"},
        {"role": "assistant", "content": '{"id": "mem-1", "alpha": 0.9, "keywords": ["大鲸"]}'},
        {"role": "assistant", "content": "[1, 2, 3]"},
        {"role": "user", "content": "再提醒我一件事"},
        {
            "role": "assistant",
            "content": "好的 mem-20261025T000000Z-0001 keywords 12345 node_modules.js"
            " toolcallidentifier alpha 我周三提醒你去取快递",
        },
    ]
    got = assistant_keywords(messages)
    assert got == ["叫你小鲸", "我周三提醒你去取快递"]
    for dropped in ("想一个外号", "大鲸", "mem-1", "12345", "node_modules.js", "alpha"):
        assert all(dropped not in g for g in got), dropped


def test_each_turns_last_reply_comes_first() -> None:
    names = "甲乙丙丁戊己庚辛壬癸子丑寅卯辰巳午未"
    messages: list[dict[str, Any]] = []
    for t in range(ASSISTANT_KEYWORDS_MAX + 2):
        messages.append({"role": "user", "content": f"问题{names[t]}"})
        # a long earlier reply would fill every slot on its own
        messages.append(
            {"role": "assistant", "content": " ".join(f"word{t}x{i}" for i in range(20))}
        )
        messages.append({"role": "assistant", "content": f"最后回答{names[t]}"})
    got = assistant_keywords(messages)
    assert got == [f"最后回答{names[t]}" for t in range(ASSISTANT_KEYWORDS_MAX)]


def test_quote_phrases_of_the_table_and_in_english() -> None:
    assert detect_quote("你之前说过叫我什么？") == "你之前说过"
    assert detect_quote("你之前答应过要提醒我什么？") == "你之前答应"
    assert detect_quote("您答应过我的事呢") == "你答应"
    assert detect_quote("你告诉过我密码吗") == "你告诉过我"
    assert detect_quote("What did you promise me about the deadline?") == "did you promise"
    assert detect_quote("You told me to water them on Tuesday") == "you told me"
    assert detect_quote("星港项目的网关端口是多少") is None
    assert detect_quote("young said hello") is None
    assert swap_speaker("叫我什么，你说") == "叫你什么，我说"


def test_the_query_asks_the_channel_only_when_quoted_and_enabled() -> None:
    ask = analyze_query("你之前说过叫我什么？", config()).assistant
    assert ask is not None and ask.source == "auto" and ask.keys == ("叫你",)
    assert analyze_query("小鲸是谁", config()).assistant is None
    off = config(assistantSaid={"enabled": False})
    assert analyze_query("你之前说过叫我什么？", off).assistant is None
    assert analyze_query("你之前说过叫我什么？", config(mode="legacy")).assistant is None
    assert analyze_query("你之前说过叫我什么？", config(), assistant=False).assistant is None


# ---- recall ---------------------------------------------------------------------------------


def mem(i: int, alpha: float, kws: list[str], said: list[str] | None = None) -> Entry:
    return Entry(
        id=f"mem-20261025T000000Z-{i:04d}",
        alpha=alpha,
        createdAt=BASE_MS + i,
        keywords=kws,
        assistantKeywords=said,
    )


def promise_store() -> list[Entry]:
    entries = [
        mem(i, 0.9 - i * 0.01, ["配置文件", f"问题{i}"], ["我来读取文件"]) for i in range(12)
    ]
    entries.append(mem(40, 0.3, ["起外号", "名字普通"], ["叫你小鲸"]))
    entries.append(mem(41, 0.3, ["提醒", "取快递"], ["我周三提醒你去取快递"]))
    return entries


def test_ordinary_keywords_never_reach_the_channel() -> None:
    entries = promise_store()
    ix = CandidateIndex(entries, config(), 1)
    assert ix.match(analyze_query("叫你小鲸", config())).candidates == set()
    assert "叫你" in ix.assistant_postings()
    off = CandidateIndex(entries, config(assistantSaid={"enabled": False}), 1)
    assert off.assistant_postings() == {}


def test_fair_the_reserve_finds_the_promise_before_normal_ranking() -> None:
    entries = promise_store()
    sim = Sim(entries, config())
    out = sim.ask("你之前说过叫我什么？")
    added = out.recall_record["added"]
    assert added[0]["id"] == entries[12].id and added[0]["lane"] == ASSISTANT_LANE
    info = out.recall_record["assistantInfo"]
    assert (
        info["requested"] and info["phrase"] == "你之前说过" and info["picks"] == [entries[12].id]
    )
    assert out.recall_record["lanesPicked"][ASSISTANT_LANE] == 1
    assert sim.state.query_info == {
        "clauses": 1,
        "quota": 10,
        "assistantSaid": {"phrase": "你之前说过", "keys": ["叫你"]},
    }
    off = Sim(entries, config(assistantSaid={"enabled": False}))
    assert off.ask("你之前说过叫我什么？").recall_record["added"] == []


def test_fair_reserve_takes_at_most_reserve_slots_and_the_rest_join_the_candidates() -> None:
    entries = promise_store()
    # both promises meet "提醒你" / "叫你": reserve 1 takes the best, the other may follow
    sim = Sim(entries, config(assistantSaid={"reserveSlots": 1}))
    out = sim.ask("你说过周三要提醒我做什么，还有叫我什么？")
    lanes = {a["id"]: a["lane"] for a in out.recall_record["added"]}
    assert list(lanes.values()).count(ASSISTANT_LANE) == 1
    assert {entries[12].id, entries[13].id} <= set(lanes)


def test_fair_high_relevance_never_replaces_the_assistant_pick() -> None:
    entries = [mem(i, 0.9 - i * 0.01, ["星港项目", "网关"]) for i in range(10)]  # hit two
    entries.append(mem(20, 0.2, ["星港项目"]))  # rotation's pick
    entries.append(mem(30, 0.2, ["起外号"], ["叫你小鲸"]))
    cfg = config(firstGenMax=2, adaptiveQuota={"enabled": False}, assistantSaid={"reserveSlots": 1})
    out = Sim(entries, cfg).ask("你说过星港项目的网关叫我什么")
    lanes = {a["id"]: a["lane"] for a in out.recall_record["added"]}
    # the quota is full (the reserve and rotation): the reserve replaces rotation's pick,
    # never the assistant's
    assert lanes == {entries[11].id: ASSISTANT_LANE, entries[0].id: "highRelevance"}
    assert out.recall_record["highRelevanceReplaced"] == 1


def said_texts() -> tuple[dict[str, str], dict[str, float]]:
    texts = {
        f"f{i}": f"user: 你之前说过配置文件叫什么名字？第{i}个 assistant: 我来读取文件"
        for i in range(8)
    }
    texts["promise"] = "user: 给我起个外号吧 assistant: 好呀，以后我就叫你小鲸。"
    return texts, {fid: 0.5 for fid in texts}


def test_ranked_the_reserve_finds_what_text_ranking_misses() -> None:
    texts, alphas = said_texts()
    cfg = ranked(firstGenMax=2)
    sim = RankedSim(texts, alphas, cfg)
    sim.entries[-1].assistantKeywords = ["叫你小鲸"]
    sim.index = CandidateIndex(sim.entries, cfg, 1)
    out = sim.ask("你之前说过叫我什么？")
    assert out.recalled[0] == "promise"
    assert out.recall_record["lanesPicked"][ASSISTANT_LANE] == 1
    off_cfg = ranked(firstGenMax=2, assistantSaid={"enabled": False})
    off = RankedSim(texts, alphas, off_cfg)
    assert "promise" not in off.ask("你之前说过叫我什么？").recalled
    # in the block already: it serves the reserve, nothing is injected twice
    again = sim.ask("你之前说过叫我什么？")
    assert "promise" not in again.recalled
    assert again.recall_record["assistantInfo"]["served"] == ["promise"]


def test_memory_recall_assistant_said_param_and_auto() -> None:
    entries = promise_store()
    cfg = config()
    ix = CandidateIndex(entries, cfg, 1)
    state = RecallState(persist=False)
    # keywords alone do not reach the channel
    plain = search(ix, state, keyword_query(["叫我"], cfg), cfg, limit=3, offset=None)
    assert plain.picks == [] and not plain.assistant["requested"]
    # assistantSaid=true: the model's words in both speakers' forms
    ask = tool_assistant_query(["叫我"], True, None, cfg)
    page = search(ix, state, keyword_query(["叫我"], cfg, assistant=ask), cfg, limit=3, offset=0)
    assert [p.id for p in page.picks][:1] == [entries[12].id]
    assert page.picks[0].lane == ASSISTANT_LANE
    # omitted: the current user message decides
    current = {"phrase": "你之前说过", "keys": ["叫你"]}
    auto = tool_assistant_query([], None, current, cfg)
    assert auto is not None and auto.source == "auto" and auto.keys == ("叫你",)
    assert tool_assistant_query(["叫我"], None, None, cfg) is None
    assert tool_assistant_query(["叫我"], False, current, cfg) is None


# ---- old folders: re-score and back-fill ----------------------------------------------------


NAMES = ("小鲸", "小鹿", "小熊", "小兔", "小猫")


def old_folders(tmp: Path) -> tuple[Any, list[str]]:
    store = new_store(tmp)
    ids = write_folders(
        store,
        nickname_folders(list(NAMES)),
    )
    return store, ids


def test_rescoring_an_old_folder_gives_it_its_phrases(tmp_path: Path) -> None:
    store, ids = old_folders(tmp_path)
    assert store.get_meta(ids[0]).assistantKeywords is None
    changes = with_assistant_keywords(store, {ids[0]: {"alpha": 0.7}})
    assert changes == {ids[0]: {"alpha": 0.7, FIELD: ["叫你小鲸"]}}
    store.update_metas(changes)
    assert store.get_entry(ids[0]).assistantKeywords == ["叫你小鲸"]
    # already extracted: nothing is read again
    assert with_assistant_keywords(store, {ids[0]: {"alpha": 0.8}}) == {ids[0]: {"alpha": 0.8}}


def test_backfill_fills_once_and_a_dry_run_writes_nothing(tmp_path: Path) -> None:
    store, ids = old_folders(tmp_path)
    files = sorted(p for p in store.dir.rglob("*") if p.is_file())
    before = {p: p.read_bytes() for p in files}
    progress: list[tuple[int, int]] = []
    dry = backfill_store(
        store, dry_run=True, batch=2, progress=lambda a, b: progress.append((a, b))
    )
    assert (dry.missing, dry.filled, dry.with_phrases) == (5, 5, 5)
    assert progress == [(2, 5), (4, 5), (5, 5)]
    assert {p: p.read_bytes() for p in sorted(p for p in store.dir.rglob("*") if p.is_file())} == (
        before
    )
    done = backfill_store(store, batch=2)
    assert done.filled == 5
    metas = [orjson.loads((store.dir / fid / "meta.json").read_bytes()) for fid in ids]
    assert [m[FIELD] for m in metas] == [[f"叫你{name}"] for name in NAMES]
    assert backfill_store(store).missing == 0
