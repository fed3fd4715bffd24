"""Identifiers used on disk: session directory names, folder ids, txn ids, keys.

Why strict: every one of these becomes a path component under the memory root.
A session id comes from the host (QQ chat keys, WebUI ids, …) and must never
name a directory outside the root, and two distinct ids must never share a
directory (that would let a recall in one return the other's memories).

Session directory names (:func:`safe_session_id`) are therefore an *injective*
encoding of the id, not a lossy replacement:

* an id made only of ``[a-z0-9._-]``, not starting with ``.`` and at most
  :data:`MAX_READABLE_LENGTH` characters long is its own directory name;
* any other id becomes ``<prefix>~<digest>``: ``prefix`` is a readable hint
  (runs of characters outside ``[A-Za-z0-9._-]`` collapsed to one ``_``,
  leading dots dropped, at most :data:`PREFIX_LENGTH` characters, ``_`` when
  nothing is left) and ``digest`` the first :data:`DIGEST_HEX` hex digits of
  SHA-256 of the UTF-8 id.

Readable names contain no ``~`` and encoded names always do, so the two forms
never meet; two readable names are equal only for equal ids; two encoded names
are equal only if 80-bit digest prefixes collide (birthday bound ≈ n²/2⁸¹: about
4·10⁻¹³ for a million sessions, and a second preimage against a given id costs
2⁸⁰ hashes). Upper case letters always take the encoded form, so the names of
distinct ids also differ on case-insensitive file systems (macOS, Windows), and
names are ASCII, so Unicode normalisation by the file system cannot merge them.
The directory also records the original id (``session.json``, see
:mod:`engine.store.session_dirs`), checked on every open: even a digest
collision is an error, never a silent share.

:func:`legacy_session_dir_name` is the original mapping (every unsafe character
→ ``_``, reference §1.5), kept only to find and migrate stores it named;
:func:`previous_session_dir_name` the one name this mapping gave before its patterns
matched whole ids (an id ending in a line break was its own name, the break
included), kept for the same reason. Every pattern here is anchored with ``\\Z``:
``$`` also matches before a final line break. Ids that would name a special
directory (``""``, ``.``, ``..``) are refused with a ``ValueError``, as before.
"""

from __future__ import annotations

import functools
import hashlib
import re
import string
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from itertools import compress

import numpy as np
import orjson

__all__ = [
    "FOLDER_ID_RE",
    "MAX_NAME_LENGTH",
    "FolderIdAllocator",
    "check_safe_name",
    "folder_ids_among",
    "folder_stamp",
    "is_folder_id",
    "is_safe_name",
    "is_session_dir_name",
    "legacy_session_dir_name",
    "make_idempotency_key",
    "previous_session_dir_name",
    "safe_session_id",
]

MAX_NAME_LENGTH = 128
"""Longest session directory name we produce (well under any filesystem's 255)."""
MAX_READABLE_LENGTH = 96
"""Longest id that is used as its own directory name."""
PREFIX_LENGTH = 48
"""Longest readable prefix of an encoded (``<prefix>~<digest>``) directory name."""
DIGEST_HEX = 20
"""Hex digits of SHA-256 in an encoded name (80 bits; see the module docstring)."""
DIGEST_SEPARATOR = "~"
"""Never part of a readable name, always part of an encoded one."""

