"""`rofmd engine …`: the memory engine on a memory directory, without a daemon.

The reference's "独立运行引擎" (`node engine/cli.mjs init|compress|recall|list|report`).
`recall --keywords/--limit/--offset` is the `memory_recall` tool's search instead of a
round, and writes nothing (no recall state, no telemetry, no session directory).
`list` and `report` read the stores without opening them (no recovery, nothing written:
:mod:`rofmd.cli.store_views`), so they are safe beside a running daemon; `report --dir`
reports one directory. `backfill-assistant` gives folders archived before the 「你说过」 channel their assistant
keywords (`--dry-run`: count only). There is no model here, so `compress` writes folders
`scored: true` with heuristic α and keywords (reference: "引擎/CLI 的启发式归档没有
“当前模型”可用"). Do not point it at a session a running daemon is serving: one process
owns a session directory.

Common options: `--memory-root DIR` (default: where the daemon would put it:
`storage.dir` of the user's config under the state directory, or `ROFMD_MEMORY_ROOT`),
`--session ID` (default `cli`), `--config-dir DIR` (default: the daemon's). Exit codes:
0 success, 1 bad arguments, unusable input or a store error (one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from engine.config import MemoryConfig
from engine.store import (
    StoreError,
    find_session_dir,
    open_session,
    read_jsonl,
)
from rofmd.cli.json_out import print_json
from rofmd.cli.stats_report import build_report, render_report
from rofmd.cli.store_views import folder_rows, read_listed
from rofmd.cli.where import DEFAULT_SESSION, CliError, UsageError, Where, locate

if TYPE_CHECKING:
    from engine.store.readonly import ReadonlyStore

__all__ = ["DEFAULT_WINDOW", "add_engine_parser", "archiver_version"]

DEFAULT_WINDOW = 128_000


def archiver_version() -> str:
    """`archivedByVersion` of folders the engine CLI writes."""
    from rofmd.version import version

    return f"rofmd-{version()}"


def _now_ms(args: argparse.Namespace) -> int:
    fixed: int | None = getattr(args, "now_ms", None)
    return fixed if fixed is not None else time.time_ns() // 1_000_000


# ---- where things are -----------------------------------------------------------------


def _session(args: argparse.Namespace) -> str:
    raw: str | None = args.session
    session = DEFAULT_SESSION if raw is None else raw
    if not session.strip():
        raise UsageError("--session must not be empty")
    return session


# ---- init -----------------------------------------------------------------------------


def cmd_init(args: argparse.Namespace) -> int:
    """Create the memory root and the session directory; say where they are."""
    where = locate(args)
    session = _session(args)
    store = where.open(session)
    store.dir.mkdir(parents=True, exist_ok=True)
    out = {
        "memoryRoot": str(where.root),
        "session": session,
        "sessionDir": str(store.dir),
        "folders": len(store),
    }
    if args.json:
        print_json(out)
    else:
        print(f"memory root  {where.root}")
        print(f"session      {session}  ({store.dir}, {len(store)} folders)")
    return 0


# ---- compress -------------------------------------------------------------------------


def _read_conversation(path: Path) -> dict[str, Any]:
    from engine.archive.standalone import conversation_errors

    try:
        data = sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise CliError(f"{path}: invalid JSON: {exc.msg} (line {exc.lineno})") from None
    errors = conversation_errors(doc)
    if errors:
        raise CliError(f"{path}: " + "; ".join(errors))
    assert isinstance(doc, dict)
    return doc


def cmd_compress(args: argparse.Namespace) -> int:
    """Archive the earliest share of a conversation file, scored heuristically."""
    from engine.archive.standalone import archive_conversation

    doc = _read_conversation(args.input)
    used = args.used_percent if args.used_percent is not None else doc.get("usedPercent")
    if used is None:
        raise UsageError("--used-percent is required (or give usedPercent in the input file)")
    if not 0 <= float(used) <= 100:
        raise UsageError(f"the used percent must be within 0..100, got {used:g}")
    if args.window <= 0:
        raise UsageError(f"--window must be a positive number of tokens, got {args.window}")
    where = locate(args)
    store = where.open(_session(args))
    now = _now_ms(args)
    result = archive_conversation(
        store,
        doc["messages"],
        used_percent=float(used),
        window=args.window,
        now_ms=now,
        cfg=where.cfg,
        archiver_version=archiver_version(),
    )
    plan, commit = result.plan, result.commit
    folders = []
    if commit is not None and commit.ok:
        planned = dict(zip(commit.folder_ids, plan.folders, strict=True))
        for fid, folder in planned.items():
            entry = store.get_entry(fid)
            folders.append(
                {
                    "id": fid,
                    "title": entry.title,
                    "alpha": entry.alpha,
                    "beta": entry.beta,
                    "keywords": list(entry.keywords),
                    "messages": len(folder.messages),
                    "chars": folder.chars,
                }
            )
    warnings = [w for _, w in plan.warnings] + ([w for _, w in commit.warnings] if commit else [])
    out = {
        "session": store.session_id,
        "sessionDir": str(store.dir),
        "outcome": plan.outcome if commit is None or commit.ok else "rolled-back",
        "usedPercent": float(used),
        "window": plan.window,
        "percentBefore": round(plan.percent_before, 2),
        "percentAfter": round(plan.percent_after, 2) if result.archived else None,
        "archivedMessages": plan.archived_messages if result.archived else 0,
        "seqRange": [plan.start_seq, plan.end_seq] if result.archived else None,
        "note": plan.note if result.archived else None,
        "folders": folders,
        "warnings": warnings,
    }
    if args.json:
        print_json(out)
    else:
        _print_compress(out, where.cfg)
    return 0 if commit is None or commit.ok else 1


def _print_compress(out: dict[str, Any], cfg: MemoryConfig) -> None:
    for w in out["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    if not out["folders"]:
        reason = {
            "below-trigger": f"{out['usedPercent']:g}% is not above compress.triggerPercent"
            f" {cfg.compress.trigger_percent:g}%",
            "rolled-back": "the commit failed and was rolled back",
        }.get(out["outcome"], f"outcome {out['outcome']}")
        print(f"nothing archived: {reason}")
        return
    lo, hi = out["seqRange"]
    print(
        f"archived {out['archivedMessages']} messages (seq {lo}..{hi}) into"
        f" {len(out['folders'])} folders in {out['sessionDir']}"
    )
    print(f"context {out['percentBefore']:g}% -> ~{out['percentAfter']:g}% of {out['window']}")
    for f in out["folders"]:
        kws = ", ".join(f["keywords"][:6])
        print(f"  {f['id']}  α {f['alpha']:.2f}  {f['chars']:>6} chars  {f['title']}  [{kws}]")
    print(f"note: {out['note']}")


# ---- recall ---------------------------------------------------------------------------


def _context(pairs: Sequence[str]) -> tuple[int | None, int | None]:
    values: dict[str, int] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or key not in ("token", "tokens", "window"):
            raise UsageError(f"--context takes token=N window=N, got {pair!r}")
        try:
            n = int(raw)
        except ValueError:
            raise UsageError(f"--context {key} must be a whole number, got {raw!r}") from None
        if n < 0:
            raise UsageError(f"--context {key} must not be negative, got {n}")
        values["token" if key.startswith("token") else "window"] = n
    return values.get("token"), values.get("window")


def _searching(args: argparse.Namespace) -> bool:
    return args.keywords is not None or args.limit is not None or args.offset is not None


def cmd_search(args: argparse.Namespace) -> int:
    """memory_recall's search (`--keywords`, else `--text`, with `--limit` / `--offset`):
    the tool's answer, and nothing written."""
    from engine.recall.standalone import search_once

    keywords = args.keywords if args.keywords is not None else args.text
    if keywords is None or not keywords.strip():
        raise UsageError("--keywords (or --text) must not be empty")
    where = locate(args)
    session = _session(args)
    try:
        store = open_session(where.root, session, per_session=where.per_session, create=False)
    except ValueError as exc:
        raise UsageError(f"session {session!r}: {exc}") from None
    arguments: dict[str, Any] = {"keywords": keywords}
    if args.limit is not None:
        arguments["limit"] = args.limit
    if args.offset is not None:
        arguments["offset"] = args.offset
    answer = search_once(store, where.cfg, arguments)
    if args.json:
        print_json({"session": store.session_id, **answer.value, "text": answer.text})
    else:
        print(answer.text)
    return 1 if answer.is_error else 0


