"""onebot images: the local paths a message names, which of them may be kept, and the
staging area that holds their copies until the message is archived (reference §3.2.7,
§2.4 path rules).

dsh-onebot-qq downloads an inbound picture into its media directory and writes
``[图片:<absolute path>]`` into the message text. By the time the message is archived
(often hours later) the plugin may have deleted the file, so the copy is taken when the
message arrives (:func:`stage_images`) into ``<memory root>/.staging/<chatKey>-<msgId>/``
and the archive later takes it into the session's ``images/`` (``engine.archive.images``).

A path in a group message is text anyone in the group can type, so a path is kept only
when all of this holds: it names an image by its suffix; its realpath (symlinks
followed) lies inside one of ``compat.mediaRoots`` (each realpath'd too; none
configured: nothing is kept); it is a regular file of at most ``compat.maxImageBytes``;
and its first bytes are an image's (``engine.store.image_copy``, the one copier of host
files). Anything else is refused with a reason, never read past its first bytes, never
copied. Comparison follows the platform: case-sensitive on Linux, case-insensitive
with ``\\`` and ``/`` alike on Windows (``os.path.normcase``).

A staged directory is published by one rename of a complete temp directory (its files
and ``staged.json`` fsynced first), so a reader never sees half a copy. Directories
older than ``compat.stagingTtlMs`` are removed by :func:`clean_staging`; ages come from
the manifest's ``stagedAt`` (the request time it was staged at), for leftovers without
one from the directory's mtime. Blocking: callers run this off the event loop.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from engine import jsonio
from engine.config.paths import resolve_user_path
from engine.jsonio import CorruptJSONError, is_temp_name, read_json, write_json_atomic
from engine.store.ids import is_safe_name, safe_session_id
from engine.store.image_copy import MAX_IMAGE_BYTES, ImageRejected, copy_image

__all__ = [
    "IMAGE_SUFFIXES",
    "STAGING_DIR",
    "StageOutcome",
    "StagedImage",
    "StagedMessage",
    "check_image",
    "clean_staging",
    "image_paths",
    "media_roots",
    "release_staged",
    "replace_image_paths",
    "stage_images",
    "staged_messages",
    "staging_name",
    "staging_root",
]

IMAGE_SUFFIXES: Final = (".jpg", ".jpeg", ".png", ".gif", ".webp", ".bmp")
"""The suffixes that make a ``[图片:…]`` path an image (case-insensitive)."""

STAGING_DIR: Final = ".staging"
"""Under the memory root: hidden, outside every session directory."""

MANIFEST: Final = "staged.json"
_MAX_DIR_NAME: Final = 200

# ``[图片:<path>]``; the colon full-width or not; the path bare or quoted. A bare path
# ends at the first ``]``: onebot's media names never hold one, and a path that did
# would need quoting to be told from the annotation's end.
_ANNOTATION = re.compile(
    r"\[图片[:：][ \t]*(?:\"(?P<dq>[^\"\n]+)\"|'(?P<sq>[^'\n]+)'|(?P<bare>[^\]\n]+?))[ \t]*\]"
)
_WINDOWS_ABSOLUTE = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\[^\\/]+[\\/])")


def _annotated(m: re.Match[str]) -> str:
    return (m.group("dq") or m.group("sq") or m.group("bare") or "").strip()


def _is_path(text: str) -> bool:
    """An absolute local path (POSIX or Windows) with an image suffix. Anything else in
    an annotation (a description, a placeholder ``（name）``, a URL) is not a path."""
    if not text.lower().endswith(IMAGE_SUFFIXES):
        return False
    return text.startswith("/") or _WINDOWS_ABSOLUTE.match(text) is not None


def image_paths(text: str) -> list[str]:
    """The image paths of ``[图片:…]`` annotations in ``text``, each once, in order.
    ``[视频:…]`` and ``[文件:…]`` are not images."""
    if "图片" not in text:
        return []
    found = (_annotated(m) for m in _ANNOTATION.finditer(text))
    return list(dict.fromkeys(p for p in found if _is_path(p)))


def replace_image_paths(text: str, placeholders: Mapping[str, str]) -> str:
    """Every annotation of a path in ``placeholders`` replaced by its placeholder; the
    rest of ``text`` (other annotations included) as it was."""
    if not placeholders:
        return text

    def repl(m: re.Match[str]) -> str:
        return placeholders.get(_annotated(m), m.group(0))

    return _ANNOTATION.sub(repl, text)


def media_roots(roots: Iterable[str], *, home: Path, cwd: Path) -> tuple[str, ...]:
    """``compat.mediaRoots`` as realpaths: ``~`` expanded, a relative root against
    ``cwd`` (the reference kept that for old configs), blank entries skipped."""
    out: list[str] = []
    for root in roots:
        text = root.strip()
        if text:
            out.append(os.path.realpath(resolve_user_path(text, base=cwd, home=home)))
    return tuple(dict.fromkeys(out))


def _inside(path: str, roots: Sequence[str]) -> bool:
    real = os.path.normcase(path)
    for root in roots:
        base = os.path.normcase(root)
        with contextlib.suppress(ValueError):  # another drive (Windows)
            if os.path.commonpath([real, base]) == base:
                return True
    return False


def check_image(path: str, roots: Sequence[str], max_bytes: int) -> str:
    """The realpath of the image at ``path`` if it may be staged; else
    :class:`ImageRejected` with the reason. Reads no byte of the file."""
    if not roots:
        raise ImageRejected("compat.mediaRoots is empty: no image is archived")
    if not os.path.isabs(path):
        raise ImageRejected("not an absolute path on this system")
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError) as exc:
        raise ImageRejected("not a usable path") from exc
    if not _inside(real, roots):
        escaped = _inside(os.path.abspath(path), roots)
        raise ImageRejected(
            "a symlink leading outside compat.mediaRoots"
            if escaped
            else "outside compat.mediaRoots"
        )
    if not real.lower().endswith(IMAGE_SUFFIXES):
        raise ImageRejected("its real file has no image suffix")
    try:
        st = os.stat(real)
    except FileNotFoundError as exc:
        raise ImageRejected("the file is gone") from exc
    except OSError as exc:
        raise ImageRejected(f"unreadable ({exc.strerror or 'error'})") from exc
    if not stat.S_ISREG(st.st_mode):
        raise ImageRejected("not a regular file")
    if st.st_size > max_bytes:
        raise ImageRejected(f"{st.st_size} bytes, larger than compat.maxImageBytes {max_bytes}")
    return real


@dataclass(frozen=True, slots=True)
class StagedImage:
    """One staged copy: the path as the message wrote it, the copy's file name in the
    staging directory, its format by its first bytes, its size."""

    path: str
    file: str
    kind: str
    bytes: int


@dataclass(frozen=True, slots=True)
class StagedMessage:
    """The staged images of one message."""

    dir: Path
    chat_key: str
    message_id: str
    staged_at: int
    images: tuple[StagedImage, ...]


@dataclass(slots=True)
class StageOutcome:
    """What :func:`stage_images` did: the staged message (None: nothing accepted, or it
    was staged before and ``already`` is set) and the refused paths with their reasons."""

    staged: StagedMessage | None = None
    refused: list[tuple[str, str]] = field(default_factory=list)
    already: bool = False


def staging_root(memory_root: Path) -> Path:
    """Where every chat's staged images wait for their archive."""
    return memory_root / STAGING_DIR


