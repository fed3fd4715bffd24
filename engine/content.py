"""A message's text: the one walk over content blocks that recall, the inbox and the
session-log readers share.

Two shapes reach the engine. A live v4 message (the host's) carries `content` as a list
of typed blocks, of which only `{"type": "text"}` blocks are what someone wrote; image,
tool-call and reasoning blocks are not text. An archived message (`context.json`) holds
what archiving rendered: strings, text blocks, image and file placeholders
(`{"placeholder": …}`), or a bare `text` field from older writers. ``archived`` says which.
The archive's own rendering of live blocks into that form is `engine.archive.surface`,
and the scoring view over archived messages (`engine.scoring.readable`) adds its own
filtering of protocol text on top of this.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["message_text"]


def message_text(message: Mapping[str, Any], *, archived: bool = False) -> str:
    """The message's text, blocks joined by newlines ("" when it has none).

    Live (default): a string `content`, else its `type: "text"` blocks. Archived: also
    bare strings in the list, any block's `text` or `placeholder`, and a `text` field
    when there is no `content` list."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if archived and isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping):
                text = block.get("text")
                if not archived:
                    if block.get("type") == "text" and isinstance(text, str):
                        parts.append(text)
                elif isinstance(text, str):
                    parts.append(text)
                elif isinstance(block.get("placeholder"), str):
                    parts.append(block["placeholder"])
        return "\n".join(parts)
    if archived:
        text = message.get("text")
        return text if isinstance(text, str) else ""
    return ""
