"""FAIR-DRI lanes, their quotas and the guarantees (reference §1.3 step 3, §1.17)."""

from __future__ import annotations

import heapq
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.recall import analyze_query
from engine.recall.candidates import FolderRow
from engine.recall.fair import descending, lane_split, rotation_firsts, rotation_key
from engine.recall.legacy import generation_factor
from tests.engine.recall_fixtures import BASE_MS, Entry, Sim, config


def mem(i: int, alpha: float, *kws: str) -> Entry:
    return Entry(
        id=f"mem-20261025T000000Z-{i:04d}", alpha=alpha, createdAt=BASE_MS + i, keywords=list(kws)
    )


def picked(sim: Sim, text: str) -> dict[str, str]:
    out = sim.ask(text)
    return {a["id"]: a["lane"] for a in out.recall_record["added"]}


def test_lane_split_defaults() -> None:
    assert lane_split(10, 0.2) == (8, 2)
    assert lane_split(1, 0.2) == (0, 1)
    assert lane_split(20, 0.2) == (16, 4)


def test_rare_high_beats_common_high() -> None:
    entries = [mem(i, 0.9, "公共话题") for i in range(40)] + [mem(99, 0.7, "公共话题", "星港项目")]
    sim = Sim(entries, config())
    lanes = picked(sim, "公共话题和星港项目")
    assert lanes[entries[-1].id] == "rareHigh"
    # k_H = 8 high slots; the 2 rotation slots are for low α only
    assert len(lanes) == 8


def test_register_defers_and_reinjects_within_ttl() -> None:
    entries = [mem(i, 0.9 - i * 0.001, "公共话题") for i in range(20)]
    sim = Sim(entries, config())
    first = picked(sim, "公共话题")
    assert sum(1 for v in first.values() if v == "hi") == 8
    assert len(sim.state.lanes.register) == 12
    second = picked(sim, "你好")  # unrelated: the register still delivers
    assert set(second.values()) == {"register"}
    assert len(second) == 8


def test_register_capacity_drops_are_counted() -> None:
    entries = [mem(i, 0.9, "公共话题") for i in range(100)]
    sim = Sim(entries, config(fairness={"register": {"capFactor": 1, "lookahead": 3}}))
    out = sim.ask("公共话题")
    assert out.recall_record["registerDrops"] == 16
    assert any("register full" in w for w in out.warnings)


def test_low_probe_and_rotation() -> None:
    entries = [mem(i, 0.1, "日常琐事") for i in range(30)] + [mem(50, 0.2, "日常琐事", "蓝色杯子")]
    sim = Sim(entries, config())
    lanes = picked(sim, "日常琐事里的蓝色杯子")
    assert lanes[entries[-1].id] == "lowProbe"
    # no high candidates: the high lane's slots spill into rotation
    assert sum(1 for v in lanes.values() if v == "rotation") == 9


def test_query_boost_respects_cooldown() -> None:
    entries = [mem(i, 0.9, "星港项目", f"词{i}") for i in range(3)]
    sim = Sim(entries, config(maxRecalledBlocks=1, fairness={"recycle": {"cooldownRounds": 3}}))
    sim.ask("星港项目")
    assert len(sim.state.additions) == 1
    trimmed = set(sim.state.lanes.high_recycle)
    assert len(trimmed) == 2
    for _ in range(2):
        assert picked(sim, "星港项目") == {}
    boosted = picked(sim, "星港项目")
    assert set(boosted.values()) == {"queryBoost"}
    assert set(boosted) <= trimmed


def test_recycle_one_per_round_after_cooldown() -> None:
    entries = [mem(i, 0.1, "日常琐事", f"词{i}") for i in range(4)]
    sim = Sim(entries, config(maxRecalledBlocks=1, fairness={"recycle": {"cooldownRounds": 2}}))
    sim.ask("日常琐事")
    assert len(sim.state.lanes.recycle) == 3
    assert picked(sim, "你好") == {}
    got = picked(sim, "你好")
    assert list(got.values()) == ["recycle"]