def staging_name(chat_key: str, message_id: str) -> str:
    """``<chatKey>-<msgId>`` as one safe directory name (the message id encoded like a
    session id; a name too long for the file system becomes the key's head and a digest
    of both). Distinct pairs can only meet by a digest collision, and the manifest
    records the pair, so even that is detected on read."""
    name = f"{chat_key}-{safe_session_id(message_id)}"
    if len(name) <= _MAX_DIR_NAME and is_safe_name(name):
        return name
    digest = hashlib.sha256(f"{chat_key}\0{message_id}".encode()).hexdigest()[:24]
    return f"{safe_session_id(chat_key)[:64]}-~{digest}"


def _suffix(path: str, kind: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    return ext if ext in IMAGE_SUFFIXES else f".{kind}"


def stage_images(
    memory_root: Path,
    chat_key: str,
    message_id: str,
    paths: Sequence[str],
    *,
    roots: Sequence[str],
    max_bytes: int,
    now_ms: int,
) -> StageOutcome:
    """Copy the acceptable images of ``paths`` into the message's staging directory
    (module docstring). A message staged before (a retried delivery) is left as it is.
    ``OSError``: writing the staging area failed (nothing of it is published)."""
    out = StageOutcome()
    base = staging_root(memory_root)
    target = base / staging_name(chat_key, message_id)
    if target.is_dir():
        out.already = True
        return out
    limit = min(max_bytes, MAX_IMAGE_BYTES)
    accepted: list[tuple[str, str]] = []
    for path in paths:
        try:
            accepted.append((path, check_image(path, roots, limit)))
        except ImageRejected as exc:
            out.refused.append((path, exc.reason))
    if not accepted:
        return out
    jsonio.fs.mkdir(base)
    tmp = jsonio.temp_path(target)
    jsonio.fs.mkdir(tmp)
    images: list[StagedImage] = []
    try:
        for path, real in accepted:
            # a file name of ours: nothing of the sender's name reaches the disk
            tmp_file = tmp / f".{len(images)}.part"
            try:
                kind = copy_image(Path(real), tmp_file, max_bytes=limit)
            except ImageRejected as exc:
                out.refused.append((path, exc.reason))
                continue
            if os.path.realpath(path) != real:  # swapped while copied: not what was checked
                jsonio.fs.unlink(tmp_file)
                out.refused.append((path, "the path changed while it was copied"))
                continue
            name = f"{len(images)}{_suffix(real, kind)}"
            size = tmp_file.stat().st_size
            jsonio.fs.replace(tmp_file, tmp / name)
            images.append(StagedImage(path, name, kind, size))
        if not images:
            jsonio.fs.rmtree(tmp)
            return out
        staged = StagedMessage(target, chat_key, message_id, now_ms, tuple(images))
        write_json_atomic(tmp / MANIFEST, _manifest(staged))
        jsonio.fs.fsync_dir(tmp)
        try:
            jsonio.fs.rename(tmp, target)
        except FileExistsError:  # staged meanwhile under another id of the same chat
            jsonio.fs.rmtree(tmp)
            out.already = True
            return out
    except BaseException:
        with contextlib.suppress(OSError):
            jsonio.fs.rmtree(tmp)
        raise
    jsonio.fs.fsync_dir(base)
    out.staged = staged
    return out


def _manifest(staged: StagedMessage) -> dict[str, Any]:
    return {
        "version": 1,
        "chatKey": staged.chat_key,
        "messageId": staged.message_id,
        "stagedAt": staged.staged_at,
        "images": [
            {"path": i.path, "file": i.file, "kind": i.kind, "bytes": i.bytes}
            for i in staged.images
        ],
    }


def _read_manifest(directory: Path) -> StagedMessage | None:
    """The staged message in ``directory``; None when its manifest is missing, damaged,
    or names a file that is not a plain file of the directory."""
    try:
        doc = read_json(directory / MANIFEST)
    except (OSError, CorruptJSONError):
        return None
    if not isinstance(doc, dict):
        return None
    key, mid, at, rows = (
        doc.get("chatKey"),
        doc.get("messageId"),
        doc.get("stagedAt"),
        doc.get("images"),
    )
    if not (isinstance(key, str) and isinstance(mid, str) and isinstance(rows, list)):
        return None
    images: list[StagedImage] = []
    for row in rows:
        if not isinstance(row, dict):
            return None
        path, name, kind, size = row.get("path"), row.get("file"), row.get("kind"), row.get("bytes")
        if not (
            isinstance(path, str)
            and isinstance(name, str)
            and is_safe_name(name)
            and name != MANIFEST
            and isinstance(kind, str)
            and type(size) is int
        ):
            return None
        images.append(StagedImage(path, name, kind, size))
    staged_at = at if type(at) is int else 0
    return StagedMessage(directory, key, mid, staged_at, tuple(images))


def staged_messages(
    memory_root: Path, chat_key: str, message_ids: Iterable[str]
) -> dict[str, StagedMessage]:
    """The staged images of those messages of chat ``chat_key`` that have any, by
    message id; only files still present (one may have been removed by hand)."""
    base = staging_root(memory_root)
    if not base.is_dir():
        return {}
    out: dict[str, StagedMessage] = {}
    for mid in dict.fromkeys(message_ids):
        directory = base / staging_name(chat_key, mid)
        staged = _read_manifest(directory) if directory.is_dir() else None
        if staged is None or (staged.chat_key, staged.message_id) != (chat_key, mid):
            continue
        present = tuple(i for i in staged.images if (directory / i.file).is_file())
        if present:
            out[mid] = StagedMessage(directory, chat_key, mid, staged.staged_at, present)
    return out


def release_staged(directories: Iterable[Path]) -> None:
    """Remove staged directories whose images were archived for good. Best effort: one
    that cannot be removed now goes with its age (:func:`clean_staging`)."""
    for directory in directories:
        with contextlib.suppress(OSError):
            jsonio.fs.rmtree(directory)


def clean_staging(memory_root: Path, now_ms: int, ttl_ms: int) -> list[str]:
    """Remove the staged directories (and leftovers of interrupted stagings) older than
    ``ttl_ms`` at ``now_ms``; the names removed."""
    base = staging_root(memory_root)
    try:
        entries = list(os.scandir(base))
    except (FileNotFoundError, NotADirectoryError):
        return []
    removed: list[str] = []
    for entry in entries:
        path = Path(entry.path)
        staged = None if is_temp_name(entry.name) else _read_manifest(path)
        if staged is not None and staged.staged_at > 0:
            born = staged.staged_at
        else:
            try:
                born = int(entry.stat(follow_symlinks=False).st_mtime * 1000)
            except OSError:
                continue
        if now_ms - born > ttl_ms:
            if entry.is_dir(follow_symlinks=False):
                jsonio.fs.rmtree(path)
            else:
                jsonio.fs.unlink(path)
            removed.append(entry.name)
    return removed