_UNSAFE_RE = re.compile(r"[^A-Za-z0-9._-]")
_UNSAFE_RUN_RE = re.compile(r"[^A-Za-z0-9._-]+")
_SAFE_NAME_RE = re.compile(r"^[A-Za-z0-9._-]+\Z")
_READABLE_ID_RE = re.compile(r"^[a-z0-9_-][a-z0-9._-]*\Z")
_SESSION_DIR_RE = re.compile(
    rf"^(?:[a-z0-9_-][a-z0-9._-]*|[A-Za-z0-9_-][A-Za-z0-9._-]*~[0-9a-f]{{{DIGEST_HEX}}})\Z"
)
FOLDER_ID_RE = re.compile(r"^mem-(\d{8}T\d{6}Z)-(\d{4,})\Z", re.ASCII)
"""Folder ids this store allocates: ``mem-YYYYMMDDTHHMMSSZ-NNNN``."""
_FOLDER_DIR_RE = re.compile(r"^mem-[A-Za-z0-9._-]+\Z")
_FOLDER_LINE_RE = re.compile(r"^mem-[A-Za-z0-9._-]+$", re.MULTILINE)
_STAMP_RE = re.compile(r"^[0-9]{8}T[0-9]{6}Z\Z")
_SAFE_DELETED = str.maketrans("", "", string.ascii_letters + string.digits + "._-")
"""`str.translate` table deleting the safe characters (:data:`_SAFE_NAME_RE`'s)."""


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


def _check_session_id(raw: str) -> None:
    if not isinstance(raw, str):
        raise ValueError(f"session id must be a string, got {type(raw).__name__}")
    if raw == "":
        raise ValueError("session id is empty")
    if raw.strip(".") == "":
        raise ValueError(f"session id {raw!r} names a special directory ('.'/'..')")
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"session id {raw!r} is not valid Unicode text") from None


def is_session_dir_name(name: str) -> bool:
    """True for a name :func:`safe_session_id` can produce (readable or encoded)."""
    return 0 < len(name) <= MAX_NAME_LENGTH and _SESSION_DIR_RE.match(name) is not None


@functools.lru_cache(maxsize=4096)  # pure; called on every request of the daemon
def safe_session_id(raw: str) -> str:
    """Map a host session id to its directory name (injective; module docstring).

    ``session-8f2c``, ``onebot-group-12345`` → themselves; ``chat/a`` →
    ``chat_a~<digest>``; ``会话一`` → ``_~<digest>``; ``Chat`` → ``Chat~<digest>``.
    Raises ``ValueError`` for an empty id, one made of dots only (``.``, ``..``;
    they would once have named the root or its parent) and one that is not valid
    Unicode (a lone surrogate cannot be recorded in ``session.json``).
    """
    _check_session_id(raw)
    if len(raw) <= MAX_READABLE_LENGTH and _READABLE_ID_RE.match(raw) is not None:
        return raw
    prefix = _UNSAFE_RUN_RE.sub("_", raw).lstrip(".")[:PREFIX_LENGTH] or "_"
    digest = hashlib.sha256(raw.encode("utf-8")).hexdigest()[:DIGEST_HEX]
    name = f"{prefix}{DIGEST_SEPARATOR}{digest}"
    if not is_session_dir_name(name):  # pragma: no cover - guaranteed by construction
        raise ValueError(f"session id {raw!r} gave an unusable directory name {name!r}")
    return name


@functools.lru_cache(maxsize=1024)
def legacy_session_dir_name(raw: str) -> str:
    """The directory name the original mapping gave ``raw`` (only to migrate it).

    Every character outside ``[A-Za-z0-9._-]`` became ``_`` (so ``chat/a`` and
    ``chat_a`` shared a directory); names over :data:`MAX_NAME_LENGTH` were cut to
    a prefix plus 16 hex digits of SHA-256. Raises like :func:`safe_session_id`.
    """
    _check_session_id(raw)
    safe = _UNSAFE_RE.sub("_", raw)
    if len(safe) > MAX_NAME_LENGTH:
        digest = hashlib.sha256(raw.encode("utf-8")).hexdigest()[:16]
        safe = f"{safe[: MAX_NAME_LENGTH - 17]}-{digest}"
    return check_safe_name(safe, "session id")


def previous_session_dir_name(raw: str) -> str | None:
    """The directory name :func:`safe_session_id` gave ``raw`` until it compared whole
    ids, when that differs from today's (only to migrate it), else None.

    Its pattern ended in ``$``, which also matches before a final line break, so an id
    readable but for one trailing ``\\n`` (``abc\\n``) was its own directory name, line
    break included; today it takes the encoded form. No other id's name changed.
    """
    if (
        len(raw) <= MAX_READABLE_LENGTH
        and raw.endswith("\n")
        and _READABLE_ID_RE.match(raw[:-1]) is not None
    ):
        return raw
    return None


