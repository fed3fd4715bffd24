"""Archived messages → the text the scoring model reads (reference v1.4.3, §1.16).

Only real conversation stays: user and assistant text. Dropped: tool output, ``[tool-call
…]`` protocol text, tool-call / reasoning blocks, system / developer messages and the
host's structural user messages (checkpoint notes, runtime / time context, catalogs,
one-shot notices). JSON is conversation only when it carries chat rows: a QQ bridge
payload (``{"messages": [{"sender": "私聊", "text": "…"}]}``, ``newMessages`` alike) in a
tool result, or such a snapshot embedded in a user message, renders in place as
``sender: text`` lines (ids and flags dropped); any other JSON (``{"error": "timeout"}``)
is process data. The order of messages is kept.

Message shapes accepted: DSH v4 messages (``role``, ``content`` as a string or blocks),
optionally wrapped as ``{"message": {...}}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from engine.content import CONVERSATION, EVERY_TEXT, text_parts, unwrapped
from engine.heuristic import has_cue
from engine.scoring.budget import to_well_formed

STRUCTURAL_SOURCE_KINDS: Final[frozenset[str]] = frozenset(
    {
        "system-prompt",
        "runtime-context",
        "time-context",
        "skill-catalog",
        "compact-checkpoint",
        "tool-jobs",
        "subagent-settled",
        "subagent-error-details",
        "user-approval",
    }
)
"""User-role messages the host writes itself: not something the user said."""

PROTOCOL_PREFIXES: Final = ("[tool-call", "[tool-added", "[tool-removed", "[tool-result")
CHAT_ARRAY_KEYS: Final = ("messages", "newMessages")
SENDER_KEYS: Final = ("sender", "senderName", "nickname", "name", "from")
_MAX_JSON_DEPTH: Final = 4
_MAX_EMBED_ATTEMPTS: Final = 32
_DECODER = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class ReadableText:
    """The readable conversation of one folder, and its content type tag."""

    text: str
    kind: str  # "user" | "decision" | "tool"

    @property
    def has_conversation(self) -> bool:
        return self.kind != "tool"


def _texts(content: Any, *, everything: bool = False) -> list[str]:
    """The text parts of a content value (`engine.content`): a string, its bare strings
    and text blocks; with `everything`, every text-ish part too (tool output, tool
    calls), for the no-conversation fallback."""
    return text_parts(content, EVERY_TEXT if everything else CONVERSATION)


def _rows(value: Any, depth: int = 0) -> list[str] | None:
    """``sender: text`` lines of chat rows found in a JSON value, or None."""
    if depth > _MAX_JSON_DEPTH:
        return None
    if isinstance(value, Mapping):
        found: list[str] = []
        hit = False
        for key in CHAT_ARRAY_KEYS:
            arr = value.get(key)
            if isinstance(arr, list):
                lines = _row_lines(arr)
                if lines:
                    found.extend(lines)
                    hit = True
        if hit:
            return found
        for sub in value.values():
            if isinstance(sub, Mapping | list):
                lines2 = _rows(sub, depth + 1)
                if lines2:
                    return lines2
        return None
    if isinstance(value, list):
        lines = _row_lines(value)
        return lines or None
    return None


def _row_lines(arr: list[Any]) -> list[str]:
    out: list[str] = []
    for item in arr:
        if not isinstance(item, Mapping):
            continue
        text = item.get("text")
        if not isinstance(text, str) or not text.strip():
            continue
        sender = next(
            (item[k] for k in SENDER_KEYS if isinstance(item.get(k), str) and item[k].strip()),
            "",
        )
        out.append(f"{sender.strip()}: {text.strip()}" if sender else text.strip())
    return out


def _looks_json(text: str) -> bool:
    s = text.strip()
    return (s.startswith("{") and s.endswith("}")) or (s.startswith("[") and s.endswith("]"))


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _embedded(text: str) -> tuple[str, list[str], str] | None:
    """A JSON snapshot with chat rows inside a text: (before, rows, after)."""
    start = text.find("{")
    attempts = 0
    while start != -1 and attempts < _MAX_EMBED_ATTEMPTS:
        attempts += 1
        try:
            value, end = _DECODER.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        rows = _rows(value)
        if rows:
            return text[:start], rows, text[end:]
        start = text.find("{", end)
    return None


def _conversation_lines(role: str, text: str) -> list[str]:
    """Lines one text part contributes (maybe none)."""
    stripped = text.strip()
    if not stripped or stripped.startswith(PROTOCOL_PREFIXES):
        return []
    if _looks_json(stripped):
        rows = _rows(_parse_json(stripped))
        return rows or []
    if "{" in stripped:
        emb = _embedded(stripped)
        if emb is not None:
            before, rows, after = emb
            out: list[str] = []
            if before.strip():
                out.append(f"{role}: {before.strip()}")
            out.extend(rows)
            if after.strip():
                out.append(f"{role}: {after.strip()}")
            return out
    return [f"{role}: {stripped}"]


def conversation_lines(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The real conversation of ``messages``, one entry per rendered message part."""
    out: list[str] = []
    for raw in messages:
        if not isinstance(raw, Mapping):
            continue
        msg = unwrapped(raw)
        role = msg.get("role")
        source = msg.get("source")
        kind = source.get("kind") if isinstance(source, Mapping) else None
        content = msg.get("content")
        if role == "tool":
            for text in _texts(content):
                stripped = text.strip()
                if _looks_json(stripped):
                    out.extend(_rows(_parse_json(stripped)) or [])
                elif "{" in stripped:
                    emb = _embedded(stripped)
                    if emb is not None:
                        out.extend(emb[1])
            continue
        if role == "user":
            if kind in STRUCTURAL_SOURCE_KINDS:
                continue
            for text in _texts(content):
                out.extend(_conversation_lines("user", text))
        elif role == "assistant":
            for text in _texts(content):
                out.extend(_conversation_lines("assistant", text))
    return out


def flat_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """Every text of ``messages`` (tool output included), for heuristics without conversation."""
    parts: list[str] = []
    for raw in messages:
        if isinstance(raw, Mapping):
            msg = unwrapped(raw)
            parts.extend(
                t.strip() for t in _texts(msg.get("content"), everything=True) if t.strip()
            )
    return to_well_formed("\n".join(parts))


def readable_text(messages: Sequence[Mapping[str, Any]]) -> ReadableText:
    """The folder's readable conversation and its type tag (tool / decision / user)."""
    lines = conversation_lines(messages)
    if not lines:
        return ReadableText("", "tool")
    text = to_well_formed("\n".join(lines))
    decided = has_cue(text, ("decision", "agreement"))
    return ReadableText(text, "decision" if decided else "user")
