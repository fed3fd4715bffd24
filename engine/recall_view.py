"""The part of the recall state that archiving needs (reference §1.4 re-archive).

Archiving (pass 0) shrinks the recall block; the recall use case owns the block.
This protocol is the contract between them, so neither imports the other:
`engine.recall` implements it on its recall state, `engine.archive` plans
against it, and `archive/abort` restores what a re-archive changed through
`snapshot` / `restore`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class AdditionView(Protocol):
    """One memory currently injected in the recall block."""

    @property
    def id(self) -> str:
        """Folder id."""
        ...

    @property
    def alpha(self) -> float:
        """α at injection."""
        ...

    @property
    def created_at(self) -> str:
        """Folder `createdAt` (ISO); re-archive takes the oldest first."""
        ...

    @property
    def injected_turn(self) -> int:
        """Turn it was injected in; additions of the current turn are protected."""
        ...

    @property
    def text(self) -> str:
        """Its rendered entry in the block (what its tokens are estimated from)."""
        ...

    @property
    def current_query(self) -> bool:
        """Matched by the current query (trimmed last, like high α)."""
        ...


class RecallBlockView(Protocol):
    """What re-archive reads and changes in a session's recall state."""

    def rearchive_candidates(self) -> Sequence[AdditionView]:
        """The additions in the block now, in block order."""
        ...

    def remove_for_rearchive(
        self, removed: Sequence[str], recycle_high: Sequence[str], turn: int
    ) -> None:
        """Drop `removed` from the block (re-render it, shrink the v3 snapshot); the ids in
        `recycle_high` (a subset of `removed`) go to the high-α recycle lane instead of
        being marked rescorePending by the caller."""
        ...

    def snapshot(self) -> object:
        """An opaque copy of the state, for `archive/abort`."""
        ...

    def restore(self, snapshot: object) -> None:
        """Put back a `snapshot()` (and persist it)."""
        ...
