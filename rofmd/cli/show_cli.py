"""`rofmd show [--session ID] [--live] [--json]`: what memory holds and what the model
would be shown (reference §3.1 "查看回忆内容", `tools/show-recall.mjs`).

Without `--session`: every session with its counts (folders, scored, pending,
rescorePending, images). With `--session`: its folders (α, β, scored / rescorePending /
pending), the recall block that would be injected, printed once, and a summary of
`recall-state.json` (version, round, block length, additions, lanes, ledger; each
entry's id, generation, α, β, characters and messages).

The block is the text `prompt/sections` answers for the session's `dsh-rofm:recall`
section after a restart: the snapshot's `block` (rendered from its additions when it
has none), nothing while `recall.enabled` is off or the session's recall is paused
(`memory-control.json`), nothing when `recall.persistInjected` is off (the block then
lives only in the daemon: ask it with `--live`). A v1 snapshot (ids only) is rebuilt
from the folders by the daemon when it loads it; show names the ids instead.

Read-only: the store is read without recovery, the snapshot peeked (a damaged file is
left where it is). `--live` asks a running daemon instead (`prompt/sections` and
`status`, one request each over `--socket`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from engine.config import MemoryConfig
from engine.jsonio import CorruptJSONError, read_json
from engine.recall.hygiene import HYGIENE_FILE, Hygiene
from engine.recall.state import RecallState, peek_state_file
from engine.store.images import image_files
from engine.store.readonly import ReadonlyStore
from rofmd.cli.json_out import print_json
from rofmd.cli.store_views import add_store_options, folder_rows, guarded, read_listed
from rofmd.cli.where import CliError, UsageError, locate
from rofmd.socket_location import SOCKET_ENV, client_socket_path

__all__ = ["add_show_parser", "block_on_disk", "counts", "state_summary"]

RECALL_SECTION = "dsh-rofm:recall"


def counts(store: ReadonlyStore) -> dict[str, Any]:
    """A session's folders by state, and its archived images."""
    entries = store.index
    return {
        "session": store.session_id,
        "dir": str(store.dir),
        "folders": len(entries),
        "scored": sum(1 for e in entries if e.scored),
        "pending": sum(1 for e in entries if not e.scored),
        "rescorePending": sum(1 for e in entries if e.scored and e.rescorePending),
        "images": len(image_files(store.paths)),
    }


def _paused(store: ReadonlyStore) -> bool:
    try:
        doc = read_json(store.paths.dir / HYGIENE_FILE)
    except (FileNotFoundError, CorruptJSONError):
        return False  # the daemon moves a damaged file aside and shows the block
    return Hygiene.from_json(doc).paused


def block_on_disk(store: ReadonlyStore, cfg: MemoryConfig) -> tuple[str, str | None, RecallState]:
    """The recall block `prompt/sections` would answer after a restart, why it is empty
    when it is (None: it is not, or nothing was recalled yet), and the snapshot."""
    state = peek_state_file(store.paths.recall_state)
    if not cfg.recall.enabled:
        return "", "recall.enabled is false", state
    if _paused(store):
        return "", "recall is paused for this session (memory_control)", state
    if not cfg.recall.persist_injected:
        why = "recall.persistInjected is false: the block lives in the daemon (--live)"
        return "", why, RecallState(persist=False)
    if state.pending_v1_ids:
        why = f"v1 snapshot ({len(state.pending_v1_ids)} ids): the daemon rebuilds it on load"
        return "", why, state
    if state.additions and not state.block:
        state.render()  # in memory only: a peeked state has no path to save to
    return state.block, None, state


def state_summary(state: RecallState, path: Path) -> dict[str, Any]:
    """show-recall's snapshot summary (the block itself is printed once, elsewhere)."""
    lanes = state.lanes
    return {
        "path": str(path),
        "exists": path.exists(),
        "version": state.loaded_version or None,
        "round": state.round,
        "blockChars": len(state.block),
        "additions": len(state.additions),
        "v1Ids": list(state.pending_v1_ids),
        "lanes": {
            "cursor": list(lanes.cursor) if lanes.cursor else None,
            "register": len(lanes.register),
            "highRecycle": len(lanes.high_recycle),
            "recycle": len(lanes.recycle),
            "lowWatermark": lanes.low_watermark,
        },
        "ledger": len(state.ledger),
        "counters": dict(state.counters),
        "degraded": state.degraded,
        "entries": [
            {
                "id": a.id,
                "generation": a.generation,
                "alpha": a.alpha,
                "beta": a.beta,
                "chars": a.chars,
                "messages": len(a.messages),
                "lane": a.lane,
            }
            for a in state.additions
        ],
    }


def _counts_line(c: dict[str, Any]) -> str:
    return (
        f"session {c['session']}  {c['folders']} folders: {c['scored']} scored, {c['pending']}"
        f" pending, {c['rescorePending']} rescorePending; {c['images']} images  {c['dir']}"
    )


