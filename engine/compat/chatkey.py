"""Chat keys: one memory directory per QQ chat, whatever the host rebuilt (§3.2.2).

The two QQ plugins rebuild sessions under new ids: dsh-onebot-qq appends
``-<base36 ms timestamp>`` after a conflict or retirement, Derpyu's qq-bridge ends every
id with 32 hex digits that change on ``/reset`` or a mode switch. Folding those
suffixes away gives the stable chat key, so a rebuilt session finds its memory and its
recall block again. Only those exact shapes fold: a look-alike id (a suffix that is not
a plausible timestamp, 31 hex digits, another prefix) keeps its own directory, because
merging two people's memories is far worse than starting one afresh.
"""

from __future__ import annotations

import re
from typing import Literal

ChannelKind = Literal["onebot-private", "onebot-group", "onebot", "qqb-private", "qqb-group"]

# Whole-string shapes in ASCII, as the reference's JavaScript patterns read: Python's `$`
# also matches before a final line break and its `\d` takes any script's digits, so
# ``onebot-private-5\n`` would have been owner 5's private chat and
# ``onebot-group-1-<suffix>\n`` would have folded into group 1's memory.
_ONEBOT_REBUILT = re.compile(r"(onebot-(?:(?:private|group)-)?\d+)-([0-9a-z]{6,10})", re.ASCII)
_ONEBOT = re.compile(r"onebot-(?:(private|group)-)?\d+", re.ASCII)
_QQB_REBUILT = re.compile(r"(qqb-([gp])-\d+)-[0-9a-f]{32}", re.ASCII)
_QQB = re.compile(r"qqb-([gp])-\d+", re.ASCII)
_PRIVATE_PEER = re.compile(r"(?:onebot-private|qqb-p)-(\d+)", re.ASCII)
_GROUP_ID = re.compile(r"(?:onebot-group|qqb-g)-(\d+)", re.ASCII)

# The window a rebuild suffix must decode into (ms since the epoch): 2020-01-01 to
# 2100-01-01. dsh-onebot-qq writes Date.now() in base36; anything outside is not its
# suffix, so the id is not folded.
_EPOCH_MIN_MS = 1_577_836_800_000
_EPOCH_MAX_MS = 4_102_444_800_000


def _plausible_timestamp(base36: str) -> bool:
    if base36.isdigit():  # a base36 timestamp of this century always has a letter
        return False
    return _EPOCH_MIN_MS <= int(base36, 36) < _EPOCH_MAX_MS


def fold_chat_key(session_id: str) -> str:
    """The chat key of a host session id: the id without a QQ rebuild suffix.

    ``onebot-123456-m1abcd2e`` → ``onebot-123456``; ``qqb-g-987654-<32 hex>`` →
    ``qqb-g-987654``; every other id is returned unchanged.
    """
    m = _QQB_REBUILT.fullmatch(session_id)
    if m is not None:
        return m.group(1)
    m = _ONEBOT_REBUILT.fullmatch(session_id)
    if m is not None and _plausible_timestamp(m.group(2)):
        return m.group(1)
    return session_id


def channel_kind(key: str) -> ChannelKind | None:
    """Which QQ chat a (folded) chat key names, or None for any other session.

    A bare ``onebot-<digits>`` is a onebot chat of unknown kind: gated like a group
    (a sender marker decides), never treated as a private chat by the cross-chat tool.
    """
    m = _QQB.fullmatch(key)
    if m is not None:
        return "qqb-group" if m.group(1) == "g" else "qqb-private"
    m = _ONEBOT.fullmatch(key)
    if m is not None:
        kind = m.group(1)
        if kind == "private":
            return "onebot-private"
        return "onebot-group" if kind == "group" else "onebot"
    return None


def is_derpyu_key(key: str) -> bool:
    """A Derpyu qq-bridge chat (scored heuristically while its whitelist is unpatched)."""
    return _QQB.fullmatch(key) is not None


def private_peer(key: str) -> str | None:
    """The QQ number of the other side of a private chat key (``onebot-private-N``,
    ``qqb-p-N``), else None. Taken from the key, never from message text (forgeable)."""
    m = _PRIVATE_PEER.fullmatch(key)
    return m.group(1) if m is not None else None


def group_number(key: str) -> str | None:
    """The group number of a group chat key (``onebot-group-N``, ``qqb-g-N``), else None."""
    m = _GROUP_ID.fullmatch(key)
    return m.group(1) if m is not None else None
