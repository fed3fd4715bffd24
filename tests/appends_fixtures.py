"""The filesystem seam (`engine.jsonio.fs`) swapped for a block (`using_fs`, also the
judge bench's byte counter), and the one seam that records each durable append before
making it, so a test can count the writes of an operation (one round, one append)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TypeVar

from engine import jsonio
from engine.jsonio import FsOps


class Appends(FsOps):
    """The real filesystem, noting every durable append (path, bytes)."""

    def __init__(self) -> None:
        self.appends: list[tuple[Path, bytes]] = []

    def append_sync(self, path: Path, data: bytes) -> None:
        self.appends.append((path, data))
        super().append_sync(path, data)


F = TypeVar("F", bound=FsOps)


@contextmanager
def using_fs(ops: F) -> Iterator[F]:
    """`jsonio.fs` is `ops` inside the block; the previous seam after it."""
    saved = jsonio.fs
    jsonio.fs = ops
    try:
        yield ops
    finally:
        jsonio.fs = saved


def noting_appends() -> AbstractContextManager[Appends]:
    """`jsonio.fs` notes every append inside the block (`using_fs`)."""
    return using_fs(Appends())
