"""`rofmd backup`, `rofmd restore` and `rofmd export`: a live store, saved and put back.

`backup` takes a consistent snapshot of every store under the memory root (or of one,
`--session`) while a daemon may be serving them, without stopping or asking it: each
store is copied by the rules of :mod:`engine.store.snapshot` (what the index names when
the copy begins, each file read whole once, then repaired and verified by the store's own
recovery), so the backup holds every folder committed before it started and opens
cleanly. The result is a directory or one tar.zst file (:mod:`rofmd.cli.backup_archive`),
made durable and renamed into place only when complete: a backup that exists is whole.

`restore BACKUP` checks the backup through before writing anything (entries, sizes,
manifest), unpacks it beside the target, checks every file's digest and that every store
in it opens cleanly, and only then puts it in place: the memory root (a `--session`
backup: that session's directory). A target that holds anything is refused without
`--force`; with it the old one is moved aside (`<target>.before-restore-<UTC time>`;
inside `sessions/` a dot-name, which no listing takes for a session) and never deleted.
Where the file system can exchange two directories the swap is atomic. A daemon serving
the memory root is always refused: it would keep writing from its old memory.

`export` is the readable form of the same snapshot, not an alias of `backup`: JSON lines,
one a folder (`session`, `dir`, `id`, `meta`, `messages`), in index order, to a file
(written atomically) or to stdout. A backup is for `restore`; an export is for a person,
`jq`, or another tool, and leaves out what only the daemon needs (recall state,
telemetry, images: their names are in each meta).

Exit codes: 0 done, 1 failure (one line on stderr), 2 bad usage; `--json` prints one
document. Progress bars go to stderr on a terminal only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from engine import jsonio
from engine.jsonio import atomic_stream, temp_path
from engine.store.index_snapshot import DERIVED_SNAPSHOTS
from engine.store.layout import SessionPaths
from engine.store.records import to_json_dict
from engine.store.snapshot import (
    SnapshotPlan,
    copy_snapshot,
    plan_snapshot,
    read_folder,
    verify_store,
)
from rofmd.cli.backup_archive import (
    FORMAT,
    MANIFEST,
    TREE,
    VERSION,
    BackupError,
    check_backup,
    describe_files,
    publish_dir,
    unpack,
    write_manifest,
    write_tar_zst,
)
from rofmd.cli.json_out import print_json
from rofmd.cli.progress import Progress
from rofmd.cli.store_views import (
    Listed,
    add_store_options,
    guarded,
    listed_stores,
    now_ms,
    serving_daemon,
)
from rofmd.cli.where import CliError, UsageError, Where, locate

__all__ = ["add_backup_parsers"]

LEAVE_OUT = frozenset(DERIVED_SNAPSHOTS)
"""Derived caches a snapshot does not take: the daemon rebuilds them from the folders."""


def _stamp(ms: int) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(ms / 1000))


def _where(args: argparse.Namespace) -> Where:
    where = locate(args)
    if not where.root.is_dir():
        raise CliError(f"memory directory {where.root} does not exist")
    return where


def _stores(where: Where, session: str | None) -> list[Listed]:
    stores = listed_stores(where, session)
    if session is not None and not stores:
        raise CliError(f"no store of session {session!r} under {where.root}")
    return stores


def _rel_dir(where: Where, store: Listed) -> str:
    """The store's directory relative to the memory root (``""``: the root itself)."""
    rel = store.paths.dir.relative_to(where.root.expanduser().resolve()).as_posix()
    return "" if rel == "." else rel


# ---- backup ---------------------------------------------------------------------------


def _output(args: argparse.Namespace, created: int, root: Path) -> tuple[Path, str]:
    fmt: str | None = args.format
    out: Path | None = args.output
    if fmt is None:
        fmt = "dir" if out is not None and not out.name.endswith(".tar.zst") else "tar.zst"
    if out is None:
        out = Path(f"rofmd-backup-{_stamp(created)}" + (".tar.zst" if fmt == "tar.zst" else ""))
    out = out.expanduser().absolute()
    if out.exists() or out.is_symlink():
        raise CliError(f"{out} exists: a backup never replaces anything (choose another --output)")
    if not out.parent.is_dir():
        raise CliError(f"{out.parent} is not a directory")
    if out.parent.resolve().is_relative_to(root.resolve()):
        raise CliError(f"{out} is inside the memory directory {root}: put the backup elsewhere")
    return out, fmt


