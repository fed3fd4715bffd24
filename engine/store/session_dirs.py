"""One directory per session id, never shared; stores named by the old mapping migrated.

The directory name is :func:`engine.store.ids.safe_session_id` (an injective
encoding of the id). The directory also records the id it belongs to::

    <root>/sessions/<name>/session.json
    {"version": 1, "id": "<the session id>",
     "migratedFrom"?: "<old directory name>", "owner"?: "<how the id was found>",
     "sharedWith"?: ["<other ids whose folders the old directory held>"]}

written atomically (:func:`engine.jsonio.write_json_atomic`) before anything else
of the store, and compared on every open: a directory recording another id is a
:class:`SessionDirError`, never a silent share.

Migration. The original mapping replaced every character outside
``[A-Za-z0-9._-]`` by ``_`` (:func:`~engine.store.ids.legacy_session_dir_name`),
so ``chat/a`` and ``chat_a`` shared ``chat_a``. A directory without
``session.json`` was written by that mapping; its owner is decided by
:func:`owner_of`:

1. the session ids in the folders' ``idempotencyKey`` (``[sessionId, turn, …]``,
   from ``index.json``, else every ``meta.json``), restricted to ids the old or the
   new mapping sends to this name: the id of the *earliest* folder (``createdAt``)
   owns it — the old mapping's first user; the others are listed in
   ``sharedWith``;
2. else the name itself when it is exactly one id (no ``_``: the old mapping
   changed nothing) or a readable new name (a store with no folder has no
   memories to lose);
3. else the first of its possible ids to open it.

Opening id ``S`` (new name ``N``, old name ``L``, previous name ``P``) then:

* ``N`` records ``S`` → use it (the fast path: one small read, no lock);
* ``N`` has no record and is owned by ``S`` → record ``S`` in it (``adopted``);
* ``N`` is another id ``O``'s old directory (``N == L(O)``, e.g. ``chat_a`` whose
  first user was ``chat/a``) → it is moved to ``O``'s new name on ``O``'s behalf and
  ``S`` continues as below; any other owner → :class:`SessionDirError`;
* ``N`` absent, ``L`` exists and is owned by ``S`` → record ``S`` in ``L``, then
  rename ``L`` → ``N`` (``migrated``); ``L`` owned by another id → its owner is
  recorded there and ``S`` gets a fresh directory;
* ``N`` absent, ``P`` exists and is owned by ``S`` → the same move from ``P``: the name
  the mapping gave an id ending in a line break until it compared whole ids (the id
  itself, :func:`~engine.store.ids.previous_session_dir_name`; no other id has one);
* else a fresh directory ``N`` with its record (``created``).

A directory several ids shared cannot be split reliably (images, recall state and
telemetry are common to all of them): it goes whole to its first user, the others
start empty, and ``sharedWith`` says who else wrote there.

Crash safety: the record is written (atomically) before the rename (atomic, one
file system), so after a SIGKILL at any step the directory is either still at its
old name — with or without the record, and the next open redoes the same,
deterministic decision — or already at its new name with its record. Temp files of
an interrupted record write are removed by the store's recovery. Decisions and
moves run under a process-wide lock and an ``flock`` of ``<root>/sessions`` (the
daemon and ``rofmd engine`` may open stores at once); the fast path takes neither.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from engine import jsonio
from engine.jsonio import CorruptJSONError, read_json, write_json_atomic
from engine.store.errors import StoreError
from engine.store.ids import (
    DIGEST_SEPARATOR,
    is_folder_id,
    legacy_session_dir_name,
    previous_session_dir_name,
    safe_session_id,
)

try:  # POSIX; without it only the in-process lock guards migrations
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "SESSION_FILE",
    "Ownership",
    "SessionDirError",
    "SessionDirInfo",
    "SessionDirOutcome",
    "find_session_dir",
    "list_session_dirs",
    "owner_of",
    "prepare_session_dir",
    "recorded_id",
    "session_dir_exists",
]

SESSION_FILE = "session.json"
SESSION_FILE_VERSION = 1

_LOCK = threading.Lock()


class SessionDirError(StoreError, ValueError):
    """A session directory belongs to another id, or its record is unreadable."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"session directory {path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Ownership:
    """Whose store a directory is, and how that was decided.

    ``how``: ``recorded`` (``session.json``), ``idempotencyKey`` (folders' keys),
    ``name`` (the directory name is the id), ``first-open`` (first possible id to
    open it), ``unknown`` (nothing tells, ``id`` is None).
    """

    id: str | None
    how: str
    others: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SessionDirOutcome:
    """What :func:`prepare_session_dir` did.

    ``action``: ``ok`` (recorded and matching), ``adopted`` (an old directory at the
    new name, now recorded), ``migrated`` (renamed from ``migrated_from``),
    ``created``. ``moved_away``: ``(id, new name)`` of another id's old store that
    sat on this id's name and was moved to its own.
    """

    action: str
    dir: Path
    migrated_from: str | None = None
    owner: str | None = None
    shared_with: tuple[str, ...] = ()
    moved_away: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class SessionDirInfo:
    """A session directory found under ``<root>/sessions``."""

    name: str
    path: Path
    id: str | None
    how: str


# ---- the record ----------------------------------------------------------------------


def recorded_id(directory: Path) -> str | None:
    """The id ``session.json`` records; None when there is no record.

    Raises :class:`SessionDirError` for a record that is not JSON or names no id,
    ``OSError`` for what the file system refuses (permissions, not a directory).
    """
    path = directory / SESSION_FILE
    try:
        doc = read_json(path)
    except FileNotFoundError:
        return None
    except CorruptJSONError as exc:
        raise SessionDirError(directory, f"{SESSION_FILE} is unreadable ({exc.reason})") from exc
    sid = doc.get("id") if isinstance(doc, dict) else None
    if not isinstance(sid, str) or sid == "":
        raise SessionDirError(directory, f"{SESSION_FILE} records no session id")
    return sid


def _write_record(directory: Path, session_id: str, own: Ownership | None, src: str | None) -> None:
    doc: dict[str, Any] = {"version": SESSION_FILE_VERSION, "id": session_id}
    if src is not None:
        doc["migratedFrom"] = src
    if own is not None and own.how != "recorded":
        doc["owner"] = own.how
        if own.others:
            doc["sharedWith"] = list(own.others)
    write_json_atomic(directory / SESSION_FILE, doc)


# ---- whose directory is it -----------------------------------------------------------


def _maps_to(session_id: str, name: str) -> bool:
    """True when the old, the previous or the new mapping sends ``session_id`` to
    ``name``."""
    try:
        return (
            legacy_session_dir_name(session_id) == name
            or safe_session_id(session_id) == name
            or previous_session_dir_name(session_id) == name
        )
    except ValueError:
        return False


def _key_session(key: Any) -> str | None:
    if not isinstance(key, str):
        return None
    try:
        doc = orjson.loads(key)
    except orjson.JSONDecodeError:
        return None
    if isinstance(doc, list) and doc and isinstance(doc[0], str) and doc[0]:
        return doc[0]
    return None


def _folder_rows(directory: Path) -> list[Any]:
    try:
        doc = read_json(directory / "index.json")
    except (FileNotFoundError, CorruptJSONError):
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("folders"), list):
        return list(doc["folders"])
    rows: list[Any] = []
    with os.scandir(directory) as entries:
        names = sorted(e.name for e in entries if is_folder_id(e.name) and e.is_dir())
    for name in names:
        with contextlib.suppress(OSError, CorruptJSONError):
            rows.append(read_json(directory / name / "meta.json"))
    return rows


