"""`recall.mode = "ranked"`: relevance first, a block that follows the conversation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.config import MemoryConfig
from engine.recall import Addition, CandidateIndex, RecallState
from engine.recall.fair import Pick
from engine.recall.round import RoundOutcome
from engine.relevance.index import RelevanceIndex
from tests.engine.recall_fixtures import BASE_MS, Entry, ask_round, config


def ranked(**over: Any) -> MemoryConfig:
    return config(mode="ranked", **over)


@dataclass
class RankedSim:
    """Folders in memory with a text each; picks render as their text."""

    texts: dict[str, str]
    alphas: dict[str, float]
    cfg: MemoryConfig
    state: RecallState = field(default_factory=lambda: RecallState(persist=False))
    window: int | None = None

    def __post_init__(self) -> None:
        self.entries = [
            Entry(fid, self.alphas.get(fid, 0.5), BASE_MS + i, ["x"])
            for i, fid in enumerate(sorted(self.texts))
        ]
        self.index = CandidateIndex(self.entries, self.cfg, 1)
        self.relevance = RelevanceIndex(self.texts.__getitem__)
        self.relevance.sync(self.entries)

    def load(self, p: Pick) -> Addition:
        return Addition(
            id=p.id,
            alpha=self.alphas.get(p.id, 0.5),
            beta=0.0,
            created_at_ms=BASE_MS,
            keywords=["x"],
            date="d",
            body=f"user: {self.texts[p.id]}",
        )

    def ask(self, text: str) -> RoundOutcome:
        return ask_round(
            None,
            self.index,
            self.state,
            text,
            self.cfg,
            turn=self.state.round + 1,
            session_key="sim",
            context_window=self.window,
            loader=self.load,
            relevance=self.relevance,
        )

    def block(self) -> list[str]:
        return sorted(self.state.ids())


def chat(n: int) -> dict[str, str]:
    """n folders of the same two speakers' small talk, each with its own topic."""
    topics = ["guitar", "marathon", "pottery", "sushi", "camping", "violin", "chess", "tango"]
    return {
        f"f{i:02d}": f"Mina: wow great! Leo: I tried {topics[i % len(topics)]} lesson {i}"
        for i in range(n)
    }


def test_the_folder_that_answers_beats_high_alpha_name_matches() -> None:
    texts = chat(8)
    texts["ans"] = "Mina: I finally finished the pottery course in Hangzhou"
    alphas = {fid: (0.95 if i % 2 else 0.01) for i, fid in enumerate(sorted(texts))}
    alphas["ans"] = 0.3
    sim = RankedSim(texts, alphas, ranked(firstGenMax=1))
    out = sim.ask("Mina, when did you finish the pottery course?")
    assert out.recalled == ["ans"]
    # fair mode, same folders, the name as everyone's keyword: α decides, not the question
    fair = RankedSim(texts, alphas, config(firstGenMax=1))
    fair.index = CandidateIndex(
        [Entry(e.id, e.alpha, e.createdAt, ["Mina"]) for e in fair.entries], fair.cfg, 2
    )
    assert fair.ask("Mina, when did you finish the pottery course?").recalled != ["ans"]


def test_an_entry_in_the_block_is_not_reinjected_and_counts_as_served() -> None:
    sim = RankedSim(chat(8), {}, ranked(firstGenMax=1))
    first = sim.ask("guitar lesson")
    assert first.recalled == ["f00"]
    again = sim.ask("the guitar lesson again")
    assert again.recalled == []
    assert sim.block() == ["f00"]


def test_a_memory_comes_back_when_needed_again_without_cooldown() -> None:
    sim = RankedSim(chat(8), {}, ranked(firstGenMax=1, ranked={"keepRounds": 0}))
    assert sim.ask("guitar").recalled == ["f00"]
    assert sim.ask("chess").recalled == ["f06"]
    assert sim.block() == ["f06"]  # guitar was not needed: evicted at once
    assert sim.ask("guitar").recalled == ["f00"]


def test_idle_entries_stay_for_keep_rounds_then_leave() -> None:
    sim = RankedSim(chat(8), {}, ranked(firstGenMax=1, ranked={"keepRounds": 1}))
    sim.ask("guitar")
    sim.ask("chess")
    assert sim.block() == ["f00", "f06"]
    sim.ask("tango")
    assert sim.block() == ["f06", "f07"]


def test_asked_in_sequence_each_question_gets_its_answer() -> None:
    texts = chat(16)
    sim = RankedSim(texts, {}, ranked(firstGenMax=2))
    for topic, fids in {
        "guitar": {"f00", "f08"},
        "pottery": {"f02", "f10"},
        "tango": {"f07", "f15"},
        "guitar again": {"f00", "f08"},
    }.items():
        sim.ask(f"how was the {topic}")
        assert fids <= set(sim.block()), topic


def test_the_block_cap_is_in_estimated_tokens_against_the_window() -> None:
    texts = {f"f{i}": f"budget talk {i} " + "words " * 200 for i in range(6)}
    sim = RankedSim(texts, {}, ranked(firstGenMax=6, maxWindowPercent=10), window=3000)
    out = sim.ask("budget")
    assert 1 <= len(sim.state.additions) < 6
    tokens = sum(len(a.text) for a in sim.state.additions) / 3
    assert tokens <= 300 + max(len(a.text) for a in sim.state.additions) / 3
    assert out.block_record["evicted"]
    # the most relevant entries stay: every survivor scores >= every evicted one
    assert set(sim.block()) <= set(out.recall_record["added"][i]["id"] for i in range(6))


