"""A store with many folders: loaded once, no directory scans afterwards."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from engine.jsonio import write_json_atomic
from engine.store import FolderMeta, open_session

N = 10_000
NOW = 1_767_225_600_000


def _guard(real: Any, forbidden: Path) -> Any:
    """Wrap a directory-listing function so listing ``forbidden`` fails the test."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        target = args[0] if args else kwargs.get("path", ".")
        if (
            not isinstance(target, int)
            and Path(os.fsdecode(target)).resolve() == forbidden.resolve()
        ):
            raise AssertionError(f"session directory scanned after load: {target}")
        return real(*args, **kwargs)

    return wrapper


def test_large_store_loads_once_and_never_scans_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_dir = tmp_path / "sessions" / "big"
    store_dir.mkdir(parents=True)
    rows = []
    for i in range(N):
        fid = f"mem-20260101T000000Z-{i + 1:05d}"
        os.mkdir(store_dir / fid)
        rows.append(
            {
                "id": fid,
                "createdAt": NOW + i,
                "alpha": 0.5,
                "beta": 1.0,
                "scored": True,
                "rescorePending": False,
                "keywords": ["部署", "端口", f"k{i}"],
                "title": f"标题 {i}",
                "idempotencyKey": f'["big",{i},1,2,"h",0]',
            }
        )
    write_json_atomic(store_dir / "index.json", {"version": 1, "folders": rows})
    started = time.perf_counter()
    store = open_session(tmp_path, "big")
    load_seconds = time.perf_counter() - started
    assert len(store) == N
    assert store.load_report.clean
    assert load_seconds < 5.0  # ~0.2 s here; generous for slow CI

    # Removing one folder's own files (rmtree) may list that folder; the
    # session directory (10^5 entries) must never be listed again.
    monkeypatch.setattr(os, "scandir", _guard(os.scandir, store_dir))
    monkeypatch.setattr(os, "listdir", _guard(os.listdir, store_dir))
    monkeypatch.setattr(Path, "iterdir", _guard(Path.iterdir, store_dir))

    assert store.find_by_idempotency_key('["big",77,1,2,"h",0]') == rows[77]["id"]
    new_id = store.new_folder_id(NOW)
    assert new_id == f"mem-20260101T000000Z-{N + 1:05d}"
    started = time.perf_counter()
    with store.transaction("arc-1") as txn:
        txn.add_folder(FolderMeta(id=new_id, createdAt=NOW, scored=False), [])
    store.update_meta(new_id, {"alpha": 0.9, "scored": True})
    assert store.rollback_committed("arc-1") == [new_id]
    assert time.perf_counter() - started < 5.0
    assert len(store) == N
    assert len(store.index) == N
