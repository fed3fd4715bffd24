"""Member gating (reference §3.2.3): who wrote a onebot message, and the α floor."""

from __future__ import annotations

import pytest

from engine.compat.sender import member_floor, message_sender, with_floor
from engine.config import load_config


@pytest.mark.parametrize(
    ("text", "sender"),
    [
        ('<user_message qq="10001" nickname="阿明">明天几点开会</user_message>', "10001"),
        ("<user_message nickname='x' qq='20002'>hi</user_message>", "20002"),
        ("[21:05 阿明(10001)] 明天几点开会", "10001"),
        ("[9:05 Bob (the builder)(30003)] hello", "30003"),
        ("some text\n[21:05 阿明(10001)] later line", "10001"),
        ("明天几点开会", None),
        ("[21:05 阿明] no uid", None),
        ("see [note(123)] inline", None),
    ],
)
def test_sender_markers(text: str, sender: str | None) -> None:
    assert message_sender(text) == sender


def test_floor_applies_to_marked_non_owners_in_onebot_group_chats_only() -> None:
    member = "[21:05 阿明(10001)] 部署端口是多少"
    owner = "[21:05 主人(88888)] 部署端口是多少"
    owners = ("88888",)
    assert member_floor("onebot-group-42", member, owners, 0.5) == 0.5
    assert member_floor("onebot-42", member, owners, 0.5) == 0.5
    assert member_floor("onebot-group-42", owner, owners, 0.5) == 0.0
    assert member_floor("onebot-group-42", "部署端口是多少", owners, 0.5) == 0.0  # no marker
    assert member_floor("onebot-private-10001", member, owners, 0.5) == 0.0  # private chat
    assert member_floor("qqb-g-42", member, owners, 0.5) == 0.0  # Derpyu: a synthetic wake
    assert member_floor("session-1", member, owners, 0.5) == 0.0
    assert member_floor("onebot-group-42", member, owners, 0.0) == 0.0  # gating off
    assert member_floor("onebot-group-42", owner, (), 0.5) == 0.5  # no owners: all members


def test_with_floor_raises_min_alpha_only() -> None:
    cfg = load_config(None, {}).config
    assert with_floor(cfg, 0.0) is cfg
    gated = with_floor(cfg, 0.5)
    assert gated.recall.min_alpha == 0.5
    assert gated.recall.mode == cfg.recall.mode
    high = cfg.model_copy(update={"recall": cfg.recall.model_copy(update={"min_alpha": 0.7})})
    assert with_floor(high, 0.5) is high
