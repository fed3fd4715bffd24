"""Durable JSON / JSONL / bytes file I/O shared by the whole engine.

Why this module exists: a memory folder or ``index.json`` that is half written
after a crash is silent data corruption. Every write here is *atomic* (readers
see the old content or the new content, never a mix) and *durable* (once the
call returns, the content survives a power loss):

1. write the data to a temp file in the **same directory** (so ``os.replace`` is
   a rename on one filesystem), flush and ``fsync`` it;
2. ``os.replace`` it over the target;
3. ``fsync`` the directory so the rename itself is on disk.

JSON is encoded with orjson, indented by two spaces, LF line ends and a final
newline (files are diffed, copied between platforms and read by humans).

Every filesystem *mutation* made by the engine goes through the module-level
:data:`fs` object (an :class:`FsOps`). It is the single seam tests use to inject
a failure at the n-th operation and prove crash consistency; production code
never replaces it. Reads do not go through it: they cannot break consistency.

Many files that must be durable at the same point (the folders of one archive) are
written with :meth:`FsOps.create_write` and made durable together with
:meth:`FsOps.fsync_all`: fsyncs issued at once share the filesystem's journal commits,
where one after another each waits for its own (the 117 fsyncs of a 39-folder archive on
ext4: ~13 ms together, 50-120 ms one after another). A writer that batches so must not
depend on any of those files before ``fsync_all`` returns.

Temp files are named ``.<target-name>.<pid>-<n>.tmp``; :func:`is_temp_name`
recognises them so recovery code can delete leftovers of a crashed writer.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from engine.concurrent_io import LazyPool, raise_first_failure

__all__ = [
    "CorruptJSONError",
    "FsOps",
    "append_jsonl",
    "atomic_stream",
    "decode_json",
    "dumps_json",
    "fs",
    "fsync_dir",
    "is_temp_name",
    "read_json",
    "temp_path",
    "write_bytes_atomic",
    "write_json_atomic",
]

_TEMP_RE = re.compile(r"^\..+\.\d+-\d+\.tmp\Z", re.ASCII)
_TARGET_RE = re.compile(r"^\.(.+)\.\d+-\d+\.tmp\Z", re.ASCII)
_counter = itertools.count(1)
_UTF8_BOM = b"\xef\xbb\xbf"


class CorruptJSONError(ValueError):
    """A file exists but its content is not valid JSON (or not UTF-8).

    Distinct from ``FileNotFoundError`` so callers can tell "never written" from
    "damaged" (the store rebuilds a damaged index but reports it).
    """

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"corrupt JSON in {path}: {reason}")
        self.path = path
        self.reason = reason


class FsOps:
    """The primitive filesystem mutations the engine performs.

    Kept deliberately tiny so a test can wrap every method (see the store's
    crash tests). Each method is one step a crash could interrupt, but
    :meth:`fsync_all`, which runs :meth:`fsync` in worker threads: a test that counts
    steps overrides it too (one step per path, in order), and consumes its ``paths``,
    which may be the writer itself (a generator making its own steps).
    """

    def create_write_sync(self, path: Path, data: bytes) -> None:
        """Create ``path`` exclusively, write ``data``, flush and fsync it."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        _write_all_and_close(fd, data)

    def create_write(self, path: Path, data: bytes) -> None:
        """Create ``path`` exclusively and write ``data``, not yet durable: the caller
        makes it so with :meth:`fsync_all` before anything depends on it."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)

    def fsync(self, path: Path) -> None:
        """Make a file's content, or a directory's entries, durable."""
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def fsync_all(self, paths: Iterable[Path]) -> None:
        """:meth:`fsync` every path, issued together (see the module docstring). Returns
        once all are durable; if any failed, raises the first failure (in ``paths``
        order) after every one has ended, so nothing is still being written then.

        Each path is handed to the disk as soon as ``paths`` yields it: a writer that
        yields its files as it writes them (a generator) has the first ones synced while
        it goes on (writing the next, or computing what it needs anyway); if the writer
        fails, what it handed over is synced before its failure propagates."""
        futures: list[concurrent.futures.Future[None]] = []
        try:
            for path in paths:
                futures.append(_sync_pool().submit(self.fsync, path))
        finally:
            concurrent.futures.wait(futures)
        raise_first_failure(futures)

    def append_sync(self, path: Path, data: bytes) -> None:
        """Append ``data`` with one ``O_APPEND`` write and fsync it."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        _write_all_and_close(fd, data)

    def replace(self, src: Path, dst: Path) -> None:
        """Atomically move a file over ``dst`` (``os.replace``)."""
        src.replace(dst)

    def rename(self, src: Path, dst: Path) -> None:
        """Rename a directory; fails if ``dst`` exists (no silent overwrite)."""
        if dst.exists():
            raise FileExistsError(f"rename target exists: {dst}")
        src.rename(dst)

    def fsync_dir(self, path: Path) -> None:
        """Make the directory entries of ``path`` durable."""
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def mkdir(self, path: Path) -> None:
        """Create a directory (and parents); an existing one is fine."""
        path.mkdir(parents=True, exist_ok=True)

    def unlink(self, path: Path) -> None:
        """Remove a file; a missing one is fine (idempotent cleanup)."""
        path.unlink(missing_ok=True)

    def rmtree(self, path: Path) -> None:
        """Remove a directory tree; a missing one is fine."""
        if path.is_symlink():
            path.unlink()
            return
        if path.exists():
            shutil.rmtree(path)


