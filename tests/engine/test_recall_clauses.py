"""Several questions in one message (reference §1.13.3-§1.13.4, §1.17): clause split,
one protected slot per clause, rotation, 未找到相关记忆, the quota with the switch off."""

from __future__ import annotations

from typing import Any

from engine import texts
from engine.recall import RecallState, analyze_query, effective_quota
from engine.recall.clauses import allocate
from engine.recall.fair import Pick
from engine.recall.query import split_clauses
from engine.recall.state import clause_status_line
from tests.engine.recall_fixtures import BASE_MS, Entry, Sim, config
from tests.engine.test_recall_ranked import RankedSim, ranked


def mem(i: int, alpha: float, *kws: str) -> Entry:
    return Entry(
        id=f"mem-20261025T000000Z-{i:04d}", alpha=alpha, createdAt=BASE_MS + i, keywords=list(kws)
    )


def ids(out: Any) -> list[str]:
    return [a["id"] for a in out.recall_record["added"]]


# ---- the split ----------------------------------------------------------------------------


def test_split_at_sentence_ends_and_newlines_drops_fragments_merges_the_rest() -> None:
    assert split_clauses("星港项目怎么样？日本旅行呢！a；嗯\n还有预算", 8, 2) == [
        "星港项目怎么样",
        "日本旅行呢",
        "还有预算",
    ]
    assert split_clauses("What about the gateway? And the trip!", 8, 2) == [
        "What about the gateway",
        "And the trip",
    ]
    # past maxClauses the rest of the message joins the last clause
    assert split_clauses("一一？二二？三三？四四", 2, 2) == ["一一", "二二？三三？四四"]
    assert split_clauses("？！", 8, 2) == []


def test_clause_queries_only_with_two_clauses_and_the_switch_on() -> None:
    cfg = config()
    q = analyze_query("星港项目的网关端口是多少？日本旅行订好了吗？", cfg)
    assert q.clauses == 2 and [p.text for p in q.parts] == [
        "星港项目的网关端口是多少",
        "日本旅行订好了吗",
    ]
    assert analyze_query("星港项目的网关端口是多少？", cfg).parts == ()
    off = config(clauseSplit={"enabled": False})
    q_off = analyze_query("星港项目的网关端口是多少？日本旅行订好了吗？", off)
    assert q_off.parts == () and q_off.clauses == 1
    assert analyze_query("星港项目？日本旅行？", config(mode="legacy")).parts == ()


def test_the_clause_count_raises_the_quota_only_while_clauses_are_split() -> None:
    text = "星港项目？日本旅行？"
    assert effective_quota(analyze_query(text, config()), config()) == 20
    off = config(clauseSplit={"enabled": False})
    assert effective_quota(analyze_query(text, off), off) == 10
    # the query analysed with the switch on, judged with it off: still one clause
    assert effective_quota(analyze_query(text, config()), off) == 10


# ---- allocation ---------------------------------------------------------------------------


def picks(prefix: str, n: int) -> list[Pick]:
    return [Pick(i, f"{prefix}{i}", "hi") for i in range(n)]


def test_allocate_protects_one_per_queue_then_rotates() -> None:
    a, b, c = picks("a", 5), picks("b", 5), picks("c", 1)
    out = allocate([a, b, c], 6)
    assert [p.id for p in out.picks] == ["a0", "b0", "c0", "a1", "b1", "a2"]
    assert [p.protected for p in out.picks] == [True, True, True, False, False, False]
    assert out.got == [["a0", "a1", "a2"], ["b0", "b1"], ["c0"]]


def test_allocate_takes_a_folder_once_and_serves_the_block() -> None:
    shared = Pick(9, "x", "hi")
    queues = [[shared, *picks("a", 2)], [Pick(9, "x", "hi"), *picks("b", 2)]]
    out = allocate(queues, 3, in_block={"b0"})
    assert out.got == [["x", "a0"], ["b0"]]
    assert [p.id for p in out.picks] == ["x", "a0"]
    assert out.served == ["b0"]


