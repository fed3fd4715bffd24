"""``stats.jsonl``: the session's telemetry, one JSON object per line.

Appends are durable (fsynced before the operation they describe is answered) because
the reference's report tools and selfcheck read them after crashes; a torn last line is
skipped on read. The records of one operation (a recall round's ``recall`` and
``recall-block``) go in one write and one fsync: the same lines, one wait for the disk.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from engine.jsonio import append_jsonl

__all__ = ["append_stats", "read_jsonl", "read_jsonl_tail"]


def append_stats(path: Path, record: Mapping[str, Any], *more: Mapping[str, Any]) -> None:
    """Append telemetry records (each must be a JSON object), in order, one line each."""
    records = (record, *more)
    if not all(isinstance(r, Mapping) for r in records):
        raise TypeError("a stats record must be a mapping")
    append_jsonl(path, *(dict(r) for r in records))


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Yield every line that is a JSON object; torn or foreign lines are skipped."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    yield from _records(data)


def read_jsonl_tail(path: Path, offset: int, size: int) -> tuple[list[dict[str, Any]], int]:
    """The records of bytes ``offset``..``size`` (read as :func:`read_jsonl` reads them),
    and the offset after their last complete line: where the next read starts, so a
    reader that follows the file parses each line once, and a line still being written
    (no line end yet) again once it is whole."""
    if size <= offset:
        return [], offset
    with path.open("rb") as fh:
        fh.seek(offset)
        data = fh.read(size - offset)
    return list(_records(data)), offset + data.rfind(b"\n") + 1


def _records(data: bytes) -> Iterator[dict[str, Any]]:
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            yield obj
