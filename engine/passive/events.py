"""A ``compaction/summary`` event and the events it shadowed → what the passive path
archives (PROTOCOL.md §6, reference §3.2.6).

``shadowedSeqs`` is authoritative (its runs may be compressed as ``[start, end]``);
``shadowedRange`` (inclusive) stands in only when it is missing. Of the shadowed
events, only user and assistant messages are archived, and of those only their text
blocks: tool calls, tool results, reasoning, images, checkpoints and pinned host context
stay out (the reference: "只保留 user/assistant 消息(跳过 checkpoint / system / tool)").
The result is a list of surface nodes, so that the pre-step's own parser classifies
them: a user message counts as conversation exactly when it would on the surface.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.sessionlog import expand_seqs

__all__ = [
    "COMPACTION_SUMMARY",
    "MAX_SHADOWED_SEQS",
    "OWN_PROVIDER",
    "Compaction",
    "compaction_of",
    "message_of",
    "shadowed_surface",
]

OWN_PROVIDER = "dsh-rofm"
"""The provider of rofmd's own compactions (and the original plugin's): never passive."""
COMPACTION_SUMMARY = "compaction/summary"
ARCHIVED_TYPES = ("user/message", "assistant/message")
MAX_SHADOWED_SEQS = 100_000
"""Seqs one compaction may name (a surface holds at most this many nodes); a range
beyond it is cut, so no event can make the daemon expand billions of seqs."""


@dataclass(frozen=True, slots=True)
class Compaction:
    """What a ``compaction/summary`` says."""

    compaction_id: str | None
    provider: str | None
    seqs: tuple[int, ...]
    """Shadowed seqs, sorted and distinct."""
    turn: int
    seq: int | None
    """The summary event's own seq."""

    @property
    def own(self) -> bool:
        """Written by rofmd (or the original plugin): its archive already holds them."""
        return self.provider == OWN_PROVIDER


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _seqs(data: Mapping[str, Any]) -> tuple[int, ...]:
    raw = data.get("shadowedSeqs")
    seqs: list[int] = []
    if isinstance(raw, list):
        entries: list[int | list[int]] = []
        for entry in raw[:MAX_SHADOWED_SEQS]:
            if _int(entry) is not None:
                entries.append(entry)
            elif (
                isinstance(entry, list)
                and len(entry) == 2
                and (a := _int(entry[0])) is not None
                and (b := _int(entry[1])) is not None
                and 0 <= b - a < MAX_SHADOWED_SEQS
            ):
                entries.append([a, b])
        seqs = expand_seqs(entries)
    if not seqs:
        rng = data.get("shadowedRange")
        if isinstance(rng, Mapping):
            start, end = _int(rng.get("start")), _int(rng.get("end"))
            if start is not None and end is not None and start <= end:
                seqs = list(range(start, min(end, start + MAX_SHADOWED_SEQS - 1) + 1))
    return tuple(sorted({s for s in seqs if s >= 0}))[:MAX_SHADOWED_SEQS]


def compaction_of(event: Mapping[str, Any]) -> Compaction | None:
    """The compaction a ``compaction/summary`` event describes; None for any other event."""
    if event.get("type") != COMPACTION_SUMMARY:
        return None
    data = event.get("data")
    if not isinstance(data, Mapping):
        data = {}
    provider = data.get("provider")
    cid = data.get("compactionId")
    return Compaction(
        compaction_id=cid if isinstance(cid, str) else None,
        provider=provider if isinstance(provider, str) else None,
        seqs=_seqs(data),
        turn=_int(data.get("turn")) or 0,
        seq=_int(event.get("seq")),
    )


def message_of(event: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The message of a message event: ``data`` for ``user/message``, else
    ``data.message``."""
    data = event.get("data")
    if not isinstance(data, Mapping):
        return None
    if event.get("type") == "user/message":
        return data
    message = data.get("message")
    return message if isinstance(message, Mapping) else None


def _text_only(content: Any) -> Any:
    if isinstance(content, list):
        return [b for b in content if isinstance(b, Mapping) and b.get("type") == "text"]
    return content if isinstance(content, str) else []


def shadowed_surface(
    events: Iterable[Mapping[str, Any]], seqs: Collection[int]
) -> list[dict[str, Any]]:
    """Surface nodes (``{seq, type, time, turn, message}``) of the user and assistant
    messages among ``events`` whose seq is in ``seqs``, text blocks only, in seq order,
    the first event of each seq."""
    wanted = set(seqs)
    by_seq: dict[int, dict[str, Any]] = {}
    for event in events:
        etype = event.get("type")
        seq = _int(event.get("seq"))
        if etype not in ARCHIVED_TYPES or seq is None or seq not in wanted or seq in by_seq:
            continue
        message = message_of(event)
        if message is None:
            continue
        data = event.get("data")
        turn = _int(data.get("turn")) if isinstance(data, Mapping) else None
        node: dict[str, Any] = {
            "seq": seq,
            "type": etype,
            "message": {**message, "content": _text_only(message.get("content"))},
        }
        time = _int(event.get("time"))
        if time is not None:
            node["time"] = time
        if turn is not None:
            node["turn"] = turn
        by_seq[seq] = node
    return [by_seq[s] for s in sorted(by_seq)]
