"""Identifiers used on disk: session directory names, folder ids, txn ids, keys.

Why strict: every one of these becomes a path component under the memory root.
A session id comes from the host (QQ chat keys, WebUI ids, …) and must never
name a directory outside the root, so unsafe characters are replaced by ``_``
(reference §1.5) and names that would still be special (``""``, ``.``, ``..``)
are refused with a ``ValueError``.
"""

from __future__ import annotations

import functools
import hashlib
import re
from datetime import UTC, datetime

import orjson

__all__ = [
    "FOLDER_ID_RE",
    "MAX_NAME_LENGTH",
    "FolderIdAllocator",
    "check_safe_name",
    "folder_stamp",
    "is_folder_id",
    "is_safe_name",
    "make_idempotency_key",
    "safe_session_id",
]

MAX_NAME_LENGTH = 128
"""Longest session directory name we produce (well under any filesystem's 255)."""

_UNSAFE_RE = re.compile(r"[^A-Za-z0-9._-]")
_SAFE_NAME_RE = re.compile(r"^[A-Za-z0-9._-]+$")
FOLDER_ID_RE = re.compile(r"^mem-(\d{8}T\d{6}Z)-(\d{4,})$")
"""Folder ids this store allocates: ``mem-YYYYMMDDTHHMMSSZ-NNNN``."""
_FOLDER_DIR_RE = re.compile(r"^mem-[A-Za-z0-9._-]+$")


def is_safe_name(name: str) -> bool:
    """True when ``name`` is usable as one path component under the root.

    Only ``[A-Za-z0-9._-]``, at most 255 characters and not made of dots only
    (``.``/``..`` and friends are special or confusing on some platforms).
    """
    return 0 < len(name) <= 255 and _SAFE_NAME_RE.match(name) is not None and name.strip(".") != ""


def check_safe_name(name: str, what: str) -> str:
    """Return ``name`` if :func:`is_safe_name`, else raise a clear ValueError."""
    if not is_safe_name(name):
        raise ValueError(f"unsafe {what}: {name!r} (allowed: A-Z a-z 0-9 . _ -, not only dots)")
    return name


@functools.lru_cache(maxsize=4096)  # pure; called on every request of the daemon
def safe_session_id(raw: str) -> str:
    """Map a host session id to its directory name.

    Every character outside ``[A-Za-z0-9._-]`` (``/``, ``\\``, NUL, spaces,
    non-ASCII …) becomes ``_``, as the reference does. Ids longer than
    :data:`MAX_NAME_LENGTH` are shortened to a prefix plus a hash of the raw id
    so distinct long ids stay distinct. Raises ``ValueError`` for an empty id
    or one that maps to dots only (``.``, ``..``): those name the root itself
    or its parent.
    """
    if not isinstance(raw, str):
        raise ValueError(f"session id must be a string, got {type(raw).__name__}")
    if raw == "":
        raise ValueError("session id is empty")
    safe = _UNSAFE_RE.sub("_", raw)
    if safe.strip(".") == "":
        raise ValueError(f"session id {raw!r} names a special directory ('.'/'..')")
    if len(safe) > MAX_NAME_LENGTH:
        digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        safe = f"{safe[: MAX_NAME_LENGTH - 17]}-{digest}"
    return check_safe_name(safe, "session id")


def is_folder_id(name: str) -> bool:
    """True for names recovery treats as memory folders (``mem-…``, safe).

    Wider than :data:`FOLDER_ID_RE` so folders written by other versions with a
    different suffix are still found and adopted.
    """
    return _FOLDER_DIR_RE.match(name) is not None and is_safe_name(name)


def folder_stamp(now_ms: int) -> str:
    """UTC ``YYYYMMDDTHHMMSSZ`` stamp of an epoch-milliseconds time."""
    dt = datetime.fromtimestamp(now_ms / 1000, tz=UTC)
    return dt.strftime("%Y%m%dT%H%M%SZ")


class FolderIdAllocator:
    """Hands out ``mem-<stamp>-<NNNN>`` ids unique within one session store.

    NNNN counts up per stamp from the highest number already known for that
    stamp (from the index, folders on disk and ids handed out earlier), so an
    id is never reused even after a rollback. O(1) per id.
    """

    def __init__(self) -> None:
        self._last: dict[str, int] = {}

    def observe(self, folder_id: str) -> None:
        """Record an existing id so it is never handed out again."""
        m = FOLDER_ID_RE.match(folder_id)
        if m is not None:
            stamp, seq = m.group(1), int(m.group(2))
            if seq > self._last.get(stamp, 0):
                self._last[stamp] = seq

    def allocate(self, now_ms: int) -> str:
        """Next unused id for the second containing ``now_ms``."""
        stamp = folder_stamp(now_ms)
        seq = self._last.get(stamp, 0) + 1
        self._last[stamp] = seq
        return f"mem-{stamp}-{seq:04d}"


def make_idempotency_key(
    session_id: str, turn: int, seq_start: int, seq_end: int, content_hash: str, chunk: int
) -> str:
    """The archive idempotency key (reference §1.1, v1.4.1) as a string.

    ``(sessionId, turn, seqStart, seqEnd, contentHash)`` plus the chunk ordinal
    inside the plan, encoded as a compact JSON array: unambiguous whatever
    characters the session id contains, and readable in ``meta.json``.
    """
    return orjson.dumps([session_id, turn, seq_start, seq_end, content_hash, chunk]).decode()
