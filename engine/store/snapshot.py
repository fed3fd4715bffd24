"""A consistent copy of a session store that a daemon may be writing meanwhile.

Why this is safe without stopping the daemon. The store's writers never change a file
in place except by appending: every JSON file is replaced whole (temp file, fsync,
rename: one read of it sees one whole version), a folder appears by one rename of its
complete staging directory, and the order of each writer is fixed
(:mod:`engine.store.transaction`, :mod:`engine.store.indexfile`):

* an archive writes its images, then renames its folders into place, then rewrites
  ``index.json``, and only then is it answered: a folder committed before the snapshot
  began is in every ``index.json`` read after that, and its files and images are on disk;
* a rollback (``archive/abort``) or a deletion (``memory_forget``) rewrites
  ``index.json`` without the folders first and removes their files after: a folder whose
  files are going is, by then, missing from the current ``index.json``;
* a judge call appends its rows to ``index.log.jsonl`` and then replaces the metas: a
  meta read later may be newer than the index rows read earlier, never older.

So :func:`plan_snapshot` reads, in this order: the small state files that name folders
(``session.json``, ``recall-state.json``, ``memory-control.json``, …; ``*.jsonl``
telemetry up to the length it has then, cut after its last whole line), then
``index.json``, then the log (whole lines); :func:`copy_snapshot` copies the folders
that index names, each file read once, then the images their metas name. Everything the
state files mention was indexed before the index was read; every folder committed
before the start is in that index, and its copy is complete. A folder whose copy is not
complete (or whose image is missing) is checked against the current ``index.json``:
gone from it, it was being removed and is left out; still indexed, it is damaged in the
store itself and is copied as it is and reported, never hidden. Nothing else of the
directory is taken: journals, staging folders and temp files are a writer's work in
progress (the folders of an archive under way are not yet indexed, so not copied),
``.reindex.json`` is superseded below, and derived caches named by the caller (the
relevance snapshot) are rebuilt by the daemon.

The copy is then made a store by the store's own rules: the image table is rebuilt from
the copied metas, a reindex marker names every copied folder, and recovery
(:func:`engine.store.recovery.recover`) replays the copied log, makes every row its
copied meta's (keeping index-only fields such as ``pendingEra``), drops rows of folders
left out, and rewrites ``index.json``. :func:`verify_store` then opens it again: a
second recovery must find nothing to do, every indexed folder must be on disk and every
folder indexed, each row must equal what its meta gives, each image a meta names must be
there and in the table. That is what "opens cleanly" means for a backup and a restore.

Writes go through :data:`engine.jsonio.fs`, into a directory the caller owns (never the
store read); the copy is made durable in one batch, unless the caller makes it durable
as a whole later (``durable=False``: a backup fsyncs its tree, or packs it into one file).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Container
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine import jsonio
from engine.jsonio import is_temp_name, write_json_atomic
from engine.store.errors import CorruptFolderError
from engine.store.folders import read_context, read_meta, validate_folder
from engine.store.ids import is_folder_id, is_safe_name
from engine.store.images import ImagesIndex, image_files, image_row
from engine.store.indexfile import IndexStatus, read_index, write_index
from engine.store.layout import JOURNAL_PREFIX, STAGING_PREFIX, SessionPaths
from engine.store.readonly import read_image_table, read_store
from engine.store.records import FolderMeta, ImageIndexEntry, index_row_from_meta
from engine.store.recovery import LoadReport, recover

__all__ = [
    "APPEND_ONLY_SUFFIX",
    "FolderRead",
    "SnapshotPlan",
    "SnapshotReport",
    "copy_snapshot",
    "plan_snapshot",
    "read_folder",
    "verify_store",
    "whole_lines",
]

APPEND_ONLY_SUFFIX = ".jsonl"
"""Files the store only appends to (telemetry): copied up to the length seen first."""


def whole_lines(data: bytes) -> bytes:
    """``data`` up to and including its last line end (a line being appended is left
    out: it was not whole when the snapshot read it)."""
    return data[: data.rfind(b"\n") + 1]


@dataclass(frozen=True, slots=True)
class SnapshotPlan:
    """What a store held when its snapshot began, read in the module docstring's order."""

    paths: SessionPaths
    side_files: tuple[tuple[str, bytes], ...]
    """Top-level state files (name, content as read), the index pair excepted."""
    index_rows: tuple[Any, ...]
    index_extra: dict[str, Any]
    index_status: IndexStatus
    log: bytes
    """``index.log.jsonl``, whole lines."""
    folder_ids: tuple[str, ...]
    """The folders to copy: those the index names (in its order); when the index is
    missing or unreadable, the complete-looking ``mem-…`` directories (the folders are
    the truth, recovery's rule)."""


