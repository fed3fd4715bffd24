"""Is this host file an image we may copy into the store? By its first bytes and size.

A host's `attachment.hostPath` is a path the host says holds the image; copying
whatever is there would let any readable file (a key, a database) into `images/`,
from where it is listed and served again. So a file is copied only when it is a
regular file no larger than :data:`MAX_IMAGE_BYTES` whose first bytes are those of
a common image format; anything else is archived as the placeholder alone.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

__all__ = ["MAX_IMAGE_BYTES", "image_kind"]

MAX_IMAGE_BYTES: Final = 32 * 1024 * 1024
"""Largest image copied (32 MiB: a phone photo is a few MiB, a PNG screenshot of a
5k display about 20)."""

_HEAD_BYTES: Final = 512


def _kind(head: bytes) -> str | None:
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
    if head[4:8] == b"ftyp" and head[8:12] in (b"heic", b"heix", b"mif1", b"avif", b"avis"):
        return "heif"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith(b"<svg") or (text.startswith(b"<?xml") and b"<svg" in text):
        return "svg"
    return None


def image_kind(path: Path, *, max_bytes: int = MAX_IMAGE_BYTES) -> str | None:
    """The image format of the regular file at `path` (`png`, `jpeg`, `gif`, `webp`,
    `bmp`, `tiff`, `heif`, `svg`), or None: not a regular file, unreadable, empty,
    larger than `max_bytes`, or not an image by its first bytes. Blocking."""
    try:
        # O_NONBLOCK: a FIFO planted at the path must not hang the archive on open
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not 0 < st.st_size <= max_bytes:
            return None
        head = os.read(fd, _HEAD_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    return _kind(head)
