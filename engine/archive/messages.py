"""Conversation nodes → the messages a folder stores: where archived text is made safe.

Every path that turns conversation into memory folders builds its messages here, once,
before anything is chunked, titled, hashed, written, indexed or scored: through
`engine.archive.plan.plan_folders`, the one folder builder of the pre-step archive and
of the passive path (`engine.passive`: `session/event` and the session-log tailer), each
passing its ``secrets.mode``. A new path must build its folders there too. So the mode
applies to every word of a folder (`engine.secrets.redact`): its text, its title, the
你说过 phrases and keywords computed from it, the task block and recall entries that
show it.

Only text parts are redacted; an image stays an image (its placeholder names the file
the folder keeps, and the planner finds its folder by that placeholder), and so does the
placeholder of a file attachment (a name, not something said).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from engine import texts
from engine.archive.chunks import ArchMessage
from engine.archive.surface import Node
from engine.secrets.redact import Mode, redact_text

__all__ = ["ArchivedMessages", "archive_messages"]

_ROLES = {"user/message": "user", "assistant/message": "assistant"}
_FILE_PART = re.compile(
    "^" + re.escape(texts.ARCHIVE_FILE_PLACEHOLDER).replace(re.escape("{name}"), ".*") + "$",
    re.S,
)


@dataclass(slots=True)
class ArchivedMessages:
    """The messages to chunk, and the secret values kept out of them, by kind."""

    messages: list[ArchMessage]
    secrets: Counter[str] = field(default_factory=Counter)


def _safe_node(node: Node, mode: Mode, secrets: Counter[str]) -> Node:
    if mode == "off":
        return node
    parts = []
    changed = False
    for kind, value in node.parts:
        if kind == "text" and not _FILE_PART.match(value):
            redaction = redact_text(value, mode)
            if redaction.kinds:
                secrets.update(redaction.kinds)
                changed = True
                value = redaction.text
        parts.append((kind, value))
    return node._replace(parts=tuple(parts)) if changed else node


def archive_messages(
    nodes: Sequence[Node], image_names: Mapping[tuple[int, int], str], mode: Mode
) -> ArchivedMessages:
    """One message per conversation node, its text under ``mode``. ``image_names``: the
    stored file name of each image, by (node position, image index)."""
    out = ArchivedMessages([])
    by_pos: dict[int, dict[int, str]] = {}
    for (pos, idx), name in image_names.items():
        by_pos.setdefault(pos, {})[idx] = name
    for node in nodes:
        names = by_pos.get(node.pos, {})
        safe = _safe_node(node, mode, out.secrets)
        out.messages.append(
            ArchMessage(
                seq=node.seq,
                role=_ROLES.get(node.type, "tool"),
                text=safe.text(names),
                time=node.time,
                turn=node.turn,
                message_id=node.message_id,
                tool_call_id=node.tool_result_id,
            )
        )
    return out