def is_folder_id(name: str) -> bool:
    """True for names recovery treats as memory folders (``mem-…``, safe).

    Wider than :data:`FOLDER_ID_RE` so folders written by other versions with a
    different suffix are still found and adopted.
    """
    # the pattern leaves only the length of `is_safe_name` to check (a ``mem-`` name is
    # made of safe characters and is not dots only)
    return len(name) <= 255 and _FOLDER_DIR_RE.match(name) is not None


def folder_ids_among(names: Sequence[str]) -> list[str]:
    """The names :func:`is_folder_id` accepts, in order, at C speed: a store's listing is
    10⁵ folder names at 10⁵ folders, read on every open.

    Only ``mem-`` names can be folders. When every one of them is ``mem-`` and safe
    characters only (one `str.translate` of them all deletes those and leaves their
    line breaks alone), they are the answer; else one regular-expression pass over their
    lines (names with a line break, which would cut one into two lines, are checked one
    by one). The first is three times faster than the second on a clean listing."""
    mem = [name for name in names if name.startswith("mem-")]
    joined = "\n".join(mem)
    if joined.translate(_SAFE_DELETED) == "\n" * (len(mem) - 1) and "mem-" not in mem:
        found = mem
    elif joined.count("\n") >= len(mem):  # more breaks than separators: a name holds one
        found = [name for name in mem if _FOLDER_DIR_RE.match(name)]
    else:
        found = _FOLDER_LINE_RE.findall(joined)
    if found and max(map(len, found)) > 255:
        return [name for name in found if len(name) <= 255]
    return found


def folder_stamp(now_ms: int) -> str:
    """UTC ``YYYYMMDDTHHMMSSZ`` stamp of an epoch-milliseconds time."""
    dt = datetime.fromtimestamp(now_ms / 1000, tz=UTC)
    return dt.strftime("%Y%m%dT%H%M%SZ")


_ID_LEN = 25  # mem-YYYYMMDDTHHMMSSZ-NNNN
_ID_MASK = np.frombuffer(b"mem-00000000T000000Z-0000", dtype=np.uint8)
_DIGIT_AT = ord("0") == _ID_MASK
_STAMP_COLS = [*range(4, 12), *range(13, 19)]
_SEQ_COLS = list(range(21, 25))
_SEQ_BASE = 10_000


def _stamp_number(stamp: str) -> int:
    """``YYYYMMDDTHHMMSSZ`` as the number of its 14 digits."""
    return int(stamp[:8] + stamp[9:15])


def _bulk_codes(ids: list[str]) -> tuple[np.ndarray, list[str]]:
    """The ids laid out exactly as :func:`FolderIdAllocator.allocate` writes them, as
    sorted codes ``stamp digits × 10⁴ + NNNN`` (one pass over their bytes), and every
    other id, for the one-by-one rule."""
    if set(map(len, ids)) <= {_ID_LEN} and all(map(str.isascii, ids)):
        cand, odd = ids, []
    else:
        plain = [len(fid) == _ID_LEN and fid.isascii() for fid in ids]
        cand = list(compress(ids, plain))
        odd = list(compress(ids, [not p for p in plain]))
    if not cand:
        return np.empty(0, dtype=np.int64), odd
    rows = np.frombuffer("".join(cand).encode("ascii"), dtype=np.uint8).reshape(-1, _ID_LEN)
    fixed = np.all(rows[:, ~_DIGIT_AT] == _ID_MASK[~_DIGIT_AT], axis=1)
    digits = rows[:, _DIGIT_AT]
    ok = fixed & np.all((digits >= ord("0")) & (digits <= ord("9")), axis=1)
    if not ok.all():
        odd += [fid for fid, good in zip(cand, ok.tolist(), strict=True) if not good]
        rows = rows[ok]
    values = rows.astype(np.int64) - ord("0")
    stamp = np.zeros(len(rows), dtype=np.int64)
    for col in _STAMP_COLS:
        stamp = stamp * 10 + values[:, col]
    seq = np.zeros(len(rows), dtype=np.int64)
    for col in _SEQ_COLS:
        seq = seq * 10 + values[:, col]
    return np.sort(stamp * _SEQ_BASE + seq, kind="stable"), odd  # ids come nearly sorted


