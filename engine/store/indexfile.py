"""Reading and writing ``index.json`` and its row log ``index.log.jsonl``.

``index.json``: ``{"version": 1, "folders": [<index entry>, …]}``. Unknown top-level
keys are preserved. A bare list (hand-made or foreign files) is accepted on read. The
index is derived data (folders are the truth), so a damaged file is reported and
rebuilt rather than trusted.

Why a log: ``memory_judge`` changes a few rows of an index of up to 10⁵, and rewriting
the whole file for that made every call cost O(N) bytes (51 MB at 10⁵). A call instead
appends one line to ``index.log.jsonl``, ``{"v": 1, "rows": [{"id", "prev", "row"}, …]}``:
each new row in full, and ``prev``, the :func:`row_digest` of the row it replaces. Load
replays the log over ``index.json``; the store writes ``index.json`` (and drops the
log) when the log outgrows :func:`index_log_budget`, and whenever it writes the whole
index anyway (an archive commit, a rollback, a repair at load). So one call writes
bytes in proportion to the folders it judges, and compaction adds a constant factor.

``prev`` is what makes the log safe against any other writer of ``index.json`` (an
older version or the reference plugin, which do not know the log, a hand edit, a
compaction whose log removal a crash undid): a logged row is applied only over the
row it was computed from; over its own value it is a no-op; over anything else the
folder's ``meta.json`` decides (see :mod:`engine.store.recovery`). Readers that only
know ``index.json`` see it as of the last compaction: valid, possibly behind the
folders' metas for rows judged since.

A line is appended with one ``O_APPEND`` write and fsynced (:func:`engine.jsonio.
append_jsonl`); a line a crash tore is skipped on read.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from engine import jsonio
from engine.jsonio import append_jsonl, dumps_json, write_bytes_atomic
from engine.store.layout import SessionPaths

__all__ = [
    "LOG_MIN_BYTES",
    "LOG_SHARE",
    "IndexLog",
    "IndexStatus",
    "LogRow",
    "Replay",
    "append_index_log",
    "encode_index",
    "file_size",
    "index_log_budget",
    "parse_index",
    "read_index",
    "read_index_log",
    "remove_index_log",
    "replay_index_log",
    "row_digest",
    "row_spans",
    "write_index",
]

IndexStatus = Literal["ok", "missing", "corrupt"]

LOG_SHARE = 4
"""The log is folded into ``index.json`` once it outgrows 1/LOG_SHARE of it."""
LOG_MIN_BYTES = 64 * 1024
"""…or this, whichever is larger (a small index is not rewritten every few calls)."""

LOG_VERSION = 1


@dataclass(frozen=True, slots=True)
class LogRow:
    """One row change of the log: the folder, the digest of the row it replaces, the row."""

    folder_id: str
    prev: str
    row: dict[str, Any]


@dataclass(slots=True)
class IndexLog:
    """The log as read: its records (one per append, in order), its size, bad lines."""

    records: list[list[LogRow]] = field(default_factory=list)
    size: int = 0
    skipped: int = 0


@dataclass(slots=True)
class Replay:
    """What :func:`replay_index_log` did, for the caller to settle with the metas."""

    original: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The rows of ``index.json`` the log names (before any record applied)."""
    before_last: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The rows the log's last record names, as they were before it."""
    conflicts: set[str] = field(default_factory=set)
    """Folders whose row was neither a record's base nor its value: another writer
    changed it; the rest of the log is not applied to them."""


def read_index(
    paths: SessionPaths, convert: Callable[[Any], Any] | None = None
) -> tuple[list[Any], dict[str, Any], IndexStatus]:
    """Raw entries (each passed through ``convert`` when given), preserved top-level
    extras and the file's status.

    With ``convert``, an index in the layout :func:`write_index` writes (and the
    reference plugin's ``JSON.stringify(…, null, 2)``) is parsed a few hundred rows at a
    time, each row converted as soon as it is parsed: the parsed rows of a whole index
    never exist at once (10⁵ rows: 160 MB less at the peak of a load, and the memory they
    would leave scattered behind). What it gives is what parsing the whole file gives;
    any other file, or any doubt, is parsed whole."""
    try:
        data = paths.index.read_bytes()
    except FileNotFoundError:
        return [], {}, "missing"
    except OSError:
        return [], {}, "corrupt"
    return parse_index(data, convert)


