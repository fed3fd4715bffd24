"""Memory store: folders, index, images, stats, journals of one session.

Reference: §1.1 (commit 事务), §1.5 (per-session directories), §1.7 (images),
§4 (目录结构), §6 (可恢复). Pure and synchronous; time is always passed in.

On-disk layout (``per_session=True``: ``<root>/sessions/<safe-id>/``, an injective
name, see ``ids`` and ``session_dirs``; ``per_session=False``: the root itself, the
reference's old global layout)::

    session.json             {"version": 1, "id": "<session id>", …} (per session only)
    index.json               {"version": 1, "folders": [IndexEntry, …]}
    index.log.jsonl          rows changed since index.json was written (replayed at
                             load, folded in by the next index write; see indexfile)
    stats.jsonl              one telemetry object per line
    recall-state.json        owned by the handlers (path: paths.recall_state)
    .commit-<txnId>.json     transaction journal (see below)
    .reindex.json            rows that may lag their meta (older versions' update_metas)
    images/<name>            archived image bytes
    images/index.json        {"version": 1, "images": [{"name", "folderId", …}]}
    mem-YYYYMMDDTHHMMSSZ-NNNN/meta.json     FolderMeta
    mem-YYYYMMDDTHHMMSSZ-NNNN/context.json  {"messages": [...]}

Journal ``.commit-<txnId>.json``::

    {"version": 1, "txnId": "arc-…", "state": "pending|committed|aborting",
     "folders": ["mem-…"], "images": [{"name": "img-….png", "folderId": "mem-…"}]}

Written ``pending`` before anything else, ``committed`` after the index; kept
until :meth:`SessionStore.finalize` (the archive landed) or
:meth:`SessionStore.rollback_committed` (``archive/abort``: ``aborting``, then
everything it wrote is removed). At load, ``pending`` → complete folders
adopted / incomplete removed, ``committed`` → finalized (the archive is kept:
"never dropped on a maybe"), ``aborting`` → rollback finished.

API::

    safe_session_id(raw: str) -> str
    make_idempotency_key(session_id, turn, seq_start, seq_end, content_hash, chunk) -> str
    open_session(root: Path, session_id: str, *, per_session: bool = True) -> SessionStore
    open_session_dir(root: Path, name: str) -> SessionStore     # as listed, no migration
    list_session_dirs(root / "sessions") -> list[SessionDirInfo]
    find_session_dir(root / "sessions", session_id) -> Path | None
    store.dir_outcome: SessionDirOutcome | None   # ok | adopted | migrated | created
    store.load_report: LoadReport
    store.index -> tuple[IndexEntry, ...];  store.version: int;  len(store)
    store.get_entry(id) -> IndexEntry;  store.find_by_idempotency_key(key) -> str | None
    store.get_meta(id) -> FolderMeta;  store.read_context(id) -> list[dict]
    store.new_folder_id(now_ms: int) -> str
    with store.transaction(txn_id, max_folders=None, keep_record=True) as txn:
        txn.add_folder(meta, messages, images=[(name, bytes | Path)]) -> bool
        txn.skipped: list[SkippedFolder]   # already archived (idempotency key)
    txn.result: CommitResult
    store.committed_transactions() -> tuple[str, ...]
    store.finalize(txn_id) -> bool
    store.rollback_committed(txn_id) -> list[str]
    store.reinstate(txn.record())   # after a restart: undoable again
    store.update_meta(id, changes) -> FolderMeta;  store.update_metas({id: changes})
    store.append_stats(record) -> bool
    store.image_entries() -> list[ImageIndexEntry];  store.image_path(name) -> Path
    store.image_index_current(files) -> bool;  store.refresh_image_index(files) -> bool

All filesystem mutations go through :data:`engine.jsonio.fs` (tests inject
faults there).
"""

from engine.store.errors import (
    CorruptFolderError,
    FolderNotFoundError,
    MaxFoldersExceededError,
    StoreError,
    TransactionError,
    UnknownTransactionError,
    reason_file,
)
from engine.store.ids import is_folder_id, make_idempotency_key, safe_session_id
from engine.store.index_entry import IndexEntry
from engine.store.layout import SessionPaths, session_paths
from engine.store.records import (
    FolderMeta,
    ImageIndexEntry,
    ImageRef,
    IndexFields,
    JournalImage,
    JournalRecord,
)
from engine.store.recovery import CorruptFolder, JournalOutcome, LoadReport
from engine.store.session_dirs import (
    SessionDirError,
    SessionDirInfo,
    SessionDirOutcome,
    find_session_dir,
    list_session_dirs,
)
from engine.store.session_store import SessionStore, open_session, open_session_dir
from engine.store.stats import read_jsonl
from engine.store.transaction import CommitResult, ImageSource, SkippedFolder, Transaction

__all__ = [
    "CommitResult",
    "CorruptFolder",
    "CorruptFolderError",
    "FolderMeta",
    "FolderNotFoundError",
    "ImageIndexEntry",
    "ImageRef",
    "ImageSource",
    "IndexEntry",
    "IndexFields",
    "JournalImage",
    "JournalOutcome",
    "JournalRecord",
    "LoadReport",
    "MaxFoldersExceededError",
    "SessionDirError",
    "SessionDirInfo",
    "SessionDirOutcome",
    "SessionPaths",
    "SessionStore",
    "SkippedFolder",
    "StoreError",
    "Transaction",
    "TransactionError",
    "UnknownTransactionError",
    "find_session_dir",
    "is_folder_id",
    "list_session_dirs",
    "make_idempotency_key",
    "open_session",
    "open_session_dir",
    "read_jsonl",
    "reason_file",
    "safe_session_id",
    "session_paths",
]
