"""memory_group_recall's reading of the group stores (reference §3.2.10 数据范围).

Read-only by construction: the stores are read as their files say
(:func:`engine.store.readonly.read_store`: ``index.json`` with its log replayed, no
recovery), ``context.json`` only for the memories on the page, and nothing is opened
for writing, so a call leaves every file and directory as it found it.

What is read: directories of ``<memory root>/sessions/`` whose names are group stores
(:data:`~engine.recall.group_recall.GROUP_DIR`), listed from the directory itself. No
name from the call is ever joined into a path: ``group`` only filters the listed names.
A symlink is not a directory here (a link named like a group store could point at a
private one), and a file is not either.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from engine import texts
from engine.config import MemoryConfig
from engine.recall.group_recall import (
    GROUP_DIR,
    GroupAnswer,
    GroupCall,
    GroupStore,
    cap_folders,
    choose_groups,
    group_label,
    render_answer,
    select_memories,
    snippet,
)
from engine.store.errors import CorruptFolderError, FolderNotFoundError, StoreUnavailableError
from engine.store.folders import CONTEXT_FILE, ReadAhead
from engine.store.layout import session_dir_paths
from engine.store.readonly import ReadonlyStore, read_store

__all__ = ["group_dir_names", "query_groups"]


def group_dir_names(root: Path) -> list[str]:
    """Names of the group store directories under ``<root>/sessions`` (sorted)."""
    try:
        it = os.scandir(root / "sessions")
    except (FileNotFoundError, NotADirectoryError):
        return []
    with it:
        return sorted(
            e.name for e in it if GROUP_DIR.match(e.name) and e.is_dir(follow_symlinks=False)
        )


def _read(root: Path, name: str) -> ReadonlyStore | None:
    try:
        store = read_store(session_dir_paths(root, name), name)
    except (OSError, ValueError, StoreUnavailableError):
        return None
    return None if store.index_status == "corrupt" else store


def query_groups(root: Path, call: GroupCall, cfg: MemoryConfig) -> GroupAnswer:
    """Answer one authorised call from the group stores under ``root`` (blocking)."""
    chosen, warnings = choose_groups(group_dir_names(root), call, cfg)
    read: dict[str, ReadonlyStore] = {}
    stores: list[GroupStore] = []
    for name in chosen:
        store = _read(root, name)
        if store is None:
            warnings.append(texts.GROUP_RECALL_WARN_UNREADABLE.format(group=group_label(name)[1]))
            continue
        entries, cut = cap_folders(name, store.index, cfg)
        warnings += cut
        read[name] = store
        stores.append(GroupStore(name, entries))
    found = select_memories(stores, call, cfg)
    snippets: dict[tuple[str, str], tuple[str, bool] | None] = {}
    if not call.list_groups:
        max_chars = cfg.compat.cross_chat.max_snippet_chars
        shown = found[call.offset : call.offset + call.limit]
        with contextlib.ExitStack() as stack:
            # each store's shown memories asked of the disk at once (`read_ahead`)
            ahead = {
                name: stack.enter_context(
                    read[name].read_ahead((m.id for m in shown if m.store == name), [CONTEXT_FILE])
                )
                for name in dict.fromkeys(m.store for m in shown)
            }
            for m in shown:
                snippets[(m.store, m.id)] = _snippet(read[m.store], m.id, max_chars, ahead[m.store])
    return render_answer(call, stores, found, snippets, cfg, warnings)


def _snippet(
    store: ReadonlyStore, folder_id: str, max_chars: int, ahead: ReadAhead
) -> tuple[str, bool] | None:
    try:
        messages = store.read_context(folder_id, ahead)
    except (CorruptFolderError, FolderNotFoundError, OSError):
        return None
    return snippet(messages, max_chars)
