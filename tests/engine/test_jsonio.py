"""Atomic, durable JSON I/O: old-or-new content, no temp files left behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from engine import jsonio
from engine.jsonio import (
    CorruptJSONError,
    FsOps,
    append_jsonl,
    is_temp_name,
    read_json,
    write_bytes_atomic,
    write_json_atomic,
)


class _Boom(OSError):
    pass


def _listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_write_and_read_roundtrip_uses_lf_and_final_newline(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    obj: dict[str, Any] = {"alpha": 0.5, "title": "日本旅行", "keywords": ["a", "b"]}
    write_json_atomic(path, obj)
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    assert b"\r" not in raw
    assert read_json(path) == obj
    assert _listing(tmp_path) == ["a.json"]


@pytest.mark.parametrize("failing", ["create_write_sync", "replace"])
def test_failed_write_keeps_old_content_and_removes_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    path = tmp_path / "index.json"
    write_json_atomic(path, {"v": "old"})

    class Failing(FsOps):
        def create_write_sync(self, p: Path, data: bytes) -> None:
            if failing == "create_write_sync":
                p.write_bytes(data[: len(data) // 2])  # a torn temp file
                raise _Boom("disk full")
            super().create_write_sync(p, data)

        def replace(self, src: Path, dst: Path) -> None:
            if failing == "replace":
                raise _Boom("replace failed")
            super().replace(src, dst)

    monkeypatch.setattr(jsonio, "fs", Failing())
    with pytest.raises(_Boom):
        write_json_atomic(path, {"v": "new"})
    assert read_json(path) == {"v": "old"}
    assert _listing(tmp_path) == ["index.json"]


def test_failed_fsync_of_directory_after_replace_reports_error_with_new_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "x.json"
    write_json_atomic(path, {"v": "old"})

    class Failing(FsOps):
        def fsync_dir(self, p: Path) -> None:
            raise _Boom("fsync dir failed")

    monkeypatch.setattr(jsonio, "fs", Failing())
    with pytest.raises(_Boom):
        write_json_atomic(path, {"v": "new"})
    # The rename happened: content is the complete new version, never a mix.
    assert read_json(path) == {"v": "new"}
    assert _listing(tmp_path) == ["x.json"]


def test_crash_leaves_recognisable_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "meta.json"

    class Crashing(FsOps):
        def replace(self, src: Path, dst: Path) -> None:
            raise _Boom("crash")

        def unlink(self, p: Path) -> None:
            raise _Boom("still crashed")

    monkeypatch.setattr(jsonio, "fs", Crashing())
    with pytest.raises(_Boom):
        write_bytes_atomic(path, b"{}")
    leftovers = _listing(tmp_path)
    assert len(leftovers) == 1
    assert is_temp_name(leftovers[0])
    assert not path.exists()


def test_is_temp_name() -> None:
    assert is_temp_name(".index.json.123-4.tmp")
    assert not is_temp_name("index.json")
    assert not is_temp_name(".commit-arc-1.json")
    assert not is_temp_name("mem-20260101T000000Z-0001")


def test_read_json_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"a": ')
    with pytest.raises(CorruptJSONError) as info:
        read_json(bad)
    assert info.value.path == bad
    assert isinstance(info.value, ValueError)
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    with pytest.raises(CorruptJSONError):
        read_json(empty)
    bom = tmp_path / "bom.json"
    bom.write_bytes(b'\xef\xbb\xbf{"a": 1}')
    assert read_json(bom) == {"a": 1}


def test_append_jsonl_one_line_per_record_and_repairs_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "stats.jsonl"
    append_jsonl(path, {"type": "recall", "n": 1})
    append_jsonl(path, {"type": "judge", "n": 2})
    with path.open("ab") as fh:
        fh.write(b'{"type": "torn')  # a crashed writer
    append_jsonl(path, {"type": "rearchive", "n": 3})
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    parsed = []
    for line in lines[:-1]:
        try:
            parsed.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            parsed.append(None)
    assert parsed == [
        {"type": "recall", "n": 1},
        {"type": "judge", "n": 2},
        None,
        {"type": "rearchive", "n": 3},
    ]
