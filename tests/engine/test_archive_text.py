"""Sentence splitting, chunking, titles and the archive texts (reference §1.1, §1.7, §1.8)."""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Any

import pytest

from engine import texts
from engine.archive.chunks import ArchMessage, chunk_messages, fold_title, titles
from engine.archive.note import render_note
from engine.archive.sentences import split_sentences
from engine.archive.surface import parse_surface, well_formed

SPEC = Path("/work/shared/spec/dsh-rofm-reference.txt")


def _spec() -> str:
    if not SPEC.exists():
        pytest.skip("reference not available")
    return SPEC.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "text",
    [
        texts.ARCHIVE_NOTE.format(n="N"),
        texts.ARCHIVE_PINNED_APPENDIX.format(n="N"),
        texts.ARCHIVE_IMAGE_PLACEHOLDER.format(name="<name>"),
        texts.ARCHIVE_TITLE_FALLBACK.format(n="N"),
        texts.ARCHIVE_TITLE_DUPLICATE.format(title="", n="<folder 序号>"),
    ],
)
def test_archive_texts_are_verbatim_after_nfkc(text: str) -> None:
    assert unicodedata.normalize("NFKC", text) in _spec()


def test_note_pattern_matches_the_selfcheck_regex() -> None:
    import re

    note = render_note(12, [("tool-jobs", "job 3 done")])
    assert re.match(r"^\[memory\] \d+ 段更早的对话已归档到 memory/", note)
    assert re.match(texts.ARCHIVE_NOTE_PATTERN, note).group(1) == "12"  # type: ignore[union-attr]
    assert note.splitlines()[2].startswith("[memory] 本次归档区间内还有 1 条非对话上下文")
    assert note.endswith("[tool-jobs] job 3 done")


@pytest.mark.parametrize(
    ("text", "pieces"),
    [
        (
            "圆周率是3.14，版本v1.2.0发布了。下一句！好",
            ["圆周率是3.14，版本v1.2.0发布了。", "下一句！", "好"],
        ),
        (
            "Pi is 3.14 ok. Next?yes; and\n\nnew",
            ["Pi is 3.14 ok. ", "Next?yes; ", "and\n\n", "new"],
        ),
        ("你好……好吧。」然后", ["你好……", "好吧。」", "然后"]),
        ("v1.2.0.final", ["v1.2.0.final"]),
        ("😀。𠮷！🎉", ["😀。", "𠮷！", "🎉"]),
        ("", []),
    ],
)
def test_sentences(text: str, pieces: list[str]) -> None:
    assert split_sentences(text) == pieces
    assert "".join(pieces) == text


def test_sentences_linear_on_many_dots() -> None:
    text = "a." * 200_000
    assert "".join(split_sentences(text)) == text


def test_well_formed_repairs_surrogates() -> None:
    assert well_formed("a\ud83d\ude00b") == "a😀b"
    assert well_formed("x\ud83d") == "x\ufffd"
    assert well_formed("\ude00y") == "\ufffdy"


def _m(role: str, text: str, seq: int = 0, time: int | None = None) -> ArchMessage:
    return ArchMessage(seq=seq, role=role, text=text, time=time)


def test_long_message_splits_at_sentences_and_keeps_time() -> None:
    long = "".join(f"第{i}句话说了一些内容。" for i in range(200))
    msgs = [_m("user", "开始", 1, 100), _m("assistant", long, 2, 200)]
    chunks, capped = chunk_messages(msgs, target_chars=300, min_chars=50, max_folders=500)
    assert not capped and len(chunks) > 5
    docs = [d for c in chunks for d in c.documents(msgs)]
    assert "".join(d["content"] for d in docs if d["seq"] == 2) == long
    frags = [d for d in docs if d["seq"] == 2]
    assert all(d["time"] == 200 for d in frags)
    assert [d["part"] for d in frags] == list(range(1, len(frags) + 1))
    assert all(d["parts"] == len(frags) for d in frags)
    assert all(not d["content"] or d["content"].endswith("。") for d in frags)


