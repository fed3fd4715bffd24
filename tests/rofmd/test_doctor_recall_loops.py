"""`rofmd doctor`'s lines on the compiled modules (the ranked recall's loops, the
surface's look-up in its line, a store directory's listing): built, turned off, or not
built (never a failure: the Python path serves, and the line says how to build them)."""

from __future__ import annotations

import pytest

from engine import json_spans
from engine.relevance import kernels
from engine.store import dir_listing
from rofmd.cli.doctor import check_recall_loops, check_store_listing, check_surface_lookup
from rofmd.server.settings import DaemonSettings


def test_built_off_and_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    built = kernels.available()
    on = check_recall_loops(DaemonSettings(kernels=True))
    off = check_recall_loops(DaemonSettings(kernels=False))
    assert on.ok and off.ok
    if built:
        assert on.detail == "compiled" and "ROFMD_KERNELS=false" in off.detail
    monkeypatch.setattr(kernels._loops, "_module", None)  # as where it was not built
    missing = check_recall_loops(DaemonSettings(kernels=True))
    assert missing.ok and "NumPy path" in missing.detail and "C compiler" in missing.hint


def test_the_surface_lookup_built_off_and_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The other compiled module's line: the same three states, never a failure."""
    built = json_spans.available()
    on = check_surface_lookup(DaemonSettings(kernels=True))
    off = check_surface_lookup(DaemonSettings(kernels=False))
    assert on.name == "surface look-up" and on.ok and off.ok
    if built:
        assert on.detail == "compiled" and "ROFMD_KERNELS=false" in off.detail
    monkeypatch.setattr(json_spans._module, "_module", None)  # as where it was not built
    missing = check_surface_lookup(DaemonSettings(kernels=True))
    assert missing.ok and "encoded" in missing.detail and "C compiler" in missing.hint


def test_the_store_listing_built_off_and_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The third module's line: the same three states, never a failure."""
    built = dir_listing.state(True) == "on"
    on = check_store_listing(DaemonSettings(kernels=True))
    off = check_store_listing(DaemonSettings(kernels=False))
    assert on.name == "store listing" and on.ok and off.ok
    if built:
        assert on.detail == "compiled" and "ROFMD_KERNELS=false" in off.detail
    monkeypatch.setattr(dir_listing._module, "_module", None)  # as where it was not built
    missing = check_store_listing(DaemonSettings(kernels=True))
    assert missing.ok and "os.scandir" in missing.detail and "C compiler" in missing.hint