# ---- fair ---------------------------------------------------------------------------------


def two_topics() -> list[Entry]:
    # one topic has the higher α everywhere: one ranking for both gives it every slot
    return [mem(i, 0.9 - i * 0.001, "星港项目") for i in range(10)] + [
        mem(20 + i, 0.8 - i * 0.001, "日本旅行") for i in range(10)
    ]


def test_fair_two_questions_both_recalled_with_the_clause_line() -> None:
    entries = two_topics()
    sim = Sim(entries, config(firstGenMax=3, adaptiveQuota={"enabled": False}))
    out = sim.ask("星港项目进展如何？日本旅行订好了吗？")
    got = ids(out)
    assert len(got) == 3
    assert entries[0].id in got and entries[10].id in got
    info = out.recall_record["clauseInfo"]
    assert [c["protected"] for c in info] == [entries[0].id, entries[10].id]
    assert out.recall_record["clauses"] == 2
    assert sim.state.block.endswith(
        "【本轮子问题召回情况】1.「星港项目进展如何」命中 2 条；2.「日本旅行订好了吗」命中 1 条"
    )
    # without the split the same message gives the first topic every slot
    whole = Sim(
        entries,
        config(firstGenMax=3, adaptiveQuota={"enabled": False}, clauseSplit={"enabled": False}),
    )
    out2 = whole.ask("星港项目进展如何？日本旅行订好了吗？")
    assert all(i in {e.id for e in entries[:10]} for i in ids(out2))
    assert "本轮子问题召回情况" not in whole.state.block
    assert out2.recall_record["clauseInfo"] == [] and out2.recall_record["clauses"] == 1


def test_fair_a_clause_without_memory_says_so() -> None:
    sim = Sim(two_topics(), config())
    out = sim.ask("星港项目进展如何？我的猫叫什么名字？")
    assert ids(out)
    line = sim.state.block.rsplit("\n\n", 1)[1]
    assert line == clause_status_line([("星港项目进展如何", 10), ("我的猫叫什么名字", 0)])
    assert line.endswith("2.「我的猫叫什么名字」" + texts.RECALL_CLAUSE_NONE)
    assert out.recall_record["clauseInfo"][1]["found"] == 0


def test_fair_nothing_found_at_all_is_the_empty_hint_alone() -> None:
    sim = Sim(two_topics(), config())
    out = sim.ask("我的猫叫什么？你喜欢什么颜色？")
    assert sim.state.block == texts.RECALL_EMPTY_HINT
    assert [c["found"] for c in out.recall_record["clauseInfo"]] == [0, 0]


def test_fair_high_relevance_never_replaces_a_clause_protected_pick() -> None:
    entries = [mem(i, 0.9 - i * 0.001, "星港项目") for i in range(10)]
    entries.append(mem(50, 0.3, "蓝色杯子"))
    entries.append(mem(60, 0.5, "星港项目", "接口网关"))  # hits two query keywords
    cfg = config(firstGenMax=2, adaptiveQuota={"enabled": False})
    sim = Sim(entries, cfg)
    out = sim.ask("星港项目的接口网关？蓝色杯子在哪？")
    got = ids(out)
    assert entries[10].id in got  # the second clause's only memory keeps its slot
    assert out.recall_record["highRelevanceReplaced"] == 0
    # one question: the same reserve replaces the low-α tail pick
    one_cfg = config(
        firstGenMax=2, adaptiveQuota={"enabled": False}, clauseSplit={"enabled": False}
    )
    one = Sim(entries, one_cfg)
    out1 = one.ask("星港项目的接口网关，蓝色杯子在哪")
    assert out1.recall_record["highRelevanceReplaced"] == 1
    assert entries[10].id not in ids(out1)