class FolderIdAllocator:
    """Hands out ``mem-<stamp>-<NNNN>`` ids unique within one session store.

    NNNN counts up per stamp from the highest number already known for that
    stamp (from the index, folders on disk and ids handed out earlier), so an
    id is never reused even after a rollback. O(1) per id (a bisection once ids
    were observed in bulk).

    Why two tables: a store's ids are observed all at once when it opens (10⁵ at
    10⁵ folders, nearly all in seconds of their own), and a dict of their stamps cost
    10 MB and half a second; those ids are kept as one sorted array of numbers
    (:meth:`observe_all`), anything else (ids handed out or observed one by one, ids of
    another layout) in the dict.

    Ids observed in bulk are laid out when an id is first asked for (:meth:`allocate`,
    :meth:`newest`), not when they are observed: a store opened to answer a recall
    hands out no id, and a restart's first round does not wait for 10⁵ ids to be parsed.
    """

    def __init__(self) -> None:
        self._last: dict[str, int] = {}
        self._bulk: np.ndarray = np.empty(0, dtype=np.int64)
        self._unsettled: list[Collection[str]] = []

    def observe(self, folder_id: str) -> None:
        """Record an existing id so it is never handed out again."""
        m = FOLDER_ID_RE.match(folder_id)
        if m is not None:
            stamp, seq = m.group(1), int(m.group(2))
            if seq > self._last.get(stamp, 0):
                self._last[stamp] = seq

    def observe_all(self, folder_ids: Collection[str]) -> None:
        """:meth:`observe` each of ``folder_ids`` (in one pass, when an id is next asked
        for: see the class docstring; the caller does not change the collection)."""
        self._unsettled.append(folder_ids)

    def _settle(self) -> None:
        """Lay out the ids observed in bulk since the last time (class docstring)."""
        while self._unsettled:
            codes, odd = _bulk_codes(list(self._unsettled.pop(0)))
            for folder_id in odd:
                self.observe(folder_id)
            if codes.size:
                if self._bulk.size:
                    codes = np.sort(np.concatenate([self._bulk, codes]), kind="stable")
                self._bulk = codes

    def _bulk_seq(self, stamp: str) -> int:
        self._settle()
        bulk = self._bulk
        if not bulk.size or not _STAMP_RE.match(stamp):
            return 0
        base = _stamp_number(stamp) * _SEQ_BASE
        i = int(np.searchsorted(bulk, base + _SEQ_BASE - 1, side="right")) - 1
        return int(bulk[i]) - base if i >= 0 and int(bulk[i]) >= base else 0

    def newest(self) -> list[str]:
        """The highest id known per second (what :meth:`observe` needs to go on), in
        id order."""
        self._settle()
        best = dict(self._last)
        bulk = self._bulk
        if bulk.size:
            stamps = bulk // _SEQ_BASE
            last = np.append(stamps[1:] != stamps[:-1], True)
            for code in bulk[last].tolist():
                s = str(code // _SEQ_BASE).zfill(14)
                stamp = f"{s[:8]}T{s[8:]}Z"
                seq = code % _SEQ_BASE
                if seq > best.get(stamp, 0):
                    best[stamp] = seq
        return [f"mem-{stamp}-{seq:04d}" for stamp, seq in sorted(best.items())]

    def allocate(self, now_ms: int) -> str:
        """Next unused id for the second containing ``now_ms``."""
        self._settle()
        stamp = folder_stamp(now_ms)
        seq = max(self._last.get(stamp, 0), self._bulk_seq(stamp)) + 1
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