fs: FsOps = FsOps()
"""The seam. Tests monkeypatch this attribute; engine code reads it per call."""

SYNC_THREADS = 16
"""Fsyncs in flight at once in :meth:`FsOps.fsync_all` (measured on ext4 for 80 new files:
16 take half the time of 4; 32 gain nothing more)."""
_sync_pool = LazyPool("rofmd-fsync", SYNC_THREADS)
"""The threads :meth:`FsOps.fsync_all` waits in, shared by every store."""


def is_temp_name(name: str) -> bool:
    """True for a temp file name produced by this module's atomic writers."""
    return bool(_TEMP_RE.match(name))


def temp_target(path: str) -> str:
    """The file an atomic writer's temp file stands for (``.x.json.12-3.tmp`` ->
    ``x.json`` beside it); any other path as it is. Error messages name the target."""
    head, _, name = path.rpartition("/")
    m = _TARGET_RE.match(name)
    if m is None:
        return path
    return f"{head}/{m.group(1)}" if head else m.group(1)


def temp_path(path: Path) -> Path:
    """A fresh temp name beside ``path`` that recovery recognises (``is_temp_name``) and
    removes when a crash leaves it behind."""
    return path.with_name(f".{path.name}.{os.getpid()}-{next(_counter)}.tmp")


def dumps_json(obj: Any) -> bytes:
    """Encode like every JSON file on disk: orjson, 2-space indent, final LF."""
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n"


def fsync_dir(path: Path) -> None:
    """Fsync a directory so a rename/create/delete inside it is durable."""
    fs.fsync_dir(path)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Atomically and durably replace ``path`` with ``data``.

    On any failure the target keeps its previous content (or stays absent) and
    the temp file is removed when possible; a crash can leave a temp file that
    :func:`is_temp_name` identifies.
    """
    tmp = temp_path(path)
    try:
        fs.create_write_sync(tmp, data)
        fs.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            fs.unlink(tmp)
        raise
    fs.fsync_dir(path.parent)


@contextlib.contextmanager
def atomic_stream(path: Path) -> Iterator[BinaryIO]:
    """A file to stream into that replaces ``path`` when the block ends, atomically and
    durably, as :func:`write_bytes_atomic` does for bytes in memory (a temp file beside
    it, fsync, rename, fsync of the directory): for what is too large to hold at once
    (a backup archive, an export). If the block raises, the temp file is removed and
    ``path`` keeps what it held."""
    tmp = temp_path(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        fs.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            fs.unlink(tmp)
        raise
    fs.fsync_dir(path.parent)


def write_json_atomic(path: Path, obj: Any) -> None:
    """Atomically and durably write ``obj`` as JSON (see :func:`dumps_json`)."""
    write_bytes_atomic(path, dumps_json(obj))


def append_jsonl(path: Path, record: Any, *more: Any) -> int:
    """Durably append ``record`` (and each of ``more``) as one compact JSON line each;
    the bytes written.

    One ``O_APPEND`` write for all of them, then one fsync. If a previous writer
    crashed mid-line (file does not end in LF) a newline is written first so the torn
    line never swallows this record; readers skip the torn line.
    """
    line = b"".join(orjson.dumps(r) + b"\n" for r in (record, *more))
    created = not path.exists()
    if not created and path.stat().st_size > 0:
        with path.open("rb") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                line = b"\n" + line
    fs.append_sync(path, line)
    if created:
        fs.fsync_dir(path.parent)
    return len(line)


def read_json(path: Path) -> Any:
    """Read and decode a JSON file.

    Raises ``FileNotFoundError`` when absent and :class:`CorruptJSONError` when
    the content is empty, not UTF-8 or not JSON. A UTF-8 BOM (hand-edited
    files) is tolerated.
    """
    return decode_json(path.read_bytes(), path)


def decode_json(data: bytes, path: Path) -> Any:
    """:func:`read_json` of the bytes read from ``path`` (for a reader that opened it)."""
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise CorruptJSONError(path, str(exc)) from exc


def _write_all(fd: int, data: bytes) -> None:
    """Write every byte (os.write may write less)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _write_all_and_close(fd: int, data: bytes) -> None:
    """Write every byte, fsync, and close the descriptor."""
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
