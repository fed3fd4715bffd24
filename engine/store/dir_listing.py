"""A session directory's listing, sorted into memory folders and the rest, in one pass.

Why: recovery lists the session directory on every open (`engine.store.recovery`), and
at 10⁵ folders that listing was the second largest part of a restart: `os.scandir`
makes an entry object for each of the 10⁵ names, each is asked whether it is a
directory, and the folder names are then checked against the folder-id rule, about
0.11 s here and 0.15 s inside a starting daemon. The compiled module
(`_dirlist.c`) reads the directory in batches without the interpreter lock, asks the
entries' types the directory already gives, checks the folder rule on the bytes, and
makes only the strings: the same listing in half the time.

Exact: the folders are the directories (a symbolic link is not one) whose name
:func:`engine.store.ids.is_folder_id` accepts, the others every other entry with its
kind, in the directory's order, as `os.scandir` and ``is_dir`` / ``is_file`` with
``follow_symlinks=False`` give them. Without the compiled module, or with
``ROFMD_KERNELS=false``, :func:`listing` computes the same with `os.scandir`.
"""

from __future__ import annotations

import operator
import os
from itertools import compress
from pathlib import Path
from typing import NamedTuple, Protocol

from engine.compiled import CompiledModule
from engine.store.ids import folder_ids_among

__all__ = ["DIR", "FILE", "OTHER", "Listing", "listing", "python_listing", "state"]

OTHER, DIR, FILE = 0, 1, 2
"""An entry's kind: a directory, a regular file, anything else (a symbolic link, a
FIFO, an entry gone while it was listed)."""


class Listing(NamedTuple):
    """A directory's entries: its memory folders, and every other entry with its kind
    (:data:`DIR`, :data:`FILE`, :data:`OTHER`) in the directory's order."""

    folders: set[str]
    others: list[tuple[str, int]]


class Compiled(Protocol):
    """What `_dirlist.c` defines."""

    def folders_and_others(
        self, path: str, stat_all: bool = False
    ) -> tuple[set[str], list[tuple[str, int]]]:
        """The listing of `path` (`stat_all`: every entry's kind from `lstat`)."""


_module: CompiledModule[Compiled] = CompiledModule("engine.store._dirlist")

_NAME = operator.attrgetter("name")
_IS_DIR = operator.methodcaller("is_dir", follow_symlinks=False)


def state(wanted: bool) -> str:
    """`on`, `off` or `not built` for `ROFMD_KERNELS` = `wanted` (`rofmd doctor`)."""
    return _module.state(wanted)


def listing(path: Path) -> Listing:
    """The listing of directory `path` (module docstring). Raises OSError as
    `os.scandir` does (FileNotFoundError, NotADirectoryError, ...)."""
    module = _module.active()
    if module is None:
        return python_listing(path)
    folders, others = module.folders_and_others(os.fspath(path))
    return Listing(folders, others)


def python_listing(path: Path) -> Listing:
    """:func:`listing` with `os.scandir`: the compiled module's rollback."""
    with os.scandir(path) as it:
        entries = list(it)
    # the folders first, at C speed (nearly every name), then the rest one by one
    names = list(map(_NAME, entries))
    folders = set(folder_ids_among(list(compress(names, map(_IS_DIR, entries)))))
    others = [
        (entry.name, _kind(entry))
        for entry in compress(entries, map(operator.not_, map(folders.__contains__, names)))
    ]
    return Listing(folders, others)


def _kind(entry: os.DirEntry[str]) -> int:
    if entry.is_dir(follow_symlinks=False):
        return DIR
    return FILE if entry.is_file(follow_symlinks=False) else OTHER