def test_min_alpha_and_no_match() -> None:
    sim = RankedSim(chat(8), {"f00": 0.1}, ranked(minAlpha=0.3))
    assert "f00" not in sim.ask("guitar").recalled
    assert sim.ask("zebra quantum").recalled == []


def test_category_fallback_when_no_term_scores() -> None:
    entries_cfg = ranked(firstGenMax=2)
    sim = RankedSim({"a": "川菜 水煮鱼", "b": "部署 端口"}, {"a": 0.9, "b": 0.9}, entries_cfg)
    sim.index = CandidateIndex(
        [Entry("a", 0.9, BASE_MS, ["喜欢川菜", "口味"]), Entry("b", 0.9, BASE_MS + 1, ["端口"])],
        entries_cfg,
        3,
    )
    out = sim.ask("我有什么偏好")
    assert out.recalled == ["a"]
    assert out.recall_record["lanesPicked"] == {"ranked": 0, "keyword": 1}


def test_rounds_are_deterministic() -> None:
    def play() -> list[str]:
        sim = RankedSim(chat(24), {f"f{i:02d}": (i % 5) / 5 for i in range(24)}, ranked())
        for q in ("guitar", "marathon and sushi", "chess", "guitar"):
            sim.ask(q)
        return [sim.state.block]

    assert play() == play()


def test_state_round_trips_needed_round() -> None:
    sim = RankedSim(chat(4), {}, ranked())
    sim.ask("guitar")
    a = sim.state.additions[0]
    back = Addition.from_json(a.to_json())
    assert back is not None and back.needed_round == a.needed_round == 1


def test_a_memory_of_the_same_questions_asked_before_does_not_take_the_answers_place() -> None:
    # the conversation archived the user's earlier questions (and replies that answered
    # nothing); asked again, in sequence, each question still gets the memory answering it
    facts = {
        "xinxin": "白露：欣欣上个月开始在百草堂药房工作了。",
        "dawei": "白露：大伟现在在星河科技当程序员。",
        "jiajia": "白露：佳佳搬去厦门了，住在海边。",
    }
    texts = {
        fid: f"韩冬：今天下雨了，我们晚上吃火锅吧。\n{fact}\n韩冬：真不错！"
        for fid, fact in facts.items()
    }
    texts["asked"] = "\n".join(
        f"{q}\n韩冬：嗯，让我想想。"
        for q in (
            "欣欣在哪里工作？",
            "大伟在哪里工作？",
            "佳佳现在住在哪里？",
            "欣欣在哪个单位上班？",
        )
    )
    sim = RankedSim(texts, {"asked": 0.9}, ranked(firstGenMax=1, ranked={"keepRounds": 0}))
    for question, fid in (
        ("欣欣在哪里工作？", "xinxin"),
        ("大伟在哪个单位上班？", "dawei"),
        ("佳佳现在住在哪里？", "jiajia"),
        ("欣欣在哪里工作？", "xinxin"),
    ):
        sim.ask(question)
        assert sim.block() == [fid], question


def _counting_matches(sim: RankedSim, monkeypatch: Any) -> list[str]:
    """Record each keyword match the index makes (the query's text)."""
    made: list[str] = []
    real = CandidateIndex.match

    def match(self: CandidateIndex, query: Any, **kw: Any) -> Any:
        made.append(query.text)
        return real(self, query, **kw)

    monkeypatch.setattr(CandidateIndex, "match", match)
    return made


def test_a_round_that_scores_makes_no_keyword_matches(monkeypatch: Any) -> None:
    """Matching every folder a keyword hits was a third to a half of a ranked round;
    ranked selection reads those candidates only when nothing scores."""
    sim = RankedSim(chat(8), {}, ranked())
    made = _counting_matches(sim, monkeypatch)
    out = sim.ask("guitar lesson")
    assert out.recalled and made == []
    assert out.recall_record["categorySeeds"] == [] and out.recall_record["missType"] is None
    made.clear()
    out = sim.ask("guitar lesson, and the marathon?")  # two clauses: each its own ranking
    assert made == []


def test_a_round_that_falls_back_or_misses_makes_them_once(monkeypatch: Any) -> None:
    entries_cfg = ranked(firstGenMax=2)
    sim = RankedSim({"a": "川菜 水煮鱼", "b": "部署 端口"}, {"a": 0.9, "b": 0.9}, entries_cfg)
    sim.index = CandidateIndex(
        [Entry("a", 0.9, BASE_MS, ["喜欢川菜", "口味"]), Entry("b", 0.9, BASE_MS + 1, ["端口"])],
        entries_cfg,
        3,
    )
    made = _counting_matches(sim, monkeypatch)
    out = sim.ask("我有什么偏好")
    assert out.recalled == ["a"] and len(made) == 1
    assert out.recall_record["categorySeeds"] == ["preference"]
    made.clear()
    miss = sim.ask("zebra quantum")
    assert miss.recalled == [] and miss.recall_record["missType"] == "keyword"
    assert len(made) == 1
