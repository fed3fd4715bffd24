"""``index.log.jsonl`` replayed over the entries of ``index.json``: one rule for the
store's recovery and for the read-only reader (`engine.store.readonly`).

The log (`engine.store.indexfile`) changes only the rows it names. A logged row applies
over the exact row it replaced; a row the log's last record wrote, or one another writer
changed under the log (a conflict), is what its folder's ``meta.json`` says, since the
metas are written after the log line. A row that does not validate falls back to what
``index.json`` had. What recovery then writes, and what the reader only reports, is the
caller's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import ValidationError

from engine.store.errors import CorruptFolderError
from engine.store.folders import read_meta
from engine.store.index_entry import IndexEntry
from engine.store.indexfile import IndexLog, read_index_log, replay_index_log
from engine.store.layout import SessionPaths
from engine.store.records import index_row_from_meta

__all__ = ["LogReplay", "replay_log_over"]


@dataclass
class LogReplay:
    """What a replay found. ``conflicts``: rows another writer changed under the log,
    with the entry ``index.json`` gave them; ``invalid``: logged rows that did not
    validate (rechecked against their meta); ``reread``: rows their meta changed."""

    log: IndexLog
    conflicts: dict[str, IndexEntry] = field(default_factory=dict)
    invalid: set[str] = field(default_factory=set)
    reread: list[str] = field(default_factory=list)


def replay_log_over(
    paths: SessionPaths,
    entries: dict[str, IndexEntry],
    on_unreadable: Callable[[str, str], None],
) -> LogReplay:
    """Replay the session's index log over ``entries`` in place (module docstring).
    ``on_unreadable(folder_id, reason)``: a meta that cannot be read (the log's row
    stands)."""
    log = read_index_log(paths)
    # the rows the log names, as index.json has them (the log touches only those)
    named = {item.folder_id for record in log.records for item in record}
    rows = {fid: entries[fid].row() for fid in named if fid in entries}
    replay = replay_index_log(rows, log)
    out = LogReplay(log, {fid: entries[fid] for fid in sorted(replay.conflicts)})
    recheck = replay.conflicts | replay.before_last.keys()
    for fid, row in replay.original.items():
        if fid in recheck or row is rows[fid]:
            continue
        try:
            entries[fid] = IndexEntry.model_validate(rows[fid])
        except ValidationError:
            recheck.add(fid)
            out.invalid.add(fid)
    for fid in sorted(recheck):
        logged = rows[fid]
        base = replay.before_last.get(fid, logged)
        try:
            row = index_row_from_meta(read_meta(paths, fid), base)
        except CorruptFolderError as exc:
            on_unreadable(fid, exc.reason)
            row = logged  # the log's word stands while the meta cannot be read
        try:
            entry = IndexEntry.model_validate(row)
        except ValidationError:
            original = replay.original[fid]
            row, entry = original, IndexEntry.model_validate(original)
        entries[fid] = entry
        if row != logged:
            out.reread.append(fid)
    return out