def test_first_gen_max_zero_disables_without_consuming_state() -> None:
    sim = Sim([mem(1, 0.9, "星港项目")], config(firstGenMax=0))
    out = sim.ask("星港项目")
    assert not out.ran
    assert sim.state.round == 0
    assert sim.state.block == ""


def test_category_expansion_high_alpha_only() -> None:
    entries = [mem(1, 0.8, "偏好", "咖啡"), mem(2, 0.3, "偏好", "茶")]
    sim = Sim(entries, config())
    out = sim.ask("我的喜好是什么")
    assert [a["id"] for a in out.recall_record["added"]] == [entries[0].id]
    assert out.recall_record["categorySeeds"] == ["preference"]
    sim2 = Sim(entries, config(categoryMatch={"enabled": False}))
    assert sim2.ask("我的喜好是什么").recall_record["added"] == []


def test_min_alpha_and_pending_excluded() -> None:
    entries = [mem(1, 0.05, "星港项目"), mem(2, 0.9, "星港项目")]
    entries.append(
        Entry(
            id="mem-20261025T000000Z-0009",
            alpha=1,
            createdAt=BASE_MS,
            keywords=["星港项目"],
            scored=False,
        )
    )
    sim = Sim(entries, config(minAlpha=0.1))
    out = sim.ask("星港项目")
    assert [a["id"] for a in out.recall_record["added"]] == [entries[1].id]


def test_bidirectional_matching() -> None:
    entries = [mem(1, 0.9, "接口网关 8080"), mem(2, 0.9, "网关")]
    sim = Sim(entries, config())
    assert set(picked(sim, "网关")) == {entries[0].id, entries[1].id}
    sim2 = Sim(entries, config())
    assert entries[1].id in picked(sim2, "星港项目的接口网关")


def test_high_relevance_replaces_tail() -> None:
    common = [mem(i, 0.9, "公共话题") for i in range(20)]
    low = [mem(50 + i, 0.1, "公共话题") for i in range(5)]
    target = mem(90, 0.6, "公共话题", "灰度比例")
    cfg = config(fairness={"rareTerm": {"minPosting": 0, "ratio": 0}})
    sim = Sim([*common, *low, target], cfg)
    out = sim.ask("公共话题的灰度比例")
    rec = out.recall_record
    lanes = {a["id"]: a["lane"] for a in rec["added"]}
    assert lanes[target.id] == "highRelevance"
    assert rec["highRelevanceCandidates"] == 1
    assert rec["highRelevancePicks"] == 1
    assert rec["highRelevanceReplaced"] == 1
    assert len(rec["added"]) == 10
    assert list(lanes.values()).count("rotation") == 1
    off = Sim(
        [*common, *low, target],
        config(
            fairness={"rareTerm": {"minPosting": 0, "ratio": 0}}, highRelevance={"enabled": False}
        ),
    )
    assert target.id not in {a["id"] for a in off.ask("公共话题的灰度比例").recall_record["added"]}


def test_round_budget_drops_from_tail() -> None:
    entries = [mem(i, 0.9, "星港项目") for i in range(5)]
    sim = Sim(entries, config(fairness={"roundBudget": {"maxChars": 150}}))
    out = sim.ask("星港项目")
    assert out.recall_record["roundBudgetDropped"] > 0
    assert 1 <= len(out.recall_record["added"]) < 5
    assert any("round budget" in w for w in out.warnings)


def test_deterministic_mode_is_plain_sigma() -> None:
    entries = [mem(i, 0.1 * (i + 1), "星港项目") for i in range(9)]
    sim = Sim(entries, config(mode="deterministic", firstGenMax=3))
    got = [a["id"] for a in sim.ask("星港项目").recall_record["added"]]
    assert got == [entries[8].id, entries[7].id, entries[6].id]


