"""Is this host file an image we may copy into the store? By its first bytes and size.

A host's `attachment.hostPath` is a path the host says holds the image; copying
whatever is there would let any readable file (a key, a database) into `images/`,
from where it is listed and served again. So a file is copied only when it is a
regular file no larger than :data:`MAX_IMAGE_BYTES` whose first bytes are those of
a common image format; anything else is archived as the placeholder alone.

This is the planning-time look (it names the stored file by the format it finds); the
copy at commit checks again on what it actually reads (`engine.store.image_copy`, the
one implementation of both), since the file may change in between.
"""

from __future__ import annotations

from pathlib import Path

from engine.store.image_copy import MAX_IMAGE_BYTES, ImageRejected, probe_image

__all__ = ["MAX_IMAGE_BYTES", "image_kind"]


def image_kind(path: Path, *, max_bytes: int = MAX_IMAGE_BYTES) -> str | None:
    """The image format of the regular file at `path` (`png`, `jpeg`, `gif`, `webp`,
    `bmp`, `tiff`, `heif`, `avif`, `svg`), or None: not a regular file, unreadable,
    empty, larger than `max_bytes`, or not an image by its first bytes. Blocking."""
    try:
        return probe_image(path, max_bytes=max_bytes)
    except ImageRejected:
        return None
