"""QQ voice notes in archived channel text (reference §3.2.7 语音归档): the table's two
rows, the split delivery merged, idempotence, and nothing else touched."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import texts
from engine.archive.chunks import ArchMessage
from engine.archive.messages import archive_messages
from engine.archive.surface import parse_surface
from engine.compat.voice import merge_voice_notes, voice_note_text

WRAP = '<user_message qq="10001" nickname="小明">\n{}\n</user_message>'


@pytest.mark.parametrize(
    ("seen", "archived"),
    [
        # the reference's table
        ("（语音转写：帮我记一下周五开会）", "[语音] 帮我记一下周五开会"),
        ("[语音]", "[语音]（未转写）"),
        # the normalised (ASCII) forms the reference prints
        ("(语音转写:帮我记一下周五开会)", "[语音] 帮我记一下周五开会"),
        # the mark and its transcript in one message (dsh-onebot-qq before steering)
        ("[语音]（语音转写：周五开会）", "[语音] 周五开会"),
        ("[语音] (语音转写: 周五开会 )", "[语音] 周五开会"),
        # a transcript that came back empty says so
        ("（语音转写：）", "[语音]（未转写）"),
        # inside the sender wrapper and after a group prefix
        (WRAP.format("[语音]"), WRAP.format("[语音]（未转写）")),
        ("[09:41 张三(841859784)] [语音]", "[09:41 张三(841859784)] [语音]（未转写）"),
        # parentheses inside the transcript belong to it
        ("（语音转写：我说（好的）就行）", "[语音] 我说（好的）就行"),
        # two voice notes in one message
        ("[语音]\n（语音转写：第二条）", "[语音]（未转写）\n[语音] 第二条"),
    ],
)
def test_reference_rows(seen: str, archived: str) -> None:
    assert voice_note_text(seen) == archived
    assert voice_note_text(archived) == archived  # idempotent


@pytest.mark.parametrize(
    "text",
    [
        "普通的一句话",
        "[语音] 已经合并过的转写",
        texts.ARCHIVE_VOICE_UNTRANSCRIBED,
        "我发了个[语音]给你看看",  # the word in a sentence, not a mark of its own
        "语音转写：没有括号",
        "[图片:/tmp/a.png]",
    ],
)
def test_other_text_is_unchanged(text: str) -> None:
    assert voice_note_text(text) == text


def test_a_transcript_in_the_next_user_message_merges_into_the_mark() -> None:
    got = merge_voice_notes([WRAP.format("[语音]"), "（语音转写：帮我记一下周五开会）", "好的"])
    assert got == [WRAP.format("[语音] 帮我记一下周五开会"), None, "好的"]
    # what is archived reads the same when archived again
    assert merge_voice_notes([t for t in got if t is not None]) == [t for t in got if t]


def test_only_the_next_user_message_and_only_a_bare_transcript_merge() -> None:
    assert merge_voice_notes(["[语音]", "你好", "（语音转写：晚了）"]) == [
        "[语音]（未转写）",
        "你好",
        "[语音] 晚了",
    ]
    # a transcript after other words is a note of that message, not the mark's
    assert merge_voice_notes(["[语音]", "看这个（语音转写：X）"]) == [
        "[语音]（未转写）",
        "看这个[语音] X",
    ]
    # the last lone mark takes it
    assert merge_voice_notes(["[语音]\n[语音]", "（语音转写：第二条）"]) == [
        "[语音]（未转写）\n[语音] 第二条",
        None,
    ]


@given(st.lists(st.sampled_from(["[语音]", "（语音转写：周五）", "你好", "(语音转写:)", "\n"])))
def test_idempotent_on_any_mix(parts: list[str]) -> None:
    text = "".join(parts)
    once = voice_note_text(text)
    assert voice_note_text(once) == once
    merged = [t for t in merge_voice_notes([text, text]) if t is not None]
    assert [t for t in merge_voice_notes(merged) if t is not None] == merged


def _surface(texts_: list[tuple[str, str]]) -> list[dict[str, object]]:
    nodes = []
    for seq, (role, text) in enumerate(texts_):
        ntype = "user/message" if role == "user" else "assistant/message"
        nodes.append(
            {
                "seq": seq,
                "type": ntype,
                "message": {
                    "id": f"m{seq}",
                    "role": role,
                    "content": [{"type": "text", "text": text}],
                    "source": {"kind": "user" if role == "user" else "model"},
                },
            }
        )
    return nodes


def _texts(messages: list[ArchMessage]) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in messages]


def test_archive_messages_folds_only_when_asked() -> None:
    nodes = parse_surface(
        _surface(
            [
                ("user", "[语音]"),
                ("assistant", "收到语音 [语音]"),
                ("user", "（语音转写：帮我记一下周五开会）"),
                ("user", "[语音]"),
            ]
        )
    )
    plain = archive_messages(nodes, {}, "redact")
    assert _texts(plain.messages) == [
        ("user", "[语音]"),
        ("assistant", "收到语音 [语音]"),
        ("user", "（语音转写：帮我记一下周五开会）"),
        ("user", "[语音]"),
    ]
    folded = archive_messages(nodes, {}, "redact", voice_notes=True)
    assert _texts(folded.messages) == [
        ("user", "[语音] 帮我记一下周五开会"),
        ("assistant", "收到语音 [语音]"),  # an assistant's words are its own
        ("user", "[语音]（未转写）"),
    ]
    assert [m.seq for m in folded.messages] == [0, 1, 3]
