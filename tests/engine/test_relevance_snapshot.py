"""Relevance index snapshots: a restored-then-synced index is a fresh build, bit for bit;
it reads only the folders that changed; a snapshot that cannot be trusted is never used;
a crash while writing one leaves the old file or the new one."""

from __future__ import annotations

import os
import struct
import tempfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import jsonio
from engine.jsonio import FsOps, is_temp_name
from engine.relevance import entry_keys, passages, snapshot
from engine.relevance.folder_text import SNAPSHOT_NAME, save_index, synced_index
from engine.relevance.index import KEYS_SECTION, RelevanceIndex
from engine.relevance.snapshot import SnapshotError, read_snapshot, write_snapshot
from engine.store import open_session
from tests.engine.recall_fixtures import BASE_MS, write_folders
from tests.engine.relevance_fixtures import E

_WORDS = ["tokyo", "budget", "guitar", "port", "杭州", "会议", "deploy", "sushi"]
OWNER = "/mem/sessions/s"
VERSION = "texts-v1"
QUERIES = (["tokyo"], ["budget", "port"], ["杭州", "guitar", "talk"], ["deploy", "x", "会议"])


def text(fid: str, created: int = 0) -> str:
    i = int(fid[1:])
    w = _WORDS
    return (
        f"{w[i % 8]} and {w[(i * 3 + created) % 8]} talk\n{w[(i * 5) % 8]} x\n{'port ' * (i % 4)}"
    )


class Texts:
    """Folder texts by id (what the store would read), counting the reads."""

    def __init__(self, created: dict[str, int] | None = None) -> None:
        self.created = created or {}
        self.unreadable: set[str] = set()
        self.reads: list[str] = []

    def __call__(self, fid: str) -> str | None:
        self.reads.append(fid)
        if fid in self.unreadable:
            return None
        return text(fid, self.created.get(fid, 0))


def fresh(entries: list[E], texts: Callable[[str], str | None] | None = None) -> RelevanceIndex:
    idx = RelevanceIndex(texts or Texts())
    idx.sync(entries)
    return idx


def assert_same(a: RelevanceIndex, b: RelevanceIndex) -> None:
    """The same answers, bit for bit: rankings (folder and passage level, with and
    without the α prior), document counts and frequencies."""
    for q in QUERIES:
        for pw in (0.0, 0.5):
            for prior in (0.0, 0.2):
                got = a.rank(q, limit=20, alpha_prior=prior, passage_weight=pw)
                want = b.rank(q, limit=20, alpha_prior=prior, passage_weight=pw)
                assert got == want, (q, pw, prior)
    assert a.docs == b.docs
    for w in [*_WORDS, "talk", "x", "a0", "a1"]:
        assert a.df(w) == b.df(w)


def roundtrip(
    idx: RelevanceIndex, path: Path, texts: Callable[[str], str | None]
) -> RelevanceIndex:
    write_snapshot(path, idx, owner=OWNER, text_version=VERSION)
    return read_snapshot(path, texts, owner=OWNER, extra_stopwords=(), text_version=VERSION)


def entries_of(n: int, **fields: Any) -> list[E]:
    return [
        E(f"f{i:02d}", alpha=0.1 + (i % 9) / 10, keywords=(f"a{i % 2}",), **fields)
        for i in range(n)
    ]


_POOL = [f"f{i:02d}" for i in range(14)]


@st.composite
def _histories(draw: st.DrawFn) -> list[tuple[list[E], bool]]:
    """Store states one after the other, each with whether the daemon restarts (the
    index goes through its snapshot) before syncing to it."""
    out = []
    for _ in range(draw(st.integers(1, 6))):
        ids = draw(st.lists(st.sampled_from(_POOL), unique=True, max_size=12))
        entries = [
            E(
                fid,
                alpha=draw(st.sampled_from([0.1, 0.5, 0.9])),
                keywords=tuple(draw(st.lists(st.sampled_from(_WORDS), max_size=3))),
                title=draw(st.sampled_from(["", "deploy plan"])),
                scored=draw(st.sampled_from([True, True, True, False])),
            )
            for fid in ids
        ]
        out.append((entries, draw(st.booleans())))
    return out


