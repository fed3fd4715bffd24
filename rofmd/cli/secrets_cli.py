"""`rofmd scan-secrets` and `rofmd forget`: secrets and memory hygiene from the shell.

``scan-secrets [--apply] [--json] [--memory-root DIR] [--config-dir DIR] [--session ID]
[--mode redact|drop] [--backup-dir DIR] [--restore DIR]`` works on a memory directory
without a daemon (like `rofmd engine`): it reports the folders holding secrets (kinds and
counts, never a value), and with ``--apply`` first copies every session it will change to
a backup (default ``<memory root>-secrets-backup-<UTC time>``, beside the root, 0700),
then rewrites those folders redacted (`engine.secrets.rewrite`: each folder old or new
after a kill at any point, the index following the metas), redacts the recall state and
telemetry that repeat folder text, drops the relevance snapshot (rebuilt), reopens the
store and scans it again. ``--restore DIR`` puts the sessions of a backup back. Both
refuse while a daemon that serves this memory root answers on the socket (``--force``).
Progress goes to stderr, one line per session and every 500 folders.

``forget --session ID [--delete] [--keywords K] [--pause | --resume] MEMORY_ID…`` asks
the running daemon, which owns the store, through the very tools the model has
(`memory_forget`, `memory_control`).

Exit codes: 0 success, 1 failure (a refused tool call, an unreachable daemon, bad input).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import orjson

from rofmd.cli.json_out import print_json

if TYPE_CHECKING:
    from engine.secrets.redact import Mode
    from rofmd.cli.where import Where

__all__ = ["add_secrets_parsers"]

PROGRESS_EVERY = 500


def _socket(args: argparse.Namespace) -> Path:
    from rofmd.socket_location import client_socket_path

    return Path(args.socket_path) if args.socket_path is not None else client_socket_path()


def _stamp() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _scan_session(
    where: Where, sid: str, name: str, args: argparse.Namespace, mode: Mode
) -> dict[str, Any]:
    from engine.jsonio import read_json
    from engine.recall.state_log import log_path as state_log_path
    from engine.secrets.store_scan import redact_json, scan_folder
    from engine.store import open_session_dir

    store = where.open_listed(sid, name)
    label = name or str(where.root)
    ids = [e.id for e in store.index]
    _progress(f"scanning {label}: {len(ids)} folders")
    scans = []
    for n, fid in enumerate(ids, start=1):
        scans.append(scan_folder(store, fid, mode))
        if n % PROGRESS_EVERY == 0:
            _progress(f"  {label}: {n}/{len(ids)} folders scanned")
    hits = [s for s in scans if s.has_secrets]
    files: Counter[str] = Counter()
    for path in (
        store.paths.recall_state,
        state_log_path(store.paths.recall_state),
        store.paths.stats,
    ):
        if not path.exists():
            continue
        found: Counter[str] = Counter()
        if path.suffix == ".jsonl":
            for line in path.read_bytes().splitlines():
                try:
                    redact_json(orjson.loads(line), mode, found)
                except orjson.JSONDecodeError:
                    continue
        else:
            try:
                redact_json(read_json(path), mode, found)
            except ValueError:
                continue
        if found:
            files[path.name] = sum(found.values())
    kinds: Counter[str] = Counter()
    for s in hits:
        kinds.update(s.kinds)
    out: dict[str, Any] = {
        "session": sid,
        "dir": str(store.dir),
        "folders": len(ids),
        "withSecrets": [{"id": s.folder_id, "kinds": dict(sorted(s.kinds.items()))} for s in hits],
        "files": dict(files),
        "kinds": dict(sorted(kinds.items())),
        "unreadable": [s.folder_id for s in scans if s.unreadable],
    }
    if not args.apply or not (hits or files):
        return out
    from engine.secrets.rewrite import backup_session, redact_session_files, rewrite_folders

    backup = args.backup_root / "sessions" / (name or "_root")
    backup_session(store.dir, backup)
    _progress(f"  {label}: backed up to {backup}")

    def step(n: int) -> None:
        if n % PROGRESS_EVERY == 0 or n == len(hits):
            _progress(f"  {label}: {n}/{len(hits)} folders rewritten")

    atomic = rewrite_folders(store.paths, hits, progress=step)
    changed = redact_session_files(store.paths, mode, Counter())
    # reopening runs the store's recovery: the reindex marker brings the index to the metas
    reopened = open_session_dir(where.root, name) if name else where.open(sid)
    left = [e.id for e in reopened.index if scan_folder(reopened, e.id, mode).has_secrets]
    out.update(
        {
            "rewritten": [s.folder_id for s in hits],
            "atomic": atomic,
            "filesRedacted": changed,
            "backup": str(backup),
            "remaining": left,
        }
    )
    return out


def cmd_scan_secrets(args: argparse.Namespace) -> int:
    """Report (and with --apply redact) the secrets of an existing store."""
    from engine.secrets.rewrite import restore_session
    from rofmd.cli.where import CliError, locate

    try:
        where = locate(args)
    except CliError as exc:
        print(f"rofmd scan-secrets: {exc}", file=sys.stderr)
        return 1
    root = where.root
    from rofmd.cli.store_views import serving_daemon

    if (args.apply or args.restore) and not args.force and serving_daemon(args, root) is not None:
        print(
            f"rofmd scan-secrets: a running daemon serves {root}; stop it first (or --force)",
            file=sys.stderr,
        )
        return 1
    if args.restore is not None:
        sessions = sorted(p for p in (args.restore / "sessions").iterdir() if p.is_dir())
        for backup in sessions:
            target = root if backup.name == "_root" else root / "sessions" / backup.name
            restore_session(backup, target)
            _progress(f"restored {target} from {backup}")
        if args.json:
            print_json({"restored": [str(p) for p in sessions]})
        return 0
    configured = where.cfg.secrets.mode
    mode = cast("Mode", args.mode or ("redact" if configured == "off" else configured))
    args.backup_root = args.backup_dir or root.with_name(f"{root.name}-secrets-backup-{_stamp()}")
    listed = where.sessions()
    if args.session is not None:
        listed = [(sid, name) for sid, name in listed if args.session in (sid, name)]
    reports = [_scan_session(where, sid, name, args, mode) for sid, name in listed]
    total = sum(len(r["withSecrets"]) for r in reports)
    summary = {
        "memoryRoot": str(root),
        "mode": mode,
        "applied": bool(args.apply),
        "backup": str(args.backup_root) if any("backup" in r for r in reports) else None,
        "foldersWithSecrets": total,
        "sessions": reports,
    }
    if args.json:
        print_json(summary)
        return 0
    for r in reports:
        kinds = ", ".join(f"{k} {v}" for k, v in r["kinds"].items()) or "none"
        print(
            f"{r['session']}: {len(r['withSecrets'])} of {r['folders']} folders hold secrets ({kinds})"
        )
        for hit in r["withSecrets"]:
            print(f"  {hit['id']}  " + ", ".join(f"{k} {v}" for k, v in hit["kinds"].items()))
        for name, count in r["files"].items():
            print(f"  {name}: {count} secret value(s)")
        if "rewritten" in r:
            how = "atomically" if r["atomic"] else "file by file (no directory exchange here)"
            print(f"  rewritten {len(r['rewritten'])} folder(s) {how}; backup {r['backup']}")
            if r["remaining"]:
                print(f"  STILL HOLDING SECRETS: {', '.join(r['remaining'])}")
    if args.apply and summary["backup"]:
        print(f"backup: {summary['backup']} (restore: rofmd scan-secrets --restore DIR)")
    elif total and not args.apply:
        print("run again with --apply to rewrite them redacted (a backup is made first)")
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    """Suppress or delete memories, or pause / resume recall, in a running daemon."""
    from rofmd.wire import call_once

    arguments: dict[str, Any]
    if args.pause or args.resume:
        name, arguments = "memory_control", {"recall": "pause" if args.pause else "resume"}
    elif args.ids or args.keywords:
        name = "memory_forget"
        arguments = {"action": "delete" if args.delete else "suppress"}
        if args.ids:
            arguments["ids"] = list(args.ids)
        if args.keywords:
            arguments["keywords"] = args.keywords
    else:
        print("rofmd forget: give memory ids, --keywords, --pause or --resume", file=sys.stderr)
        return 1
    params = {"session": {"id": args.session}, "name": name, "arguments": arguments}
    try:
        result = call_once(_socket(args), "tools/call", params, timeout=30)
    except OSError as exc:
        print(f"rofmd forget: cannot reach the daemon: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - CLI boundary: one readable line, exit 1
        print(f"rofmd forget: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print_json({"value": result.get("value"), "isError": result.get("isError")})
    else:
        print("\n".join(c.get("text", "") for c in result.get("content", [])))
    return 1 if result.get("isError") else 0


def add_secrets_parsers(sub: Any) -> None:
    """Add `scan-secrets` and `forget` to the `rofmd` command parsers."""
    scan = sub.add_parser("scan-secrets", help="find (and --apply: redact) secrets in a store")
    scan.add_argument("--socket", dest="socket_path", type=Path, help="daemon socket path")
    scan.add_argument("--memory-root", type=Path, help="memory directory")
    scan.add_argument("--config-dir", type=Path, help="directory of config.json")
    scan.add_argument("--session", help="only this session (id or directory name)")
    scan.add_argument("--apply", action="store_true", help="rewrite them redacted (backup first)")
    scan.add_argument("--mode", choices=("redact", "drop"), help="default: secrets.mode")
    scan.add_argument("--backup-dir", type=Path, help="where the backup goes (must not exist)")
    scan.add_argument("--restore", type=Path, metavar="DIR", help="put a backup's sessions back")
    scan.add_argument("--force", action="store_true", help="even if a daemon serves the root")
    scan.add_argument("--json", action="store_true", help="machine-readable output")
    scan.set_defaults(func=cmd_scan_secrets)

    forget = sub.add_parser("forget", help="suppress or delete memories of a session")
    forget.add_argument("--socket", dest="socket_path", type=Path, help="daemon socket path")
    forget.add_argument("--session", required=True, help="the host session id")
    forget.add_argument("ids", nargs="*", metavar="MEMORY_ID", help="mem-… ids")
    forget.add_argument("--delete", action="store_true", help="delete instead of suppress")
    forget.add_argument("--keywords", help="list candidates for these keywords (no change)")
    group = forget.add_mutually_exclusive_group()
    group.add_argument("--pause", action="store_true", help="pause recall injection")
    group.add_argument("--resume", action="store_true", help="resume recall injection")
    forget.add_argument("--json", action="store_true", help="machine-readable output")
    forget.set_defaults(func=cmd_forget)
