"""The one message → text walk (`engine.content`): live v4 messages and archived ones."""

from __future__ import annotations

from engine.content import ARCHIVED, message_text

LIVE = {
    "role": "user",
    "content": [
        {"type": "text", "text": "第一段"},
        {"type": "image", "text": "not text", "attachment": {"hostPath": "/x.png"}},
        {"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"},
        {"type": "text", "text": "第二段"},
        "a bare string",
    ],
}


def test_live_messages_give_their_text_blocks_only() -> None:
    assert message_text(LIVE) == "第一段\n第二段"
    assert message_text({"content": "plain"}) == "plain"
    assert message_text({"text": "old"}) == ""
    assert message_text({"content": None}) == ""


def test_archived_messages_give_what_archiving_rendered() -> None:
    archived = {
        "content": ["before", {"text": "said"}, {"placeholder": "[图片：（a.png）]"}, {"x": 1}]
    }
    assert message_text(archived, ARCHIVED) == "before\nsaid\n[图片：（a.png）]"
    assert message_text({"text": "old writer"}, ARCHIVED) == "old writer"
    assert message_text({"content": "plain"}, ARCHIVED) == "plain"