def parse_index(
    data: bytes, convert: Callable[[Any], Any] | None = None
) -> tuple[list[Any], dict[str, Any], IndexStatus]:
    """What :func:`read_index` gives for a file holding `data` (present)."""
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    if convert is not None:
        chunked = _rows_by_chunks(data, convert)
        if chunked is not None:
            return chunked[0], chunked[1], "ok"
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return [], {}, "corrupt"
    rows: list[Any]
    if isinstance(doc, list):
        rows, extra = doc, {}
    elif isinstance(doc, dict) and isinstance(doc.get("folders"), list):
        rows, extra = doc["folders"], {k: v for k, v in doc.items() if k != "folders"}
    else:
        return [], {}, "corrupt"
    return (rows if convert is None else list(map(convert, rows))), extra, "ok"


_UTF8_BOM = b"\xef\xbb\xbf"
_ROWS_KEY = b'\n  "folders":'
_ROWS_START = b'\n  "folders": [\n'
_ROWS_END = b"\n  ]"
_ROW_SEP = re.compile(re.escape(b"\n    },\n    {\n"))
ROWS_PER_CHUNK = 512


def row_spans(data: bytes) -> tuple[dict[str, Any], list[tuple[int, int]]] | None:
    """An indented index cut into its rows without parsing them: the document without
    its rows (parsed), and where each row's text starts and ends in `data`; None when the
    file is not in that layout.

    In a document indented by two spaces a row of the top-level ``folders`` array starts
    and ends on a line of its own at four spaces: ``    },\n    {`` is found between two
    rows and nowhere else (a nested value is indented further, and a JSON string holds no
    line break). So cutting the array there gives the rows, each whole, and the document
    without its rows keeps everything else."""
    if data.count(_ROWS_KEY) != 1:
        return None
    head = data.find(_ROWS_START)
    tail = data.rfind(_ROWS_END)
    if head < 0 or tail < head + len(_ROWS_START):
        return None
    try:
        rest = orjson.loads(data[: head + len(_ROWS_START) - 1] + b"]" + data[tail + 4 :])
    except orjson.JSONDecodeError:
        return None
    if not isinstance(rest, dict) or rest.get("folders") != []:
        return None
    at = head + len(_ROWS_START)
    starts = [at] + [m.start() + 8 for m in _ROW_SEP.finditer(data, at, tail)]  # "    {"
    ends = [x - 2 for x in starts[1:]] + [tail]  # each row's closing "}"
    return rest, list(zip(starts, ends, strict=True))


def _rows_by_chunks(
    data: bytes, convert: Callable[[Any], Any]
) -> tuple[list[Any], dict[str, Any]] | None:
    """The rows of an indented index (:func:`row_spans`), parsed and converted chunk by
    chunk; None when the file is not in that layout or any part does not parse (the
    caller parses it whole)."""
    cut = row_spans(data)
    if cut is None:
        return None
    rest, spans = cut
    view = memoryview(data)
    rows: list[Any] = []
    try:
        for k in range(0, len(spans), ROWS_PER_CHUNK):
            last = min(k + ROWS_PER_CHUNK, len(spans)) - 1
            chunk = orjson.loads(b"[" + view[spans[k][0] : spans[last][1]] + b"]")
            rows.extend(map(convert, chunk))
            del chunk
    except orjson.JSONDecodeError:
        return None
    return rows, {k: v for k, v in rest.items() if k != "folders"}


