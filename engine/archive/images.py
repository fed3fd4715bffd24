"""Archived images: run-stamped names, placeholders, and what to copy (reference §1.7).

An image block becomes ``[图片：（<name>）]`` in the archived text. With an
``attachment.hostPath`` that is an image file (by its first bytes and size,
`engine.archive.image_check`) and the connection's ``attachments`` capability, its bytes
are copied to the session's ``images/<name>`` and recorded in ``meta.images``; without one
only the placeholder remains and the caller gets a warning. Names are
``img-<runStamp>-<seq>-<i>.<ext>``: the run stamp keeps a later archive of a rebuilt
session from overwriting older files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engine import texts
from engine.archive.surface import Node

__all__ = ["PlannedImage", "plan_images", "run_stamp"]

_EXT = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/jpg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
    "image/bmp": "bmp",
    "image/svg+xml": "svg",
}


def run_stamp(now_ms: int) -> str:
    """``YYYYMMDDTHHMMSSmmmZ`` (UTC) of the archive run."""
    dt = datetime.fromtimestamp(now_ms / 1000, tz=UTC)
    return dt.strftime("%Y%m%dT%H%M%S") + f"{now_ms % 1000:03d}Z"


@dataclass(frozen=True, slots=True)
class PlannedImage:
    """One image of the archived span."""

    seq: int
    index: int
    name: str
    placeholder: str
    ref: dict[str, Any]
    host_path: str | None
    """Copy from here (None: placeholder only)."""


def _ext(att: Mapping[str, Any]) -> str:
    media = att.get("mediaType")
    if isinstance(media, str) and media.lower() in _EXT:
        return _EXT[media.lower()]
    name = att.get("name")
    if isinstance(name, str) and "." in name:
        ext = name.rsplit(".", 1)[1].lower()
        if ext.isalnum() and len(ext) <= 5:
            return ext
    return "png"


def plan_images(
    nodes: Sequence[Node], *, stamp: str, readable: frozenset[str], attachments: bool
) -> tuple[dict[tuple[int, int], PlannedImage], list[str]]:
    """Name every image of ``nodes``; (by (pos, index), warnings)."""
    out: dict[tuple[int, int], PlannedImage] = {}
    warnings: list[str] = []
    for node in nodes:
        for img in node.images:
            att = img.attachment
            name = f"img-{stamp}-{node.seq}-{img.index}.{_ext(att)}"
            placeholder = texts.ARCHIVE_IMAGE_PLACEHOLDER.format(name=name)
            ref: dict[str, Any] = {"name": name, "placeholder": placeholder}
            for key in ("mediaType", "width", "height", "bytes", "attachmentId"):
                value = att.get(key)
                if value is not None and not isinstance(value, bool):
                    ref[key] = value
            path = img.host_path
            usable = path if (attachments and path is not None and path in readable) else None
            if usable is None:
                why = (
                    "the host has no attachments capability"
                    if not attachments
                    else "no readable image file at attachment.hostPath"
                )
                warnings.append(
                    f"image-placeholder: image {img.index} of message seq {node.seq} archived"
                    f" as a placeholder only ({why})"
                )
            out[(node.pos, img.index)] = PlannedImage(
                node.seq, img.index, name, placeholder, ref, usable
            )
    return out, warnings
