"""Who wrote a onebot group message, and whether their recall is gated (§3.2.3).

dsh-onebot-qq writes the sender into the text: ``<user_message qq="…" nickname="…">…
</user_message>`` or a group prefix ``[HH:MM nick(uid)]``. The owner (``compat.ownerIds``)
is never gated; any other marked sender recalls only memories with α ≥
``compat.memberMinAlpha``. A message without a marker (a private chat, the owner typing
in the WebUI) counts as the owner's, as does every Derpyu message: its trigger is a wake
the bridge synthesises, with no sender to read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from engine.compat.chatkey import channel_kind
from engine.config import MemoryConfig

_USER_MESSAGE_TAG = re.compile(r"<user_message\b[^>]*?\bqq\s*=\s*[\"']?(\d+)")
_GROUP_PREFIX = re.compile(r"^\s*\[\d{1,2}:\d{2}\s+[^\]\n]*?\((\d+)\)\]", re.MULTILINE)


def message_sender(text: str) -> str | None:
    """The QQ number a onebot message names as its sender (the first marker), or None."""
    m = _USER_MESSAGE_TAG.search(text)
    if m is not None:
        return m.group(1)
    m = _GROUP_PREFIX.search(text)
    return m.group(1) if m is not None else None


def member_floor(key: str, text: str, owner_ids: Iterable[str], member_min_alpha: float) -> float:
    """The α floor this message's recall gets: ``member_min_alpha`` for a marked
    non-owner in a onebot chat that is not private, else 0 (no gating)."""
    if member_min_alpha <= 0:
        return 0.0
    kind = channel_kind(key)
    if kind not in ("onebot-group", "onebot"):
        return 0.0
    sender = message_sender(text)
    if sender is None or sender in set(owner_ids):
        return 0.0
    return member_min_alpha


def with_floor(cfg: MemoryConfig, floor: float) -> MemoryConfig:
    """``cfg`` with ``recall.minAlpha`` raised to ``floor``: every recall path (the lanes,
    the keyword bridges, memory_recall) already honours minAlpha, so the gate holds
    everywhere at once."""
    if floor <= cfg.recall.min_alpha:
        return cfg
    return cfg.model_copy(update={"recall": cfg.recall.model_copy(update={"min_alpha": floor})})