def _copy_all(
    where: Where, stores: list[Listed], tree: Path, progress: Progress
) -> list[dict[str, Any]]:
    """Snapshot every store into ``tree`` (not yet durable: the backup is made so whole,
    as a directory or as the tar.zst it is packed into)."""
    plans: list[tuple[Listed, SnapshotPlan]] = [
        (s, plan_snapshot(s.paths, leave_out=LEAVE_OUT)) for s in stores
    ]
    progress.total = max(1, sum(len(p.folder_ids) for _, p in plans))
    done = 0
    sessions: list[dict[str, Any]] = []
    for store, plan in plans:
        rel = _rel_dir(where, store)
        dst = SessionPaths(root=tree, dir=tree / rel if rel else tree)
        base = done

        def tick(n: int, _total: int, base: int = base) -> None:
            progress.update(base + n)

        rep = copy_snapshot(plan, dst, durable=False, progress=tick)
        done += len(plan.folder_ids)
        damaged = {fid for fid, _ in rep.unreadable}
        problems = verify_store(dst, damaged=damaged)
        if problems:
            raise CliError(
                f"the copy of session {store.session!r} does not open cleanly: {'; '.join(problems)}"
            )
        sessions.append(
            {
                "id": store.session,
                "dir": rel,
                "folders": len(rep.folders),
                "images": rep.images,
                "gone": rep.gone,
                "unreadable": [{"folder": f, "reason": r} for f, r in rep.unreadable],
                "missingImages": [{"folder": f, "image": i} for f, i in rep.missing_images],
            }
        )
    return sessions


