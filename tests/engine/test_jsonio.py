"""Atomic, durable JSON I/O: old-or-new content, no temp files left behind."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine import jsonio
from engine.jsonio import (
    CorruptJSONError,
    FsOps,
    append_jsonl,
    atomic_stream,
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
    # whole names only: recovery deletes temp files, never a file that merely looks like one
    assert not is_temp_name(".index.json.123-4.tmp\n")
    assert not is_temp_name(".index.json.١٢٣-4.tmp")
    assert jsonio.temp_target("d/.x.json.1-2.tmp") == "d/x.json"
    assert jsonio.temp_target("d/.x.json.1-2.tmp\n") == "d/.x.json.1-2.tmp\n"


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


# ---- batched durability ---------------------------------------------------------------


class _Syncs(FsOps):
    """Records which paths were fsynced, from whichever thread; fails the named ones."""

    def __init__(self, failing: frozenset[str] = frozenset(), together: int = 1) -> None:
        self.failing = failing
        self.synced: list[str] = []
        self.threads: set[int] = set()
        self._lock = threading.Lock()
        self._together = together
        self._meet = threading.Barrier(together, timeout=20)

    def fsync(self, path: Path) -> None:
        with self._lock:
            first = len(self.synced) < self._together
            self.synced.append(path.name)
            self.threads.add(threading.get_ident())
        if first:
            self._meet.wait()  # the first ones wait for each other: only concurrent ones meet
        if path.name in self.failing:
            raise _Boom(f"fsync {path.name}")
        super().fsync(path)


def test_create_write_then_fsync_all_makes_every_file_and_directory_durable(
    tmp_path: Path,
) -> None:
    fs = _Syncs(together=4)
    names = [f"f{i}.json" for i in range(40)]
    for name in names:
        fs.create_write(tmp_path / name, name.encode())
    with pytest.raises(FileExistsError):  # exclusive, like create_write_sync
        fs.create_write(tmp_path / names[0], b"again")
    fs.fsync_all([*(tmp_path / n for n in names), tmp_path])
    assert sorted(fs.synced) == sorted([*names, tmp_path.name])
    assert len(fs.threads) >= 4  # issued together, not one after another
    assert all((tmp_path / n).read_bytes() == n.encode() for n in names)


def test_fsync_all_raises_the_first_failure_after_every_fsync_ended(tmp_path: Path) -> None:
    paths = [tmp_path / f"f{i}" for i in range(12)]
    for p in paths:
        p.write_bytes(b"x")
    fs = _Syncs(failing=frozenset({"f7", "f3"}))
    with pytest.raises(_Boom, match="fsync f3"):
        fs.fsync_all(paths)
    assert sorted(fs.synced) == sorted(p.name for p in paths)  # none abandoned


def test_fsync_all_of_nothing_does_nothing(tmp_path: Path) -> None:
    fs = _Syncs()
    fs.fsync_all([])
    fs.fsync_all(iter(()))
    assert fs.synced == []


def test_fsync_all_syncs_each_path_as_the_writer_yields_it(tmp_path: Path) -> None:
    """A generator's first file is being synced while it writes the next; if the writer
    fails half-way, what it had handed over is synced before the failure is raised."""
    issued = threading.Event()

    class Watching(_Syncs):
        def fsync(self, path: Path) -> None:
            super().fsync(path)
            issued.set()

    fs = Watching()

    def writer(fail: bool) -> Iterator[Path]:
        for i in range(3):
            path = tmp_path / f"{'bad' if fail else 'ok'}{i}"
            fs.create_write(path, b"x")
            yield path
            assert issued.wait(20), "not synced before the writer went on"
            issued.clear()
            if fail and i == 1:
                raise _Boom("disk full")

    fs.fsync_all(writer(False))
    assert fs.synced == ["ok0", "ok1", "ok2"]
    with pytest.raises(_Boom, match="disk full"):
        fs.fsync_all(writer(True))
    assert fs.synced[3:] == ["bad0", "bad1"]


def test_atomic_stream_replaces_the_file_only_when_the_block_ends(tmp_path: Path) -> None:
    target = tmp_path / "export.jsonl"
    target.write_bytes(b"old\n")
    with atomic_stream(target) as out:
        out.writelines([b"a\n", b"b\n"])
        assert target.read_bytes() == b"old\n"  # not yet
    assert target.read_bytes() == b"a\nb\n"
    assert [p.name for p in tmp_path.iterdir()] == ["export.jsonl"]


def test_atomic_stream_that_raises_keeps_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "backup.tar.zst"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_stream(target) as out:
        out.write(b"half")
        raise RuntimeError("disk full")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["backup.tar.zst"]
