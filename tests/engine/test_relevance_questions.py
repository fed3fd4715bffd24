"""Questions are not answers: a sentence that asks is never a folder's best passage, and
the question words of a message are not searched for."""

from __future__ import annotations

import struct
import zlib
from collections import Counter
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.recall.query import search_text
from engine.relevance import snapshot
from engine.relevance.analyzer import search_passages, search_terms, search_terms_by_line
from engine.relevance.index import RelevanceIndex
from engine.relevance.snapshot import SnapshotError, read_snapshot, write_snapshot
from tests.engine.relevance_fixtures import E


def index_of(texts: dict[str, str]) -> RelevanceIndex:
    idx = RelevanceIndex(texts.__getitem__)
    idx.sync([E(k) for k in sorted(texts)])
    return idx


def best(idx: RelevanceIndex, question: str, limit: int = 1) -> tuple[str, ...]:
    """What ranked recall ranks first for `question` (its passage rerank on)."""
    terms = idx.query_terms(search_text(question))
    return idx.rank(terms, limit=limit, min_relative=0.3, passage_weight=0.5).ids


CHATTER_ZH = "\n".join(
    f"韩冬：今天{w}，我们晚上一起吃饭吧。" for w in ("下雨了", "好热", "很忙", "放假", "降温")
)
ASKED_ZH = "\n".join(
    [
        "欣欣在哪里工作？",
        "韩冬：嗯，让我想想。",
        "大伟在哪里工作？",
        "韩冬：好问题，等我一下。",
        "佳佳在哪里工作？",
        "韩冬：我回忆一下啊。",
    ]
)
ANSWER_ZH = CHATTER_ZH + "\n白露：欣欣上个月开始在百草堂药房工作了。\n韩冬：真不错！"


def test_a_line_is_split_into_what_it_states_and_what_it_asks() -> None:
    line = "韩冬：我八点就在沙发上睡着了。你怎么看？"
    assert search_passages(line) == [
        (search_terms("韩冬：我八点就在沙发上睡着了。"), False),
        (search_terms("你怎么看？"), True),
    ]
    assert search_passages("Did Mina move? She did.\nno question here") == [
        (search_terms("She did."), False),
        (search_terms("Did Mina move?"), True),
        (search_terms("no question here"), False),
    ]
    # a line opening with punctuation: its sentences still end where they end
    assert search_passages("？好吗？他来了。") == [
        (search_terms("他来了。"), False),
        (search_terms("？好吗？"), True),
    ]
    # full-width, NFKC forms and a ?! ending ask too; a text without any is its lines
    for asked in ("真的吗？", "真的吗﹖", "really?!"):
        assert search_passages(asked) == [([], False), (search_terms(asked), True)]
    plain = "星港项目的网关端口是8080。\nnode.js wow"
    assert search_passages(plain) == [(t, False) for t in search_terms_by_line(plain)]


_PIECES = st.sampled_from(
    ["欣欣", "在哪里", "工作", "Mina", "moved", "to", "Lisbon", "8080", "node.js", "的", " "]
)
_ENDS = st.sampled_from(
    ["", "。", "？", "?", ".", "!", "?!", "；", "，", "\n", "﹖", "...", "！", "．", "⁉", "｡"]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.lists(_PIECES, max_size=4), _ENDS), max_size=12))
def test_passages_hold_exactly_the_terms_of_each_line(parts: list[tuple[list[str], str]]) -> None:
    text = "".join("".join(words) + end for words, end in parts)
    lines = search_terms_by_line(text)
    passages = search_passages(text)
    # every line gives its stated passage, then its asking one when it has any
    at = 0
    for terms in lines:
        got = Counter(passages[at][0])
        assert not passages[at][1]
        at += 1
        if at < len(passages) and passages[at][1]:
            got.update(passages[at][0])
            at += 1
        assert got == Counter(terms)
    assert at == len(passages)


