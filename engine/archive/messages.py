"""Conversation nodes → the messages a folder stores: where archived text is made safe.

Every path that turns conversation into memory folders builds its messages here, once,
before anything is chunked, titled, hashed, written, indexed or scored: through
`engine.archive.plan.plan_folders`, the one folder builder of the pre-step archive and
of the passive path (`engine.passive`: `session/event` and the session-log tailer), each
passing its ``secrets.mode``. A new path must build its folders there too. So the mode
applies to every word of a folder (`engine.secrets.redact`): its text, its title, the
你说过 phrases and keywords computed from it, the task block and recall entries that
show it.

In QQ channel sessions (``voice_notes``) the user messages' voice notes are folded
here as well (`engine.compat.voice`), so the pre-step and the passive path store the
same ``[语音] …`` text.

Only text parts are redacted; an image stays an image (its placeholder names the file
the folder keeps, and the planner finds its folder by that placeholder), also where the
placeholder stands inside a text part (a onebot image path rewritten into it,
`engine.archive.images.plan_staged_images`: a run-stamped name can look random enough
to be taken for a secret), and so does the placeholder of a file attachment (a name,
not something said).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from engine import texts
from engine.archive.chunks import ArchMessage
from engine.archive.surface import Node
from engine.compat.voice import merge_voice_notes
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


def _redact(text: str, mode: Mode, keep: re.Pattern[str] | None, secrets: Counter[str]) -> str:
    """``text`` redacted, the placeholders ``keep`` matches left whole."""
    pieces = keep.split(text) if keep is not None else [text]
    for i in range(0, len(pieces), 2):  # odd pieces are the placeholders kept
        redaction = redact_text(pieces[i], mode)
        if redaction.kinds:
            secrets.update(redaction.kinds)
            pieces[i] = redaction.text
    return "".join(pieces)


def _safe_node(node: Node, mode: Mode, secrets: Counter[str], names: Sequence[str]) -> Node:
    if mode == "off":
        return node
    keep = None
    if names:
        placeholders = (re.escape(texts.ARCHIVE_IMAGE_PLACEHOLDER.format(name=n)) for n in names)
        keep = re.compile("(" + "|".join(placeholders) + ")")
    parts = []
    changed = False
    for kind, value in node.parts:
        if kind == "text" and not _FILE_PART.match(value):
            safe = _redact(value, mode, keep, secrets)
            if safe != value:
                changed = True
                value = safe
        parts.append((kind, value))
    return node._replace(parts=tuple(parts)) if changed else node


def archive_messages(
    nodes: Sequence[Node],
    image_names: Mapping[tuple[int, int], str],
    mode: Mode,
    *,
    voice_notes: bool = False,
) -> ArchivedMessages:
    """One message per conversation node, its text under ``mode``. ``image_names``: the
    stored file name of each image, by (node position, image index). ``voice_notes``
    (QQ channel sessions): voice marks and transcripts folded, a transcript message
    merged into the voice message before it (then it is not a message of its own)."""
    out = ArchivedMessages([])
    by_pos: dict[int, dict[int, str]] = {}
    for (pos, idx), name in image_names.items():
        by_pos.setdefault(pos, {})[idx] = name
    for node in nodes:
        names = by_pos.get(node.pos, {})
        safe = _safe_node(node, mode, out.secrets, list(names.values()))
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
    if voice_notes:
        out.messages = _with_voice_notes(out.messages)
    return out


def _with_voice_notes(messages: list[ArchMessage]) -> list[ArchMessage]:
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    folded = merge_voice_notes([messages[i].text for i in users])
    texts_by_index = dict(zip(users, folded, strict=True))
    out: list[ArchMessage] = []
    for i, message in enumerate(messages):
        if i not in texts_by_index:
            out.append(message)
            continue
        text = texts_by_index[i]
        if text is None:
            continue  # merged into the voice message before it
        out.append(message if text == message.text else replace(message, text=text))
    return out