def test_single_sentence_longer_than_target_stays_whole() -> None:
    msgs = [_m("user", "x" * 5000)]
    chunks, _ = chunk_messages(msgs, target_chars=1200, min_chars=200, max_folders=500)
    assert len(chunks) == 1 and chunks[0].chars == 5000


def test_small_chunks_merge_and_cap() -> None:
    msgs = [_m("user", "a" * 1000), _m("assistant", "b" * 50), _m("user", "c" * 1000)]
    chunks, _ = chunk_messages(msgs, target_chars=1000, min_chars=200, max_folders=500)
    assert [c.chars for c in chunks] == [1050, 1000]
    msgs = [_m("user", str(i) * 500) for i in range(10)]
    chunks, capped = chunk_messages(msgs, target_chars=500, min_chars=1, max_folders=3)
    assert capped and len(chunks) == 3 and sum(c.chars for c in chunks) == 5000


def test_tool_result_starts_no_folder() -> None:
    msgs = [_m("user", "u" * 900), _m("assistant", "call"), _m("tool", "r" * 900)]
    chunks, _ = chunk_messages(msgs, target_chars=1000, min_chars=1, max_folders=500)
    roles = [[msgs[p.msg].role for p in c.pieces] for c in chunks]
    assert roles == [["user", "assistant", "tool"]]


def test_titles_rules() -> None:
    msgs = [
        _m("user", "  部署   端口\n是多少？  "),
        _m("assistant", "8080"),
        _m("assistant", "继续说明"),
        _m("tool", ""),
        _m("user", "部署 端口 是多少？"),
        _m("assistant", ""),
    ]
    from engine.archive.chunks import Chunk, Piece

    def ch(*idx: int) -> Chunk:
        return Chunk([Piece(i, 0, 1, msgs[i].text) for i in idx])

    got = titles([ch(0, 1), ch(2), ch(3), ch(4)], msgs)
    assert got == [
        "部署 端口 是多少？（1）",
        "部署 端口 是多少？（2）",
        "部署 端口 是多少？（3）",
        "部署 端口 是多少？（4）",
    ]
    lone = [_m("assistant", ""), _m("assistant", "只有助手的话")]
    assert titles([Chunk([Piece(0, 0, 1, "")]), Chunk([Piece(1, 0, 1, "只有助手的话")])], lone) == [
        "第1段对话",
        "只有助手的话",
    ]
    assert fold_title("一二三四五六七八九十" * 3) == ("一二三四五六七八九十" * 3)[:24]
    assert len(fold_title("😀" * 30)) == 24


def _node(seq: int, ntype: str, source: dict[str, str], *parts: str) -> dict[str, Any]:
    """A surface node whose message has text blocks `parts`."""
    content = [{"type": "text", "text": text} for text in parts]
    role = ntype.split("/")[0]
    return {
        "seq": seq,
        "type": ntype,
        "message": {"role": role, "content": content, "source": source},
    }


def test_surface_classification() -> None:
    checkpoint = {"kind": "compact-checkpoint"}
    nodes = parse_surface(
        [
            _node(0, "system/message", {"kind": "system-prompt"}, "sys"),
            _node(1, "user/message", checkpoint, "[memory] 3 段更早的对话已归档到 memory/"),
            _node(2, "user/message", checkpoint, "Summary of earlier"),
            _node(3, "user/message", {"kind": "plugin", "plugin": "compact"}, "old"),
            _node(4, "system/message", {"kind": "system-prompt"}),
            _node(5, "user/message", {"kind": "user"}, "hi"),
            _node(6, "user/message", {"kind": "runtime-context"}, "ctx"),
        ]
    )
    assert [n.cls for n in nodes] == [
        "pinned",
        "own-note",
        "foreign-checkpoint",
        "foreign-checkpoint",
        "empty",
        "conversation",
        "pinned",
    ]
    assert nodes[1].note_count == 3
