"""Whether QQ compatibility is on, and what follows from it for one session (§3.2).

One immutable value the daemon swaps when detection, the config or the autopatch
changes (``handlers.compat``); every rule that depends on compat reads it, so "compat
off behaves exactly as without the plugins" is decided in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine.compat.chatkey import channel_kind, fold_chat_key, is_derpyu_key


@dataclass(frozen=True)
class CompatStatus:
    """``active``: compat behaviour applies (qqBots on, or auto and a plugin found).
    ``derpyu_patched``: Derpyu's tool whitelist lets rofmd's tools run (§3.2.5)."""

    mode: Literal["auto", "on", "off"] = "auto"
    active: bool = False
    onebot: bool = False
    derpyu: bool = False
    derpyu_patched: bool = False
    profile: str | None = None
    error: str | None = None
    patch_action: str | None = None

    def chat_key(self, session_id: str) -> str:
        """The memory key of a session id: folded while compat is active (§3.2.2)."""
        return fold_chat_key(session_id) if self.active else session_id

    def is_channel(self, key: str) -> bool:
        """A QQ channel session: compat active and a QQ chat key."""
        return self.active and channel_kind(key) is not None

    def heuristic_scoring(self, key: str, channel_score: str) -> bool:
        """Channel folders scored heuristically at creation (§3.2.4): always with
        ``compat.channelScore: heuristic``; for Derpyu chats while its whitelist is not
        patched (its guard refuses ``memory_judge``, so the model could never score)."""
        if not self.is_channel(key):
            return False
        return channel_score == "heuristic" or (is_derpyu_key(key) and not self.derpyu_patched)

    def plugins(self) -> list[str]:
        """The log names of the plugins compat acts for."""
        found = [("dsh-onebot-qq", self.onebot), ("derpyu-qq-bridge", self.derpyu)]
        return [name for name, on in found if on]

    def to_json(self) -> dict[str, object]:
        """The ``compat`` part of ``status``."""
        return {
            "mode": self.mode,
            "active": self.active,
            "plugins": self.plugins(),
            "derpyuPatched": self.derpyu_patched,
            "patch": self.patch_action,
            "profile": self.profile,
            "error": self.error,
        }


INACTIVE = CompatStatus()
