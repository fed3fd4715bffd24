"""`make eval`: the generator's premises, the evidence checker, the baseline, a quick run.

The benchmark is only as good as its premises: every question's evidence exists, each
evidence surface string is in exactly one message (so finding it in a block means the
evidence message was recalled), and the daemon's rendering (relative-time notes) does
not break it. The quick run goes through a real private daemon end to end.
"""

from __future__ import annotations

import dataclasses
import re
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.eval.baseline import Bm25, Folder, chinese_tokens, tokenize
from bench.eval.check import block_entries, entry_chars, evidence_found
from bench.eval.generate import (
    DEFAULT_SIZE,
    LANGS,
    QUESTION_KINDS,
    QUICK_SIZE,
    TIMEZONE,
    Conversation,
    Lang,
    generate,
    validate,
)
from bench.eval.play import Answer, ConversationRun, user_config
from bench.eval.report import metrics, sequence_losses
from engine.recall.assistant_said import detect_quote
from engine.recall.dates import annotate_relative_time, resolve_timezone

SEED = 20260105


@pytest.fixture(scope="module", params=LANGS)
def conversations(request: pytest.FixtureRequest) -> list[Conversation]:
    lang: Lang = request.param
    return [generate(SEED, lang, i) for i in range(3)] + [generate(7, lang, 0, QUICK_SIZE)]


def test_generator_is_deterministic() -> None:
    for lang in LANGS:
        assert generate(SEED, lang, 1) == generate(SEED, lang, 1)
        assert generate(SEED, lang, 1).to_json() == generate(SEED, lang, 1).to_json()
        assert generate(SEED, lang, 1) != generate(SEED + 1, lang, 1)
        assert generate(SEED, lang, 1) != generate(SEED, lang, 2)


def test_every_evidence_exists_and_each_surface_is_in_exactly_one_message(
    conversations: list[Conversation],
) -> None:
    for conv in conversations:
        messages = conv.messages()
        by_id = {m.id: m for m in messages}
        assert len(by_id) == len(messages)
        assert conv.questions and conv.facts
        for q in conv.questions:
            assert q.evidence and len(q.evidence) == len(q.surfaces)
            for mid, surface in zip(q.evidence, q.surfaces, strict=True):
                assert mid in by_id, (q.id, mid)
                holders = [m.id for m in messages if surface in m.text]
                assert holders == [mid], (q.id, surface, holders)
                assert surface not in q.text
        for fact in conv.facts:
            assert [m.id for m in messages if fact.surface in m.text] == [fact.message_id]
        assert validate(conv) == []


def test_surfaces_survive_the_relative_time_notes_of_the_block(
    conversations: list[Conversation],
) -> None:
    tz = resolve_timezone(TIMEZONE)
    for conv in conversations:
        by_id = {m.id: m for m in conv.messages()}
        for fact in conv.facts:
            m = by_id[fact.message_id]
            assert fact.surface in annotate_relative_time(m.text, m.time_ms, tz, 1), fact.id


def test_two_and_said_questions(conversations: list[Conversation]) -> None:
    for conv in conversations:
        by_id = {m.id: m for m in conv.messages()}
        kinds = [q.kind for q in conv.questions]
        # asked after every other kind (the sequence regime of the others is unchanged)
        tail = [k for k in kinds if k in ("two", "said")]
        assert kinds[len(kinds) - len(tail) :] == tail
        two = [q for q in conv.questions if q.kind == "two"]
        assert two and all(len(q.evidence) == 2 for q in two)
        if conv.lang == "zh":
            assert all(q.text.count("？") == 2 for q in two)
        else:
            assert all(q.text.count("?") == 2 for q in two)
        said = [q for q in conv.questions if q.kind == "said"]
        assert said
        for q in said:
            assert [by_id[m].role for m in q.evidence] == ["assistant"]
            assert detect_quote(q.text) is not None  # it quotes the assistant