def cmd_recall(args: argparse.Namespace) -> int:
    """One deterministic recall round for a text; print the recall block. With
    `--keywords`, `--limit` or `--offset`: memory_recall's search instead, read-only."""
    from engine.recall.standalone import StandaloneRecall, append_round_stats, recall_once

    if _searching(args):
        return cmd_search(args)
    if args.text is None:
        raise UsageError("--text is required (or --keywords / --limit / --offset for a search)")
    text = args.text.strip()
    if not text:
        raise UsageError("--text must not be empty")
    tokens, window = _context(args.context or [])
    where = locate(args)
    store = where.open(_session(args))
    session = StandaloneRecall.open(store, where.cfg)
    started = time.perf_counter()
    outcome = recall_once(
        session,
        text,
        now_ms=_now_ms(args),
        context_window=window,
    )
    elapsed_ms = round((time.perf_counter() - started) * 1000, 3)
    extra: dict[str, Any] = {"elapsedMs": elapsed_ms}
    if tokens is not None:
        extra["contextTokens"] = tokens
    append_round_stats(store, outcome, **extra)
    record = outcome.recall_record
    out = {
        "session": store.session_id,
        "ran": outcome.ran,
        "recalled": outcome.recalled,
        "candidates": record.get("candidates", 0),
        "addedChars": record.get("addedChars", 0),
        "addedTokens": record.get("addedTokens", 0),
        "contextTokens": tokens,
        "contextWindow": window,
        "elapsedMs": elapsed_ms,
        "block": session.state.block,
        "warnings": outcome.warnings,
    }
    if args.json:
        print_json(out)
        return 0
    for w in outcome.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if not outcome.ran:
        print("recall is off (recall.firstGenMax is 0)")
        return 0
    share = ""
    if tokens:
        share = f" ({out['addedTokens'] * 100 / tokens:.2f}% of the {tokens}-token context)"
    print(
        f"recalled {len(outcome.recalled)} of {out['candidates']} candidates:"
        f" +{out['addedChars']} chars, ~{out['addedTokens']} tokens{share}"
    )
    print(session.state.block if session.state.block else "(the recall block is empty)")
    return 0


