"""Meta / index records: old files read, unknown fields survive, updates are atomic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine import jsonio
from engine.jsonio import FsOps, read_json, write_json_atomic
from engine.store import (
    CorruptFolderError,
    FolderMeta,
    FolderNotFoundError,
    SessionStore,
    open_session,
    read_jsonl,
    reason_file,
)
from engine.store.records import index_row_from_meta

NOW = 1_767_225_600_000

OLD_META: dict[str, Any] = {  # a v1.1-era folder: no sources, provenance, event time, key …
    "id": "mem-20251020T081700Z-0001",
    "createdAt": 1760948220000,
    "alpha": 0.85,
    "keywords": ["星港项目", "接口网关 8080", "部署"],
    "title": "部署端口",
    "messageCount": 4,
}


def old_store(tmp_path: Path) -> SessionStore:
    store = open_session(tmp_path, "s1")
    folder = store.dir / OLD_META["id"]
    folder.mkdir()
    write_json_atomic(folder / "meta.json", OLD_META)
    write_json_atomic(folder / "context.json", [{"role": "user", "content": "端口 8080"}])
    return open_session(tmp_path, "s1")


def test_old_meta_without_optional_fields_reads(tmp_path: Path) -> None:
    store = old_store(tmp_path)
    assert store.load_report.adopted == [OLD_META["id"]]
    meta = store.get_meta(str(OLD_META["id"]))
    assert meta.beta == 0.0  # β missing → 0
    assert meta.scored is True  # scored missing → scored (reference: scored !== false)
    assert meta.rescorePending is False
    assert meta.alphaSource is None and meta.eventStart is None and meta.images is None
    assert meta.model_extra == {"messageCount": 4}
    assert store.read_context(str(OLD_META["id"])) == [{"role": "user", "content": "端口 8080"}]
    entry = store.get_entry(str(OLD_META["id"]))
    assert entry.keywords == ["星港项目", "接口网关 8080", "部署"]


def test_update_meta_preserves_unknown_fields_and_deletes_with_none(tmp_path: Path) -> None:
    store = old_store(tmp_path)
    fid = str(OLD_META["id"])
    version = store.version
    store.update_meta(
        fid,
        {
            "beta": 3.0,
            "events": ["日本旅行"],
            "event": "日本旅行",
            "eventSource": "llm",
            "eventAt": NOW,
            "rescorePending": True,
        },
    )
    on_disk = read_json(store.dir / fid / "meta.json")
    assert on_disk["messageCount"] == 4
    assert on_disk["events"] == ["日本旅行"]
    assert store.get_entry(fid).rescorePending is True
    assert store.version > version
    store.update_meta(fid, {"events": None, "event": None})
    on_disk = read_json(store.dir / fid / "meta.json")
    assert "events" not in on_disk and "event" not in on_disk
    # the row as the next load sees it: index.json plus the rows logged since
    again = open_session(tmp_path, "s1").get_entry(fid)
    assert again.events is None and again.eventSource == "llm"
    assert again == store.get_entry(fid)
    assert not store.paths.reindex_marker.exists()
    with pytest.raises(ValueError, match="cannot be changed"):
        store.update_meta(fid, {"id": "mem-other"})
    with pytest.raises(FolderNotFoundError):
        store.update_meta("mem-20990101T000000Z-0001", {"alpha": 1})


def test_update_interrupted_before_its_metas_is_repaired_at_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows are logged before the metas are written: a crash in between leaves the
    log claiming a row its meta does not have; the load takes the meta's."""
    store = old_store(tmp_path)
    fid = str(OLD_META["id"])

    class CrashOnMeta(FsOps):
        def replace(self, src: Path, dst: Path) -> None:
            if dst.name == "meta.json":
                raise OSError("crash")
            super().replace(src, dst)

    monkeypatch.setattr(jsonio, "fs", CrashOnMeta())
    with pytest.raises(OSError):
        store.update_meta(fid, {"alpha": 0.3, "scored": True, "judgedAt": NOW})
    monkeypatch.setattr(jsonio, "fs", FsOps())
    assert store.get_entry(fid).alpha == 0.85  # the store follows the meta, not the log
    logged = read_json(store.paths.index_log)["rows"][0]["row"]
    assert logged["alpha"] == 0.3
    again = open_session(tmp_path, "s1")
    assert again.load_report.reindexed == [fid]
    assert again.get_entry(fid).alpha == 0.85
    assert not again.paths.index_log.exists()  # folded into index.json at that load
    row = next(r for r in read_json(again.paths.index)["folders"] if r["id"] == fid)
    assert row["alpha"] == 0.85


def test_invalid_update_writes_nothing(tmp_path: Path) -> None:
    store = old_store(tmp_path)
    fid = str(OLD_META["id"])
    before = (store.dir / fid / "meta.json").read_bytes()
    with pytest.raises(ValueError):
        store.update_meta(fid, {"createdAt": "yesterday"})
    assert (store.dir / fid / "meta.json").read_bytes() == before


def test_corrupt_indexed_folder_raises_clear_error(tmp_path: Path) -> None:
    store = old_store(tmp_path)
    fid = str(OLD_META["id"])
    (store.dir / fid / "meta.json").write_bytes(b"nope")
    with pytest.raises(CorruptFolderError, match=r"meta\.json") as meta:
        store.get_meta(fid)
    (store.dir / fid / "context.json").write_bytes(b"[1, 2]")
    with pytest.raises(CorruptFolderError, match=r"context\.json: ") as garbled:
        store.read_context(fid)
    (store.dir / fid / "context.json").unlink()
    with pytest.raises(CorruptFolderError, match=r"context\.json missing") as context:
        store.read_context(fid)
    # each reason names its file first: what a read of some files proves fixed
    assert reason_file(meta.value.reason) == "meta.json"
    assert reason_file(garbled.value.reason) == reason_file(context.value.reason) == "context.json"
    assert reason_file("image a.png missing") == "image"


def test_index_row_from_meta_writes_only_set_fields() -> None:
    meta = FolderMeta(id="mem-20260101T000000Z-0001", createdAt=NOW, alphaSource="pending")
    row = index_row_from_meta(meta)
    assert row == {
        "id": "mem-20260101T000000Z-0001",
        "createdAt": NOW,
        "alpha": 0.0,
        "beta": 0.0,
        "scored": True,
        "rescorePending": False,
        "keywords": [],
        "title": "",
    }


def test_unknown_nested_and_null_extras_survive_roundtrip() -> None:
    raw = {
        "id": "mem-1",
        "createdAt": NOW,
        "images": [{"name": "a.png", "sha": "abc"}],
        "nullable": None,
    }
    meta = FolderMeta.model_validate(raw)
    from engine.store.records import to_json_dict

    out = to_json_dict(meta)
    assert out["images"] == [{"name": "a.png", "sha": "abc"}]
    assert out["nullable"] is None


def test_stats_append_and_read(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    store.append_stats({"type": "compress-applied", "foldersPlanned": 2, "foldersCommitted": 2})
    store.append_stats({"type": "judge", "batchSize": 3})
    with store.paths.stats.open("ab") as fh:
        fh.write(b"{torn")
    assert [r["type"] for r in read_jsonl(store.paths.stats)] == ["compress-applied", "judge"]
    with pytest.raises(TypeError):
        store.append_stats(["not", "a", "record"])  # type: ignore[arg-type]
