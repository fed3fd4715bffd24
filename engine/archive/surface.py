"""DSH v4 surface nodes → typed nodes the archive planner reasons about.

Why a separate module: the planner must know, for every model-visible node, whether
it is conversation (archivable), a checkpoint note of ours (merged), a foreign
checkpoint (never touched, stops backward extension), pinned host context (dropped
silently when the host re-injects it, copied into the note appendix when it is a
one-shot notice or of an unknown kind), or a node that renders to nothing (reference
§1.1, §1.8). It also renders messages to the readable text stored in ``context.json``
(images and files become placeholders, tool calls a ``[tool-call …]`` line, reasoning
is not archived): the walk is `engine.content`'s, under its ``SURFACE`` view.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

from engine import texts
from engine.content import SURFACE, ImageBlock, attachment_name, content_parts
from engine.scoring.budget import to_well_formed

__all__ = [
    "ONE_SHOT_KINDS",
    "REINJECTED_KINDS",
    "ImageBlock",
    "Node",
    "NodeClass",
    "parse_surface",
    "well_formed",
]

NodeClass = Literal["conversation", "own-note", "foreign-checkpoint", "pinned", "empty"]

REINJECTED_KINDS = frozenset(
    {"runtime-context", "time-context", "skill-catalog", "system-prompt", "rofm-recall"}
)
"""Pinned kinds the host injects again every turn: shadowed silently (§1.8 B)."""

ONE_SHOT_KINDS = frozenset(
    {"subagent-settled", "subagent-error-details", "tool-jobs", "user-approval"}
)
"""One-shot notices: copied into the note appendix when shadowed (§1.8 B)."""

_NOTE_RE = re.compile(texts.ARCHIVE_NOTE_PATTERN)
_CONVERSATION_TYPES = {"user/message", "assistant/message", "tool/result"}


def well_formed(text: str) -> str:
    """Join surrogate pairs into one code point and turn lone halves into U+FFFD.

    The reference's ``toWellFormed`` (v1.4.4): no model-visible or stored text may carry a
    lone surrogate (it cannot be encoded as UTF-8 JSON, and a host API rejects it). One
    implementation with the task block's (``engine.scoring.budget.to_well_formed``).
    """
    return to_well_formed(text)


class Node(NamedTuple):
    """One surface node as the planner sees it.

    Immutable, and a named tuple rather than a frozen dataclass: a plan builds one per
    surface node, and a frozen dataclass's constructor costs three times as much (a
    400-node surface: ~2 ms of the plan)."""

    pos: int
    seq: int
    type: str
    time: int | None
    turn: int | None
    role: str
    kind: str
    cls: NodeClass
    parts: tuple[tuple[str, Any], ...]
    """Rendered content in block order: ("text", str) | ("image", ImageBlock)."""
    tool_call_ids: tuple[str, ...] = ()
    tool_result_id: str | None = None
    note_count: int = 0
    message_id: str | None = None

    @property
    def is_user(self) -> bool:
        return self.cls == "conversation" and self.type == "user/message"

    @property
    def is_tool_result(self) -> bool:
        return self.cls == "conversation" and self.type == "tool/result"

    @property
    def images(self) -> tuple[ImageBlock, ...]:
        return tuple(p[1] for p in self.parts if p[0] == "image")

    def text(self, image_name: Mapping[int, str] | None = None) -> str:
        """Readable text; images become placeholders (named by ``image_name`` or attachment)."""
        out: list[str] = []
        for kind, value in self.parts:
            if kind == "text":
                out.append(value)
            else:
                img: ImageBlock = value
                name = (image_name or {}).get(img.index) or attachment_name(img.attachment)
                out.append(texts.ARCHIVE_IMAGE_PLACEHOLDER.format(name=name))
        return "\n".join(out)


def _message_of(node: Mapping[str, Any]) -> Mapping[str, Any]:
    msg = node.get("message")
    if isinstance(msg, Mapping):
        inner = msg.get("message")
        # Tolerate an event `data` object ({"message": …, "turn": …}) in place of the message.
        if isinstance(inner, Mapping) and "role" not in msg:
            return inner
        return msg
    return {}


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _render_blocks(content: Any) -> tuple[list[tuple[str, Any]], list[str]]:
    call_ids: list[str] = []
    parts = content_parts(content, SURFACE, call_ids=call_ids)
    return [("text", p) if isinstance(p, str) else ("image", p) for p in parts], call_ids


def _classify(
    ntype: str, role: str, kind: str, first_text: str, user_kinds: frozenset[str]
) -> NodeClass:
    if kind == "compact-checkpoint" or kind == "plugin:compact":
        return "own-note" if _NOTE_RE.match(first_text) else "foreign-checkpoint"
    if ntype in _CONVERSATION_TYPES:
        if ntype == "user/message":
            return "conversation" if kind in user_kinds else "pinned"
        if ntype == "assistant/message":
            return "conversation" if kind in ("model", "", "assistant") else "pinned"
        return "conversation"
    return "pinned"


def parse_surface(
    nodes: Iterable[Mapping[str, Any]], *, user_kinds: Iterable[str] = ("user",)
) -> list[Node]:
    """Typed nodes in surface order. Unknown node shapes become pinned nodes (kept safe)."""
    kinds = frozenset(user_kinds) | {"user"}
    out: list[Node] = []
    for pos, raw in enumerate(nodes):
        msg = _message_of(raw)
        ntype = str(raw.get("type") or "")
        role = str(msg.get("role") or "")
        source = msg.get("source")
        kind = ""
        if isinstance(source, Mapping):
            kind = str(source.get("kind") or "")
            if kind == "plugin" and source.get("plugin") == "compact":
                kind = "plugin:compact"
        elif ntype == "user/message":
            kind = "user"
        if not kind and ntype == "assistant/message":
            kind = "model"
        if not kind and ntype == "tool/result":
            kind = "tool"
        parts, call_ids = _render_blocks(msg.get("content"))
        first_text = next((v for k, v in parts if k == "text"), "")
        cls: NodeClass = _classify(ntype, role, kind, first_text, kinds)
        if not parts and cls == "pinned":
            cls = "empty"  # renders to nothing: droppable, never blocks a note merge (§1.8 A)
        note_count = 0
        if cls == "own-note":
            m = _NOTE_RE.match(first_text)
            note_count = int(m.group(1)) if m else 0
        tool_result_id = msg.get("toolCallId") if ntype == "tool/result" else None
        out.append(
            Node(
                pos=pos,
                seq=seq if (seq := _int_or_none(raw.get("seq"))) is not None else pos,
                type=ntype,
                time=_int_or_none(raw.get("time")),
                turn=_int_or_none(raw.get("turn")),
                role=role,
                kind=kind,
                cls=cls,
                parts=tuple(parts),
                tool_call_ids=tuple(call_ids),
                tool_result_id=tool_result_id if isinstance(tool_result_id, str) else None,
                note_count=note_count,
                message_id=msg.get("id") if isinstance(msg.get("id"), str) else None,
            )
        )
    return out


def conversation(nodes: Sequence[Node]) -> list[Node]:
    """The archivable nodes, in order."""
    return [n for n in nodes if n.cls == "conversation"]