def test_legacy_generations_and_seed() -> None:
    assert generation_factor(1, 5, 3) == 1.0
    den = 1 - math.erf(-4 / (3 * math.sqrt(2)))
    assert math.isclose(generation_factor(2, 5, 3), (1 - math.erf(-3 / (3 * math.sqrt(2)))) / den)
    entries = [mem(1, 1.0, "星港项目", "灰度"), mem(2, 1.0, "灰度", "回滚"), mem(3, 1.0, "回滚")]
    cfg = config(mode="legacy", seed=7, mu=50)
    sim = Sim(entries, cfg)
    added = sim.ask("星港项目").recall_record["added"]
    assert [(a["id"], a["generation"]) for a in added] == [
        (entries[0].id, 1),
        (entries[1].id, 2),
        (entries[2].id, 3),
    ]
    runs = set()
    for _ in range(5):
        s = Sim(list(entries), config(mode="legacy", seed=7, probabilityScale=0.5))
        runs.add(tuple(a["id"] for a in s.ask("星港项目").recall_record["added"]))
    assert len(runs) == 1


# ---- guarantees as properties --------------------------------------------------------

alphas = st.floats(min_value=0.01, max_value=1.0, allow_nan=False)


@settings(max_examples=40, deadline=None)
@given(st.lists(alphas, min_size=0, max_size=60), st.floats(min_value=0.6, max_value=1.0))
def test_g1_rare_high_alpha_hit_appears_in_the_same_round(
    common: list[float], target_alpha: float
) -> None:
    entries = [mem(i, a, "公共话题") for i, a in enumerate(common)]
    target = mem(500, target_alpha, "星港项目")
    sim = Sim([*entries, target], config())
    assert target.id in picked(sim, "公共话题 星港项目")


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=1, max_value=40), st.integers(min_value=0, max_value=12))
def test_g2_low_alpha_reached_within_ceil_l_over_r(low: int, high: int) -> None:
    cfg = config(maxRecalledBlocks=400)
    _, r = lane_split(cfg.recall.first_gen_max, cfg.recall.fairness.explore_ratio)
    entries = [mem(i, 0.05 + (i % 5) * 0.1, "日常琐事") for i in range(low)]
    entries += [mem(1000 + i, 0.9, "日常琐事") for i in range(high)]
    sim = Sim(entries, cfg)
    seen: set[str] = set()
    for _ in range(math.ceil(low / r)):
        seen |= set(picked(sim, "日常琐事"))
    assert {e.id for e in entries[:low]} <= seen


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(alphas, st.sampled_from(["甲项目", "乙项目", "丙项目"])), min_size=1, max_size=30
    ),
    st.lists(
        st.sampled_from(["甲项目", "乙项目", "丙项目", "甲项目和乙项目", "你好"]),
        min_size=1,
        max_size=40,
    ),
)
def test_g4_no_id_reinjected_before_cooldown(
    folders: list[tuple[float, str]], queries: list[str]
) -> None:
    cooldown = 4
    cfg = config(maxRecalledBlocks=3, fairness={"recycle": {"cooldownRounds": cooldown}})
    sim = Sim([mem(i, a, kw) for i, (a, kw) in enumerate(folders)], cfg)
    last: dict[str, int] = {}
    for q in queries:
        out = sim.ask(q)
        rnd = sim.state.round
        for a in out.recall_record["added"]:
            if a["id"] in last:
                assert rnd - last[a["id"]] >= cooldown
            last[a["id"]] = rnd


def test_replays_are_identical() -> None:
    entries = [
        mem(i, ((i * 37) % 100) / 100 + 0.01, "日常琐事" if i % 3 else "星港项目")
        for i in range(200)
    ]
    queries = ["日常琐事", "星港项目", "星港项目和日常琐事", "你好"] * 5

    def run() -> list[tuple[str, ...]]:
        sim = Sim(list(entries), config(maxRecalledBlocks=12))
        return [tuple(a["id"] for a in sim.ask(q).recall_record["added"]) for q in queries]

    first = run()
    for _ in range(99):
        assert run() == first


def test_query_keywords_capped_at_16() -> None:
    text = " ".join(f"word{i}x" for i in range(40))
    assert len(analyze_query(text, config()).keywords) == 16