@dataclass(slots=True)
class SnapshotReport:
    """What :func:`copy_snapshot` copied, left out and found damaged."""

    folders: list[str] = field(default_factory=list)
    """Folders copied (the damaged ones included)."""
    gone: list[str] = field(default_factory=list)
    """Indexed when the snapshot began, removed from the store while it ran."""
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    """(folder, reason): damaged in the store itself; copied as they are."""
    images: int = 0
    missing_images: list[tuple[str, str]] = field(default_factory=list)
    """(folder, image) that a meta names and the store does not have."""
    bytes: int = 0
    repair: LoadReport | None = None
    """What recovery did to make the copy a store (rows re-derived, rows dropped)."""


def _special(name: str) -> bool:
    """Names a writer's work in progress, or the index pair (planned on their own)."""
    return (
        is_temp_name(name)
        or name.startswith((JOURNAL_PREFIX, STAGING_PREFIX))
        or name in ("index.json", "index.log.jsonl", ".reindex.json")
    )


def _read_prefix(path: Path, limit: int) -> bytes:
    with path.open("rb") as fh:
        return whole_lines(fh.read(limit))


def _side_files(paths: SessionPaths, leave_out: Container[str]) -> list[tuple[str, bytes]]:
    """Top-level regular files, each read once (append-only ones up to their length now)."""
    sizes: list[tuple[str, int]] = []
    with os.scandir(paths.dir) as it:
        for entry in it:
            name = entry.name
            if _special(name) or name in leave_out or not entry.is_file(follow_symlinks=False):
                continue
            sizes.append((name, entry.stat(follow_symlinks=False).st_size))
    out: list[tuple[str, bytes]] = []
    for name, size in sorted(sizes):
        path = paths.dir / name
        try:
            if name.endswith(APPEND_ONLY_SUFFIX):
                out.append((name, _read_prefix(path, size)))
            else:
                out.append((name, path.read_bytes()))
        except FileNotFoundError:
            continue  # replaced or removed meanwhile: a later version is not ours to take
    return out


def _ids(rows: tuple[Any, ...]) -> list[str]:
    ids: dict[str, None] = {}
    for row in rows:
        fid = row.get("id") if isinstance(row, dict) else None
        if isinstance(fid, str) and is_folder_id(fid):
            ids.setdefault(fid)
    return list(ids)


def _folder_dirs(paths: SessionPaths) -> list[str]:
    with os.scandir(paths.dir) as it:
        return sorted(
            e.name for e in it if is_folder_id(e.name) and e.is_dir(follow_symlinks=False)
        )


def plan_snapshot(
    paths: SessionPaths, *, leave_out: Container[str] = (), state_files: bool = True
) -> SnapshotPlan:
    """Read what a snapshot of the store at ``paths`` starts from (module docstring).
    ``leave_out``: top-level names not to take (derived caches); ``state_files=False``:
    none (a reader of the folders only). Blocking; reads only."""
    side = _side_files(paths, leave_out) if state_files else []
    raw, extra, status = read_index(paths)
    rows = tuple(raw)
    try:
        log = _read_prefix(paths.index_log, paths.index_log.stat().st_size)
    except FileNotFoundError:
        log = b""
    ids = _ids(rows) if status == "ok" else _folder_dirs(paths)
    return SnapshotPlan(paths, tuple(side), rows, extra, status, log, tuple(ids))


def _indexed_now(paths: SessionPaths, folder_id: str) -> bool:
    """Whether the store's current ``index.json`` still names ``folder_id`` (a folder
    being removed has left it before its files go)."""
    raw, _, status = read_index(paths)
    return status != "ok" or folder_id in _ids(tuple(raw))


def _read_folder(paths: SessionPaths, folder_id: str) -> dict[str, bytes] | None:
    """Every regular file of a folder, each read once; None when the folder is gone."""
    folder = paths.folder(folder_id)
    try:
        with os.scandir(folder) as it:
            names = sorted(
                e.name for e in it if e.is_file(follow_symlinks=False) and not is_temp_name(e.name)
            )
    except (FileNotFoundError, NotADirectoryError):
        return None
    files: dict[str, bytes] = {}
    for name in names:
        try:
            files[name] = (folder / name).read_bytes()
        except FileNotFoundError:
            continue  # validation below decides whether that matters
    return files


