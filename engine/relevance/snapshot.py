"""A relevance index on disk, so that a restart or a reopen reads no folder again.

Building a session's index reads and analyses every scored folder's text (70 s at 10^5
folders); a snapshot holds the index's arrays as they are in memory, so loading it is
reading them back (well under a second), and the first sync after it reads only the
folders that changed since (`RelevanceIndex.restored`). It is derived data: whatever is
wrong with it, the index is built from the folders instead, and nothing else reads it.

The file is one binary record, written whole through `engine.jsonio.write_bytes_atomic`
(a crash leaves the old file or the new one):

* 8 bytes magic, 8 bytes little-endian header length;
* the header, JSON: format, fingerprint (this code's analyser, fields, BM25 constants
  and the folder-text version: :func:`fingerprint`), owner (the store it was built
  over), `keywords.extraStopwords`, the sections in order (name, NumPy type code,
  items) and each section's checksum (:func:`word_sum`);
* each section's raw bytes (native byte order, which the fingerprint includes), read
  straight into the arrays the index keeps;
* 4 bytes CRC-32 of the magic, length and header, and 4 bytes end mark.

The sections are checked with a sum of 64-bit words, not a CRC: it finds a flipped bit,
a zeroed or foreign block and a truncation as surely, at four times the speed (the
check is a third of a load at 10^5 folders otherwise).

A snapshot is used only when it is whole (sizes, CRC), this code's (format and
fingerprint), the same store's and built with the same extra stopwords, and its arrays
fit together; otherwise :func:`read_snapshot` says why and the caller builds afresh.
A change to what goes into the index (analyser, boosts, stored fields) changes the
fingerprint by itself as far as the probe text shows it; bump :data:`FORMAT` for any
other change of meaning or layout.
"""

from __future__ import annotations

import functools
import hashlib
import os
import struct
import sys
import weakref
import zlib
from array import array
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from engine.jsonio import write_bytes_atomic
from engine.relevance.analyzer import EN_FILLER, search_terms_by_line
from engine.relevance.index import FIELD_BOOSTS, KEYS_SECTION, RelevanceIndex
from engine.relevance.passages import BM25_B, BM25_K1, quantise_length
from engine.stopwords import CJK_SPLIT_CHARS, EN_STOPWORDS

__all__ = [
    "FORMAT",
    "LaterSection",
    "SnapshotError",
    "encode_sections",
    "fingerprint",
    "read_sections",
    "read_sections_leaving",
    "read_snapshot",
    "word_sum",
    "write_snapshot",
]

FORMAT = 3  # 2: passages split at asking sentences (s.ask); 3: no stored tf parts
MAGIC = b"RFMDRIX\x00"
END = b"RIX."
_HEAD = struct.Struct("<8sQ")
_TAIL = struct.Struct("<I4s")
_MAX_HEADER = 1 << 20
_TYPECODES = {"u1": "B", "u2": "H", "i4": "i", "i8": "q", "f4": "f", "f8": "d"}
_MASK = (1 << 64) - 1
_PROBE = (
    "Mina finished the Marathon in Hangzhou, 2024!\n"
    "星港项目的网关端口是8080，决定去杭州。\nnode.js ＦＵＬＬＷＩＤＴＨ wow great deploying"
)


class SnapshotError(ValueError):
    """Why a snapshot file was not used (the index is built from the folders instead)."""


@functools.cache
def fingerprint(text_version: str) -> str:
    """What a snapshot's contents depend on besides the folders: the analyser (its word
    lists and what it makes of a probe text), the field boosts, the BM25 constants and
    length quantisation, the byte order, and `text_version` (what the caller's texts
    are made of)."""
    facts = {
        "format": FORMAT,
        "byteorder": sys.byteorder,
        "boosts": FIELD_BOOSTS,
        "bm25": [BM25_K1, BM25_B, [quantise_length(x) for x in (1.0, 7.3, 123.4, 5e4)]],
        "stopwords": sorted(EN_STOPWORDS),
        "filler": sorted(EN_FILLER),
        "split": sorted(CJK_SPLIT_CHARS),
        "probe": search_terms_by_line(_PROBE),
        "text": text_version,
    }
    return hashlib.blake2b(orjson.dumps(facts), digest_size=16).hexdigest()


