"""The snapshot of ``index.json`` (`engine.store.index_snapshot`): opening a store from it
gives exactly what parsing the file gives (every value of every entry, the extras, the
load report), it is written from the file's bytes whatever the store holds in memory
(the index log's rows are parsed), and any other file (rewritten since, changed in
place, damaged snapshot) is parsed as ever."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.store import index_snapshot as snap
from engine.store import open_session, recovery
from engine.store.index_entry import IndexEntry, entry_from_row
from engine.store.index_snapshot import (
    SNAPSHOT_NAME,
    checked_entry,
    read_index_entries,
    save_index_snapshot,
)
from engine.store.indexfile import parse_index
from tests.engine.recall_fixtures import BASE_MS, write_folders

SID = "rows"


@pytest.fixture(autouse=True)
def small_stores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snap, "SNAPSHOT_MIN_ROWS", 1)


def _seed(root: Path, n: int = 30) -> list[str]:
    store = open_session(root, SID)
    folders = [
        {
            "createdAt": BASE_MS + i * 60_000,
            "alpha": 0.5 + i % 5 / 10,
            "beta": i % 3,
            "keywords": ["星港项目", f"词{i}"],
            "persons": ["Mina"] if i % 4 == 0 else None,
            "scored": i % 6 != 0,
        }
        for i in range(n)
    ]
    return write_folders(store, folders)


def _parsed(root: Path) -> tuple[list[Any], dict[str, Any]]:
    data = (root / "sessions" / SID / "index.json").read_bytes()
    rows, extra, status = parse_index(data, checked_entry)
    assert status == "ok"
    return rows, extra


def _values(entries: Any) -> list[Any]:
    return [tuple(e) if isinstance(e, IndexEntry) else e for e in entries]


def _hits(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each read took the snapshot."""
    seen: list[bool] = []
    real = snap._cached

    def cached(*args: Any) -> Any:
        out = real(*args)
        seen.append(out is not None)
        return out

    monkeypatch.setattr(snap, "_cached", cached)
    return seen


def test_a_reopen_takes_the_snapshot_and_gets_what_parsing_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _seed(tmp_path)
    store = open_session(tmp_path, SID)
    assert save_index_snapshot(store.paths, store.index)
    assert (store.dir / SNAPSHOT_NAME).is_file()
    assert save_index_snapshot(store.paths, store.index) is None  # already stands for it
    hits = _hits(monkeypatch)
    entries, extra, status = read_index_entries(store.paths)
    assert hits == [True] and status == "ok"
    rows, parsed_extra = _parsed(tmp_path)
    assert (_values(entries), extra) == (_values(rows), parsed_extra)
    reference = tmp_path / "ref"
    shutil.copytree(tmp_path / "sessions", reference / "sessions")
    (reference / "sessions" / SID / SNAPSHOT_NAME).unlink()
    hits.clear()
    again = open_session(tmp_path, SID)  # the log replayed over it, as over parsed rows
    parsed = open_session(reference, SID)
    assert hits == [True, False]
    assert _values(again.index) == _values(parsed.index) == _values(store.index)
    assert again._index_extra == parsed._index_extra
    assert again.load_report == parsed.load_report


def test_rows_the_log_changed_are_parsed_not_taken_from_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _seed(tmp_path)
    store = open_session(tmp_path, SID)
    store.update_metas({ids[2]: {"alpha": 0.11}, ids[9]: {"keywords": ["接口网关"]}})
    assert store.paths.index_log.is_file()  # the changes are in the log, not index.json
    assert save_index_snapshot(store.paths, store.index)
    rows, _ = _parsed(tmp_path)
    hits = _hits(monkeypatch)
    entries, _, status = read_index_entries(store.paths)
    assert hits == [True] and status == "ok"
    assert _values(entries) == _values(rows)
    assert _values(entries) != _values(store.index)  # memory has the log replayed
    reopened = open_session(tmp_path, SID)  # ... and so has a store opened from it
    assert _values(reopened.index) == _values(store.index)


def test_a_rewritten_or_edited_index_is_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _seed(tmp_path)
    store = open_session(tmp_path, SID)
    assert save_index_snapshot(store.paths, store.index)
    write_folders(store, [{"createdAt": BASE_MS + 10**8, "alpha": 0.7, "keywords": ["新"]}], "x")
    hits = _hits(monkeypatch)
    assert len(open_session(tmp_path, SID)) == 31 and hits == [False]
    # an edit in place that keeps the file's size (another writer, a hand edit)
    assert save_index_snapshot(store.paths, store.index)
    path = store.paths.index
    data = path.read_bytes()
    path.write_bytes(data.replace("星港项目".encode(), "灰度比例".encode(), 1))
    hits.clear()
    edited = open_session(tmp_path, SID)
    assert hits == [False]
    assert "灰度比例" in edited.index[0].keywords


def _flip(data: bytes) -> bytes:
    out = bytearray(data)
    out[-100] ^= 0x04
    return bytes(out)


DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "truncated": lambda d: d[: len(d) // 2],
    "empty": lambda d: b"",
    "a flipped bit in the payload": _flip,
    "a foreign file": lambda d: b"RFMDCIX\x00" + d[8:],
    "a broken header": lambda d: d[:20] + b"}" + d[21:],
    "another version": lambda d: d.replace(b'"format":%d' % snap.FORMAT, b'"format":99', 1),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_snapshot_is_ignored_and_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    _seed(tmp_path)
    store = open_session(tmp_path, SID)
    assert save_index_snapshot(store.paths, store.index)
    path = store.dir / SNAPSHOT_NAME
    path.write_bytes(DAMAGE[damage](path.read_bytes()))
    hits = _hits(monkeypatch)
    again = open_session(tmp_path, SID)
    assert hits == [False]
    assert _values(again.index) == _values(store.index)
    assert save_index_snapshot(again.paths, again.index)  # written anew
    hits.clear()
    open_session(tmp_path, SID)
    assert hits == [True]


def test_a_missing_or_corrupt_index_is_what_a_read_says(tmp_path: Path) -> None:
    _seed(tmp_path)
    store = open_session(tmp_path, SID)
    assert save_index_snapshot(store.paths, store.index)
    store.paths.index.write_bytes(b"{not json")
    assert read_index_entries(store.paths) == ([], {}, "corrupt")
    store.paths.index.unlink()
    assert read_index_entries(store.paths) == ([], {}, "missing")
    assert save_index_snapshot(store.paths, store.index) is None


# what the hints rely on: an entry gives its row back, and the row gives the entry back
_scalar = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=4))
_rows = st.fixed_dictionaries(
    {
        "id": st.from_regex(r"mem-2026010[1-9]T000000Z-000[1-9]", fullmatch=True),
        "createdAt": st.integers(0, 2**40),
        "alpha": st.one_of(st.integers(0, 1), st.floats(0, 1)),
        "beta": st.one_of(st.integers(-10, 10), st.floats(-10, 10)),
        "scored": st.booleans(),
        "keywords": st.lists(st.sampled_from(["星港", "a", "B c", ""]), max_size=4),
        "title": st.text(max_size=6),
    },
    optional={
        "persons": st.none() | st.lists(st.text(max_size=3), max_size=2),
        "eventStart": st.none() | st.integers(0, 2**40),
        "timeTags": st.lists(st.dictionaries(st.sampled_from(["text", "at"]), _scalar)),
        "assistantKeywords": st.none() | st.lists(st.text(max_size=3), max_size=2),
        "custom": st.dictionaries(st.text(max_size=3), _scalar, max_size=2),
        "scoreMode": st.none() | st.sampled_from(["model", "heuristic"]),
    },
)


@settings(max_examples=300, deadline=None)
@given(row=_rows)
def test_an_entry_written_back_and_read_again_is_the_same_entry(row: dict[str, Any]) -> None:
    try:
        entry = entry_from_row(row)
    except ValueError:
        return  # refused rows are parsed, never hints
    back = entry_from_row(orjson.loads(orjson.dumps(entry.row())))
    assert tuple(back) == tuple(entry)


def test_a_store_as_opened_says_what_its_entries_come_from(tmp_path: Path) -> None:
    """`loaded_from` names the bytes of ``index.json`` (and the code that read them)
    while the entries are exactly its rows: parsed or from the snapshot alike; never
    after a log replay, a repair or a change. A snapshot written with it is the one
    parsing the file makes."""
    ids = _seed(tmp_path)
    assert open_session(tmp_path, SID).loaded_from is None  # the judge calls' log replayed
    store = open_session(tmp_path, SID)
    store.update_metas({})  # nothing: the log stays
    root = tmp_path / "sessions" / SID
    store._write_index()  # folded in, as the next archive commit does
    parsed = open_session(tmp_path, SID)
    source = parsed.loaded_from
    assert source is not None and source.endswith(str((root / "index.json").stat().st_size))
    with_source = save_index_snapshot(parsed.paths, parsed.index, source)
    assert with_source
    taken = (root / SNAPSHOT_NAME).read_bytes()
    (root / SNAPSHOT_NAME).unlink()
    assert save_index_snapshot(parsed.paths, parsed.index) == with_source
    assert (root / SNAPSHOT_NAME).read_bytes() == taken
    restored = open_session(tmp_path, SID)
    assert restored.loaded_from == source
    assert _values(restored.index) == _values(parsed.index)
    restored.update_meta(ids[1], {"alpha": 0.9})
    assert restored.loaded_from is None
    # a folder the index does not list: adopted, the index rewritten, nothing to name
    shutil.copytree(root / ids[2], root / "mem-20300101T000000Z-0001")
    meta = orjson.loads((root / "mem-20300101T000000Z-0001" / "meta.json").read_bytes())
    meta.update(id="mem-20300101T000000Z-0001", idempotencyKey="other")
    (root / "mem-20300101T000000Z-0001" / "meta.json").write_bytes(orjson.dumps(meta))
    repaired = open_session(tmp_path, SID)
    assert repaired.load_report.adopted == ["mem-20300101T000000Z-0001"]
    assert repaired.loaded_from is None


def test_the_index_is_hashed_while_the_directory_is_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a store hashes ``index.json`` in a worker thread during the listing of
    its directory: each waits until the other has begun (done one after the other,
    either would wait in vain), and the reopen takes the snapshot all the same."""
    _seed(tmp_path)
    store = open_session(tmp_path, SID)
    assert save_index_snapshot(store.paths, store.index)
    hashing, listing = threading.Event(), threading.Event()
    real_identity, real_scan = snap._file_identity, recovery._Recovery.scan

    def identity(path: Path) -> Any:
        hashing.set()
        assert listing.wait(2), "index.json hashed before the listing began"
        return real_identity(path)

    def scan(self: Any) -> Any:
        listing.set()
        assert hashing.wait(2), "the directory listed before the hashing began"
        return real_scan(self)

    monkeypatch.setattr(snap, "_file_identity", identity)
    monkeypatch.setattr(recovery._Recovery, "scan", scan)
    hits = _hits(monkeypatch)
    again = open_session(tmp_path, SID)
    assert hits == [True] and hashing.is_set() and listing.is_set()
    assert _values(again.index) == _values(store.index)
