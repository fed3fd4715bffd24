"""The backup format of `rofmd backup` / `rofmd restore`: a directory, or the same tree
as one tar.zst file.

    rofmd-backup.json   the manifest (below)
    memory/             part of a memory root as it was: sessions/<name>/… (every session,
                        or the one `--session` named), or the store itself (global layout)

The manifest::

    {"format": "rofmd-backup", "version": 1, "createdAt": <ms>, "rofmdVersion": "…",
     "scope": "root" | "session", "layout": "per-session" | "global",
     "sessions": [{"id", "dir", "folders", "images", "gone", "unreadable"}],
     "files": [[<path>, <size>, <blake2b-128 hex>], …], "bytes": <total>}

``files`` lists every file of the backup but the manifest, so a restore knows before it
writes anything what it will write, and checks after that it wrote exactly that.

Why a restore checks so much before writing: an archive is input from outside (a copy
that travelled, a file someone handed over). Its member names are relative, with no
``..``, no absolute path and only the characters store names use, under ``memory/``;
its members are regular files and directories only (no symlink, hard link, device,
FIFO or sparse file); each file is listed in the manifest with its size, the total fits
the free space of the target's file system, and nothing is unpacked with tarfile's own
extraction (which would honour modes, owners, links). Files are written 0600 and
directories 0700 under the CLI's umask, whatever the archive says.

The tar is written member by member in a fixed order with fixed owners, modes and times
(the backup's ``createdAt``), so the same snapshot gives the same bytes.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import stat
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson
import zstandard

from engine import jsonio
from engine.jsonio import atomic_stream, dumps_json
from engine.store.ids import previous_session_dir_name
from rofmd.cli.where import CliError

__all__ = [
    "FORMAT",
    "MANIFEST",
    "TREE",
    "BackupError",
    "Member",
    "check_backup",
    "describe_files",
    "digest",
    "publish_dir",
    "unpack",
    "write_tar_zst",
]

FORMAT = "rofmd-backup"
VERSION = 1
MANIFEST = "rofmd-backup.json"
TREE = "memory"
MAX_MANIFEST_BYTES = 256 * 1024 * 1024
MAX_MEMBERS = 5_000_000
MAX_DEPTH = 6
"""memory/sessions/<name>/mem-…/meta.json is 5 deep; one more for what a newer version adds."""
ZSTD_LEVEL = 6
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_NAME_RE = re.compile(r"^[A-Za-z0-9._~-]{1,255}\Z")
CHUNK = 1 << 20

Kind = Literal["file", "dir"]


class BackupError(CliError):
    """The backup cannot be used (or written): one readable line, exit 1."""


@dataclass(frozen=True, slots=True)
class Member:
    """One entry of a backup as read: its path inside the backup, kind and size."""

    path: str
    kind: Kind
    size: int


def digest(data: bytes) -> str:
    """The manifest's digest of a file's content."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


# ---- writing --------------------------------------------------------------------------


def describe_files(base: Path) -> list[list[Any]]:
    """``[path, size, digest]`` of every file under ``base`` (paths relative to it, POSIX,
    sorted): the manifest's ``files``."""
    out: list[list[Any]] = []
    top = str(base)
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        rel = os.path.relpath(dirpath, top)
        for name in sorted(filenames):
            with open(os.path.join(dirpath, name), "rb") as fh:
                data = fh.read()
            out.append([name if rel == "." else f"{rel}/{name}", len(data), digest(data)])
    return out


def write_manifest(base: Path, manifest: dict[str, Any]) -> None:
    jsonio.fs.create_write(base / MANIFEST, dumps_json(manifest))


def _tree(base: Path) -> Iterator[Path]:
    """Every directory and file under ``base``, parents first, each level sorted."""
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        here = Path(dirpath)
        if here != base:
            yield here
        for name in sorted(filenames):
            yield here / name


def publish_dir(staging: Path, output: Path) -> None:
    """Make every file and directory of ``staging`` durable, then rename it to ``output``
    (which must not exist) and make the rename durable."""
    jsonio.fs.fsync_all([*_tree(staging), staging])
    jsonio.fs.rename(staging, output)
    jsonio.fs.fsync_dir(output.parent)