# ---- list / report --------------------------------------------------------------------


def _selected(args: argparse.Namespace, where: Where) -> list[tuple[str, str]]:
    """(session id, directory name) of the selected stores that exist."""
    if args.session is not None:
        session = _session(args)
        if not where.per_session:
            return where.sessions()
        try:
            found = find_session_dir(where.root / "sessions", session)
        except ValueError as exc:
            raise UsageError(f"session {session!r}: {exc}") from None
        return [(session, found.name)] if found is not None else []
    return where.sessions()


def cmd_list(args: argparse.Namespace) -> int:
    """Folders per session: α, β, scored, rescorePending, pending. Read-only: the stores
    are read without recovery (:mod:`rofmd.cli.store_views`), nothing is written."""

    where = locate(args)
    sessions: list[dict[str, Any]] = []
    for store in read_listed(where, _session(args) if args.session is not None else None):
        folders = folder_rows(store)
        sessions.append(
            {
                "session": store.session_id,
                "dir": str(store.dir),
                "folders": folders,
                "pending": sum(1 for f in folders if f["pending"]),
            }
        )
    if args.json:
        print_json({"memoryRoot": str(where.root), "sessions": sessions})
        return 0
    if not sessions:
        print(f"no sessions under {where.root}")
        return 0
    for s in sessions:
        print(
            f"session {s['session']}  {len(s['folders'])} folders, {s['pending']} pending  {s['dir']}"
        )
        for f in s["folders"]:
            flags = [
                "scored" if f["scored"] else "PENDING",
                *(["rescorePending"] if f["rescorePending"] else []),
            ]
            print(
                f"  {f['id']}  α {f['alpha']:.2f}  β {f['beta']:+.1f}  {' '.join(flags):<9}"
                f"  {f['title']}"
            )
    return 0