def encode_index(rows: Iterable[dict[str, Any]], extra: dict[str, Any]) -> bytes:
    """The bytes of ``index.json`` holding `rows` and the top-level `extra` (what
    :func:`write_index` writes)."""
    doc: dict[str, Any] = {"version": 1}
    doc.update(extra)
    doc["folders"] = list(rows)
    return dumps_json(doc)


def write_index(paths: SessionPaths, rows: Iterable[dict[str, Any]], extra: dict[str, Any]) -> int:
    """Atomically rewrite ``index.json``; returns its size in bytes. The caller drops
    the log once this returns (:func:`remove_index_log`)."""
    data = encode_index(rows, extra)
    write_bytes_atomic(paths.index, data)
    return len(data)


def file_size(path: Path) -> int:
    """Size of ``path`` in bytes, 0 when absent."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def index_log_budget(index_bytes: int) -> int:
    """Log size past which the next index write folds the log into ``index.json``:
    compaction then costs at most LOG_SHARE bytes per byte logged."""
    return max(LOG_MIN_BYTES, index_bytes // LOG_SHARE)


def row_digest(row: Mapping[str, Any]) -> str:
    """A short digest of a row's content (key order does not matter)."""
    return hashlib.blake2b(
        orjson.dumps(row, option=orjson.OPT_SORT_KEYS), digest_size=8
    ).hexdigest()


def append_index_log(paths: SessionPaths, rows: Sequence[LogRow]) -> int:
    """Durably append one record; returns the log's size after it."""
    record = {
        "v": LOG_VERSION,
        "rows": [{"id": r.folder_id, "prev": r.prev, "row": r.row} for r in rows],
    }
    append_jsonl(paths.index_log, record)
    return file_size(paths.index_log)


def remove_index_log(paths: SessionPaths) -> None:
    """Drop the log (``index.json`` now holds every row it had). Not fsynced: a log a
    crash brings back is harmless (each row only applies over the row it replaced)."""
    jsonio.fs.unlink(paths.index_log)


def read_index_log(paths: SessionPaths) -> IndexLog:
    """Every readable record of the log; a torn or foreign line is counted and skipped."""
    try:
        data = paths.index_log.read_bytes()
    except FileNotFoundError:
        return IndexLog()
    log = IndexLog(size=len(data))
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        record = _record(line)
        if record is None:
            log.skipped += 1
        else:
            log.records.append(record)
    return log


def replay_index_log(rows: dict[str, dict[str, Any]], log: IndexLog) -> Replay:
    """Apply ``log`` over ``rows`` (folder id → row, from ``index.json``) in place.

    A logged row applies over the row it replaced (``prev``) and is a no-op over its own
    value; anything else is a conflict. Folders without a row are skipped (gone, or the
    index was lost: the folders decide). Pure: the metas are the caller's business (the
    last record's folders, and the conflicts, are settled by their ``meta.json``).
    """
    out = Replay()
    for n, record in enumerate(log.records):
        last = n == len(log.records) - 1
        for item in record:
            fid = item.folder_id
            cur = rows.get(fid)
            if cur is None or fid in out.conflicts:
                continue
            out.original.setdefault(fid, cur)
            if last:
                out.before_last.setdefault(fid, cur)
            digest = row_digest(cur)
            if digest == item.prev:
                rows[fid] = item.row
            elif digest != row_digest(item.row):
                out.conflicts.add(fid)
    return out


def _record(line: bytes) -> list[LogRow] | None:
    try:
        doc = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict) or doc.get("v") != LOG_VERSION:
        return None
    items = doc.get("rows")
    if not isinstance(items, list):
        return None
    out: list[LogRow] = []
    for item in items:
        if not isinstance(item, dict):
            return None
        fid, prev, row = item.get("id"), item.get("prev"), item.get("row")
        if not isinstance(fid, str) or not isinstance(prev, str) or not isinstance(row, dict):
            return None
        if row.get("id") != fid:
            return None
        out.append(LogRow(fid, prev, row))
    return out