def cmd_backup(args: argparse.Namespace) -> int:
    """A consistent snapshot of a live memory directory, as a directory or a tar.zst."""
    started = time.perf_counter()
    created = now_ms(args)
    where = _where(args)
    stores = _stores(where, args.session)
    output, fmt = _output(args, created, where.root)
    staging = temp_path(output)
    progress = Progress(sys.stderr, 1, "backup", unit="folders")
    try:
        sessions = _copy_all(where, stores, staging / TREE, progress)
        jsonio.fs.mkdir(staging / TREE)
        progress.close()
        files = describe_files(staging)
        total = sum(f[1] for f in files)
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "createdAt": created,
            "rofmdVersion": _version(),
            "scope": "session" if args.session is not None else "root",
            "layout": "per-session" if where.per_session else "global",
            "memoryRoot": str(where.root),
            "sessions": sessions,
            "files": files,
            "bytes": total,
        }
        write_manifest(staging, manifest)
        if fmt == "dir":
            publish_dir(staging, output)
            size = total
        else:
            whole = total + (staging / MANIFEST).stat().st_size
            packing = Progress(sys.stderr, whole, "packing")
            size = write_tar_zst(staging, output, mtime_s=created // 1000, progress=packing.update)
            packing.close()
    finally:
        jsonio.fs.rmtree(staging)  # ours alone; gone already when published as a directory
    out = {
        "output": str(output),
        "format": fmt,
        "scope": manifest["scope"],
        "createdAt": created,
        "sessions": sessions,
        "folders": sum(s["folders"] for s in sessions),
        "images": sum(s["images"] for s in sessions),
        "bytes": total,
        "size": size,
        "elapsedMs": round((time.perf_counter() - started) * 1000, 1),
    }
    if args.json:
        print_json(out)
        return 0
    for s in sessions:
        for u in s["unreadable"]:
            print(
                f"warning: {s['id']}: folder {u['folder']} is damaged in the store ({u['reason']});"
                " copied as it is",
                file=sys.stderr,
            )
        for m in s["missingImages"]:
            print(
                f"warning: {s['id']}: image {m['image']} of {m['folder']} is missing in the store",
                file=sys.stderr,
            )
    print(
        f"backed up {out['folders']} folder(s) of {len(sessions)} session(s)"
        f" ({total / (1024 * 1024):.1f} MiB) to {output}"
    )
    return 0


def _version() -> str:
    from rofmd.version import version

    return version()


# ---- restore --------------------------------------------------------------------------


def _free_bytes(path: Path) -> int:
    probe = path
    while not probe.exists():
        probe = probe.parent
    st = os.statvfs(probe)
    return st.f_bavail * st.f_frsize


def _target(where: Where, manifest: dict[str, Any]) -> tuple[Path, str]:
    """Where the backup goes and the prefix of its members that go there."""
    sessions = manifest["sessions"]
    if manifest["scope"] == "root":
        return where.root, TREE
    if len(sessions) != 1 or not isinstance(sessions[0].get("dir"), str):
        raise BackupError(f"{MANIFEST}: a session backup names one session")
    rel = sessions[0]["dir"]
    if not rel:
        return where.root, TREE  # the global layout: the session's store is the root
    parts = rel.split("/")
    if len(parts) != 2 or parts[0] != "sessions":
        raise BackupError(f"{MANIFEST}: unusable session directory {rel!r}")
    return where.root / "sessions" / parts[1], f"{TREE}/{rel}"


def _non_empty(path: Path) -> bool:
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        return True
    return path.is_dir() and any(path.iterdir())


def _aside(target: Path, created: int) -> Path:
    """A free name for the old target: beside it, or a dot-name inside ``sessions/``."""
    hidden = target.parent.name == "sessions"
    base = f"{'.' if hidden else ''}{target.name}.before-restore-{_stamp(created)}"
    candidate, n = target.with_name(base), 1
    while candidate.exists() or candidate.is_symlink():
        n += 1
        candidate = target.with_name(f"{base}-{n}")
    return candidate


def _stores_in(staging: Path, manifest: dict[str, Any], prefix: str) -> Iterator[tuple[Any, Path]]:
    """(manifest session entry, its store directory inside ``staging``)."""
    lead = prefix[len(TREE) :].strip("/")
    for s in manifest["sessions"]:
        rel = str(s.get("dir", ""))
        inner = rel[len(lead) :].strip("/") if lead else rel
        yield s, staging / inner if inner else staging


def _install(staging: Path, target: Path, aside: Path | None) -> None:
    """Put ``staging`` where ``target`` is; the old target (if any) goes to ``aside``."""
    from engine.secrets.rewrite import swap_dirs

    jsonio.fs.mkdir(target.parent)
    if target.exists() and not _non_empty(target):
        target.rmdir()  # an empty directory: nothing to keep
    if target.exists():
        assert aside is not None
        if swap_dirs(staging, target):  # atomic: the target is old or new, never absent
            jsonio.fs.rename(staging, aside)
        else:
            jsonio.fs.rename(target, aside)
            jsonio.fs.rename(staging, target)
    else:
        jsonio.fs.rename(staging, target)
    jsonio.fs.fsync_dir(target.parent)


def cmd_restore(args: argparse.Namespace) -> int:
    """Check a backup, then put it in place of the memory root (or its session)."""
    created = now_ms(args)
    source: Path = args.backup.expanduser().absolute()
    if not source.exists():
        raise CliError(f"{source} does not exist")
    where = locate(args)
    manifest = check_backup(source, free_bytes=_free_bytes(where.root))
    target, prefix = _target(where, manifest)
    if serving_daemon(args, where.root) is not None:
        raise CliError(f"a running daemon serves {where.root}: stop it first (`rofmd status`)")
    occupied = _non_empty(target)
    if occupied and not args.force:
        raise CliError(f"{target} is not empty: --force moves it aside (nothing is deleted)")
    layout = "per-session" if where.per_session else "global"
    warnings = []
    if manifest.get("layout") != layout:
        warnings.append(
            f"the backup has the {manifest.get('layout')} layout, the config says {layout}"
            " (storage.perSession)"
        )
    jsonio.fs.mkdir(target.parent)
    staging = temp_path(target)
    progress = Progress(sys.stderr, max(1, int(manifest.get("bytes") or 0)), "restore")
    try:
        written = unpack(source, manifest, prefix, staging, progress=progress.update)
        progress.close()
        for entry, store_dir in _stores_in(staging, manifest, prefix):
            damaged = {u.get("folder") for u in entry.get("unreadable") or []}
            paths = SessionPaths(root=staging, dir=store_dir)
            problems = verify_store(paths, damaged=damaged)
            if problems:
                raise BackupError(
                    f"session {entry.get('id')!r} of the backup does not open cleanly:"
                    f" {'; '.join(problems)}"
                )
        jsonio.fs.fsync_all(p for p in written if p.exists())
    except BaseException:
        jsonio.fs.rmtree(staging)  # ours alone, and nothing was put in place yet
        raise
    aside = _aside(target, created) if occupied else None
    # no cleanup from here on: once exchanged, the staging name holds the old target
    _install(staging, target, aside)
    folders = sum(int(s.get("folders") or 0) for s in manifest["sessions"])
    out = {
        "restored": str(target),
        "from": str(source),
        "movedAside": str(aside) if aside is not None else None,
        "scope": manifest["scope"],
        "createdAt": manifest.get("createdAt"),
        "sessions": [s.get("id") for s in manifest["sessions"]],
        "folders": folders,
        "warnings": warnings,
    }
    if args.json:
        print_json(out)
        return 0
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(f"restored {folders} folder(s) of {len(out['sessions'])} session(s) to {target}")
    if aside is not None:
        print(f"the previous content is kept at {aside}")
    return 0


# ---- export ---------------------------------------------------------------------------


def _export_lines(where: Where, stores: list[Listed], counts: dict[str, int]) -> Iterator[bytes]:
    for store in stores:
        plan = plan_snapshot(store.paths, state_files=False)
        rel = _rel_dir(where, store)
        for fid in plan.folder_ids:
            got = read_folder(plan, fid)
            if got.gone:
                counts["gone"] += 1
                continue
            line: dict[str, Any] = {"session": store.session, "dir": rel, "id": fid}
            if got.meta is None:
                line["unreadable"] = got.reason
                counts["unreadable"] += 1
            else:
                line["meta"] = to_json_dict(got.meta)
                line["messages"] = got.messages
                counts["folders"] += 1
            yield orjson.dumps(line) + b"\n"


def cmd_export(args: argparse.Namespace) -> int:
    """Every folder of the snapshot as a JSON line (meta and messages)."""
    to_stdout = args.output is None or str(args.output) == "-"
    if to_stdout and args.json:
        raise UsageError("--json needs --output FILE: stdout carries the export")
    where = _where(args)
    stores = _stores(where, args.session)
    counts = {"folders": 0, "gone": 0, "unreadable": 0}
    lines = _export_lines(where, stores, counts)
    if to_stdout:
        for line in lines:  # a closed pipe ends the command quietly (`rofmd.cli.main.main`)
            sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
        target = "-"
    else:
        path = Path(args.output).expanduser().absolute()
        if path.is_dir():
            raise CliError(f"{path} is a directory")
        with atomic_stream(path) as file:
            file.writelines(lines)
        target = str(path)
    out = {"output": target, "sessions": [s.session for s in stores], **counts}
    if args.json:
        print_json(out)
    else:
        print(
            f"exported {counts['folders']} folder(s) of {len(stores)} session(s) to {target}"
            + (f"; {counts['unreadable']} unreadable" if counts["unreadable"] else ""),
            file=sys.stderr if to_stdout else sys.stdout,
        )
    return 0


# ---- parser ---------------------------------------------------------------------------


def _format(value: str) -> str:
    if value not in ("dir", "tar.zst"):
        raise argparse.ArgumentTypeError("choose dir or tar.zst")
    return value


def add_backup_parsers(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `backup`, `restore` and `export` to the `rofmd` subcommands."""
    p = sub.add_parser(
        "backup",
        help="a consistent snapshot of a live memory directory (tar.zst or a directory)",
        description="Copy every store (or one, --session) while a daemon may serve them: the "
        "backup holds every folder committed before it started and opens cleanly.",
    )
    add_store_options(p, session_help="only this session's store (default: every session)")
    p.add_argument(
        "--output",
        type=Path,
        help="where the backup goes; must not exist (default ./rofmd-backup-<UTC time>[.tar.zst])",
    )
    p.add_argument(
        "--format",
        type=_format,
        help="dir or tar.zst (default: tar.zst, or dir when --output does not end in .tar.zst)",
    )
    p.set_defaults(func=guarded("backup", cmd_backup))

    p = sub.add_parser(
        "restore",
        help="check a backup and put it in place of the memory directory (or its session)",
        description="Checks the whole backup before writing; refuses a non-empty target "
        "without --force, and with --force moves the old one aside (never deletes it).",
    )
    p.add_argument("backup", type=Path, metavar="BACKUP", help="a backup directory or .tar.zst")
    add_store_options(p, session_help=None)
    p.add_argument(
        "--socket",
        dest="socket_path",
        type=Path,
        help="the daemon to check for (env ROFMD_SOCKET_PATH): restore refuses while a "
        "daemon serves the memory directory",
    )
    p.add_argument(
        "--force", action="store_true", help="replace a non-empty target, moving it aside"
    )
    p.set_defaults(func=guarded("restore", cmd_restore))

    p = sub.add_parser(
        "export",
        help="the same snapshot as readable JSON lines: one folder a line, meta and messages",
    )
    add_store_options(p, session_help="only this session (default: every session)")
    p.add_argument(
        "--output", type=Path, help="file to write (atomically); default - (standard output)"
    )
    p.set_defaults(func=guarded("export", cmd_export))
