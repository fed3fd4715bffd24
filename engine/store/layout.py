"""Where each file of a session store lives (reference §4, §1.5).

``per_session=True`` (the default, ``storage.perSession``):
``<root>/sessions/<safe-id>/`` (``safe_session_id``: injective, see
:mod:`engine.store.ids`; the directory records its id, see
:mod:`engine.store.session_dirs`). ``per_session=False`` is the pre-0.2 global
layout, where the store *is* the memory root (``<root>/index.json``,
``<root>/mem-…/``); the session id is then not part of the path.

Every path handed out is checked to resolve inside the root, so even a bug in
id sanitising cannot make the store write elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.store.errors import StoreUnavailableError
from engine.store.ids import check_safe_name, previous_session_dir_name, safe_session_id

__all__ = ["SessionPaths", "session_dir_paths", "session_paths"]

JOURNAL_PREFIX = ".commit-"
STAGING_PREFIX = ".staging-"


@dataclass(frozen=True, slots=True)
class SessionPaths:
    """All paths of one session store."""

    root: Path
    dir: Path

    @property
    def index(self) -> Path:
        return self.dir / "index.json"

    @property
    def index_log(self) -> Path:
        """Index rows changed since ``index.json`` was last written (see ``indexfile``)."""
        return self.dir / "index.log.jsonl"

    @property
    def stats(self) -> Path:
        return self.dir / "stats.jsonl"

    @property
    def recall_state(self) -> Path:
        return self.dir / "recall-state.json"

    @property
    def reindex_marker(self) -> Path:
        """Lists folders whose index rows may lag their meta (written by older versions'
        ``update_metas``; recovery still honours it)."""
        return self.dir / ".reindex.json"

    @property
    def images_dir(self) -> Path:
        return self.dir / "images"

    @property
    def images_index(self) -> Path:
        return self.images_dir / "index.json"

    def folder(self, folder_id: str) -> Path:
        return self.dir / check_safe_name(folder_id, "folder id")

    def staging(self, folder_id: str) -> Path:
        """Where a new folder is assembled before its rename into place."""
        return self.dir / f"{STAGING_PREFIX}{check_safe_name(folder_id, 'folder id')}"

    def image(self, name: str) -> Path:
        return self.images_dir / check_safe_name(name, "image name")

    def journal(self, txn_id: str) -> Path:
        return self.dir / f"{JOURNAL_PREFIX}{check_safe_name(txn_id, 'transaction id')}.json"


def session_paths(root: Path, session_id: str, *, per_session: bool) -> SessionPaths:
    """Resolve the store directory of ``session_id`` under ``root``.

    Raises ``ValueError`` for an unusable id or a directory that would resolve
    outside the root (for example through a symlinked ``sessions`` entry).
    """
    root_resolved = root.expanduser().resolve()
    if not per_session:
        return SessionPaths(root=root_resolved, dir=root_resolved)
    return _inside(root_resolved, safe_session_id(session_id), repr(session_id))


def session_dir_paths(root: Path, name: str) -> SessionPaths:
    """The paths of the existing directory ``<root>/sessions/<name>`` (as listed): a
    safe name, or a name the mapping gave an id before it compared whole ids (the id,
    ending in a line break), until that store is next opened and renamed."""
    if previous_session_dir_name(name) != name:
        check_safe_name(name.replace("~", "_"), "session directory name")
    return _inside(root.expanduser().resolve(), name, repr(name))


def _inside(root_resolved: Path, name: str, what: str) -> SessionPaths:
    target = (root_resolved / "sessions" / name).resolve()
    if not target.is_relative_to(root_resolved) or target == root_resolved:
        raise StoreUnavailableError(
            str(root_resolved / "sessions" / name),
            "OUTSIDE_ROOT",
            f"session directory for {what} escapes the memory root",
        )
    return SessionPaths(root=root_resolved, dir=target)