def test_trim_keeps_what_the_current_query_matched_over_pinned_high_alpha() -> None:
    """A memory picked for this very question is trimmed last, even below a pinned
    high-α one the question did not match (otherwise it would be injected, evicted in
    the same round and then held in cooldown)."""
    from engine.recall.round import trim_block
    from engine.recall.state import Addition, RecallState

    cfg = config(maxRecalledBlocks=2)
    state = RecallState(persist=False)
    state.round = 5
    state.additions = [
        Addition("mem-a", 0.95, 3.0, 1, injected_round=1, body="a" * 50),
        Addition("mem-b", 0.90, 3.0, 2, injected_round=2, body="b" * 50),
        Addition("mem-c", 0.20, 3.0, 3, injected_round=5, body="c" * 50),
    ]
    evicted, _ = trim_block(state, cfg, None, {"mem-c"})
    assert [a.id for a in evicted] == ["mem-b"]
    assert [a.id for a in state.additions] == ["mem-a", "mem-c"]
    assert state.lanes.high_recycle == {"mem-b": 5}
    # without a current-query match the pin holds: the low-α one goes first
    state.additions.append(Addition("mem-d", 0.91, 3.0, 4, injected_round=5, body="d" * 50))
    evicted, _ = trim_block(state, cfg, None, set())
    assert [a.id for a in evicted] == ["mem-c"]


def _negated(fid: str) -> tuple[int, ...]:
    """The id part of the rotation key as it was: each code point negated."""
    return tuple(-ord(c) for c in fid)


_ids = st.text(
    alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, categories=None),
    max_size=8,
)


@settings(max_examples=500, deadline=None)
@given(a=_ids, b=_ids)
def test_the_descending_id_key_orders_ids_as_negated_code_points(a: str, b: str) -> None:
    """`descending` (bytes, C speed) orders any two ids as the tuple of negated code
    points did: descending where they differ, a prefix first, surrogates included."""
    assert (descending(a) < descending(b)) == (_negated(a) < _negated(b))
    assert (descending(a) == descending(b)) == (a == b)


def test_the_descending_id_key_on_folder_ids() -> None:
    ids = [
        "mem-20260101T000000Z-0001",
        "mem-20260101T000000Z-0002",
        "mem-20260101T000000Z-1000",
        "mem-20260101T000000Z-10000",  # a longer sequence number: its prefix comes first
        "mem-20251231T235959Z-0001",
        "mem-20260101T000000Z-0001\ud800",
    ]
    assert sorted(ids, key=descending) == sorted(ids, key=_negated)
    assert sorted(ids, key=descending)[:2] == [
        "mem-20260101T000000Z-1000",
        "mem-20260101T000000Z-10000",
    ]


_folder_rows = st.lists(
    st.tuples(
        st.sampled_from([0.05, 0.1, 0.3, -0.0, 0.0]),
        st.integers(0, 3),
        st.sampled_from(["mem-a", "mem-b", "mem-b1", "mem-c", "mem-\ud800", "mem-é"]),
    ),
    max_size=40,
)


@settings(max_examples=400, deadline=None)
@given(
    rows=_folder_rows,
    cursor=st.one_of(
        st.none(),
        st.tuples(
            st.sampled_from([0.05, 0.1, 0.3]),
            st.integers(0, 3),
            st.sampled_from(["mem-b", "mem-z"]),
        ),
    ),
    m=st.integers(0, 45),
    data=st.data(),
)
def test_the_rotation_lane_s_first_folders_are_the_whole_key_s(
    rows: list[tuple[float, int, str]],
    cursor: tuple[float, int, str] | None,
    m: int,
    data: st.DataObject,
) -> None:
    """`rotation_firsts` makes the id part of the key only where α and createdAt tie; it
    picks what `heapq.nsmallest` over the whole key picks, in its order, ties (repeated
    ids) in the pool's order, wherever the cursor falls."""
    folders = [FolderRow(fid, alpha, 0.0, created, ()) for alpha, created, fid in rows]
    pool = data.draw(st.permutations(range(len(folders))))
    whole = rotation_key(cursor)
    expected = heapq.nsmallest(
        m, pool, key=lambda n: whole((folders[n].alpha, folders[n].created_at, folders[n].id))
    )
    assert rotation_firsts(folders, list(pool), cursor, m) == expected
