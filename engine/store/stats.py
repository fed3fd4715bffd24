"""``stats.jsonl``: the session's telemetry, one JSON object per line.

Appends are durable (fsync per record) because the reference's report tools
and selfcheck read them after crashes; a torn last line is skipped on read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from engine.jsonio import append_jsonl

__all__ = ["append_stats", "read_jsonl"]


def append_stats(path: Path, record: Mapping[str, Any]) -> None:
    """Append one telemetry record (must be a JSON object)."""
    if not isinstance(record, Mapping):
        raise TypeError("a stats record must be a mapping")
    append_jsonl(path, dict(record))


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Yield every line that is a JSON object; torn or foreign lines are skipped."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            yield obj