def test_conversation_shape(conversations: list[Conversation]) -> None:
    for conv in conversations[:3]:  # default size
        lo, hi = DEFAULT_SIZE.sessions
        assert lo <= len(conv.sessions) <= hi
        assert all(20 <= len(s.turns) <= 40 for s in conv.sessions)
        first = [q for q in conv.questions if q.kind not in ("two", "said")]
        assert 30 <= len(first) <= 50
        assert {q.kind for q in conv.questions} == set(QUESTION_KINDS)
        assert any(len(q.evidence) == 2 for q in conv.questions if q.kind == "multihop")
        dates = [s.date for s in conv.sessions]
        assert dates == sorted(dates) and len(set(dates)) == len(dates)
        times = [m.time_ms for m in conv.messages()]
        assert times == sorted(times)
        user = f"{conv.user}:" if conv.lang == "en" else f"{conv.user}："
        friend = f"{conv.friend}:" if conv.lang == "en" else f"{conv.friend}："
        turns = [t for s in conv.sessions for t in s.turns]
        assert all(t.user.text.startswith(user) for t in turns)
        prefixed = sum(t.assistant.text.startswith(friend) for t in turns)
        assert len(turns) - 4 <= prefixed < len(turns)  # a few promises, as an assistant
        for q in conv.questions:
            if q.kind == "temporal":
                assert q.answer in dates


def test_chinese_is_written_with_full_width_punctuation() -> None:
    conv = generate(SEED, "zh", 0)
    texts = [m.text for m in conv.messages()] + [q.text for q in conv.questions]
    ascii_punct = re.compile(r"[,.?!:;()]")
    assert not [t for t in texts if ascii_punct.search(t)]
    assert any("，" in t for t in texts) and any("？" in t for t in texts)


def test_validate_finds_a_surface_planted_twice() -> None:
    conv = generate(SEED, "en", 0)
    fact = conv.facts[0]
    s0 = conv.sessions[-1]
    turn = s0.turns[0]
    bad_turn = dataclasses.replace(
        turn, user=dataclasses.replace(turn.user, text=turn.user.text + " " + fact.surface)
    )
    bad_session = dataclasses.replace(s0, turns=(bad_turn, *s0.turns[1:]))
    bad = dataclasses.replace(conv, sessions=(*conv.sessions[:-1], bad_session))
    problems = validate(bad)
    assert any(fact.surface in p for p in problems), problems


BLOCK = (
    "## 记忆回忆（按创建时间从早到晚）\n\n以下是更早对话的归档片段…\n\n"
    "### 回忆 1 · 归档于 2026-12-01 周二 15:56 · α=0.53 · β=+0.0 · 第1代 · 关键词：bakery\n"
    "user: Mina: Big news, my cousin Arlo lives on   Juniper\nStreet in Porto now.\n"
    "assistant: Leo: Haha great.\n\n"
    "### 回忆 2 · 归档于 2026-12-01 周二 15:56 · α=0.40 · β=+0.0 · 第1代 · 关键词：猫\n"
    "user: 林夏：思思家的猫叫团子，老是偷袜子。\n"
)


def test_evidence_checker() -> None:
    assert evidence_found(BLOCK, "Juniper Street")  # whitespace is normalised
    assert evidence_found(BLOCK, "叫团子")
    assert not evidence_found(BLOCK, "Quince Lane")
    assert not evidence_found(BLOCK, "叫豆豆")
    assert not evidence_found(BLOCK, "")
    assert not evidence_found("", "Juniper Street")
    assert block_entries(BLOCK) == 2 and block_entries("") == 0
    assert entry_chars(BLOCK) == len(BLOCK) - BLOCK.index("### 回忆") and entry_chars("") == 0


def test_baseline_tokenizers_and_retrieval() -> None:
    assert chinese_tokens("林夏买了降噪耳机，花了386块 OK") == [
        *("林夏", "夏买", "买了", "了降", "降噪", "噪耳", "耳机"),
        *("花了", "386", "块", "ok"),
    ]
    assert tokenize(["Mina finished the running race"], "en") == [["mina", "finish", "run", "race"]]
    folders = [
        Folder("mem-1", "user: Mina: I paid 86 euros for the concert tickets.", True, 1),
        Folder("mem-2", "user: Mina: The weather is perfect for hiking.", True, 1),
        Folder("mem-3", "user: 林夏：我买降噪耳机最后花了304块钱。", True, 1),
    ]
    assert [f.id for f in Bm25(folders[:2], "en").top("How much were the tickets?", 1)] == ["mem-1"]
    assert [f.id for f in Bm25(folders, "zh").top("林夏买降噪耳机花了多少钱？", 1)] == ["mem-3"]
    assert Bm25(folders, "en").top("tickets", 0) == []
    assert len(Bm25(folders, "en").top("tickets", 10)) == 3


