"""Chat keys (reference §3.2.2): rebuild suffixes fold, look-alikes keep their own key."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.compat.chatkey import (
    channel_kind,
    fold_chat_key,
    group_number,
    is_derpyu_key,
    private_peer,
)

HEX32 = "0123456789abcdef" * 2


@pytest.mark.parametrize(
    ("session_id", "key"),
    [
        ("onebot-123456", "onebot-123456"),
        ("onebot-123456-m1abcd2e", "onebot-123456"),
        ("onebot-group-42-mk3f0a1b", "onebot-group-42"),
        ("onebot-private-7-mk3f0a1b", "onebot-private-7"),
        (f"qqb-g-987654-{HEX32}", "qqb-g-987654"),
        (f"qqb-p-1-{HEX32}", "qqb-p-1"),
        ("qqb-g-987654", "qqb-g-987654"),
    ],
)
def test_rebuild_suffixes_fold(session_id: str, key: str) -> None:
    assert fold_chat_key(session_id) == key


@pytest.mark.parametrize(
    "session_id",
    [
        "onebot-123456-12345678",  # digits only: not a base36 timestamp of this century
        "onebot-123456-zz",  # too short to be a millisecond timestamp
        "onebot-123456-zzzzzzzzzz",  # decodes past 2100
        "onebot-123456-abc00000",  # decodes before 2020
        f"qqb-g-987654-{HEX32[:31]}",  # 31 hex digits
        f"qqb-g-987654-{HEX32.upper()}",  # the bridge writes lower-case hex
        f"qqb-x-987654-{HEX32}",  # neither g nor p
        f"xqqb-g-987654-{HEX32}",
        "session-8f2c-m1abcd2e",  # not a QQ id at all
        "onebot-abc-m1abcd2e",  # the chat id is a number
    ],
)
def test_look_alikes_keep_their_own_key(session_id: str) -> None:
    assert fold_chat_key(session_id) == session_id


@given(st.text(min_size=1, max_size=60))
def test_folding_is_idempotent(session_id: str) -> None:
    once = fold_chat_key(session_id)
    assert fold_chat_key(once) == once


def test_kinds_peers_and_groups() -> None:
    assert channel_kind("onebot-private-7") == "onebot-private"
    assert channel_kind("onebot-group-42") == "onebot-group"
    assert channel_kind("onebot-123") == "onebot"
    assert channel_kind("qqb-g-1") == "qqb-group"
    assert channel_kind("qqb-p-1") == "qqb-private"
    assert channel_kind("session-1") is None
    assert channel_kind(f"qqb-g-1-{HEX32}") is None  # kinds are of folded keys
    assert private_peer("onebot-private-7") == "7"
    assert private_peer("qqb-p-99") == "99"
    assert private_peer("onebot-group-7") is None
    assert group_number("qqb-g-5") == "5"
    assert group_number("onebot-private-5") is None
    assert is_derpyu_key("qqb-p-1") and not is_derpyu_key("onebot-1")