def _dir_store(directory: Path) -> ReadonlyStore:
    """`report --dir`: one store directory as it is (a session directory, or an old global
    memory directory), whatever layout the config says."""
    from engine.store.layout import SessionPaths
    from engine.store.readonly import read_store
    from engine.store.session_dirs import SessionDirError, recorded_id

    path = directory.expanduser().resolve()
    if not path.is_dir():
        raise CliError(f"--dir {directory}: not a directory")
    try:
        sid = recorded_id(path)
    except SessionDirError:
        sid = None
    return read_store(SessionPaths(root=path.parent, dir=path), sid or path.name)


def cmd_report(args: argparse.Namespace) -> int:
    """The §1.6 report over stats.jsonl of the selected sessions (default: all), with the
    pending eras of their stores; `--dir`: of one directory only. Read-only."""
    from engine.scoring.era_audit import era_totals, store_eras

    if args.dir is not None:
        where: Where | None = None
        stores = [_dir_store(args.dir)]
    else:
        where = locate(args)
        stores = read_listed(where, _session(args) if args.session is not None else None)
    names = [s.session_id for s in stores]
    records: list[dict[str, Any]] = []
    eras = []
    for store in stores:
        own = list(read_jsonl(store.paths.stats))
        records.extend(own)
        eras.append(store_eras(store.session_id, store.index, own))
    rep = build_report(records, era_totals(eras))
    head: dict[str, Any] = (
        {"dir": str(stores[0].dir)} if where is None else {"memoryRoot": str(where.root)}
    )
    rep = {**head, "sessions": names, **rep}
    if args.json:
        print_json(rep)
    else:
        place = f"dir {head['dir']}" if where is None else f"memory root {where.root}"
        print(f"{place}  sessions: {', '.join(names) or 'none'}")
        print(render_report(rep))
    return 0


# ---- backfill-assistant ---------------------------------------------------------------


def cmd_backfill_assistant(args: argparse.Namespace) -> int:
    """Give old folders their 「你说过」 phrases (`assistantKeywords`), once: folders archived
    before the channel have none until they are scored again. Atomic batches through the
    store; `--dry-run` reads the folders on disk and counts, without opening a store (so
    not even its recovery writes)."""
    from engine.assistant_keywords import Backfill, backfill_store, count_backfill
    from engine.store import session_paths
    from engine.store.layout import session_dir_paths

    where = locate(args)
    sessions: list[dict[str, Any]] = []
    for name, dir_name in _selected(args, where):
        result: Backfill
        if args.dry_run:
            paths = (
                session_dir_paths(where.root, dir_name)
                if where.per_session
                else session_paths(where.root, name, per_session=False)
            )
            result = count_backfill(paths)
            folder_dir = paths.dir
        else:
            store = where.open_listed(name, dir_name)

            def progress(done: int, total: int, name: str = name) -> None:
                print(f"{name}: {done}/{total} folders", file=sys.stderr)

            result = backfill_store(store, progress=progress)
            folder_dir = store.dir
        sessions.append(
            {
                "session": name,
                "dir": str(folder_dir),
                "folders": result.folders,
                "missing": result.missing,
                "filled": result.filled,
                "withPhrases": result.with_phrases,
                "unreadable": result.unreadable,
            }
        )
    out = {"memoryRoot": str(where.root), "dryRun": bool(args.dry_run), "sessions": sessions}
    if args.json:
        print_json(out)
        return 0
    verb = "would fill" if args.dry_run else "filled"
    if not sessions:
        print(f"no sessions under {where.root}")
    for s in sessions:
        print(
            f"session {s['session']}  {s['folders']} folders, {s['missing']} without assistant"
            f" keywords: {verb} {s['filled']} ({s['withPhrases']} with phrases)"
            + (f", {len(s['unreadable'])} unreadable" if s["unreadable"] else "")
        )
    return 0


