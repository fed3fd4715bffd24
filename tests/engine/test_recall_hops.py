"""`recall.hops` (reference §3.0.2): descendant generations through the keywords of each
generation's memories; 0 (the default) has none; legacy ignores it."""

from __future__ import annotations

import pytest

from engine.recall import CandidateIndex
from tests.engine.recall_fixtures import BASE_MS, Entry, Sim, config
from tests.engine.test_recall_ranked import RankedSim, ranked


def chain() -> list[Entry]:
    def e(i: int, alpha: float, *kws: str) -> Entry:
        return Entry(f"mem-20261025T000000Z-{i:04d}", alpha, BASE_MS + i, list(kws))

    return [
        e(1, 0.9, "星港项目", "接口网关"),
        e(2, 0.8, "接口网关", "灰度比例"),
        e(3, 0.7, "灰度比例", "发布窗口"),
        e(4, 0.95, "日本旅行"),
    ]


def generations(out: object) -> dict[str, tuple[str, int]]:
    rec = out.recall_record  # type: ignore[attr-defined]
    return {a["id"]: (a["lane"], a["generation"]) for a in rec["added"]}


@pytest.mark.parametrize("hops", [0, 1, 2, 5])
def test_fair_each_hop_is_one_more_generation(hops: int) -> None:
    entries = chain()
    sim = Sim(entries, config(hops=hops))
    got = generations(sim.ask("星港项目"))
    want = {entries[0].id: ("rareHigh", 1)}
    for g, entry in enumerate(entries[1:3], start=2):
        if g <= hops + 1:
            want[entry.id] = ("hop", g)
    assert got == want
    assert sim.ask("星港项目").recall_record["hops"] == hops


def test_descendants_are_shown_as_their_generation() -> None:
    sim = Sim(chain(), config(hops=1))
    sim.ask("星港项目")
    gens = sorted(a.generation for a in sim.state.additions)
    assert gens == [1, 2]
    assert "· 第2代 ·" in sim.state.block


def test_each_generation_takes_at_most_the_quota() -> None:
    entries = [
        Entry(f"mem-20261025T000000Z-{i:04d}", 0.9, BASE_MS + i, ["共同话题"]) for i in range(9)
    ]
    entries.insert(0, Entry("mem-20261025T000000Z-0100", 0.95, BASE_MS, ["星港项目", "共同话题"]))
    cfg = config(hops=3, firstGenMax=2, adaptiveQuota={"enabled": False})
    got = generations(Sim(entries, cfg).ask("星港项目"))
    per_gen: dict[int, int] = {}
    for _, g in got.values():
        per_gen[g] = per_gen.get(g, 0) + 1
    assert per_gen[1] == 1 and all(n <= 2 for n in per_gen.values())


def test_ranked_descendants_follow_the_relevant_memories() -> None:
    texts = {"a": "星港项目 接口网关 的设计", "b": "灰度比例 讨论", "c": "日本旅行 的计划"}
    cfg = ranked(hops=1)
    sim = RankedSim(texts, {}, cfg)
    # the sim's entries carry the keyword "x": give them real ones
    sim.entries[0].keywords = ["星港项目", "接口网关"]
    sim.entries[1].keywords = ["接口网关", "灰度比例"]
    sim.entries[2].keywords = ["日本旅行"]
    sim.index = CandidateIndex(sim.entries, cfg, 2)
    out = sim.ask("星港项目的设计")
    assert out.recalled[0] == "a"
    assert generations(out)["b"] == ("hop", 2)
    assert "c" not in out.recalled


def test_legacy_ignores_hops() -> None:
    entries = chain()
    cfg = config(mode="legacy", hops=3, seed=7, probabilityScale=100)
    out = Sim(entries, cfg).ask("星港项目")
    assert all(lane == "legacy" for lane, _ in generations(out).values())
    assert out.recall_record["hops"] == 0
