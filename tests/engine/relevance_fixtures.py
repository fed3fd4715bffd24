"""What the relevance index tests index: an index entry with the fields it reads."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from engine.relevance import kernels


@dataclass(frozen=True)
class E:
    """An index entry as the relevance index sees one (`engine.store.IndexEntry` has
    these fields and more)."""

    id: str
    alpha: float = 0.5
    createdAt: int = 0
    keywords: tuple[str, ...] = ()
    title: str = ""
    scored: bool = True
    persons: tuple[str, ...] | None = None
    events: tuple[str, ...] | None = None
    locations: tuple[str, ...] | None = None


@contextmanager
def recall_loops(compiled: bool) -> Iterator[None]:
    """The ranked recall on its compiled loops (`engine.relevance.kernels`) or on its
    NumPy path, for the block. Compiled loops that were not built skip the test, except
    under CI, which builds them (`make`) and must not pass without them."""
    if compiled and not kernels.available():
        if os.environ.get("CI"):
            pytest.fail("the compiled recall loops were not built")
        pytest.skip("the compiled recall loops were not built (no C compiler?)")
    was = kernels.active() is not None
    kernels.use_kernels(compiled)
    try:
        yield
    finally:
        kernels.use_kernels(was)


BOTH_PATHS = pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
"""Runs a test on the compiled loops and on the NumPy path (`recall_loops`)."""