class _WordSum:
    """The sum, modulo 2^64, of a byte stream read as little-endian 64-bit words (the
    last one zero-padded), fed in pieces of any length."""

    def __init__(self) -> None:
        self.total = 0
        self._pending = b""

    def add(self, buf: Any) -> None:
        raw = np.frombuffer(buf, dtype=np.uint8)
        at = 0
        if self._pending:
            at = min(8 - len(self._pending), raw.size)
            self._pending += raw[:at].tobytes()
            if len(self._pending) < 8:
                return
            self.total += int.from_bytes(self._pending, "little")
            self._pending = b""
        whole = (raw.size - at) // 8 * 8
        if whole:
            words = raw[at : at + whole].view("<u8")
            self.total += int(words.sum(dtype=np.uint64))
        self._pending = raw[at + whole :].tobytes()

    def value(self) -> int:
        tail = int.from_bytes(self._pending, "little") if self._pending else 0
        return (self.total + tail) & _MASK


def word_sum(*parts: Any) -> int:
    """The checksum of a section made of `parts` back to back (see :class:`_WordSum`)."""
    acc = _WordSum()
    for p in parts:
        acc.add(p)
    return acc.value()


def encode_sections(
    magic: bytes, header: Mapping[str, Any], parts: Mapping[str, tuple[str, Sequence[Any]]]
) -> bytes:
    """A snapshot file (module docstring): `magic`, the JSON `header` with the section
    table and checksums added, each section's buffers (name -> NumPy type code and the
    buffers that make it, back to back), and the tail. Any derived index written whole
    as arrays uses this frame (`engine.recall.candidate_snapshot` too)."""
    sections: list[list[Any]] = []
    sums: list[str] = []
    buffers: list[Any] = []
    for name, (code, pieces) in parts.items():
        nbytes = sum(memoryview(p).nbytes for p in pieces)
        size = np.dtype(code).itemsize
        if nbytes % size:
            raise RuntimeError(f"section {name} is not whole items")
        sections.append([name, code, nbytes // size])
        sums.append(f"{word_sum(*pieces):016x}")
        buffers.extend(pieces)
    raw = orjson.dumps({**header, "sections": sections, "sums": sums})
    head = _HEAD.pack(magic, len(raw)) + raw
    return b"".join([head, *buffers, _TAIL.pack(zlib.crc32(head), END)])


def _encode(
    index: RelevanceIndex,
    *,
    owner: str,
    extra_stopwords: Sequence[str],
    text_version: str,
    source: str | None = None,
) -> bytes:
    """The snapshot file of `index` (the caller holds its lock); `source`: the stamp of
    the entries it is synced to (`write_snapshot`)."""
    header: dict[str, Any] = {
        "format": FORMAT,
        "fingerprint": fingerprint(text_version),
        "owner": owner,
        "extra": list(extra_stopwords),
    }
    if source is not None:
        header["source"] = source
    return encode_sections(MAGIC, header, index.snapshot_parts())


def write_snapshot(
    path: Path,
    index: RelevanceIndex,
    *,
    owner: str,
    text_version: str,
    write: Callable[[Path, bytes], None] = write_bytes_atomic,
    source: Callable[[RelevanceIndex], str | None] | None = None,
) -> int:
    """Write `index`'s snapshot to `path` (atomically and durably); returns its size.
    Blocking; takes the index's lock only to copy it, so the index is usable meanwhile.
    The changes it holds no longer count as unsaved. `source`, asked under the lock:
    what the entries the index is synced to are a function of, when it knows
    (`engine.store.SessionStore.loaded_from`), stamped into the header: a reader given
    the same takes the stored keys as its entries' without comparing them
    (`read_snapshot`)."""
    with index.lock:
        stamp = source(index) if source is not None else None
        data = _encode(
            index,
            owner=owner,
            extra_stopwords=index.extra_stopwords,
            text_version=text_version,
            source=stamp,
        )
        taken = index.unsaved
    write(path, data)
    with index.lock:
        index.unsaved -= taken
        index.saved = True
        index.stamp = stamp
    return len(data)


def _header(raw: bytes) -> dict[str, Any]:
    try:
        header = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise SnapshotError(f"header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise SnapshotError("header is not an object")
    return header


def _sections(header: dict[str, Any]) -> list[tuple[str, str, int, str]]:
    raw, sums = header.get("sections"), header.get("sums")
    out: list[tuple[str, str, int, str]] = []
    if isinstance(raw, list) and isinstance(sums, list) and len(sums) == len(raw):
        for item, check in zip(raw, sums, strict=True):
            if (
                isinstance(item, list)
                and len(item) == 3
                and isinstance(item[0], str)
                and item[1] in _TYPECODES
                and isinstance(item[2], int)
                and item[2] >= 0
                and isinstance(check, str)
            ):
                out.append((item[0], item[1], item[2], check))
    if not isinstance(raw, list) or len(out) != len(raw) or len({s[0] for s in out}) != len(out):
        raise SnapshotError("bad section table")
    return out


def _read_into(f: Any, buf: array[Any]) -> None:
    view = memoryview(buf).cast("B")
    while view:
        n = f.readinto(view)
        if not n:
            raise SnapshotError("truncated")
        view = view[n:]


class LaterSection:
    """A section a read left on disk (:func:`read_sections_leaving`): its bytes are read,
    and checked against its sum, only when asked for. It holds a descriptor of the file
    it was found in, so it reads that file's bytes even once a newer snapshot replaced
    the file (snapshots are replaced whole, never written in place), until it is read
    or closed (or collected)."""

    def __init__(self, fd: int, name: str, offset: int, nbytes: int, check_sum: str) -> None:
        self.name = name
        self.nbytes = nbytes
        self._fd = fd
        self._offset = offset
        self._sum = check_sum
        self._close = weakref.finalize(self, os.close, fd)

    def read(self) -> bytes:
        """The section's bytes; SnapshotError when they are not those written (or the
        section was closed). Closes it."""
        if not self._close.alive:
            raise SnapshotError(f"section {self.name} was closed before it was read")
        try:
            data = os.pread(self._fd, self.nbytes, self._offset)
        except OSError as exc:
            raise SnapshotError(f"unreadable: {exc}") from None
        finally:
            self.close()
        if len(data) != self.nbytes:
            raise SnapshotError("truncated")
        if f"{word_sum(data):016x}" != self._sum:
            raise SnapshotError(f"checksum mismatch in {self.name}")
        return data

    def close(self) -> None:
        """Let the file go (a read after this raises SnapshotError)."""
        self._close()


def read_sections(
    path: Path, magic: bytes, what: str, check: Callable[[dict[str, Any]], None]
) -> dict[str, array[Any]]:
    """The sections of the snapshot file at `path` written with `magic`
    (:func:`encode_sections`), each checked; `check` refuses a header that is not the
    reader's (another version, another store: it raises :class:`SnapshotError`). Raises
    FileNotFoundError when there is no file and :class:`SnapshotError` (with the reason)
    when it cannot be used. Blocking."""
    return read_sections_leaving(path, magic, what, check, lambda _header: ())[0]


def read_sections_leaving(
    path: Path,
    magic: bytes,
    what: str,
    check: Callable[[dict[str, Any]], None],
    leave: Callable[[dict[str, Any]], Collection[str]],
) -> tuple[dict[str, array[Any]], dict[str, LaterSection]]:
    """:func:`read_sections`, but the sections `leave` names (asked once `check` took
    the header) are left on disk, each a :class:`LaterSection` the caller reads when it
    needs it, or closes. Why: a section only some loads need (the stored keys of a
    relevance index, 28 MB at 10^5 folders, which a stamped snapshot's first sync never
    compares) costs its disk read and checksum on every restart otherwise."""
    with open(path, "rb", buffering=0) as f:
        try:
            return _read(f, magic, what, check, leave)
        except OSError as exc:
            raise SnapshotError(f"unreadable: {exc}") from None


def read_snapshot(
    path: Path,
    text_of: Callable[[str], str | None],
    *,
    owner: str,
    extra_stopwords: Sequence[str],
    text_version: str,
    source: str | None = None,
) -> RelevanceIndex:
    """The index stored at `path`, to be synced before use (its first sync checks every
    folder against it). Raises FileNotFoundError when there is none and
    :class:`SnapshotError` (with the reason) when it cannot be used. `source`: what the
    entries of that first sync are a function of (`engine.store.SessionStore.
    loaded_from`); a snapshot stamped with the same was synced to those very entries,
    and its first sync does not compare them (`RelevanceIndex.sync`). Blocking."""
    extra = list(extra_stopwords)
    stamped = False

    def check(header: dict[str, Any]) -> None:
        nonlocal stamped
        if header.get("format") != FORMAT or header.get("fingerprint") != fingerprint(text_version):
            raise SnapshotError("written by another version")
        if header.get("owner") != owner:
            raise SnapshotError("built over another store")
        if header.get("extra") != extra:
            raise SnapshotError("built with other keywords.extraStopwords")
        stamped = source is not None and header.get("source") == source

    def leave(_header: dict[str, Any]) -> Collection[str]:
        # a stamped snapshot's first sync takes its entries without comparing keys
        return (KEYS_SECTION,) if stamped else ()

    arrays, later = read_sections_leaving(path, MAGIC, "a relevance index snapshot", check, leave)
    keys_later = later.pop(KEYS_SECTION, None)
    for section in later.values():  # none but the keys: never left open
        section.close()
    try:
        index = RelevanceIndex.restored(
            text_of, arrays, extra_stopwords=tuple(extra), stamped=stamped, keys_later=keys_later
        )
    except (KeyError, ValueError, UnicodeDecodeError, TypeError) as exc:
        if keys_later is not None:
            keys_later.close()
        raise SnapshotError(f"inconsistent arrays: {exc!r}") from None
    index.stamp = source if stamped else None
    return index


def _read(
    f: Any,
    magic: bytes,
    what: str,
    check: Callable[[dict[str, Any]], None],
    leave: Callable[[dict[str, Any]], Collection[str]],
) -> tuple[dict[str, array[Any]], dict[str, LaterSection]]:
    size = os.fstat(f.fileno()).st_size
    head = f.read(_HEAD.size)
    if len(head) != _HEAD.size:
        raise SnapshotError("truncated")
    found, header_len = _HEAD.unpack(head)
    if found != magic:
        raise SnapshotError(f"not {what}")
    if header_len > _MAX_HEADER or _HEAD.size + header_len + _TAIL.size > size:
        raise SnapshotError("truncated")
    raw = f.read(header_len)
    header = _header(raw)
    check(header)
    sections = _sections(header)
    body = sum(count * np.dtype(code).itemsize for _, code, count, _ in sections)
    if _HEAD.size + header_len + body + _TAIL.size != size:
        raise SnapshotError("truncated or overlong")
    left = frozenset(leave(header))
    arrays: dict[str, array[Any]] = {}
    later: dict[str, LaterSection] = {}
    try:
        for name, code, count, check_sum in sections:
            if name in left:
                nbytes = count * np.dtype(code).itemsize
                at = f.tell()
                later[name] = LaterSection(os.dup(f.fileno()), name, at, nbytes, check_sum)
                f.seek(at + nbytes)
                continue
            buf: array[Any] = array(_TYPECODES[code], bytes(np.dtype(code).itemsize)) * count
            _read_into(f, buf)
            if f"{word_sum(buf):016x}" != check_sum:
                raise SnapshotError(f"checksum mismatch in {name}")
            arrays[name] = buf
        tail = f.read(_TAIL.size)
        if len(tail) != _TAIL.size:
            raise SnapshotError("truncated")
        stored_crc, end = _TAIL.unpack(tail)
        if end != END or stored_crc != zlib.crc32(head + raw):
            raise SnapshotError("header checksum mismatch")
    except BaseException:
        for section in later.values():
            section.close()
        raise
    return arrays, later