def test_a_folder_of_questions_does_not_beat_the_folder_that_answers() -> None:
    texts = {"asked": ASKED_ZH, "answer": ANSWER_ZH, "chat": CHATTER_ZH}
    idx = index_of(texts)
    assert best(idx, "欣欣在哪里工作？") == ("answer",)
    texts_en = {
        "asked": "Where does Alice work?\nLeo: let me think.\nWhere does Bob work?\nLeo: hmm.",
        "answer": "Leo: rain again today\nMina: Alice works at the bakery on Main Street now\n"
        "Leo: lovely\nMina: we should meet for dinner soon",
        "chat": "Leo: rain again today\nMina: we should meet for dinner soon",
    }
    assert best(index_of(texts_en), "Where does Alice work?") == ("answer",)


def test_an_asking_sentence_still_counts_for_its_folder() -> None:
    texts = {
        "proposal": "Mina: should we move the launch to Friday?\nLeo: yes",
        "other": "Mina: the weather is nice\nLeo: yes",
    }
    idx = index_of(texts)
    assert best(idx, "when is the launch") == ("proposal",)


def test_question_words_are_not_searched_for() -> None:
    assert search_text("欣欣在哪里工作？") == "欣欣在 工作？"
    assert search_text("白露决定接受哪家公司的offer？") == "白露决定接受 公司的offer？"
    assert search_text("种了几棵番茄苗，花了多少钱？") == "种了 棵番茄苗，花了 钱？"
    assert search_text("什么时候去？谁说的？为什么呢") == " 去？ 说的？  "
    # a statement that holds question words (an indirect question) does not pull the
    # question to itself: the words of its answer do
    texts = {
        "unsure": "白露：我也不知道大伟在哪里工作。",
        "answer": "白露：欣欣在百草堂药房工作。",
        "chat": "白露：今天下雨了。",
    }
    idx = index_of(texts)
    raw = idx.rank(idx.query_terms("欣欣在哪里工作？"), limit=1, passage_weight=0.5)
    assert raw.ids == ("unsure",)
    assert best(idx, "欣欣在哪里工作？") == ("answer",)


def _snapshot_without(data: bytes, name: str) -> bytes:
    """`data` (a snapshot file) without section `name`, every checksum made right: what
    a version that did not store it wrote."""
    (header_len,) = struct.unpack_from("<Q", data, 8)
    header = orjson.loads(data[16 : 16 + header_len])
    at = 16 + header_len
    body = b""
    sections, sums = [], []
    for (sec, code, count), check in zip(header["sections"], header["sums"], strict=True):
        size = count * np.dtype(code).itemsize
        if sec != name:
            body += data[at : at + size]
            sections.append([sec, code, count])
            sums.append(check)
        at += size
    header["sections"], header["sums"] = sections, sums
    raw = orjson.dumps(header)
    head = data[:8] + struct.pack("<Q", len(raw)) + raw
    return head + body + struct.pack("<I4s", zlib.crc32(head), snapshot.END)


def test_the_asking_marks_survive_a_snapshot_and_a_compaction(tmp_path: Path) -> None:
    texts = {"asked": ASKED_ZH, "answer": ANSWER_ZH, "chat": CHATTER_ZH}
    texts |= {f"x{i}": f"白露：第{i}天下雨了。你呢？" for i in range(6)}
    idx = index_of(texts)
    path = tmp_path / "snap"
    write_snapshot(path, idx, owner="/s", text_version="v")
    back = read_snapshot(path, texts.__getitem__, owner="/s", extra_stopwords=(), text_version="v")
    back.sync([E(k) for k in sorted(texts)])
    assert best(back, "欣欣在哪里工作？", 3) == best(idx, "欣欣在哪里工作？", 3)
    assert best(back, "欣欣在哪里工作？") == ("answer",)
    # most folders go: the passages are compacted, the marks move with them
    kept = ["answer", "asked", "chat"]
    idx.sync([E(k) for k in kept])
    assert best(idx, "欣欣在哪里工作？", 3) == best(
        index_of({k: texts[k] for k in kept}), "欣欣在哪里工作？", 3
    )
    assert best(idx, "欣欣在哪里工作？") == ("answer",)
    # a snapshot from before the marks were stored is not used: its passages are lines
    path.write_bytes(_snapshot_without(path.read_bytes(), "s.ask"))
    with pytest.raises(SnapshotError, match="inconsistent arrays"):
        read_snapshot(path, texts.__getitem__, owner="/s", extra_stopwords=(), text_version="v")
