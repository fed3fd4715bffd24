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


@pytest.mark.parametrize(
    "session_id",
    [
        "onebot-group-42-mk3f0a1b\n",  # `$` matched before a final line break
        f"qqb-g-987654-{HEX32}\n",
        "onebot-group-٤٢-mk3f0a1b",  # `\d` took any script's digits
        "onebot-private-7-mk3f0a1b\r",
    ],
)
def test_a_look_alike_with_a_final_line_break_or_other_digits_keeps_its_own_key(
    session_id: str,
) -> None:
    """The reference's patterns are JavaScript's: whole ids, ASCII digits. Read with
    Python's `$` and `\\d`, these folded into another chat's key and shared its memory."""
    assert fold_chat_key(session_id) == session_id


@pytest.mark.parametrize(
    "key", ["onebot-private-7\n", "qqb-p-99\n", "onebot-private-٧", "qqb-g-5\n", "onebot-group-٥"]
)
def test_a_look_alike_key_is_no_qq_chat_and_names_no_peer_nor_group(key: str) -> None:
    assert channel_kind(key) is None
    assert private_peer(key) is None
    assert group_number(key) is None
    assert not is_derpyu_key(key)


@given(st.text(alphabet="onebt-privaqgp0123456789٣\n", min_size=1, max_size=24))
def test_a_chat_key_is_ascii_and_whole(key: str) -> None:
    """Whatever an id looks like, a peer or a group number is ASCII digits taken from
    an id that is exactly the shape (no line break, no other script)."""
    for found in (private_peer(key), group_number(key)):
        if found is not None:
            assert found.isascii() and found.isdigit() and "\n" not in key
            assert key.endswith(found)
    if channel_kind(key) is not None:
        assert key.isascii() and "\n" not in key
