"""The recall state written a round at a time: a snapshot and a log of what changed.

Rewriting the whole v3 document every round (the block, every addition with its
messages, the ledger of every folder ever shown) made the state file most of a
round's writing. So `recall-state.json` is a *snapshot* (the v3 document, plus
``"logBase": s``) and each later save appends one line to `recall-state.log.jsonl`
beside it (:func:`log_path`): what changed since the document the line before it
committed (``{"base": s, "n": k, "set": {...}, "additions": [...], "block": [...],
"ledger": {...}}``, see :func:`encode_record`). When the log has grown past the
snapshot's size (or :data:`MAX_RECORDS` lines), the next save writes a new snapshot
with ``logBase`` one higher instead, which retires every line of the old log at once.

Why a crash leaves a state that was committed, never a mix:

* a line is appended with one ``O_APPEND`` write and fsynced before the round is
  answered (`engine.jsonio.append_jsonl`), so a round was committed when its line is
  whole on disk;
* reading (:func:`replay`) applies, in order, the lines ``base == s`` numbered
  ``1, 2, 3, …`` and stops at the first line that is not whole JSON or not the next
  number (a torn tail: the round being written when the process died, which was never
  answered); lines of another base are an older snapshot's, already in this one;
* a snapshot is written atomically (temp file, fsync, rename): before its rename the
  old snapshot and its log are read, after it the new one, whose base no old line has
  (the base of a new snapshot is one past any base seen in the snapshot or the log);
* after a read that stopped early, or a write that failed, the next save writes a
  snapshot (never a line after a torn one), so nothing is ever appended to a log whose
  tail a reader would stop at.

A record names the additions already written by id (a string in place of the object),
writes the block as literal pieces and references to the additions' bodies (the block
is most of its own text repeated), and the ledger as the keys set and removed.
Resolving a record gives back exactly the document the save had: the test compares
them at every byte offset of the log.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

__all__ = [
    "MAX_RECORDS",
    "apply_record",
    "encode_record",
    "log_path",
    "replay",
]

MAX_RECORDS = 256
"""Lines a log holds at most before the next save writes a snapshot (bounds a replay)."""
_MIN_REFERENCED = 48
"""Bodies shorter than this stay literal in a block record."""
_DELTA_DICTS = ("ledger",)
"""Top-level mappings written as the keys set and removed."""
_SPECIAL = ("additions", "block", *_DELTA_DICTS)


def log_path(state_path: Path) -> Path:
    """`recall-state.log.jsonl` beside `recall-state.json`."""
    return state_path.with_name(state_path.name.removesuffix(".json") + ".log.jsonl")


def _block_parts(block: str, additions: list[dict[str, Any]]) -> list[str | int]:
    """`block` as literal pieces and indexes of additions whose body it contains."""
    found: list[tuple[int, int, int]] = []
    for i, add in enumerate(additions):
        body = add.get("body")
        if isinstance(body, str) and len(body) >= _MIN_REFERENCED:
            at = block.find(body)
            if at >= 0:
                found.append((at, at + len(body), i))
    found.sort()
    parts: list[str | int] = []
    pos = 0
    for start, end, i in found:
        if start < pos:
            continue  # overlaps a body already referenced
        if start > pos:
            parts.append(block[pos:start])
        parts.append(i)
        pos = end
    if pos < len(block):
        parts.append(block[pos:])
    return parts


def _join_parts(parts: list[Any], additions: list[Any]) -> str:
    out: list[str] = []
    for p in parts:
        if isinstance(p, int) and not isinstance(p, bool):
            out.append(additions[p]["body"])
        else:
            out.append(str(p))
    return "".join(out)


def encode_record(prev: dict[str, Any], doc: dict[str, Any], base: int, n: int) -> dict[str, Any]:
    """The log line that turns `prev` (the last committed document) into `doc`."""
    rec: dict[str, Any] = {"base": base, "n": n}
    changed = {k: v for k, v in doc.items() if k not in _SPECIAL and prev.get(k, rec) != v}
    gone = [k for k in prev if k not in doc]
    if changed:
        rec["set"] = changed
    if gone:
        rec["unset"] = gone
    before = {a["id"]: a for a in prev.get("additions") or () if isinstance(a, dict)}
    adds = doc["additions"]
    if adds != prev.get("additions"):
        rec["additions"] = [a["id"] if before.get(a["id"]) == a else a for a in adds]
    block = doc["block"]
    if block != prev.get("block"):
        parts = _block_parts(block, adds)
        rec["block"] = parts if _join_parts(parts, adds) == block else [block]
    for name in _DELTA_DICTS:
        new, old = doc[name], prev.get(name)
        if new == old:
            continue
        if not isinstance(old, dict):
            rec[name] = {"set": new, "del": []}
            continue
        rec[name] = {
            "set": {k: v for k, v in new.items() if k not in old or old[k] != v},
            "del": [k for k in old if k not in new],
        }
    return rec


def apply_record(prev: dict[str, Any], rec: dict[str, Any]) -> dict[str, Any]:
    """The document `rec` (from :func:`encode_record`) commits on top of `prev`. Raises
    ``ValueError`` (or ``KeyError``/``TypeError``/``IndexError``) for a line that does
    not fit `prev`: the reader stops there."""
    doc = dict(prev)
    for k in rec.get("unset") or ():
        doc.pop(k, None)
    doc.update(rec.get("set") or {})
    if "additions" in rec:
        before = {a["id"]: a for a in prev.get("additions") or () if isinstance(a, dict)}
        doc["additions"] = [before[a] if isinstance(a, str) else dict(a) for a in rec["additions"]]
    if "block" in rec:
        doc["block"] = _join_parts(rec["block"], doc["additions"])
    for name in _DELTA_DICTS:
        if name not in rec:
            continue
        merged = dict(prev.get(name) or {})
        delta = rec[name]
        for k in delta["del"]:
            merged.pop(k, None)
        merged.update(delta["set"])
        # a key set again moves to the end, as the saving side's dict did
        for k in delta["set"]:
            merged[k] = merged.pop(k)
        doc[name] = merged
    return doc


def _lines(data: bytes) -> Iterator[tuple[bytes, bool]]:
    """Each line of `data` and whether it was whole (ended in LF)."""
    pos = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            yield data[pos:], False
            return
        yield data[pos:end], True
        pos = end + 1


def replay(
    snapshot: dict[str, Any], data: bytes, base: int
) -> tuple[dict[str, Any], int, bool, int]:
    """The document the log `data` commits on top of `snapshot` (its ``logBase`` is
    `base`): (document, lines applied, whether every line of this base was used, the
    highest base any line names)."""
    doc = snapshot
    applied = 0
    clean = True
    top = base
    for line, whole in _lines(data):
        try:
            rec = orjson.loads(line) if whole else None
        except orjson.JSONDecodeError:
            rec = None
        if not isinstance(rec, dict):
            clean = False
            break
        line_base = rec.get("base")
        if not isinstance(line_base, int) or isinstance(line_base, bool):
            clean = False  # not a line this module writes
            break
        top = max(top, line_base)
        if line_base != base:
            continue
        if not clean or rec.get("n") != applied + 1:
            clean = False
            break
        try:
            doc = apply_record(doc, rec)
        except (ValueError, KeyError, TypeError, IndexError, AttributeError):
            clean = False
            break
        applied += 1
    return doc, applied, clean, top