def _users(directory: Path) -> list[str]:
    """Session ids in the folders' idempotency keys, earliest first use first."""
    first: dict[str, tuple[float, str]] = {}
    for row in _folder_rows(directory):
        if not isinstance(row, dict):
            continue
        sid = _key_session(row.get("idempotencyKey"))
        if sid is None:
            continue
        created = row.get("createdAt")
        at = (
            float(created)
            if isinstance(created, int | float) and not isinstance(created, bool)
            else float("inf")
        )
        mark = (at, str(row.get("id", "")))
        if sid not in first or mark < first[sid]:
            first[sid] = mark
    return sorted(first, key=lambda s: (first[s], s))


def owner_of(directory: Path, opener: str | None = None) -> Ownership:
    """Whose store ``directory`` (an existing session directory) is; module docstring.

    ``opener`` is the id about to open it (rule 3); None when only listing.
    """
    recorded = recorded_id(directory)
    if recorded is not None:
        return Ownership(recorded, "recorded")
    name = directory.name
    users = _users(directory)
    possible = [u for u in users if _maps_to(u, name)]
    if possible:
        return Ownership(possible[0], "idempotencyKey", tuple(u for u in users if u != possible[0]))
    others = tuple(users)
    if DIGEST_SEPARATOR in name:  # only the new mapping makes these: the name is the id's
        if opener is not None and _maps_to(opener, name):
            return Ownership(opener, "name", others)
        return Ownership(None, "unknown", others)
    if ("_" not in name or _readable(name)) and _maps_to(name, name):
        return Ownership(name, "name", others)
    if opener is not None and _maps_to(opener, name):
        return Ownership(opener, "first-open", others)
    return Ownership(None, "unknown", others)


