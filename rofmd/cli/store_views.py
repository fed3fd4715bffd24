"""What the operator's read tools share (`selfcheck`, `show`, `search`, `audit`, `engine
list` / `report`): their options, the stores they look at, and their one error path.

Why: each of them looks at the stores of a memory root without owning them (a daemon
may serve them meanwhile), so each finds the stores the same read-only way (nothing is
claimed, migrated or created: :func:`engine.store.find_session_dir`,
:func:`engine.store.list_session_dirs`) and reads them without recovery
(:func:`engine.store.readonly.read_store`). Config and memory root are the daemon's
(:func:`rofmd.cli.where.locate`).

Errors: a bad argument exits 2, a failure 1, each as one line on stderr
(`rofmd <command>: …`), never a traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.store import StoreError, find_session_dir, list_session_dirs
from engine.store.layout import SessionPaths, session_dir_paths, session_paths
from engine.store.readonly import ReadonlyStore, read_store
from rofmd.cli.where import DEFAULT_SESSION, CliError, UsageError, Where

__all__ = [
    "Listed",
    "add_store_options",
    "guarded",
    "listed_stores",
    "now_ms",
    "read_listed",
]


def add_store_options(p: argparse.ArgumentParser, *, session_help: str | None) -> None:
    """`--memory-dir` (alias `--memory-root`), `--config-dir`, `--session`, `--json`."""
    p.add_argument(
        "--memory-dir",
        "--memory-root",
        dest="memory_root",
        type=Path,
        metavar="DIR",
        help="memory directory (env ROFMD_MEMORY_ROOT; default: the daemon's, where the "
        "config's storage.dir points under the state directory)",
    )
    p.add_argument(
        "--config-dir",
        type=Path,
        metavar="DIR",
        help="directory of config.json / config.local.json (env ROFMD_CONFIG_DIR; default "
        "$XDG_CONFIG_HOME/rofmd)",
    )
    if session_help is not None:
        p.add_argument("--session", help=session_help)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--now-ms", type=int, help=argparse.SUPPRESS)


def now_ms(args: argparse.Namespace) -> int:
    """The time a command works at (`--now-ms` in tests)."""
    fixed: int | None = getattr(args, "now_ms", None)
    return fixed if fixed is not None else time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class Listed:
    """A store found under the memory root: its session id and its paths."""

    session: str
    paths: SessionPaths


def listed_stores(where: Where, session: str | None) -> list[Listed]:
    """The stores to look at: ``session``'s (if it has one), else every store. Reads
    only (module docstring)."""
    root = where.root
    if not where.per_session:
        if not root.is_dir():
            return []
        return [Listed(session or DEFAULT_SESSION, session_paths(root, "", per_session=False))]
    base = root / "sessions"
    if session is not None:
        if not session.strip():
            raise UsageError("--session must not be empty")
        try:
            found = find_session_dir(base, session)
        except ValueError as exc:
            raise UsageError(f"session {session!r}: {exc}") from None
        return [Listed(session, session_dir_paths(root, found.name))] if found else []
    return [
        Listed(d.id or d.name, session_dir_paths(root, d.name)) for d in list_session_dirs(base)
    ]


def read_listed(where: Where, session: str | None) -> list[ReadonlyStore]:
    """:func:`listed_stores`, each read without recovery."""
    return [read_store(s.paths, s.session) for s in listed_stores(where, session)]


def serving_daemon(args: argparse.Namespace, root: Path) -> str | None:
    """The pid of a daemon on the command's socket (`--socket`, else the default) that
    serves ``root``, else None: the commands that rewrite a store offline refuse then,
    since one process owns a session directory."""
    from rofmd.socket_location import client_socket_path
    from rofmd.wire import ConnectionLost, RpcError, call_once

    path = args.socket_path if args.socket_path is not None else client_socket_path()
    try:
        status = call_once(path, "status", timeout=3)
    except (OSError, ConnectionLost, RpcError, ValueError):
        return None  # nobody answers there: nobody to collide with
    served = status.get("memoryRoot") if isinstance(status, dict) else None
    if not isinstance(served, str) or Path(served).resolve() != root.resolve():
        return None
    return str(status.get("pid"))


def folder_rows(store: ReadonlyStore) -> list[dict[str, Any]]:
    """Each folder of ``store`` as `engine list` and `show` print it (their `--json`)."""
    return [
        {
            "id": e.id,
            "alpha": e.alpha,
            "beta": e.beta,
            "scored": e.scored,
            "rescorePending": e.rescorePending,
            "pending": not e.scored,
            "keywords": list(e.keywords),
            "title": e.title,
            "createdAt": e.createdAt,
        }
        for e in store.index
    ]


def guarded(name: str, func: Callable[[argparse.Namespace], int]) -> Callable[..., int]:
    """``func`` with the tools' error path (module docstring)."""

    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except CliError as exc:
            print(f"rofmd {name}: {exc}", file=sys.stderr)
            return exc.exit_code
        except BrokenPipeError:
            raise  # `| head` stopped reading: `rofmd.cli.main.main` ends quietly
        except (StoreError, OSError) as exc:
            print(f"rofmd {name}: {exc}", file=sys.stderr)
            return 1

    run.__doc__ = func.__doc__
    return run