@contextmanager
def chunks_of(size: int) -> Iterator[None]:
    """Snapshots written meanwhile store their keys in chunks of `size`."""
    saved = entry_keys.CHUNK
    entry_keys.CHUNK = size
    try:
        yield
    finally:
        entry_keys.CHUNK = saved


@settings(max_examples=100, deadline=None)
@given(_histories(), st.sampled_from([1, 3, 256]))
def test_a_restored_then_synced_index_is_a_fresh_build(
    history: list[tuple[list[E], bool]], chunk: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp, chunks_of(chunk):
        path = Path(tmp) / "snap"
        live = RelevanceIndex(Texts())
        for entries, restart in history:
            if restart:
                live = roundtrip(live, path, Texts())
            live.sync(entries)
            assert_same(live, fresh(entries))
        # and once more from the last state, synced to it unchanged
        again = roundtrip(live, path, Texts())
        again.sync(history[-1][0])
        assert_same(again, fresh(history[-1][0]))


@settings(max_examples=40, deadline=None)
@given(_histories())
def test_term_ids_outgrowing_two_bytes_change_nothing(
    history: list[tuple[list[E], bool]],
) -> None:
    """The passages keep term ids in two bytes until one needs four: an index whose
    column is widened early (here past term id 3), restored or not, answers as a fresh
    build whose column never was."""
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        path = Path(tmp) / "snap"
        mp.setattr(passages, "_NARROW_MAX", 3)
        live = RelevanceIndex(Texts())
        for entries, restart in history:
            if restart:
                live = roundtrip(live, path, Texts())
            live.sync(entries)
            with mp.context() as wide:
                wide.setattr(passages, "_NARROW_MAX", 1 << 31)
                assert_same(live, fresh(entries))


def test_a_restart_reads_only_the_folders_that_changed(tmp_path: Path) -> None:
    path = tmp_path / "snap"
    entries = entries_of(12)
    built = fresh(entries)
    write_snapshot(path, built, owner=OWNER, text_version=VERSION)

    texts = Texts()
    same = read_snapshot(path, texts, owner=OWNER, extra_stopwords=(), text_version=VERSION)
    assert same.sync(entries) == 0
    assert texts.reads == []
    assert_same(same, built)

    # judged (keywords, α), one new folder, one gone: only the new one is read
    later = [replace(e, keywords=("deploy",)) if e.id == "f03" else e for e in entries[1:]]
    later = [replace(e, alpha=0.95) if e.id == "f04" else e for e in later]
    later.append(E("f12", keywords=("sushi",)))
    texts = Texts()
    restored = read_snapshot(path, texts, owner=OWNER, extra_stopwords=(), text_version=VERSION)
    assert restored.sync(later) == 3  # f00 gone, f03 re-indexed, f12 added (α is no change)
    assert texts.reads == ["f12"]
    assert_same(restored, fresh(later))
    assert restored.rank(["deploy"], limit=3).ids[0] == "f03"


def test_changes_in_some_chunks_of_keys_leave_the_others_unread(tmp_path: Path) -> None:
    """Keys stored in chunks of 4: a folder gone from the middle, one judged again, an α
    changed, the store's order reversed and a new folder: only the new one is read."""
    path = tmp_path / "snap"
    entries = entries_of(30)
    with chunks_of(4):
        write_snapshot(path, fresh(entries), owner=OWNER, text_version=VERSION)
    later = [e for e in entries if e.id != "f13"]
    later = [replace(e, keywords=("sushi", "tokyo")) if e.id == "f06" else e for e in later]
    later = [replace(e, alpha=0.01) if e.id == "f21" else e for e in later]
    later = [*reversed(later), E("f30", keywords=("会议",))]
    texts = Texts()
    restored = read_snapshot(path, texts, owner=OWNER, extra_stopwords=(), text_version=VERSION)
    assert restored.sync(later) == 3  # f13 gone, f06 indexed again, f30 new
    assert texts.reads == ["f30"]
    assert_same(restored, fresh(later))


def test_a_reused_folder_id_and_an_unread_text_are_read_again(tmp_path: Path) -> None:
    """A folder id handed out again after a rollback and a restart is another folder
    (other creation time, other text); a text that could not be read when the snapshot
    was taken is read again (it may have been repaired)."""
    path = tmp_path / "snap"
    entries = entries_of(6)
    broken = Texts()
    broken.unreadable = {"f02"}
    write_snapshot(path, fresh(entries, broken), owner=OWNER, text_version=VERSION)

    later = [replace(e, createdAt=7) if e.id == "f04" else e for e in entries]
    texts = Texts(created={"f04": 7})
    restored = read_snapshot(path, texts, owner=OWNER, extra_stopwords=(), text_version=VERSION)
    restored.sync(later)
    assert sorted(texts.reads) == ["f02", "f04"]
    assert_same(restored, fresh(later, Texts(created={"f04": 7})))
    # still unreadable: found by its fields alone, and marked again in the next snapshot
    still = Texts()
    still.unreadable = {"f02"}
    again = read_snapshot(path, still, owner=OWNER, extra_stopwords=(), text_version=VERSION)
    again.sync(entries)
    assert still.reads == ["f02"]
    once_more = roundtrip(again, path, Texts())
    reads = once_more.text_of
    once_more.sync(entries)
    assert isinstance(reads, Texts) and reads.reads == ["f02"]


def test_a_snapshot_of_a_restored_index_before_its_first_sync_is_the_same(tmp_path: Path) -> None:
    entries = entries_of(9)
    first = tmp_path / "a"
    write_snapshot(first, fresh(entries), owner=OWNER, text_version=VERSION)
    loaded = read_snapshot(first, Texts(), owner=OWNER, extra_stopwords=(), text_version=VERSION)
    second = tmp_path / "b"
    write_snapshot(second, loaded, owner=OWNER, text_version=VERSION)
    assert second.read_bytes() == first.read_bytes()


def test_unsaved_changes_are_counted_until_a_snapshot_holds_them(tmp_path: Path) -> None:
    idx = fresh(entries_of(5))
    assert idx.unsaved == 5 and not idx.saved
    write_snapshot(tmp_path / "s", idx, owner=OWNER, text_version=VERSION)
    assert idx.unsaved == 0 and idx.saved
    idx.sync(entries_of(6))
    assert idx.unsaved == 1


# -- snapshots that are not used ------------------------------------------------------


def _valid(tmp_path: Path) -> tuple[Path, list[E]]:
    path = tmp_path / "snap"
    entries = entries_of(10)
    write_snapshot(path, fresh(entries), owner=OWNER, text_version=VERSION)
    return path, entries


def _sections(data: bytes) -> tuple[dict[str, Any], dict[str, tuple[int, int]]]:
    """The header of a snapshot file and where each section's bytes are."""
    (header_len,) = struct.unpack_from("<Q", data, 8)
    header = orjson.loads(data[16 : 16 + header_len])
    at = 16 + header_len
    spans = {}
    for name, code, count in header["sections"]:
        size = count * np.dtype(code).itemsize
        spans[name] = (at, at + size)
        at += size
    return header, spans


def _rewritten(data: bytes, edit: Callable[[bytearray, dict[str, Any]], None]) -> bytes:
    """`data` with `edit` applied to its body and header, every checksum made right
    again: a file only the checks after the checksums can refuse."""
    header, spans = _sections(data)
    body = bytearray(data[16 + struct.unpack_from("<Q", data, 8)[0] : -8])
    start = min(a for a, _ in spans.values())
    edit(body, header)
    header["sums"] = [
        f"{snapshot.word_sum(bytes(body[a - start : b - start])):016x}" for a, b in spans.values()
    ]
    raw = orjson.dumps(header)
    head = data[:8] + struct.pack("<Q", len(raw)) + raw
    return head + bytes(body) + struct.pack("<I4s", zlib.crc32(head), snapshot.END)


def _flip(data: bytes) -> bytes:
    out = bytearray(data)
    out[len(out) // 2] ^= 0x40
    return bytes(out)


def _dead(body: bytearray, header: dict[str, Any]) -> None:
    """Every document dead, the count of live ones kept."""
    at = 0
    for name, code, count in header["sections"]:
        size = count * np.dtype(code).itemsize
        if name == "i.live":
            body[at : at + size] = bytes(size)
        at += size


def _header(**changes: Any) -> Callable[[bytes], bytes]:
    return lambda d: _rewritten(d, lambda body, header: header.update(changes))


BAD: dict[str, tuple[Callable[[bytes], bytes], str]] = {
    "empty": (lambda d: b"", "truncated"),
    "garbage": (lambda d: b"\x00garbage" * 50, "not a relevance index snapshot"),
    "truncated in the header": (lambda d: d[:20], "truncated"),
    "truncated in the arrays": (lambda d: d[: len(d) // 2], "truncated"),
    "truncated by one byte": (lambda d: d[:-1], "truncated"),
    "one byte longer": (lambda d: d + b"\x00", "overlong"),
    "a flipped bit": (_flip, "checksum mismatch in"),
    "a flipped bit in the header": (
        lambda d: d[:40] + bytes([d[40] ^ 0x01]) + d[41:],
        ".+",
    ),
    "consistent checksums, inconsistent arrays": (
        lambda d: _rewritten(d, _dead),
        "inconsistent arrays",
    ),
    "another format": (_header(format=snapshot.FORMAT + 1), "another version"),
    "the format before flat tf parts": (_header(format=2), "another version"),
    "another analyser": (_header(fingerprint="0" * 32), "another version"),
    "another store": (_header(owner="/elsewhere"), "another store"),
    "other extra stopwords": (_header(extra=["tokyo"]), "extraStopwords"),
    "a broken section table": (_header(sections=[["i.len", "i8", -1]]), "section table"),
}


@pytest.mark.parametrize("damage", sorted(BAD))
def test_a_damaged_or_foreign_snapshot_is_refused(tmp_path: Path, damage: str) -> None:
    path, _ = _valid(tmp_path)
    transform, reason = BAD[damage]
    path.write_bytes(transform(path.read_bytes()))
    with pytest.raises(SnapshotError, match=reason):
        read_snapshot(path, Texts(), owner=OWNER, extra_stopwords=(), text_version=VERSION)


def test_a_rewritten_file_with_right_checksums_is_read() -> None:
    """The test's own rewriting keeps a file valid when it edits nothing (so the
    refusals above are for what each edit breaks, not for the rewriting)."""
    with tempfile.TemporaryDirectory() as tmp:
        path, entries = _valid(Path(tmp))
        path.write_bytes(_rewritten(path.read_bytes(), lambda body, header: None))
        loaded = read_snapshot(path, Texts(), owner=OWNER, extra_stopwords=(), text_version=VERSION)
        loaded.sync(entries)
        assert_same(loaded, fresh(entries))


def test_another_text_version_or_stopwords_or_owner_of_the_reader_is_refused(
    tmp_path: Path,
) -> None:
    path, _ = _valid(tmp_path)
    for owner, extra, version in (
        ("/elsewhere", (), VERSION),
        (OWNER, ("budget",), VERSION),
        (OWNER, (), "texts-v2"),
    ):
        with pytest.raises(SnapshotError):
            read_snapshot(path, Texts(), owner=owner, extra_stopwords=extra, text_version=version)
    with pytest.raises(FileNotFoundError):
        read_snapshot(
            tmp_path / "none", Texts(), owner=OWNER, extra_stopwords=(), text_version=VERSION
        )


# -- the stored keys, left on disk by a stamped restore ---------------------------------

STAMP = "index.json:stamp-1"


def _stamped(tmp_path: Path, entries: list[E]) -> Path:
    path = tmp_path / "snap"
    write_snapshot(path, fresh(entries), owner=OWNER, text_version=VERSION, source=lambda _i: STAMP)
    return path


def _read(path: Path, texts: Texts, source: str | None = STAMP) -> RelevanceIndex:
    return read_snapshot(
        path, texts, owner=OWNER, extra_stopwords=(), text_version=VERSION, source=source
    )


def _damage_keys(path: Path) -> None:
    """One flipped bit inside the stored keys, their checksum left as it was."""
    data = bytearray(path.read_bytes())
    _, spans = _sections(bytes(data))
    start, end = spans[KEYS_SECTION]
    assert end - start > 10
    data[(start + end) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


needs_proc = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")


def test_a_stamped_restore_never_reads_the_stored_keys(tmp_path: Path) -> None:
    """Its first sync takes the stamped entries as they are: the keys, a quarter of the
    file at 10^5 folders, are not even read. A flipped bit in them shows it: the stamped
    restore is used, an unstamped one refuses the file."""
    entries = entries_of(12)
    path = _stamped(tmp_path, entries)
    _damage_keys(path)
    texts = Texts()
    loaded = _read(path, texts)
    assert loaded.sync(entries) == 0
    assert texts.reads == []
    assert_same(loaded, fresh(entries))
    with pytest.raises(SnapshotError, match=f"checksum mismatch in {KEYS_SECTION}"):
        _read(path, Texts(), source=None)


def _names_decoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times restores decoded their documents' stored ids."""
    calls: list[int] = []
    real = RelevanceIndex._name_documents

    def spied(index: RelevanceIndex, names: bytes) -> None:
        calls.append(len(names))
        real(index, names)

    monkeypatch.setattr(RelevanceIndex, "_name_documents", spied)
    return calls


def test_a_stamped_restore_of_its_very_entries_never_decodes_their_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stored ids are compared as bytes with the entries' ids and the documents are
    named with the entries' own strings; entries that differ (a folder gone), and an
    unstamped restore, decode them as ever."""
    entries = entries_of(12)
    path = _stamped(tmp_path, entries)
    decoded = _names_decoded(monkeypatch)
    loaded = _read(path, Texts())
    assert loaded.sync(entries) == 0 and decoded == []
    assert_same(loaded, fresh(entries))
    assert all(a is e.id for a, e in zip(loaded._doc_ids, entries, strict=True))
    fewer = entries[:-1]
    again = _read(path, Texts())
    assert again.sync(fewer) == 1 and len(decoded) == 1
    assert_same(again, fresh(fewer))
    unstamped = _read(path, Texts(), source=None)
    assert len(decoded) == 2  # at once
    assert unstamped.sync(entries) == 0 and len(decoded) == 2
    assert_same(unstamped, fresh(entries))


def test_stored_ids_that_name_no_documents_fail_the_first_sync_of_a_stamped_restore(
    tmp_path: Path,
) -> None:
    """Two documents under one id, checksums made right: a stamped restore no longer
    reads the ids at once, so its first sync refuses them (ValueError: the caller builds
    the index afresh), as an unstamped restore refuses the file."""
    entries = entries_of(12)
    path = _stamped(tmp_path, entries)

    def same_id(body: bytearray, header: dict[str, Any]) -> None:
        at = 0
        for name, code, count in header["sections"]:
            size = count * np.dtype(code).itemsize
            if name == "i.doc_ids":
                ids = bytes(body[at : at + size]).replace(b"f03", b"f02")
                body[at : at + size] = ids
            at += size

    path.write_bytes(_rewritten(path.read_bytes(), same_id))
    loaded = _read(path, Texts())
    with pytest.raises(ValueError, match="document ids do not fit"):
        loaded.sync(entries)
    with pytest.raises(SnapshotError, match="inconsistent arrays"):
        _read(path, Texts(), source=None)


def test_a_stamped_restore_whose_entries_changed_reads_and_checks_the_keys(
    tmp_path: Path,
) -> None:
    """Entries that do not name the stamped documents one to one (a folder gone) are
    compared with the stored keys, read then: the changed folder is indexed again (its
    fields only: no text is read); damaged keys fail that sync (the caller builds the
    index afresh), never pass unchecked."""
    entries = entries_of(12)
    path = _stamped(tmp_path, entries)
    changed = [replace(e, keywords=("deploy",)) if e.id == "f03" else e for e in entries[:-1]]
    texts = Texts()
    loaded = _read(path, texts)
    assert loaded.sync(changed) == 2
    assert texts.reads == []
    assert_same(loaded, fresh(changed))
    _damage_keys(path)
    damaged = _read(path, Texts())
    with pytest.raises(ValueError, match="checksum mismatch"):
        damaged.sync(changed)


def test_the_keys_left_on_disk_are_those_of_the_file_restored_even_once_it_is_replaced(
    tmp_path: Path,
) -> None:
    entries = entries_of(12)
    path = _stamped(tmp_path, entries)
    loaded = _read(path, Texts())
    other = tmp_path / "other"
    write_snapshot(other, fresh(entries_of(3)), owner=OWNER, text_version=VERSION)
    os.replace(other, path)  # a newer snapshot, written whole, takes the name
    changed = entries[:-1]
    assert loaded.sync(changed) == 1
    assert_same(loaded, fresh(changed))


@needs_proc
def test_the_file_left_open_for_the_keys_is_closed_by_the_first_sync_or_a_refusal(
    tmp_path: Path,
) -> None:
    entries = entries_of(12)
    path = _stamped(tmp_path, entries)
    before = _open_fds()
    for synced in (entries, entries[:-1]):  # taken as stamped; compared (keys read)
        loaded = _read(path, Texts())
        assert _open_fds() == before + 1
        loaded.sync(synced)
        assert _open_fds() == before
    unsynced = _read(path, Texts())
    assert _open_fds() == before + 1
    del unsynced  # an index dropped before its first sync lets the file go too
    assert _open_fds() == before
    path.write_bytes(_rewritten(path.read_bytes(), _dead))  # refused after the read
    with pytest.raises(SnapshotError, match="inconsistent arrays"):
        _read(path, Texts())
    assert _open_fds() == before


def test_a_later_section_reads_once_and_not_after_it_was_closed(tmp_path: Path) -> None:
    path = _stamped(tmp_path, entries_of(5))

    def leave_keys(_header: dict[str, Any]) -> list[str]:
        return [KEYS_SECTION]

    arrays, later = snapshot.read_sections_leaving(
        path, snapshot.MAGIC, "a relevance index snapshot", lambda _h: None, leave_keys
    )
    assert KEYS_SECTION not in arrays and set(later) == {KEYS_SECTION}
    section = later[KEYS_SECTION]
    whole = snapshot.read_sections(
        path, snapshot.MAGIC, "a relevance index snapshot", lambda _h: None
    )
    assert section.read() == whole[KEYS_SECTION].tobytes()
    with pytest.raises(SnapshotError, match="closed"):
        section.read()


# -- a crash while writing -------------------------------------------------------------


class Injected(OSError):
    """The injected failure."""


class FaultyFs(FsOps):
    """Fails the n-th filesystem step; in crash mode, every later one as well (the
    process is gone: no cleanup), and a failing file write leaves a torn temp file."""

    def __init__(self, fail_at: int, crash: bool) -> None:
        self.count = 0
        self.fail_at = fail_at
        self.crash = crash

    def _fails(self) -> bool:
        n, self.count = self.count, self.count + 1
        return n == self.fail_at or (self.crash and n > self.fail_at)

    def create_write_sync(self, path: Path, data: bytes) -> None:
        if self._fails():
            path.write_bytes(data[: len(data) // 3])
            raise Injected(f"create {path.name}")
        path.write_bytes(data)

    def replace(self, src: Path, dst: Path) -> None:
        if self._fails():
            raise Injected(f"replace {dst.name}")
        src.replace(dst)

    def fsync_dir(self, path: Path) -> None:
        if self._fails():
            raise Injected(f"fsync {path.name}")

    def unlink(self, path: Path) -> None:
        if self._fails():
            raise Injected(f"unlink {path.name}")
        path.unlink(missing_ok=True)


@contextmanager
def faulty(fs: FsOps) -> Iterator[None]:
    saved = jsonio.fs
    jsonio.fs = fs
    try:
        yield
    finally:
        jsonio.fs = saved


@pytest.mark.parametrize("crash", [False, True])
def test_a_crash_while_writing_leaves_the_old_snapshot_or_the_new_one(
    tmp_path: Path, crash: bool
) -> None:
    path = tmp_path / "snap"
    old_entries, new_entries = entries_of(8), entries_of(11)
    write_snapshot(path, fresh(old_entries), owner=OWNER, text_version=VERSION)
    old_bytes = path.read_bytes()
    newer = fresh(new_entries)
    steps = 0
    outcomes = set()
    while True:
        path.write_bytes(old_bytes)
        fs = FaultyFs(steps, crash)
        with faulty(fs):
            try:
                write_snapshot(path, newer, owner=OWNER, text_version=VERSION)
                failed = False
            except Injected:
                failed = True
        if not failed:
            break  # every step passed: nothing left to interrupt
        steps += 1
        assert newer.unsaved > 0  # a failed write saved nothing
        # what a restart finds: the old snapshot or the new one, never a mix
        texts = Texts()
        loaded = read_snapshot(path, texts, owner=OWNER, extra_stopwords=(), text_version=VERSION)
        which = "old" if path.read_bytes() == old_bytes else "new"
        outcomes.add(which)
        loaded.sync(new_entries)
        assert_same(loaded, fresh(new_entries))
        assert texts.reads == (["f08", "f09", "f10"] if which == "old" else [])
        leftovers = [p.name for p in tmp_path.iterdir() if p.name != "snap"]
        assert all(is_temp_name(name) for name in leftovers)  # recovery removes them
        for name in leftovers:
            (tmp_path / name).unlink()
    assert steps >= 3  # create, replace, fsync of the directory were each interrupted
    assert outcomes == {"old", "new"}
    assert newer.unsaved == 0


# -- in a session directory ------------------------------------------------------------


def test_the_snapshot_file_is_no_folder_to_the_store_and_a_crashed_write_is_cleaned(
    tmp_path: Path,
) -> None:
    store = open_session(tmp_path, "s")
    ids = write_folders(
        store,
        [
            {
                "createdAt": BASE_MS + n * 1000,
                "keywords": [f"k{n}"],
                "messages": [{"role": "user", "content": f"deploy port {8000 + n}"}],
            }
            for n in range(5)
        ],
    )
    index, _ = synced_index(None, store, ())
    assert save_index(index) is not None
    snap = store.dir / SNAPSHOT_NAME
    written = snap.read_bytes()
    leftover = jsonio.temp_path(snap)  # what a crash in the middle of a write leaves
    leftover.write_bytes(written[:100])
    again = open_session(tmp_path, "s")
    report = again.load_report
    assert [e.id for e in again.index] == ids
    assert report.temp_removed == [leftover.name]
    assert not (report.adopted or report.corrupt_folders or report.removed_incomplete)
    assert snap.read_bytes() == written and not leftover.exists()
    assert open_session(tmp_path, "s").load_report.clean