# ---- parser ---------------------------------------------------------------------------


def _guard(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except CliError as exc:
            print(f"rofmd engine {args.engine_command}: {exc}", file=sys.stderr)
            return exc.exit_code
        except (StoreError, OSError) as exc:
            print(f"rofmd engine {args.engine_command}: {exc}", file=sys.stderr)
            return 1

    run.__doc__ = func.__doc__
    return run


def _common(p: argparse.ArgumentParser, *, session_help: str) -> None:
    p.add_argument("--memory-root", type=Path, help="memory directory (default: the daemon's)")
    p.add_argument("--session", help=session_help)
    p.add_argument("--config-dir", type=Path, help="directory of config.json / config.local.json")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--now-ms", type=int, help=argparse.SUPPRESS)


def add_engine_parser(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `engine` (with init / compress / recall / list / report / backfill-assistant) to
    `sub`."""
    engine = sub.add_parser(
        "engine",
        help="run the memory engine on a memory directory, without a daemon",
        description="The memory engine on a memory directory, without a daemon "
        "(heuristic scoring: no model is involved).",
    )
    cmds = engine.add_subparsers(dest="engine_command", required=True, metavar="COMMAND")
    one = f"session id (default {DEFAULT_SESSION})"
    every = "only this session (default: every session)"

    p = cmds.add_parser("init", help="create the memory root and a session directory")
    _common(p, session_help=one)
    p.set_defaults(func=_guard(cmd_init))

    p = cmds.add_parser(
        "compress", help="archive the earliest share of a conversation.json (heuristic scores)"
    )
    _common(p, session_help=one)
    p.add_argument(
        "--input",
        type=Path,
        required=True,
        help='{"messages": [{"role", "content"}], "usedPercent": N} ("-": stdin)',
    )
    p.add_argument(
        "--used-percent",
        type=float,
        help="how full the context is, in %% of the window (default: the file's usedPercent)",
    )
    p.add_argument(
        "--window",
        type=int,
        default=DEFAULT_WINDOW,
        help=f"context window (default {DEFAULT_WINDOW})",
    )
    p.set_defaults(func=_guard(cmd_compress))

    p = cmds.add_parser(
        "recall",
        help="one deterministic recall round (or, with --limit/--offset, memory_recall's search)",
    )
    _common(p, session_help=one)
    p.add_argument("--text", help="the user message to recall on")
    p.add_argument(
        "--keywords",
        help="search like the memory_recall tool: keywords separated by spaces, commas, 、 or ;"
        " (read-only: nothing is written)",
    )
    p.add_argument("--limit", type=int, help="memory_recall limit, 1..20 (default 3)")
    p.add_argument(
        "--offset",
        type=int,
        help="memory_recall offset (a paginated search: a stable order, pages never overlap)",
    )
    p.add_argument(
        "--context",
        nargs="+",
        metavar="KEY=N",
        help="token=N (context tokens in use) window=N (context window)",
    )
    p.set_defaults(func=_guard(cmd_recall))

    p = cmds.add_parser("list", help="folders per session: α, β, scored, rescorePending, pending")
    _common(p, session_help=every)
    p.set_defaults(func=_guard(cmd_list))

    p = cmds.add_parser("report", help="the recall / archive report from stats.jsonl")
    _common(p, session_help=every)
    p.add_argument(
        "--dir",
        type=Path,
        help="report only this directory (a session directory, or an old global memory/)",
    )
    p.set_defaults(func=_guard(cmd_report))

    p = cmds.add_parser(
        "backfill-assistant",
        help="give old folders their 「你说过」 assistant keywords, once (not while a daemon"
        " serves the session)",
    )
    _common(p, session_help=every)
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="read the folders and count, write nothing (no store is opened)",
    )
    p.set_defaults(func=_guard(cmd_backfill_assistant))