def _tar_info(name: str, kind: Kind, size: int, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE if kind == "dir" else tarfile.REGTYPE
    info.mode = 0o700 if kind == "dir" else 0o600
    info.size = size
    info.mtime = mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def write_tar_zst(
    staging: Path, output: Path, *, mtime_s: int, progress: Callable[[int], None] | None = None
) -> int:
    """Write ``staging`` (manifest first, then the tree) as ``output``, atomically and
    durably (a temp file beside it, fsync, rename, fsync of the directory); returns its
    size. ``progress(bytes read so far)``."""
    paths = [staging / MANIFEST, *(p for p in _tree(staging) if p != staging / MANIFEST)]
    with atomic_stream(output) as raw:
        zst = zstandard.ZstdCompressor(level=ZSTD_LEVEL).stream_writer(raw, closefd=False)
        with zst, tarfile.open(fileobj=zst, mode="w|", format=tarfile.GNU_FORMAT) as tar:
            done = 0
            for path in paths:
                name = path.relative_to(staging).as_posix()
                if path.is_dir():
                    tar.addfile(_tar_info(name, "dir", 0, mtime_s))
                    continue
                data = path.read_bytes()
                tar.addfile(_tar_info(name, "file", len(data), mtime_s), io.BytesIO(data))
                done += len(data)
                if progress is not None:
                    progress(done)
    return output.stat().st_size


# ---- reading --------------------------------------------------------------------------


def _old_session_dir(part: str) -> bool:
    """A session directory named by the mapping before ids were compared whole (the id,
    ending in a line break): a backup of a store not opened since holds one, and the store
    is renamed when it is next opened."""
    return previous_session_dir_name(part) == part


def _checked_name(raw: str, kind: Kind) -> str:
    """The member's path if it is one a backup can hold (module docstring), else raise."""
    name = raw[:-1] if kind == "dir" and raw.endswith("/") else raw
    if not name or name.startswith("/") or "\\" in name or "\0" in name:
        raise BackupError(f"unsafe path in the backup: {raw!r}")
    parts = name.split("/")
    if any(
        p in (".", "..")
        or not (_NAME_RE.match(p) or (i == 2 and parts[1] == "sessions" and _old_session_dir(p)))
        for i, p in enumerate(parts)
    ):
        raise BackupError(f"unsafe path in the backup: {raw!r}")
    if len(parts) > MAX_DEPTH:
        raise BackupError(f"path too deep in the backup: {raw!r}")
    if name == MANIFEST and kind == "file":
        return name
    if parts[0] != TREE:
        raise BackupError(f"unexpected entry in the backup: {raw!r} (only {MANIFEST}, {TREE}/)")
    return name


def _tar_kind(info: tarfile.TarInfo) -> Kind:
    if info.isdir():
        return "dir"
    if info.isreg() and not info.issparse():
        return "file"
    what = (
        "a symlink"
        if info.issym()
        else "a hard link"
        if info.islnk()
        else "a device"
        if info.isdev()
        else "a special file"
    )
    raise BackupError(f"refused: {info.name!r} is {what} (a backup holds files and directories)")


def _iter_tar(path: Path, want: Callable[[Member], bool]) -> Iterator[tuple[Member, bytes | None]]:
    try:
        with (
            path.open("rb") as fh,
            zstandard.ZstdDecompressor().stream_reader(fh) as zst,
            io.BufferedReader(zst, CHUNK) as reader,  # tarfile reads in 512-byte blocks
            tarfile.open(fileobj=reader, mode="r|") as tar,
        ):
            for info in tar:
                kind = _tar_kind(info)
                member = Member(_checked_name(info.name, kind), kind, int(info.size))
                data = None
                if kind == "file" and want(member):
                    extracted = tar.extractfile(info)
                    assert extracted is not None  # a regular file
                    data = extracted.read()
                yield member, data
    except (tarfile.TarError, zstandard.ZstdError, EOFError) as exc:
        raise BackupError(f"{path}: not a readable tar.zst backup ({exc})") from None


def _iter_dir(base: Path, want: Callable[[Member], bool]) -> Iterator[tuple[Member, bytes | None]]:
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        here = Path(dirpath)
        for name in [*dirnames, *sorted(filenames)]:
            path = here / name
            rel = path.relative_to(base).as_posix()
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                raise BackupError(f"refused: {rel!r} is a symlink (a backup holds files and dirs)")
            if stat.S_ISDIR(mode):
                yield Member(_checked_name(rel, "dir"), "dir", 0), None
            elif stat.S_ISREG(mode):
                member = Member(_checked_name(rel, "file"), "file", path.lstat().st_size)
                yield member, path.read_bytes() if want(member) else None
            else:
                raise BackupError(f"refused: {rel!r} is a special file")


def is_tar_zst(path: Path) -> bool:
    """A file that starts like a zstd frame (else a directory backup is expected)."""
    if not path.is_file():
        return False
    with path.open("rb") as fh:
        return fh.read(4) == ZSTD_MAGIC


def members(path: Path, want: Callable[[Member], bool]) -> Iterator[tuple[Member, bytes | None]]:
    """Every entry of the backup at ``path`` (checked as it comes, module docstring), with
    the content of the files ``want`` asks for."""
    if is_tar_zst(path):
        return _iter_tar(path, want)
    if path.is_dir():
        return _iter_dir(path, want)
    raise BackupError(f"{path}: neither a backup directory nor a tar.zst backup")


def _manifest(data: bytes) -> dict[str, Any]:
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BackupError(f"{MANIFEST}: invalid JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise BackupError(f"{MANIFEST}: not a {FORMAT} manifest")
    if doc.get("version") != VERSION:
        raise BackupError(
            f"{MANIFEST}: version {doc.get('version')!r} (this rofmd reads {VERSION})"
        )
    files = doc.get("files")
    ok = isinstance(files, list) and all(
        isinstance(f, list)
        and len(f) == 3
        and isinstance(f[0], str)
        and isinstance(f[1], int)
        and isinstance(f[2], str)
        for f in files
    )
    if not ok or doc.get("scope") not in ("root", "session"):
        raise BackupError(f"{MANIFEST}: malformed (files, scope)")
    if not isinstance(doc.get("sessions"), list):
        raise BackupError(f"{MANIFEST}: malformed (sessions)")
    return doc


def check_backup(path: Path, *, free_bytes: int) -> dict[str, Any]:
    """Read the backup at ``path`` once, writing nothing, and return its manifest when
    every entry is one it may hold (module docstring), the files are exactly those the
    manifest lists with their sizes, and they fit in ``free_bytes``."""
    found: dict[str, int] = {}
    manifest: dict[str, Any] | None = None
    total = 0
    for n, (member, data) in enumerate(
        members(path, lambda m: m.path == MANIFEST and m.size <= MAX_MANIFEST_BYTES), 1
    ):
        if n > MAX_MEMBERS:
            raise BackupError(f"more than {MAX_MEMBERS} entries: not a rofmd backup")
        if member.kind == "dir":
            continue
        if member.path in found or (member.path == MANIFEST and manifest is not None):
            raise BackupError(f"{member.path!r} appears twice in the backup")
        if member.path == MANIFEST:
            if data is None:
                raise BackupError(f"{MANIFEST} is larger than {MAX_MANIFEST_BYTES} bytes")
            manifest = _manifest(data)
            continue
        total += member.size
        if total > free_bytes:
            raise BackupError(
                f"the backup needs more than the {free_bytes} bytes free where it would go"
            )
        found[member.path] = member.size
    if manifest is None:
        raise BackupError(f"{path}: no {MANIFEST}: not a rofmd backup")
    listed = {f[0]: f[1] for f in manifest["files"]}
    if found != listed:
        extra = sorted(set(found) - set(listed))
        lacking = sorted(set(listed) - set(found))
        sized = sorted(p for p in set(found) & set(listed) if found[p] != listed[p])
        detail = "; ".join(
            f"{what}: {', '.join(items[:3])}"
            for what, items in (
                ("not in the manifest", extra),
                ("missing", lacking),
                ("size differs", sized),
            )
            if items
        )
        raise BackupError(f"the backup does not match its manifest ({detail})")
    return manifest


def unpack(
    path: Path,
    manifest: dict[str, Any],
    prefix: str,
    staging: Path,
    *,
    progress: Callable[[int], None] | None = None,
) -> list[Path]:
    """Write the files of the checked backup at ``path`` under ``prefix`` (``memory/…``)
    into the new directory ``staging`` (their paths relative to ``prefix``), each checked
    against the manifest's size and digest; returns what was written (to be made durable
    by the caller). Nothing outside ``staging`` is touched."""
    listed = {f[0]: (f[1], f[2]) for f in manifest["files"]}
    lead = prefix.rstrip("/") + "/"
    written: list[Path] = [staging]
    jsonio.fs.mkdir(staging)
    made = {staging}
    done = 0

    def target(member_path: str) -> Path:
        rel = member_path[len(lead) :]
        return staging.joinpath(*rel.split("/"))

    for member, data in members(path, lambda m: m.path.startswith(lead)):
        if not member.path.startswith(lead):
            continue
        out = target(member.path)
        if member.kind == "dir":
            if out not in made:
                jsonio.fs.mkdir(out)
                made.add(out)
                written.append(out)
            continue
        assert data is not None
        size, want = listed[member.path]
        if len(data) != size or digest(data) != want:
            raise BackupError(f"{member.path}: content differs from the manifest (damaged)")
        if out.parent not in made:
            jsonio.fs.mkdir(out.parent)
            made.add(out.parent)
            written.append(out.parent)
        jsonio.fs.create_write(out, data)
        written.append(out)
        done += len(data)
        if progress is not None:
            progress(done)
    return written
