"""Chunking archived messages into folders, and folder titles (reference §1.1).

A chunk closes before the piece that would take it past ``targetChunkChars`` (so a
folder can exceed the target only by one over-long sentence or message); messages
longer than the target are split at sentence boundaries first, and every fragment
keeps its message's ``time``. The first piece of a tool result never starts a new
folder, so a tool call and its result stay together. Chunks under ``minChunkChars``
are merged into the previous one; ``maxFolders`` merges the excess into the last.

Titles: the chunk's first non-empty user message; for a chunk without one, the
nearest earlier user message of the archived span; else the chunk's first text; else
``第N段对话``. Whitespace folded, at most 24 code points; titles repeated within one
run get their folder ordinal as a full-width suffix.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from engine import texts
from engine.archive.sentences import split_sentences

__all__ = ["ArchMessage", "Chunk", "chunk_messages", "content_hash", "fold_title", "titles"]

_WS = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class ArchMessage:
    """One conversation message as archived (text already has image placeholders)."""

    seq: int
    role: str
    text: str
    time: int | None = None
    turn: int | None = None
    message_id: str | None = None
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True)
class Piece:
    msg: int
    part: int
    parts: int
    text: str


@dataclass(slots=True)
class Chunk:
    """One future folder: pieces of messages in order."""

    pieces: list[Piece]
    # (part, parts) of each run of one message's fragments, numbered across the
    # whole archive run: "part 2 of 3" = the message continues in other folders.
    run_numbers: list[tuple[int, int]] = field(default_factory=list)

    def runs(self) -> list[list[Piece]]:
        """Consecutive fragments of the same message, grouped."""
        runs: list[list[Piece]] = []
        for p in self.pieces:
            if runs and runs[-1][-1].msg == p.msg and runs[-1][-1].part + 1 == p.part:
                runs[-1].append(p)
            else:
                runs.append([p])
        return runs

    @property
    def chars(self) -> int:
        return sum(len(p.text) for p in self.pieces)

    def documents(self, msgs: Sequence[ArchMessage]) -> list[dict[str, Any]]:
        """The ``context.json`` messages of this chunk.

        Consecutive fragments of one message in the same folder are stored as one
        entry: a reader sees the message, not its sentence-by-sentence split, and the
        concatenation is unchanged. A message spread over several folders carries
        ``part`` / ``parts`` (its fragment number and how many folders it spans).
        """
        out: list[dict[str, Any]] = []
        for index, run in enumerate(self.runs()):
            first = run[0]
            m = msgs[first.msg]
            text = "".join(p.text for p in run)
            doc: dict[str, Any] = {"role": m.role, "content": text, "seq": m.seq}
            if m.time is not None:
                doc["time"] = m.time
            if m.turn is not None:
                doc["turn"] = m.turn
            if m.message_id is not None:
                doc["id"] = m.message_id
            if m.tool_call_id is not None:
                doc["toolCallId"] = m.tool_call_id
            part, parts = self.run_numbers[index] if index < len(self.run_numbers) else (1, 1)
            if parts > 1:
                doc["part"] = part
                doc["parts"] = parts
            out.append(doc)
        return out

    def event_range(self, msgs: Sequence[ArchMessage]) -> tuple[int, int] | None:
        """(eventStart, eventEnd) = (min time, max time + 1) of its messages (§1.10)."""
        times = [msgs[p.msg].time for p in self.pieces if msgs[p.msg].time is not None]
        if not times:
            return None
        valid = [t for t in times if t is not None]
        return min(valid), max(valid) + 1


def chunk_messages(
    msgs: Sequence[ArchMessage], *, target_chars: int, min_chars: int, max_folders: int
) -> tuple[list[Chunk], bool]:
    """(chunks, capped): the folders for ``msgs`` (see the module docstring)."""
    target = max(1, target_chars)
    pieces: list[Piece] = []
    for i, m in enumerate(msgs):
        sentences = split_sentences(m.text) if len(m.text) > target else [m.text]
        if not sentences:
            sentences = [""]
        for j, s in enumerate(sentences):
            pieces.append(Piece(i, j, len(sentences), s))
    chunks: list[Chunk] = []
    cur: list[Piece] = []
    chars = 0
    for piece in pieces:
        attach = piece.part == 0 and msgs[piece.msg].role == "tool"
        if cur and chars + len(piece.text) > target and not attach:
            chunks.append(Chunk(cur))
            cur, chars = [], 0
        cur.append(piece)
        chars += len(piece.text)
    if cur:
        chunks.append(Chunk(cur))
    merged: list[Chunk] = []
    for c in chunks:
        if merged and c.chars < min_chars:
            merged[-1].pieces.extend(c.pieces)
        else:
            merged.append(c)
    if len(merged) > 1 and merged[0].chars < min_chars:
        merged[1].pieces[:0] = merged[0].pieces
        del merged[0]
    capped = False
    cap = max(1, max_folders)
    if len(merged) > cap:
        capped = True
        for extra in merged[cap:]:
            merged[cap - 1].pieces.extend(extra.pieces)
        del merged[cap:]
    _number_runs(merged)
    return merged, capped


def _number_runs(chunks: Sequence[Chunk]) -> None:
    """Give every run its (part, parts) across the chunks of one archive run."""
    totals: Counter[int] = Counter()
    for chunk in chunks:
        for run in chunk.runs():
            totals[run[0].msg] += 1
    seen: Counter[int] = Counter()
    for chunk in chunks:
        chunk.run_numbers = []
        for run in chunk.runs():
            seen[run[0].msg] += 1
            chunk.run_numbers.append((seen[run[0].msg], totals[run[0].msg]))


def fold_title(text: str) -> str:
    """Whitespace folded and trimmed, at most 24 code points."""
    return _WS.sub(" ", text).strip()[: texts.ARCHIVE_TITLE_MAX_CODE_POINTS]


def titles(chunks: Sequence[Chunk], msgs: Sequence[ArchMessage]) -> list[str]:
    """One title per chunk (§1.1 title rules, duplicates suffixed within the run)."""
    raw: list[str] = []
    for n, chunk in enumerate(chunks, start=1):
        title = ""
        for p in chunk.pieces:
            if msgs[p.msg].role == "user" and (t := fold_title(msgs[p.msg].text)):
                title = t
                break
        if not title and chunk.pieces:
            for i in range(chunk.pieces[0].msg - 1, -1, -1):
                if msgs[i].role == "user" and (t := fold_title(msgs[i].text)):
                    title = t
                    break
        if not title:
            for p in chunk.pieces:
                if t := fold_title(p.text):
                    title = t
                    break
        raw.append(title or texts.ARCHIVE_TITLE_FALLBACK.format(n=n))
    counts = Counter(raw)
    return [
        texts.ARCHIVE_TITLE_DUPLICATE.format(title=t, n=i + 1) if counts[t] > 1 else t
        for i, t in enumerate(raw)
    ]


def content_hash(chunks: Sequence[Chunk], msgs: Sequence[ArchMessage]) -> str:
    """Hash of what a plan archives and how it is chunked (part of the idempotency key)."""
    h = hashlib.sha256()
    for chunk in chunks:
        h.update(orjson.dumps(chunk.documents(msgs)))
        h.update(b"\x00")
    return h.hexdigest()[:16]
