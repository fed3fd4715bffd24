"""Exceptions of the memory store.

Specific types so callers (archive handler, protocol layer) can map each one
to the right answer instead of parsing messages.
"""

from __future__ import annotations

__all__ = [
    "CorruptFolderError",
    "FolderNotFoundError",
    "MaxFoldersExceededError",
    "StoreError",
    "StoreUnavailableError",
    "TransactionError",
    "UnknownTransactionError",
    "reason_file",
]


class StoreError(Exception):
    """Base class of store errors."""


class StoreUnavailableError(StoreError, ValueError):
    """The store cannot be used as it is on disk, for a reason the operating system
    would not report as an errno (a session directory that resolves outside the memory
    root, through a symlink): answered like a storage failure (-32003), with the path."""

    def __init__(self, path: str, reason: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.reason = reason


class MaxFoldersExceededError(StoreError):
    """The transaction would push the folder count past ``storage.maxFolders``.

    Raised before anything is written: the whole archive is refused, never a
    part of it (reference §3, storage.maxFolders).
    """

    def __init__(self, current: int, adding: int, limit: int) -> None:
        super().__init__(
            f"storage.maxFolders reached: {current} folder(s) + {adding} new > limit {limit}"
        )
        self.current = current
        self.adding = adding
        self.limit = limit


class TransactionError(StoreError):
    """Misuse of a transaction (reused id, second open txn, commit twice, …)."""


class UnknownTransactionError(StoreError, KeyError):
    """No committed transaction with that id is on record."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown transaction"


class FolderNotFoundError(StoreError, KeyError):
    """The folder id is not in this session's index."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown folder"


class CorruptFolderError(StoreError):
    """A folder's ``meta.json`` or ``context.json`` is missing or unreadable. Its
    `reason` names the file first (:func:`reason_file`)."""

    def __init__(self, folder_id: str, reason: str) -> None:
        super().__init__(f"corrupt memory folder {folder_id}: {reason}")
        self.folder_id = folder_id
        self.reason = reason


def reason_file(reason: str) -> str:
    """What a folder's damage is about: the first word of its reason, which names the
    file (``meta.json``, ``context.json``; ``image`` for one of its images), so a read
    of some of a folder's files can tell which damage it proves fixed."""
    return reason.split(" ", 1)[0].removesuffix(":")