@dataclass(frozen=True, slots=True)
class FolderRead:
    """One folder of a plan as read in place: its meta and messages, or ``gone`` (removed
    meanwhile), or ``reason`` (damaged in the store)."""

    folder_id: str
    meta: FolderMeta | None = None
    messages: list[dict[str, Any]] | None = None
    gone: bool = False
    reason: str | None = None


def read_folder(plan: SnapshotPlan, folder_id: str) -> FolderRead:
    """Read one planned folder without copying it (an export), by the rules
    :func:`copy_snapshot` copies it by."""
    for attempt in (1, 2):
        try:
            meta = read_meta(plan.paths, folder_id)
            messages = read_context(plan.paths, folder_id)
        except CorruptFolderError as exc:
            if not _indexed_now(plan.paths, folder_id):
                return FolderRead(folder_id, gone=True)
            if attempt == 2:
                return FolderRead(folder_id, reason=exc.reason)
            continue
        return FolderRead(folder_id, meta, messages)
    raise AssertionError("unreachable")  # pragma: no cover


class _Writer:
    """Files written into the copy, handed to the disk as they go (``fsync_all``)."""

    def __init__(self) -> None:
        self.written: list[Path] = []
        self.bytes = 0

    def mkdir(self, path: Path) -> None:
        jsonio.fs.mkdir(path)
        self.written.append(path)

    def write(self, path: Path, data: bytes) -> None:
        jsonio.fs.create_write(path, data)
        self.written.append(path)
        self.bytes += len(data)


def _copy_folder(
    plan: SnapshotPlan, dst: SessionPaths, folder_id: str, out: _Writer
) -> tuple[str, FolderMeta | None, str | None]:
    """Copy one folder: ``("copied", meta, None)``, ``("gone", None, None)`` or
    ``("unreadable", None, reason)`` (module docstring)."""
    src = plan.paths
    target = dst.folder(folder_id)
    for attempt in (1, 2):
        files = _read_folder(src, folder_id)
        if attempt == 2:
            jsonio.fs.rmtree(target)
        if files is None:
            return "gone", None, None
        out.mkdir(target)
        for name, data in files.items():
            out.write(target / name, data)
        try:
            meta = validate_folder(dst, folder_id)
        except CorruptFolderError as exc:
            if not _indexed_now(src, folder_id):
                jsonio.fs.rmtree(target)
                return "gone", None, None
            if attempt == 2:
                return "unreadable", None, exc.reason
            continue
        return "copied", meta, None
    raise AssertionError("unreachable")  # pragma: no cover


def _copy_images(
    plan: SnapshotPlan,
    dst: SessionPaths,
    metas: dict[str, FolderMeta],
    out: _Writer,
    rep: SnapshotReport,
) -> list[str]:
    """Copy the images the copied metas name; returns the folders that turned out gone."""
    gone: list[str] = []
    for fid, meta in metas.items():
        for ref in meta.images or ():
            if not is_safe_name(ref.name):
                rep.missing_images.append((fid, ref.name))
                continue
            try:
                data = plan.paths.image(ref.name).read_bytes()
            except (FileNotFoundError, IsADirectoryError):
                if not _indexed_now(plan.paths, fid):
                    gone.append(fid)
                    break
                rep.missing_images.append((fid, ref.name))
                continue
            if not dst.images_dir.exists():
                out.mkdir(dst.images_dir)
            target = dst.image(ref.name)
            if not target.exists():
                out.write(target, data)
                rep.images += 1
    return gone


def _write_image_table(dst: SessionPaths, metas: dict[str, FolderMeta]) -> None:
    """The image table of the copy, from the copied metas (the table is derived data: the
    store's own rebuild would read every meta again)."""
    table = ImagesIndex(dst)
    table.ensure_loaded(list)  # none copied: an empty table, nothing written yet
    for meta in metas.values():
        for ref in meta.images or ():
            if table.get(ref.name) is None and dst.image(ref.name).is_file():
                table.put(image_row(meta, ref.name))
    if table.entries():
        table.write()


