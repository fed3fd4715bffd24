"""Archived images: run-stamped names, placeholders, and what to copy (reference §1.7).

An image block becomes ``[图片：（<name>）]`` in the archived text. With an
``attachment.hostPath`` that is an image file (by its first bytes and size,
`engine.archive.image_check`) and the connection's ``attachments`` capability, its bytes
are copied to the session's ``images/<name>`` and recorded in ``meta.images``; without one
only the placeholder remains and the caller gets a warning.

Names are ``img-<runStamp>-<seq>-<i>.<ext>``: the run stamp keeps a later archive of a
rebuilt session from overwriting older files. Nothing of the host's own file name goes
into it: the stem is made of the run stamp and two integers, and the extension comes from
a fixed ASCII table, by the file's first bytes when it was read, else by the media type,
else by the attachment name's extension, else ``png``. So no attachment name (full-width
letters, path separators, control characters, an unknown extension) can make the store
refuse the name and with it the whole archive. The host's name is kept in the image's
``meta.images`` entry as ``originalName``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from engine import texts
from engine.archive.surface import Node, well_formed
from engine.compat.media import StagedMessage, replace_image_paths
from engine.config.limits import MAX_SAFE_INTEGER

__all__ = [
    "IMAGE_EXTENSIONS",
    "PlannedImage",
    "image_extension",
    "image_ref",
    "plan_images",
    "plan_staged_images",
    "run_stamp",
]

_KIND_EXT: Final = {
    "png": "png",
    "jpeg": "jpg",
    "gif": "gif",
    "webp": "webp",
    "bmp": "bmp",
    "tiff": "tiff",
    "heif": "heic",
    "avif": "avif",
    "svg": "svg",
}
"""Stored extension per format found by `image_check.image_kind`."""

_MEDIA_EXT: Final = {
    "image/png": "png",
    "image/apng": "png",
    "image/jpeg": "jpg",
    "image/jpg": "jpg",
    "image/pjpeg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
    "image/bmp": "bmp",
    "image/x-ms-bmp": "bmp",
    "image/tiff": "tiff",
    "image/heic": "heic",
    "image/heif": "heic",
    "image/avif": "avif",
    "image/svg+xml": "svg",
}

_NAME_EXT: Final = {
    "png": "png",
    "jpg": "jpg",
    "jpeg": "jpg",
    "jpe": "jpg",
    "gif": "gif",
    "webp": "webp",
    "bmp": "bmp",
    "tif": "tiff",
    "tiff": "tiff",
    "heic": "heic",
    "heif": "heic",
    "avif": "avif",
    "svg": "svg",
}

IMAGE_EXTENSIONS: Final = frozenset(_KIND_EXT.values())
"""Every extension a stored image name can have."""

_MEDIA_TYPES: Final = {
    "png": "image/png",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "bmp": "image/bmp",
    "tiff": "image/tiff",
    "heif": "image/heic",
    "avif": "image/avif",
    "svg": "image/svg+xml",
}

MAX_ORIGINAL_NAME: Final = 255
"""Characters of the host's file name kept in ``originalName``."""


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


def image_extension(att: Mapping[str, Any], kind: str | None = None) -> str:
    """The stored extension: by the file's format ``kind`` (its first bytes) if known,
    else the attachment's media type, else its name's extension (NFKC, so ``ｐｎｇ`` is
    ``png``), else ``png``. Always one of :data:`IMAGE_EXTENSIONS`."""
    if kind is not None and kind in _KIND_EXT:
        return _KIND_EXT[kind]
    media = att.get("mediaType")
    if isinstance(media, str):
        ext = _MEDIA_EXT.get(media.split(";", 1)[0].strip().lower())
        if ext is not None:
            return ext
    name = att.get("name")
    if isinstance(name, str) and "." in name:
        tail = unicodedata.normalize("NFKC", well_formed(name.rsplit(".", 1)[1]))
        ext = _NAME_EXT.get(tail.strip().lower())
        if ext is not None:
            return ext
    return "png"


