"""`rofmd time-view --from … [--to …] [--session ID] [--json]`: memories by event time.

The reference's read-only `tools/time-view.mjs` (§3.1 "查看回忆内容", §6 "时间辅助不建物理目
录"): the folders of a time window, in event order, without a daemon. The window is
memory_recall's (`engine.timeexpr.query`: `'2026-10-31'`, `'2026-10'`, `'2026'`, epoch ms,
一个模糊时间; `--to` makes it a two-ended range), as its first level: a view shows the window
asked, it never widens. Which folders it holds is memory_recall's rule too (the session's
`TimeIndex`: a folder with time tags by its tags, else by its event interval, else its
archive instant), whatever `time.mode` says.

Read-only, strictly: it reads `index.json` and replays `index.log.jsonl` in memory; no
store is opened (opening one runs recovery, which may repair files), nothing is created,
moved or appended, the memory root may even be read-only. Options as `rofmd engine`:
`--memory-root`, `--config-dir`, `--session` (default: every session).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from engine.config import MemoryConfig
from engine.store import find_session_dir, list_session_dirs
from engine.store.layout import SessionPaths, session_dir_paths, session_paths
from engine.store.readonly import read_store
from engine.timeexpr.civil import resolve_timezone, to_local
from engine.timeexpr.index import TimeIndex
from engine.timeexpr.query import normalize_time_query
from rofmd.cli.json_out import print_json

__all__ = ["add_time_view_parser", "cmd_time_view"]


def _stores(args: argparse.Namespace, root: Path, cfg: MemoryConfig) -> list[tuple[str, Path]]:
    """(session, directory) of the stores to show; nothing is created or claimed."""
    from rofmd.cli.where import CliError

    if not cfg.storage.per_session:
        return [(args.session or "cli", root)] if root.is_dir() else []
    base = root / "sessions"
    if args.session is not None:
        try:
            found = find_session_dir(base, args.session)
        except ValueError as exc:
            raise CliError(f"session {args.session!r}: {exc}") from None
        return [(args.session, found)] if found is not None else []
    return [(d.id or d.name, d.path) for d in list_session_dirs(base)]


def _paths(root: Path, directory: Path, per_session: bool) -> SessionPaths:
    if not per_session:
        return session_paths(root, "", per_session=False)
    return session_dir_paths(root, directory.name)


def _when(ms: int, tz: Any) -> str:
    return to_local(ms, tz).strftime("%Y-%m-%d %H:%M")


def cmd_time_view(args: argparse.Namespace) -> int:
    """Print the folders of a time window (module docstring); exit 1 on bad input."""
    from rofmd.cli.where import CliError, locate

    try:
        where = locate(args)
        now_ms = args.now_ms if args.now_ms is not None else time.time_ns() // 1_000_000
        cfg = where.cfg
        query = normalize_time_query(args.time_from, args.time_to, None, now_ms=now_ms, cfg=cfg)
        if not query.constrained:
            raise CliError("; ".join(query.warnings) or "--from is not a time")
        level = query.levels[0]
        assert level.start is not None and level.end is not None
        tz = resolve_timezone(cfg.time.timezone)
        sessions: list[dict[str, Any]] = []
        for session, directory in _stores(args, where.root, cfg):
            # the index and its log as the next open would load them, no file written
            paths = _paths(where.root, directory, cfg.storage.per_session)
            entries = list(read_store(paths, session).index)
            index = TimeIndex(entries, cfg.time.timezone, with_tags=cfg.time_tag.mode != "off")
            by_id = {e.id: e for e in entries}
            folders: list[dict[str, Any]] = []
            for fid in index.event_order(index.window_ids(level.start, level.end)):
                e, ft = by_id[fid], index.folders[fid]
                folders.append(
                    {
                        "id": fid,
                        "eventStart": ft.start,
                        "eventEnd": ft.end,
                        "eventTimeSource": ft.source,
                        "createdAt": e.createdAt,
                        "alpha": e.alpha,
                        "beta": e.beta,
                        "scored": e.scored,
                        "title": e.title,
                        "timeTags": [t.get("label") for t in e.timeTags or [] if t.get("label")],
                    }
                )
            sessions.append({"session": session, "dir": str(directory), "folders": folders})
    except CliError as exc:
        print(f"rofmd time-view: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"rofmd time-view: {exc}", file=sys.stderr)
        return 1
    window = {
        "from": level.start,
        "to": level.end,
        "firstDay": level.first.isoformat() if level.first else None,
        "lastDay": level.last.isoformat() if level.last else None,
        "granularity": query.granularity,
        "explicit": query.explicit,
    }
    if args.json:
        out = {
            "memoryRoot": str(where.root),
            "timezone": cfg.time.timezone,
            "window": window,
            "warnings": list(query.warnings),
            "sessions": sessions,
        }
        print_json(out)
        return 0
    for w in query.warnings:
        print(f"warning: {w}", file=sys.stderr)
    span = window["firstDay"]
    if window["lastDay"] != span:
        span = f"{span} ~ {window['lastDay']}"
    print(f"time window {span} ({cfg.time.timezone or 'UTC'})  memory root {where.root}")
    if not sessions:
        print("no sessions")
    for s in sessions:
        print(f"session {s['session']}  {len(s['folders'])} folder(s) in the window")
        for f in s["folders"]:
            end = max(f["eventStart"], f["eventEnd"] - 1)
            when = _when(f["eventStart"], tz)
            if _when(end, tz) != when:
                when += f" ~ {_when(end, tz)}"
            flag = "scored " if f["scored"] else "PENDING"
            tags = f"  [{', '.join(f['timeTags'])}]" if f["timeTags"] else ""
            print(
                f"  {when:<35} {f['id']}  {flag}  α {f['alpha']:.2f}  β {f['beta']:+.1f}"
                f"  {f['title']}{tags}"
            )
    return 0


def add_time_view_parser(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `time-view` to the `rofmd` subcommands."""
    p = sub.add_parser(
        "time-view",
        help="list the memories of a time window by event time (read-only)",
        description="The memory folders of a time window, in event order. Reads only: "
        "no file is written, created or moved.",
    )
    p.add_argument(
        "--from",
        dest="time_from",
        required=True,
        help="'2026-10-31' (day), '2026-10' (month), '2026' (year) or epoch ms",
    )
    p.add_argument("--to", dest="time_to", help="the end of a two-ended range (same forms)")
    p.add_argument("--session", help="only this session (default: every session)")
    p.add_argument("--memory-root", type=Path, help="memory directory (default: the daemon's)")
    p.add_argument("--config-dir", type=Path, help="directory of config.json / config.local.json")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--now-ms", type=int, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_time_view)