def copy_snapshot(
    plan: SnapshotPlan,
    dst: SessionPaths,
    *,
    durable: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> SnapshotReport:
    """Copy the store ``plan`` was read from into the empty or absent ``dst.dir`` and make
    the copy a consistent store (module docstring). ``durable``: made so before this
    returns (``False``: a copy about to be packed and removed need not be).
    ``progress(done, total)`` is told after each folder. Blocking."""
    rep = SnapshotReport()
    out = _Writer()
    out.mkdir(dst.dir)
    for name, data in plan.side_files:
        out.write(dst.dir / name, data)
    if plan.index_status == "ok":
        out.bytes += write_index(dst, plan.index_rows, plan.index_extra)
    if plan.log:
        out.write(dst.index_log, plan.log)
    metas: dict[str, FolderMeta] = {}
    total = len(plan.folder_ids)
    for n, fid in enumerate(plan.folder_ids, 1):
        outcome, meta, reason = _copy_folder(plan, dst, fid, out)
        if outcome == "gone":
            rep.gone.append(fid)
        else:
            rep.folders.append(fid)
            if meta is not None:
                metas[fid] = meta
            if reason is not None:
                rep.unreadable.append((fid, reason))
        if progress is not None:
            progress(n, total)
    for fid in _copy_images(plan, dst, metas, out, rep):
        jsonio.fs.rmtree(dst.folder(fid))
        rep.folders.remove(fid)
        del metas[fid]
        rep.missing_images = [(f, i) for f, i in rep.missing_images if f != fid]
        rep.gone.append(fid)
    if durable:
        jsonio.fs.fsync_all(p for p in out.written if p.exists())
    rep.bytes = out.bytes
    _write_image_table(dst, metas)
    write_json_atomic(dst.reindex_marker, {"version": 1, "folders": rep.folders})
    rep.repair = recover(dst).report
    jsonio.fs.fsync_dir(dst.dir)
    return rep


def verify_store(paths: SessionPaths, *, damaged: Container[str] = ()) -> list[str]:
    """Problems that keep the store at ``paths`` from opening cleanly (module docstring);
    empty when it is consistent. ``damaged``: folders known to be unreadable (copied so
    from a damaged store), reported elsewhere and not counted here. Runs recovery (it
    writes only what it finds to repair, which a clean store does not need)."""
    report = recover(paths).report
    problems: list[str] = []
    corrupt = [c for c in report.corrupt_folders if c.folder_id not in damaged]
    checks: list[tuple[str, list[str]]] = [
        ("index.json unreadable", ["index.json"] if report.index_status == "corrupt" else []),
        ("index rewritten on open", ["index.json"] if report.index_rewritten else []),
        ("folders not indexed", report.adopted),
        ("indexed folders missing", report.missing_folders),
        ("index rows dropped", report.dropped_entries),
        ("rows behind their meta", report.reindexed),
        ("duplicate folders", report.duplicate_folders),
        ("incomplete folders", report.removed_incomplete),
        ("unreadable folders", [f"{c.folder_id} ({c.reason})" for c in corrupt]),
        ("journals left", [j.txn_id for j in report.journals]),
        ("temp files left", report.temp_removed),
    ]
    problems.extend(f"{what}: {', '.join(items)}" for what, items in checks if items)
    store = read_store(paths, "")
    if store.log_records or store.log_skipped:
        problems.append("index.log.jsonl left after a rewrite")
    on_disk = set(store.folder_dirs)
    rows_off: list[str] = []
    images_off: list[str] = []
    unreadable: list[str] = []
    table = {e.name: e for e in read_image_table(paths).entries}
    named: set[str] = set()
    for fid, entry in store.entries.items():
        if fid not in on_disk or fid in damaged:
            continue
        try:
            meta = validate_folder(paths, fid)
        except CorruptFolderError as exc:
            if all(c.folder_id != fid for c in corrupt):
                unreadable.append(f"{fid} ({exc.reason})")
            continue
        row = entry.row()
        if index_row_from_meta(meta, row) != row:
            rows_off.append(fid)
        for ref in meta.images or ():
            named.add(ref.name)
            held = table.get(ref.name)
            if not is_safe_name(ref.name) or not paths.image(ref.name).is_file():
                images_off.append(f"{ref.name} of {fid} missing")
            elif held is None or held.model_dump() != _table_row(meta, ref.name):
                images_off.append(f"{ref.name} of {fid} not in the image table")
    if unreadable:
        problems.append(f"unreadable folders: {', '.join(unreadable)}")
    if rows_off:
        problems.append(f"index rows differ from their meta: {', '.join(rows_off)}")
    stray = sorted((image_files(paths) - named) | (set(table) - named))
    if stray:
        images_off.append(f"images no copied meta names: {', '.join(stray)}")
    if images_off:
        problems.append("images: " + "; ".join(images_off))
    return problems


def _table_row(meta: FolderMeta, name: str) -> dict[str, Any]:
    return ImageIndexEntry.model_validate(image_row(meta, name)).model_dump()