def test_fair_lane_promises_the_allocation_leaves_out_stay_in_the_register() -> None:
    entries = two_topics()
    sim = Sim(entries, config(firstGenMax=3, adaptiveQuota={"enabled": False}))
    sim.ask("星港项目")  # k_H = 2: the next six high-α candidates wait in the register
    a2, a3 = entries[2].id, entries[3].id
    assert [r["id"] for r in sim.state.lanes.register][:2] == [a2, a3]
    # the register delivers a2 and a3, which neither clause asks about: they share the
    # rotation with the clauses, a2 gets the last slot, a3 is promised again
    out = sim.ask("日本旅行订好了吗？天气怎么样？")
    got = ids(out)
    assert got == [entries[10].id, entries[11].id, a2]
    assert a3 in {r["id"] for r in sim.state.lanes.register}


def test_clause_status_survives_a_restart() -> None:
    sim = Sim(two_topics(), config())
    sim.ask("星港项目进展如何？我的猫叫什么名字？")
    back = RecallState.from_json(sim.state.to_json())
    assert back.clause_status == sim.state.clause_status
    assert back.render() == sim.state.block


def test_a_single_clause_round_clears_the_line() -> None:
    sim = Sim(two_topics(), config())
    sim.ask("星港项目进展如何？我的猫叫什么名字？")
    sim.ask("日本旅行订好了吗")
    assert "本轮子问题召回情况" not in sim.state.block


# ---- ranked -------------------------------------------------------------------------------


def ranked_texts() -> tuple[dict[str, str], dict[str, float]]:
    texts_ = {
        f"g{i}": f"Mina: the staging cluster gateway port and proxy timeout note {i} for the"
        " cluster gateway"
        for i in range(6)
    }
    texts_["trip"] = "Mina: we booked the Kyoto hotel near the station"
    texts_.update({f"x{i}": f"Leo: hotel {i} hotel" for i in range(3)})
    alphas = {fid: 0.9 for fid in texts_}
    alphas["trip"] = 0.2
    return texts_, alphas


ASK = "Which gateway port and proxy timeout did we set for the staging cluster? Which hotel?"


def test_ranked_two_questions_get_their_own_rankings() -> None:
    texts_, alphas = ranked_texts()
    sim = RankedSim(texts_, alphas, ranked(firstGenMax=2, adaptiveQuota={"enabled": False}))
    out = sim.ask(ASK)
    assert out.recalled == ["g0", "x0"]
    assert [c["protected"] for c in out.recall_record["clauseInfo"]] == ["g0", "x0"]
    assert sim.state.block.endswith("；2.「Which hotel」命中 1 条")
    # one ranking for the whole message: the gateway's many terms take both slots
    whole = RankedSim(
        texts_,
        alphas,
        ranked(firstGenMax=2, adaptiveQuota={"enabled": False}, clauseSplit={"enabled": False}),
    )
    assert whole.ask(ASK).recalled == ["g0", "g1"]
    assert "本轮子问题召回情况" not in whole.state.block


def test_ranked_a_clause_served_by_the_block_takes_its_slot_without_reinjection() -> None:
    texts_, alphas = ranked_texts()
    sim = RankedSim(texts_, alphas, ranked(firstGenMax=2, adaptiveQuota={"enabled": False}))
    assert sim.ask("Where is the Kyoto hotel?").recalled[0] == "trip"
    out = sim.ask("Which gateway port did we set? Where is the Kyoto hotel?")
    assert out.recalled == ["g0"]  # one new memory, one served from the block
    assert out.recall_record["clauseInfo"][1]["protected"] == "trip"
    assert "2.「Where is the Kyoto hotel」命中 2 条" in sim.state.block  # trip and x0


def test_ranked_a_clause_without_memory_says_so() -> None:
    texts_, alphas = ranked_texts()
    sim = RankedSim(texts_, alphas, ranked())
    sim.ask("Which gateway port did we set? What is my cat called?")
    assert sim.state.block.endswith("2.「What is my cat called」" + texts.RECALL_CLAUSE_NONE)