def _answer(evidence: int, found: int, bm25: int, entries: int) -> Answer:
    return Answer(
        "q", "single", "fresh", evidence, found, entries, entries, 0, 0, False, bm25, 0, 0
    )


def test_metrics() -> None:
    m = metrics([_answer(2, 1, 2, 3), _answer(1, 1, 0, 0)])
    assert m["questions"] == 2 and m["evidence"] == 3
    assert m["rofmdRecall"] == pytest.approx(2 / 3, abs=1e-4)
    assert m["bm25Recall"] == pytest.approx(2 / 3, abs=1e-4)
    assert m["ratio"] == 1.0
    assert m["rofmdHitRate"] == 0.5 and m["bm25HitRate"] == 0.5
    assert m["budget"] == {"0": 1, "3": 1}
    assert metrics([])["ratio"] is None


def test_sequence_losses_say_what_the_block_held_instead() -> None:
    def row(q: str, regime: Any, found: int, block: tuple[str, ...], kind: str = "two") -> Answer:
        return Answer(
            q, kind, regime, 2, found, len(block), 0, 0, 0, False, 0, 0, 0, block_ids=block
        )

    run = ConversationRun(generate(7, "zh", 0, QUICK_SIZE), played=("a", "b", "c"))
    run.answers = [
        row("q1", "fresh", 2, ("a", "b")),
        row("q2", "fresh", 2, ("a", "c")),
        row("q3", "fresh", 1, ("c",), "single"),
        row("q1", "sequence", 1, ("a", "new")),  # a folder archived while asking
        row("q2", "sequence", 0, ("new", "b")),  # that one again, carried over
        row("q3", "sequence", 0, ("a",), "single"),  # neither
    ]
    losses = sequence_losses([run])["zh"]
    assert losses["two"] == {
        "questions": 2,
        "lost": 3,
        "archived while asking": 3,
        "carried over": 2,
        "other": 0,
    }
    assert losses["single"]["other"] == 1 and losses["single"]["carried over"] == 0


def test_user_config() -> None:
    assert user_config(None) == {"scoring": {"fallback": "always"}}
    assert user_config("legacy")["recall"] == {"mode": "legacy"}


def _shares(node: Any) -> list[float]:
    """Every share-like number of the summary (recall, hit rates)."""
    out: list[float] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key.endswith(("Recall", "HitRate")):
                out.append(value)
            else:
                out.extend(_shares(value))
    return out


def test_quick_run_end_to_end(tmp_path: Path) -> None:
    path = tmp_path / "eval.json"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [sys.executable, "-m", "bench.eval", "--quick", "--diagnose", "--json", str(path)],
        capture_output=True,
        text=True,
        timeout=90,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert out.returncode == 0, out.stderr[-3000:]
    # the quick run's own cost (CPU seconds of the run and the daemon it starts), which
    # other tests running on the same cores (pytest -n) do not inflate as they do wall time
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert cpu < 30, cpu
    result = orjson.loads(path.read_bytes())
    summary = result["summary"]
    assert set(summary) == {"en", "zh"}
    for lang in ("en", "zh"):
        for regime in ("fresh", "sequence"):
            m = summary[lang][regime]
            assert m["questions"] > 0 and m["evidence"] >= m["questions"]
            assert m["byKind"]
        assert summary[lang]["runs"]["scoredFolders"] > 0
    shares = _shares(summary)
    assert shares and all(0.0 <= s <= 1.0 for s in shares)
    for run in result["runs"]:
        for a in run["answers"]:
            assert 0 <= a["found"] <= a["evidence"] and 0 <= a["bm25Found"] <= a["evidence"]
            if a["regime"] == "fresh":
                assert a["entries"] == a["recalled"]  # the reset left only this round's picks
            assert len(a["blockIds"]) == a["entries"]
            assert len(a["evidenceIds"]) >= 1 and len(a["bm25Ids"]) == a["entries"]
        assert run["playedFolders"]
    for word in ("rofmd", "bm25s@n", "fresh", "sequence", "per question kind", "lost in sequence"):
        assert word in out.stdout
    assert "en-00" in out.stderr and "zh-00" in out.stderr  # progress per conversation