def image_ref(
    att: Mapping[str, Any], name: str, placeholder: str, kind: str | None
) -> dict[str, Any]:
    """The ``meta.images`` entry: only well-typed host fields, so none can make the folder
    meta invalid (and the archive fail)."""
    ref: dict[str, Any] = {"name": name, "placeholder": placeholder}
    for key in ("mediaType", "attachmentId"):
        value = att.get(key)
        if isinstance(value, str) and value:
            ref[key] = well_formed(value)
    if "mediaType" not in ref and kind in _MEDIA_TYPES:
        ref["mediaType"] = _MEDIA_TYPES[kind]
    for key in ("width", "height", "bytes"):
        value = att.get(key)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if type(value) is int and 0 <= value <= MAX_SAFE_INTEGER:
            ref[key] = value
    original = att.get("name")
    if isinstance(original, str) and original:
        ref["originalName"] = well_formed(original)[:MAX_ORIGINAL_NAME]
    return ref


def plan_images(
    nodes: Sequence[Node], *, stamp: str, readable: Mapping[str, str], attachments: bool
) -> tuple[dict[tuple[int, int], PlannedImage], list[str]]:
    """Name every image of ``nodes``; (by (pos, index), warnings).

    ``readable``: host paths that hold an image, with its format by the first bytes
    (`image_check.image_kind`); any other path is archived as the placeholder alone.
    """
    out: dict[tuple[int, int], PlannedImage] = {}
    warnings: list[str] = []
    for node in nodes:
        for img in node.images:
            att = img.attachment
            path = img.host_path
            kind = readable.get(path) if path is not None else None
            name = f"img-{stamp}-{node.seq}-{img.index}.{image_extension(att, kind)}"
            placeholder = texts.ARCHIVE_IMAGE_PLACEHOLDER.format(name=name)
            ref = image_ref(att, name, placeholder, kind)
            usable = path if (attachments and kind is not None) else None
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


def plan_staged_images(
    nodes: Sequence[Node], staged: Mapping[str, StagedMessage], *, stamp: str
) -> tuple[list[Node], dict[tuple[int, int], PlannedImage]]:
    """onebot images (reference §3.2.7 step 4): in each user node whose message has
    staged copies (``engine.compat.media``), every ``[图片:<path>]`` of a staged path
    becomes the placeholder of a stored image ``qq-<runStamp>-<seq>-<i>.<ext>``, copied
    from the staging area by the same transaction as every other archived image. Their
    indexes follow the node's image blocks. (the nodes with their text rewritten, the
    images by (pos, index)); nodes without staged images come back unchanged."""
    out_nodes: list[Node] = []
    images: dict[tuple[int, int], PlannedImage] = {}
    for node in nodes:
        message = staged.get(node.message_id) if node.message_id and node.is_user else None
        if message is None:
            out_nodes.append(node)
            continue
        first = len(node.images)
        planned: dict[str, PlannedImage] = {}
        for i, copy in enumerate(message.images):
            if copy.path in planned:
                continue
            name = f"qq-{stamp}-{node.seq}-{i}.{image_extension({}, copy.kind)}"
            placeholder = texts.ARCHIVE_IMAGE_PLACEHOLDER.format(name=name)
            original = copy.path.replace("\\", "/").rsplit("/", 1)[-1]
            ref = image_ref({"bytes": copy.bytes, "name": original}, name, placeholder, copy.kind)
            host = str(message.dir / copy.file)
            planned[copy.path] = PlannedImage(node.seq, first + i, name, placeholder, ref, host)
        by_path = {path: img.placeholder for path, img in planned.items()}
        parts = tuple(
            (kind, replace_image_paths(value, by_path) if kind == "text" else value)
            for kind, value in node.parts
        )
        text = "\n".join(v for k, v in parts if k == "text")
        for img in planned.values():
            if img.placeholder in text:
                images[(node.pos, img.index)] = img
        out_nodes.append(node._replace(parts=parts))
    return out_nodes, images
