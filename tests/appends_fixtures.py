"""Noting the durable appends a piece of code makes: the real filesystem seam
(`engine.jsonio.fs`) swapped for one that records each append before making it, so a
test can count the writes of an operation (one round, one durable append)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engine import jsonio
from engine.jsonio import FsOps


class Appends(FsOps):
    """The real filesystem, noting every durable append (path, bytes)."""

    def __init__(self) -> None:
        self.appends: list[tuple[Path, bytes]] = []

    def append_sync(self, path: Path, data: bytes) -> None:
        self.appends.append((path, data))
        super().append_sync(path, data)


@contextmanager
def noting_appends() -> Iterator[Appends]:
    """`jsonio.fs` notes every append inside the block; the previous seam after it."""
    saved = jsonio.fs
    jsonio.fs = noted = Appends()
    try:
        yield noted
    finally:
        jsonio.fs = saved
