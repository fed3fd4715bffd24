"""``.passive-watermark.json``: which shadowed seqs the passive path already handled
(reference §3.2.6, v1.4.1 "E-03 passive 水位").

Seqs number the events of one DSH session; a rebuilt session starts again at 0 and a
QQ chat key gathers several sessions in one directory. So the marks are kept per DSH
session id (v2), entries shaped as the reference has them, ``{sessionId, seq}``: ``seq``
is the highest seq handled. We also write ``ranges``, the exact handled seqs as merged
inclusive ``[start, end]`` runs, so a compaction of an older span after a newer one
(seqs below ``seq`` never handled) is still archived; an entry without ``ranges`` (the
reference's own files) means every seq up to ``seq``.

Version 1 had no session ids: one mark for the directory, ``{"version": 1, "seq": N}``
(also read: ``lastSeq`` / ``watermark`` for N, or a ``seqs`` list). It is read as the
mark of the session the directory belongs to, and written back as v2.

A missing file is an empty watermark; a damaged one too (it is reported, and the next
write replaces it): a seq archived again then lands on folders its idempotency key
already has, so recovering costs no duplicate.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.jsonio import CorruptJSONError, read_json, write_json_atomic

__all__ = ["VERSION", "WATERMARK_NAME", "Watermark", "load_watermark", "save_watermark"]

WATERMARK_NAME = ".passive-watermark.json"
VERSION = 2


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _merge(runs: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(runs):
        if out and a <= out[-1][1] + 1:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _runs(seqs: Iterable[int]) -> list[tuple[int, int]]:
    return _merge((s, s) for s in seqs)


@dataclass
class Watermark:
    """Handled seqs per DSH session id, as merged inclusive runs."""

    marks: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    read_version: int | None = None
    """The version the file had (None: no file)."""
    damage: str | None = None
    """Why the file could not be read (it was taken as empty)."""

    def handled(self, session_id: str, seq: int) -> bool:
        """``seq`` of ``session_id`` was handled already."""
        runs = self.marks.get(session_id)
        if not runs:
            return False
        i = bisect.bisect_right(runs, seq, key=lambda run: run[0]) - 1
        return i >= 0 and runs[i][0] <= seq <= runs[i][1]

    def unhandled(self, session_id: str, seqs: Iterable[int]) -> list[int]:
        """The seqs of ``seqs`` not handled yet, in their order."""
        return [s for s in seqs if not self.handled(session_id, s)]

    def mark(self, session_id: str, seqs: Iterable[int]) -> None:
        """Record ``seqs`` of ``session_id`` as handled."""
        new = _runs(seqs)
        if new:
            self.marks[session_id] = _merge([*self.marks.get(session_id, []), *new])

    def high(self, session_id: str) -> int | None:
        """The highest handled seq of ``session_id``."""
        runs = self.marks.get(session_id)
        return runs[-1][1] if runs else None

    def to_json(self, now_ms: int) -> dict[str, Any]:
        """The v2 file."""
        return {
            "version": VERSION,
            "entries": [
                {"sessionId": sid, "seq": runs[-1][1], "ranges": [[a, b] for a, b in runs]}
                for sid, runs in sorted(self.marks.items())
                if runs
            ],
            "updatedAt": now_ms,
        }


def _entry_runs(entry: Mapping[str, Any]) -> list[tuple[int, int]]:
    ranges = entry.get("ranges")
    if isinstance(ranges, list):
        runs = [
            (a, b)
            for r in ranges
            if isinstance(r, list)
            and len(r) == 2
            and (a := _int(r[0])) is not None
            and (b := _int(r[1])) is not None
            and 0 <= a <= b
        ]
        return _merge(runs)
    seq = _int(entry.get("seq"))
    return [(0, seq)] if seq is not None and seq >= 0 else []


def _v1_runs(doc: Mapping[str, Any]) -> list[tuple[int, int]]:
    for key in ("seq", "lastSeq", "watermark"):
        seq = _int(doc.get(key))
        if seq is not None and seq >= 0:
            return [(0, seq)]
    seqs = doc.get("seqs")
    if isinstance(seqs, list):
        return _runs(s for s in seqs if (v := _int(s)) is not None and v >= 0)
    return []


def parse_watermark(doc: Any, *, default_session: str) -> Watermark:
    """A watermark from a decoded file (see the module docstring for both versions)."""
    if not isinstance(doc, Mapping):
        return Watermark(damage="not a JSON object")
    version = _int(doc.get("version"))
    entries = doc.get("entries")
    if version == VERSION or isinstance(entries, list):
        wm = Watermark(read_version=VERSION)
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, Mapping) and isinstance(entry.get("sessionId"), str):
                runs = _entry_runs(entry)
                if runs:
                    sid = entry["sessionId"]
                    wm.marks[sid] = _merge([*wm.marks.get(sid, []), *runs])
        return wm
    wm = Watermark(read_version=1)
    runs = _v1_runs(doc)
    if runs:
        wm.marks[default_session] = runs
    return wm


def load_watermark(path: Path, *, default_session: str) -> Watermark:
    """The watermark at ``path``; ``default_session`` owns the marks of a v1 file."""
    try:
        doc = read_json(path)
    except FileNotFoundError:
        return Watermark()
    except (CorruptJSONError, OSError) as exc:
        return Watermark(damage=str(exc))
    return parse_watermark(doc, default_session=default_session)


def save_watermark(path: Path, wm: Watermark, now_ms: int) -> None:
    """Write ``wm`` as v2, atomically and durably."""
    write_json_atomic(path, wm.to_json(now_ms))
