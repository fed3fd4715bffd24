"""`rofmd doctor`'s line on the ranked recall's compiled loops: built, turned off, or
not built (never a failure: the NumPy path serves, and the line says how to build them)."""

from __future__ import annotations

import pytest

from engine.relevance import kernels
from rofmd.cli.doctor import check_recall_loops
from rofmd.server.settings import DaemonSettings


def test_built_off_and_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    built = kernels.available()
    on = check_recall_loops(DaemonSettings(kernels=True))
    off = check_recall_loops(DaemonSettings(kernels=False))
    assert on.ok and off.ok
    if built:
        assert on.detail == "compiled" and "ROFMD_KERNELS=false" in off.detail
    monkeypatch.setattr(kernels, "available", lambda: False)
    missing = check_recall_loops(DaemonSettings(kernels=True))
    assert missing.ok and "NumPy path" in missing.detail and "C compiler" in missing.hint
