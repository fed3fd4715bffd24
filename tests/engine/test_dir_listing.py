"""A store directory's listing (`engine.store.dir_listing`): the compiled one is
`os.scandir`'s, name for name and kind for kind, whatever the directory holds, and
recovery finds the same with either."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.store import dir_listing
from engine.store.dir_listing import DIR, FILE, OTHER, Listing, listing, python_listing
from engine.store.ids import is_folder_id
from engine.store.layout import SessionPaths
from engine.store.recovery import recover

compiled = dir_listing._module.active()
needs_module = pytest.mark.skipif(compiled is None, reason="the compiled listing is not built")


def _compiled(path: Path, *, stat_all: bool = False) -> Listing:
    assert compiled is not None
    return Listing(*compiled.folders_and_others(os.fspath(path), stat_all))


def _same(path: Path) -> Listing:
    """The compiled listing, checked against scandir's, both ways of telling kinds."""
    want = python_listing(path)
    for stat_all in (False, True):
        got = _compiled(path, stat_all=stat_all)
        assert got.folders == want.folders
        assert got.others == want.others  # the same order: the directory's
    return want


def _a_messy_directory(root: Path) -> None:
    """Everything a session directory can hold, and what it should not."""
    root.mkdir()
    # the longest name a directory can have: 255 bytes
    for name in ("mem-20260101T000000Z-0001", "mem-a", "mem-A.b_c-9", "mem-" + "x" * 251):
        (root / name).mkdir()
    (root / "mem-").mkdir()  # no suffix
    (root / "mem-bad name").mkdir()
    (root / "mem-ü").mkdir()  # not ASCII
    (root / "Mem-upper").mkdir()
    (root / "mem-a-file").write_text("{}")  # a folder's name, a file's kind
    (root / "mem-link").symlink_to(root / "mem-a")  # a link to a folder is not one
    (root / "dangling").symlink_to(root / "nowhere")
    (root / "index.json").write_text("{}")
    (root / ".index.json.1-2.tmp").write_text("")
    (root / ".commit-t1.json").write_text("{}")
    (root / ".staging-mem-20260101T000000Z-0002").mkdir()
    (root / "images").mkdir()
    os.mkfifo(root / "fifo")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(os.fspath(root / "sock"))
    os.mkdir(os.fsencode(root) + b"/mem-\xff")  # not UTF-8: surrogate-escaped, no folder
    (root / "mem-a" / "meta.json").write_text("{}")  # inside a folder: not listed


@needs_module
def test_a_messy_directory_lists_as_scandir_lists_it(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _a_messy_directory(root)
    got = _same(root)
    assert got.folders == {
        "mem-20260101T000000Z-0001",
        "mem-a",
        "mem-A.b_c-9",
        "mem-" + "x" * 251,
    }
    kinds = dict(got.others)
    assert kinds["mem-a-file"] == FILE and kinds["index.json"] == FILE
    assert kinds["mem-link"] == OTHER and kinds["dangling"] == OTHER
    assert kinds["fifo"] == OTHER and kinds["sock"] == OTHER
    assert kinds["mem-"] == DIR and kinds["mem-ü"] == DIR and kinds["images"] == DIR
    assert kinds[os.fsdecode(b"mem-\xff")] == DIR
    assert len(got.others) == len(kinds)  # each name once
    assert all(is_folder_id(name) for name in got.folders)


@needs_module
def test_more_entries_than_a_batch_holds(tmp_path: Path) -> None:
    """Thousands of entries, long names among them: the batches (1024 names, 256 kB)
    end mid-directory many times, and no entry is lost or listed twice."""
    root = tmp_path / "big"
    root.mkdir()
    for n in range(3000):
        (root / f"mem-{n:05d}-{'z' * (n % 200)}").mkdir()
        if n % 3 == 0:
            (root / f"other-{n}-{'q' * 240}").write_text("")
    got = _same(root)
    assert len(got.folders) == 3000 and len(got.others) == 1000


def _names() -> st.SearchStrategy[str]:
    alphabet = st.sampled_from("mem-ABCxyz019._ü \n")
    return st.text(alphabet, min_size=1, max_size=12).filter(
        lambda s: s not in (".", "..") and "/" not in s
    )


@needs_module
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(entries=st.dictionaries(_names(), st.sampled_from(["dir", "file", "link"]), max_size=25))
def test_any_names_and_kinds(
    tmp_path_factory: pytest.TempPathFactory, entries: dict[str, str]
) -> None:
    root = tmp_path_factory.mktemp("any")
    for name, kind in entries.items():
        path = root / name
        if kind == "dir":
            path.mkdir()
        elif kind == "file":
            path.write_text("x")
        else:
            path.symlink_to(root)
    got = _same(root)
    assert got.folders == {n for n, k in entries.items() if k == "dir" and is_folder_id(n)}
    assert sorted(n for n, _ in got.others) == sorted(set(entries) - got.folders)


@needs_module
def test_errors_are_scandirs(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    with pytest.raises(FileNotFoundError) as caught:
        _compiled(missing)
    assert caught.value.filename == os.fspath(missing)
    (tmp_path / "f").write_text("")
    with pytest.raises(NotADirectoryError):
        _compiled(tmp_path / "f")
    with pytest.raises(FileNotFoundError):
        python_listing(missing)


@pytest.fixture
def switched() -> Iterator[None]:
    yield
    dir_listing._module.use(True)


def test_turned_off_it_lists_with_scandir(
    tmp_path: Path, switched: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "s"
    _a_messy_directory(root)
    dir_listing._module.use(False)
    calls: list[Path] = []
    real = dir_listing.python_listing

    def counted(path: Path) -> Listing:
        calls.append(path)
        return real(path)

    monkeypatch.setattr(dir_listing, "python_listing", counted)
    assert listing(root) == real(root) and calls == [root]
    assert dir_listing.state(False) in ("off", "not built")


def test_recovery_finds_the_same_either_way(tmp_path: Path, switched: None) -> None:
    """A directory left by crashes (temp files, a journal, a staging folder, an orphan,
    a file by a folder's name) recovers to the same store with the listing on or off."""
    reports = []
    for on in (True, False):
        dir_listing._module.use(on)
        root = tmp_path / f"r{on}"
        _a_messy_directory(root)
        paths = SessionPaths(tmp_path, root)
        state = recover(paths)
        reports.append(
            (
                sorted(state.report.temp_removed),
                sorted(state.report.adopted),
                sorted(c.folder_id for c in state.report.corrupt_folders),
                sorted(state.entries),
                sorted(p.name for p in root.iterdir()),
            )
        )
    assert reports[0] == reports[1]
    assert ".index.json.1-2.tmp" in reports[0][0]  # the temp file went
