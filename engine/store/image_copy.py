"""Copy one host image file into the store: only an image, never held whole in memory.

A host's ``attachment.hostPath`` names a file the daemon does not own. Between the
moment an archive is planned and the moment its images are copied that file may be
replaced, grow, vanish, turn into a FIFO or a device, or name a secret instead of an
image. So the copy trusts nothing checked earlier: it looks at the file type before
opening (a FIFO or a device is never opened), opens without blocking, checks again on
the open descriptor (regular file, not empty, within the cap), reads in
:data:`COPY_CHUNK` pieces (memory stays one chunk whatever the file's size), checks the
first bytes it copies against the image formats it knows, and stops at the cap even
when the file grows while it is read.

Anything wrong with the *source* raises :class:`ImageRejected` with a short reason: one
image that cannot be copied is archived as its placeholder, never a reason to refuse
an archive. Failures writing the store's own file are ``OSError`` as for every other
store write (a storage failure of the whole transaction).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import Final

from engine import jsonio

__all__ = [
    "COPY_CHUNK",
    "MAX_IMAGE_BYTES",
    "ImageRejected",
    "copy_image",
    "probe_image",
    "sniff_image",
]

MAX_IMAGE_BYTES: Final = 32 * 1024 * 1024
"""Largest image copied (32 MiB: a phone photo is a few MiB, a PNG screenshot of a
5k display about 20)."""

COPY_CHUNK: Final = 1024 * 1024
"""Bytes read and written per step of a copy (its whole memory cost)."""

HEAD_BYTES: Final = 512
"""Bytes :func:`sniff_image` needs to tell every format it knows."""

_OPEN_FLAGS: Final = (
    os.O_RDONLY
    # a FIFO planted after the type check must not hang the archive on open
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)

_FILE_TYPES: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class ImageRejected(Exception):
    """A host file that is not copied; ``reason`` says why in a few words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def sniff_image(head: bytes) -> str | None:
    """The image format that ``head`` (a file's first bytes) starts: ``png``, ``jpeg``,
    ``gif``, ``webp``, ``bmp``, ``tiff``, ``heif``, ``avif``, ``svg``; None otherwise."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    if head.startswith(b"BM") and len(head) >= 26:
        return "bmp"
    if head.startswith((b"II*\x00", b"MM\x00*")):
        return "tiff"
    if head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand in (b"avif", b"avis"):
            return "avif"
        if brand in (b"heic", b"heix", b"mif1"):
            return "heif"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith(b"<svg") or (text.startswith(b"<?xml") and b"<svg" in text):
        return "svg"
    return None


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB"


def _read_error(exc: OSError) -> ImageRejected:
    if exc.errno == errno.ENOENT:
        return ImageRejected("the file is gone")
    if exc.errno == errno.ELOOP:
        return ImageRejected("a symlink loop")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return ImageRejected("not readable (permission denied)")
    if exc.errno == errno.ENOTDIR:
        return ImageRejected("a path component is not a directory")
    name = errno.errorcode.get(exc.errno or 0, "error")
    return ImageRejected(f"unreadable ({name})")


def _check_stat(st: os.stat_result, max_bytes: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        what = next((label for test, label in _FILE_TYPES if test(st.st_mode)), "not a file")
        raise ImageRejected(f"{what}, not a regular file")
    if st.st_size == 0:
        raise ImageRejected("an empty file")
    if st.st_size > max_bytes:
        raise ImageRejected(f"{_mib(st.st_size)}, larger than the {_mib(max_bytes)} limit")


def _open(path: Path, max_bytes: int) -> int:
    """A read descriptor on the regular file at ``path`` within ``max_bytes``."""
    try:
        _check_stat(os.stat(path), max_bytes)  # a FIFO or a device is never opened
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise _read_error(exc) from exc
    except ValueError as exc:  # a NUL byte, an unencodable character
        raise ImageRejected("not a usable path") from exc
    try:
        _check_stat(os.fstat(fd), max_bytes)  # what was opened, if it changed meanwhile
    except BaseException:
        os.close(fd)
        raise
    return fd


def probe_image(path: Path, *, max_bytes: int = MAX_IMAGE_BYTES) -> str:
    """The image format of the file at ``path`` by its first bytes (see
    :func:`sniff_image`); :class:`ImageRejected` when it is not one we copy. Blocking."""
    fd = _open(path, max_bytes)
    try:
        try:
            head = os.read(fd, HEAD_BYTES)
        except OSError as exc:
            raise _read_error(exc) from exc
    finally:
        os.close(fd)
    kind = sniff_image(head)
    if kind is None:
        raise ImageRejected("not an image by its first bytes")
    return kind


def copy_image(source: Path, target: Path, *, max_bytes: int = MAX_IMAGE_BYTES) -> str:
    """Copy the image file ``source`` to the new file ``target`` (created exclusively,
    fsynced; not published: the caller renames it into place). Returns its format.

    Raises :class:`ImageRejected` for anything wrong with the source, including a file
    that grows past ``max_bytes`` during the copy; ``target`` is then removed. An
    ``OSError`` is a failure writing ``target``.
    """
    fd = _open(source, max_bytes)
    created = False
    try:
        buf = bytearray(COPY_CHUNK)
        view = memoryview(buf)
        total = 0
        kind: str | None = None
        while True:
            want = min(COPY_CHUNK, max_bytes + 1 - total)
            try:
                n = os.readv(fd, [view[:want]])
            except OSError as exc:
                raise _read_error(exc) from exc
            if n == 0:
                break
            if kind is None:
                # the bytes copied are the bytes checked, whatever the path held earlier
                kind = sniff_image(bytes(view[: min(n, HEAD_BYTES)]))
                if kind is None:
                    raise ImageRejected("not an image by its first bytes")
            total += n
            if total > max_bytes:
                raise ImageRejected(f"grew past the {_mib(max_bytes)} limit while copied")
            chunk = bytes(view[:n])
            if created:
                jsonio.fs.append_sync(target, chunk)
            else:
                created = True  # from here a failure removes the (unique, temp) target
                jsonio.fs.create_write_sync(target, chunk)
        if kind is None:
            raise ImageRejected("an empty file")
    except BaseException:
        if created:
            with contextlib.suppress(OSError):
                jsonio.fs.unlink(target)
        raise
    finally:
        os.close(fd)
    return kind