def _print_session(detail: dict[str, Any]) -> None:
    print(_counts_line(detail["counts"]))
    for f in detail["folders"]:
        flags = "PENDING" if f["pending"] else "scored"
        if f["rescorePending"]:
            flags += " rescorePending"
        print(f"  {f['id']}  α {f['alpha']:.2f}  β {f['beta']:+.1f}  {flags:<21} {f['title']}")
    block = detail["block"]
    why = detail["blockEmpty"]
    print(f"recall block that would be injected ({len(block)} chars):")
    if block:
        print("-----")
        print(block)
        print("-----")
    else:
        print(f"  (empty: {why or 'nothing recalled yet'})")
    s = detail["recallState"]
    if not s["exists"]:
        print("recall-state.json: none yet")
        return
    lanes = s["lanes"]
    print(
        f"recall-state.json: v{s['version']}, round {s['round']}, block {s['blockChars']} chars,"
        f" {s['additions']} addition(s); lanes cursor {lanes['cursor']}, register"
        f" {lanes['register']}, highRecycle {lanes['highRecycle']}, recycle {lanes['recycle']};"
        f" ledger {s['ledger']}; degraded {s['degraded']}"
    )
    for e in s["entries"]:
        print(
            f"  {e['id']}  gen {e['generation']}  α {e['alpha']:.2f}  β {e['beta']:+.1f}"
            f"  {e['chars']} chars  {e['messages']} message(s)  lane {e['lane'] or '-'}"
        )


def _live(args: argparse.Namespace) -> int:
    from rofmd.wire import RpcError, call_once

    if args.session is None:
        raise UsageError("--live needs --session")
    path = args.socket_path if args.socket_path is not None else client_socket_path()
    try:
        status = call_once(path, "status", timeout=10)
        answer = call_once(path, "prompt/sections", {"session": {"id": args.session}}, timeout=30)
    except RpcError as exc:
        raise CliError(f"the daemon refused: {exc}") from None
    except TimeoutError:
        raise CliError(f"the daemon at {path} did not answer in time") from None
    except OSError as exc:
        raise CliError(f"cannot reach the daemon at {path}: {exc.strerror or exc}") from None
    sections = answer.get("sections") or []
    texts = {s.get("name"): s.get("text", "") for s in sections}
    block = texts.get(RECALL_SECTION, "")
    out = {
        "live": True,
        "socket": str(path),
        "memoryRoot": status.get("memoryRoot"),
        "pid": status.get("pid"),
        "session": args.session,
        "block": block,
        "sections": sections,
        "counters": status.get("counters"),
    }
    if args.json:
        print_json(out)
        return 0
    print(
        f"daemon pid {out['pid']} at {path}  memory root {out['memoryRoot']}  session"
        f" {args.session}"
    )
    print(f"recall block the daemon injects ({len(block)} chars):")
    print("-----\n" + block + "\n-----" if block else "  (empty)")
    tasks = texts.get("dsh-rofm:memory-tasks", "")
    print(f"memory task block: {len(tasks)} chars" if tasks else "memory task block: empty")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """Print sessions, or one session in full (module docstring)."""
    if args.live:
        return _live(args)
    where = locate(args)
    stores = read_listed(where, args.session)
    if args.session is not None and not stores:
        raise CliError(f"no store of session {args.session!r} under {where.root}")
    if args.session is None:
        listed = [counts(s) for s in stores]
        if args.json:
            print_json({"memoryRoot": str(where.root), "sessions": listed})
            return 0
        print(f"memory root {where.root}  {len(listed)} session(s)")
        for c in listed:
            print(_counts_line(c))
        return 0
    store = stores[0]
    block, why, state = block_on_disk(store, where.cfg)
    detail = {
        "memoryRoot": str(where.root),
        "session": store.session_id,
        "counts": counts(store),
        "folders": folder_rows(store),
        "block": block,
        "blockEmpty": why,
        "recallState": state_summary(state, store.paths.recall_state),
    }
    if args.json:
        print_json(detail)
    else:
        _print_session(detail)
    return 0


def add_show_parser(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `show` to the `rofmd` subcommands."""
    p = sub.add_parser(
        "show",
        help="sessions and their memories, the recall block that would be injected, the"
        " recall-state summary (read-only)",
        description="What memory holds and what the model would be shown. Writes nothing.",
    )
    add_store_options(p, session_help="one session in full (default: every session's counts)")
    p.add_argument(
        "--live",
        action="store_true",
        help="ask the running daemon (prompt/sections, status) instead of reading disk",
    )
    p.add_argument(
        "--socket",
        dest="socket_path",
        type=Path,
        help=f"daemon socket for --live (env {SOCKET_ENV})",
    )
    p.set_defaults(func=guarded("show", cmd_show))