def _readable(name: str) -> bool:
    try:
        return safe_session_id(name) == name
    except ValueError:
        return False


# ---- opening -------------------------------------------------------------------------


@contextlib.contextmanager
def _locked(base: Path) -> Iterator[None]:
    with _LOCK:
        fd: int | None = None
        if fcntl is not None:
            fd = os.open(base, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError as exc:  # pragma: no cover - file systems without flock
                if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                    os.close(fd)
                    raise
        try:
            yield
        finally:
            if fd is not None:
                os.close(fd)  # releases the flock


def _require_dir(path: Path) -> bool:
    """True for a directory, False when absent; ENOTDIR for anything else."""
    if path.is_dir():
        return True
    if path.exists() or path.is_symlink():
        raise NotADirectoryError(errno.ENOTDIR, "session directory is not a directory", str(path))
    return False


def _move(src: Path, dst: Path, session_id: str, own: Ownership) -> None:
    """Record ``session_id`` in ``src`` (unless recorded), then rename it to ``dst``."""
    if own.how != "recorded":
        _write_record(src, session_id, own, src.name)
    jsonio.fs.rename(src, dst)
    jsonio.fs.fsync_dir(dst.parent)


def prepare_session_dir(base: Path, session_id: str) -> SessionDirOutcome:
    """Make ``base/safe_session_id(session_id)`` the recorded directory of ``session_id``.

    ``base`` is ``<root>/sessions``. Migrates a store named by the old mapping
    (module docstring). Raises :class:`SessionDirError` when the directory belongs
    to another id, ``ValueError`` for an unusable id, ``OSError`` from the file system.
    """
    name = safe_session_id(session_id)
    target = base / name
    if target.is_dir():
        try:
            if recorded_id(target) == session_id:
                return SessionDirOutcome("ok", target)
        except SessionDirError:
            pass  # decided (and reported) under the lock
    jsonio.fs.mkdir(base)
    with _locked(base):
        return _prepare(base, session_id, target)


def _prepare(base: Path, session_id: str, target: Path) -> SessionDirOutcome:
    moved: list[tuple[str, str]] = []
    if _require_dir(target):
        own = owner_of(target, session_id)
        if own.id == session_id:
            if own.how == "recorded":
                return SessionDirOutcome("ok", target)
            _write_record(target, session_id, own, None)
            return SessionDirOutcome("adopted", target, None, own.how, own.others)
        other = own.id
        if (
            other is None
            or legacy_session_dir_name(other) != target.name
            or (safe_session_id(other) == target.name)
        ):
            who = "no known session" if other is None else f"session {other!r}"
            raise SessionDirError(target, f"belongs to {who}, not {session_id!r}")
        # Another id's store written by the old mapping sits on this id's name: give it
        # its own name first (it would have moved there on its own next open).
        dest = base / safe_session_id(other)
        if _require_dir(dest):
            raise SessionDirError(
                target,
                f"holds the old store of session {other!r}, whose own directory {dest.name} "
                "exists too; move one of them aside by hand",
            )
        _move(target, dest, other, own)
        moved.append((other, dest.name))
    legacy_name = legacy_session_dir_name(session_id)
    legacy = base / legacy_name
    if legacy_name != target.name and legacy.is_dir():
        own = owner_of(legacy, session_id)
        if own.id == session_id:
            _move(legacy, target, session_id, own)
            return SessionDirOutcome(
                "migrated", target, legacy_name, own.how, own.others, tuple(moved)
            )
        if own.id is not None and own.how != "recorded":
            _write_record(legacy, own.id, own, None)  # the decision, made durable
    previous = _previous_dir(base, session_id)
    if previous is not None:
        own = owner_of(previous, session_id)
        if own.id == session_id:
            _move(previous, target, session_id, own)
            return SessionDirOutcome(
                "migrated", target, previous.name, own.how, own.others, tuple(moved)
            )
    jsonio.fs.mkdir(target)
    _write_record(target, session_id, None, None)
    return SessionDirOutcome("created", target, moved_away=tuple(moved))


def _previous_dir(base: Path, session_id: str) -> Path | None:
    """The directory the previous mapping named for ``session_id``, when there is one
    (:func:`~engine.store.ids.previous_session_dir_name`)."""
    name = previous_session_dir_name(session_id)
    if name is None or not (base / name).is_dir():
        return None
    return base / name


# ---- finding without changing --------------------------------------------------------


def session_dir_exists(base: Path, session_id: str) -> bool:
    """False when :func:`prepare_session_dir` would have to create a fresh directory for
    ``session_id`` (nothing at its name, no old-mapping store of its own); True when it
    would open, adopt, migrate or refuse something that is already there.

    Reads only: a session can then be opened without a directory until it first writes
    (:func:`engine.store.session_store.open_session` with ``create=False``). A record
    that cannot be read counts as there, so the open reports it as it always did.
    """
    target = base / safe_session_id(session_id)
    if target.exists() or target.is_symlink():
        return True
    for old in (base / legacy_session_dir_name(session_id), _previous_dir(base, session_id)):
        if old is None or old == target or not old.is_dir():
            continue
        try:
            if owner_of(old, session_id).id == session_id:
                return True
        except SessionDirError:
            return True
    return False


def find_session_dir(base: Path, session_id: str) -> Path | None:
    """The existing store directory of ``session_id`` (new or old name), else None.

    Reads only; what :func:`prepare_session_dir` would open, except that it
    never creates or moves anything.
    """
    target = base / safe_session_id(session_id)
    if target.is_dir() and owner_of(target, session_id).id == session_id:
        return target
    for old in (base / legacy_session_dir_name(session_id), _previous_dir(base, session_id)):
        if (
            old is not None
            and old != target
            and old.is_dir()
            and owner_of(old, session_id).id == session_id
        ):
            return old
    return None


def list_session_dirs(base: Path) -> list[SessionDirInfo]:
    """Every session directory under ``base`` with the id it belongs to (sorted by name).

    ``id`` is None for an old directory whose id nothing tells (its name has a
    ``_`` that stood for any character and it holds no folder).
    """
    if not base.is_dir():
        return []
    out = []
    for path in sorted(base.iterdir()):
        if path.name.startswith(".") or not path.is_dir():
            continue
        try:
            own = owner_of(path)
        except SessionDirError:
            own = Ownership(None, "unknown")
        out.append(SessionDirInfo(path.name, path, own.id, own.how))
    return out
