"""`rofmd doctor`'s lines on the compiled modules (the ranked recall's loops, the
surface's look-up in its line, a store directory's listing): built, turned off, or not
built (never a failure: the Python path serves, and the line says how to build them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engine import json_spans
from engine.compiled import CompiledModule
from engine.relevance import kernels
from engine.store import dir_listing
from rofmd.cli.doctor import Check, check_recall_loops, check_store_listing, check_surface_lookup
from rofmd.server.settings import DaemonSettings

LINES: dict[str, tuple[Callable[[DaemonSettings], Check], CompiledModule[Any], str]] = {
    "recall loops": (check_recall_loops, kernels._loops, "NumPy path"),
    "surface look-up": (check_surface_lookup, json_spans._module, "encoded"),
    "store listing": (check_store_listing, dir_listing._module, "os.scandir"),
}


@pytest.mark.parametrize("name", sorted(LINES))
def test_built_off_and_missing(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    check, module, without = LINES[name]
    on = check(DaemonSettings(kernels=True))
    off = check(DaemonSettings(kernels=False))
    assert on.name == name and on.ok and off.ok
    if module.available():
        assert on.detail == "compiled" and "ROFMD_KERNELS=false" in off.detail
    monkeypatch.setattr(module, "_module", None)  # as where it was not built
    missing = check(DaemonSettings(kernels=True))
    assert missing.ok and without in missing.detail and "C compiler" in missing.hint
