"""Replace folders by their redacted form, crash-safely, after a backup (scan-secrets).

A folder is two files (``context.json``, ``meta.json``) that must change together: a
kill at any point must leave each folder old or new, never new text under an old title.
So a folder's new form is assembled, durable, in ``.staging-<id>/`` and *exchanged* with
the folder in one system call (``renameat2(RENAME_EXCHANGE)`` on Linux,
``renamex_np(RENAME_SWAP)`` on macOS): before it, the folder is old and the staging
directory (new) is removed by the store's recovery; after it, the folder is new and the
staging directory (old) is removed the same way. Where the filesystem cannot exchange,
each file is replaced atomically, meta first (a crash between the two leaves the old
text under the new meta: nothing lost, and a second run finishes it); the report says
which way it went.

The index follows the metas whatever happens: before the first folder changes, the
folders are listed in the store's reindex marker (``.reindex.json``), which every open
of the store (the daemon's, the next run's) honours by re-reading those metas; the
caller reopens the store when done, which folds the marker in.

The backup is a complete copy of each session directory changed, made durable before
anything is rewritten, under ``<backup>/sessions/<name>/``; restoring one is putting
that directory back in place of the session's (:func:`restore_session`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import shutil
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import orjson

from engine import jsonio
from engine.jsonio import dumps_json, read_json, write_bytes_atomic, write_json_atomic
from engine.recall.state import fold_state_log
from engine.secrets.redact import Mode
from engine.secrets.store_scan import FolderScan, redact_json
from engine.store.folders import context_document
from engine.store.index_snapshot import DERIVED_SNAPSHOTS
from engine.store.layout import SessionPaths

__all__ = [
    "backup_session",
    "exchange_supported",
    "redact_session_files",
    "restore_session",
    "rewrite_folders",
    "swap_dirs",
]

_RENAME_EXCHANGE = 2  # linux/fs.h
_RENAME_SWAP = 2  # macOS stdio.h
_AT_FDCWD = -100
_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP})


def _libc_swap() -> Callable[[bytes, bytes], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    except OSError:
        return None
    if sys.platform.startswith("linux") and hasattr(libc, "renameat2"):
        fn = libc.renameat2
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        return lambda a, b: int(fn(_AT_FDCWD, a, _AT_FDCWD, b, _RENAME_EXCHANGE))
    if sys.platform == "darwin" and hasattr(libc, "renamex_np"):
        fnx = libc.renamex_np
        fnx.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint]
        return lambda a, b: int(fnx(a, b, _RENAME_SWAP))
    return None


_SWAP = _libc_swap()


def exchange_supported() -> bool:
    """Whether this platform has an atomic directory exchange (the filesystem may still
    refuse it: :func:`swap_dirs` then returns False)."""
    return _SWAP is not None


def swap_dirs(a: Path, b: Path) -> bool:
    """Exchange two directories atomically; False when the system or filesystem cannot
    (nothing changed then). Any other failure raises its ``OSError``."""
    if _SWAP is None:
        return False
    if _SWAP(os.fsencode(a), os.fsencode(b)) == 0:
        return True
    err = ctypes.get_errno()
    if err in _UNSUPPORTED:
        return False
    raise OSError(err, os.strerror(err), str(a))


swap: Callable[[Path, Path], bool] = swap_dirs
"""The seam the crash tests wrap, like `engine.jsonio.fs` (read per call)."""


def _folder_files(scan: FolderScan) -> tuple[bytes, bytes]:
    assert scan.messages is not None and scan.meta is not None
    return dumps_json(context_document(scan.messages)), dumps_json(scan.meta)


def rewrite_folders(
    paths: SessionPaths,
    scans: Sequence[FolderScan],
    *,
    progress: Callable[[int], None] | None = None,
) -> bool:
    """Replace each scanned folder by its redacted form (module docstring). Returns True
    when every folder was exchanged atomically. ``progress(n)``: n folders done."""
    todo = [s for s in scans if s.has_secrets and s.messages is not None]
    if not todo:
        return True
    marker = paths.reindex_marker
    listed: list[str] = []
    if marker.exists():  # a marker left by a crash of an earlier run: keep what it lists
        try:
            doc = read_json(marker)
            listed = [i for i in doc.get("folders", []) if isinstance(i, str)]
        except (jsonio.CorruptJSONError, OSError, AttributeError):
            listed = []
    write_json_atomic(
        marker, {"folders": list(dict.fromkeys([*listed, *(s.folder_id for s in todo)]))}
    )
    atomic = True
    for done, scan in enumerate(todo, start=1):
        atomic = _rewrite_one(paths, scan) and atomic
        if progress is not None:
            progress(done)
    return atomic


def _rewrite_one(paths: SessionPaths, scan: FolderScan) -> bool:
    context_bytes, meta_bytes = _folder_files(scan)
    folder = paths.folder(scan.folder_id)
    staging = paths.staging(scan.folder_id)
    jsonio.fs.rmtree(staging)  # a leftover of an interrupted run

    def staged() -> Iterator[Path]:
        jsonio.fs.mkdir(staging)
        jsonio.fs.create_write(staging / "context.json", context_bytes)
        yield staging / "context.json"
        jsonio.fs.create_write(staging / "meta.json", meta_bytes)
        yield staging / "meta.json"
        yield staging

    jsonio.fs.fsync_all(staged())
    if swap(staging, folder):
        jsonio.fs.fsync_dir(paths.dir)
        jsonio.fs.rmtree(staging)  # the old folder
        return True
    jsonio.fs.rmtree(staging)
    write_bytes_atomic(folder / "meta.json", meta_bytes)
    write_bytes_atomic(folder / "context.json", context_bytes)
    return False


def redact_session_files(paths: SessionPaths, mode: Mode, kinds: Counter[str]) -> list[str]:
    """The session files that repeat folder text, redacted in place (atomically): the
    recall state and the telemetry lines; the relevance index snapshot (derived, rebuilt
    from the folders) is removed. Returns the names of the files changed."""
    changed: list[str] = []
    state = paths.recall_state
    fold_state_log(state)  # its log's lines repeat folder text too: one file to redact
    if state.exists():
        try:
            doc = read_json(state)
        except jsonio.CorruptJSONError:
            doc = None
        if doc is not None:
            found: Counter[str] = Counter()
            new = redact_json(doc, mode, found)
            if found:
                write_json_atomic(state, new)
                kinds.update(found)
                changed.append(state.name)
    stats = paths.stats
    if stats.exists():
        found = Counter()
        lines = stats.read_bytes().splitlines()
        out: list[bytes] = []
        for line in lines:
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # a torn line: readers skip it, and so does the rewrite
            out.append(orjson.dumps(redact_json(record, mode, found)))
        if found:
            write_bytes_atomic(stats, b"".join(line + b"\n" for line in out))
            kinds.update(found)
            changed.append(stats.name)
    gone = [name for name in DERIVED_SNAPSHOTS if (paths.dir / name).exists()]
    for name in gone:  # derived indexes hold the session's words
        jsonio.fs.unlink(paths.dir / name)
    if gone:
        jsonio.fs.fsync_dir(paths.dir)
        changed.extend(gone)
    return changed


def _files(root: Path) -> Iterable[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            yield Path(dirpath) / name
        for name in dirnames:
            yield Path(dirpath) / name
    yield root


def backup_session(session_dir: Path, backup_dir: Path) -> Path:
    """Copy a session directory, whole, to ``backup_dir`` (which must not exist) and make
    the copy durable; returns it. Directories are created 0700."""
    if backup_dir.exists():
        raise FileExistsError(f"backup target exists: {backup_dir}")
    backup_dir.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    shutil.copytree(session_dir, backup_dir, symlinks=True, copy_function=shutil.copy2)
    os.chmod(backup_dir, 0o700)
    jsonio.fs.fsync_all(p for p in _files(backup_dir) if not p.is_symlink())
    jsonio.fs.fsync_dir(backup_dir.parent)
    return backup_dir


def restore_session(backup_dir: Path, session_dir: Path) -> None:
    """Put a backed-up session directory back (the daemon must not be serving it): the
    current one is exchanged with a copy of the backup, then removed; the backup stays."""
    incoming = session_dir.with_name(f".restore-{session_dir.name}")
    shutil.rmtree(incoming, ignore_errors=True)
    shutil.copytree(backup_dir, incoming, symlinks=True, copy_function=shutil.copy2)
    jsonio.fs.fsync_all(p for p in _files(incoming) if not p.is_symlink())
    if session_dir.exists() and swap(incoming, session_dir):
        jsonio.fs.fsync_dir(session_dir.parent)
        shutil.rmtree(incoming)
        return
    if session_dir.exists():
        aside = session_dir.with_name(f".replaced-{session_dir.name}")
        shutil.rmtree(aside, ignore_errors=True)
        os.rename(session_dir, aside)
        os.rename(incoming, session_dir)
        jsonio.fs.fsync_dir(session_dir.parent)
        shutil.rmtree(aside)
    else:
        os.rename(incoming, session_dir)
        jsonio.fs.fsync_dir(session_dir.parent)
