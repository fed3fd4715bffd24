"""The recall state's snapshot and log (`engine.recall.state_log`): what a crash leaves
is read back as the state of the last committed save, or the one before it, never a mix.
"""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine import jsonio
from engine.recall import RecallState, load_state_file, prepare_state, read_state_file
from engine.recall import state as state_module
from engine.recall.candidates import CandidateIndex
from engine.recall.state import fold_state_log
from engine.recall.state_log import apply_record, encode_record, log_path
from engine.store import SessionStore
from tests.engine.recall_fixtures import BASE_MS, ask_round, config, new_store, write_folders

FOLDERS = 14


def _store(tmp: Path) -> SessionStore:
    store = new_store(tmp)
    folders = [
        {
            "createdAt": BASE_MS + i * 60_000,
            "alpha": 0.2 + 0.05 * i,
            "beta": i % 3 - 1,
            "keywords": ["星港项目", f"词{i}"],
            "messages": [
                {"role": "user", "content": f"星港项目第{i}条：昨天我们讨论了发布计划和测试的安排"},
                {
                    "role": "assistant",
                    "content": f"好的，第{i}条记下了，下周再确认一次时间表与负责人",
                },
            ],
        }
        for i in range(FOLDERS)
    ]
    write_folders(store, folders)
    return store


def _doc(rs: RecallState) -> dict[str, Any]:
    """The state as its file would hold it (through JSON, like a reader gets it)."""
    loaded: dict[str, Any] = orjson.loads(orjson.dumps(rs.to_json()))
    return loaded


def _saves(tmp: Path, rounds: int) -> tuple[SessionStore, RecallState, list[dict[str, Any]]]:
    """Rounds saved one after another, trimming and re-archiving on the way; the
    document after each save."""
    store = _store(tmp)
    cfg = config(maxRecalledBlocks=4)
    rs = RecallState(path=store.paths.recall_state)
    prepare_state(rs, store, cfg)
    index = CandidateIndex(store.index, cfg)
    docs: list[dict[str, Any]] = []
    for t in range(1, rounds + 1):
        text = f"词{t % FOLDERS}和词{(5 * t) % FOLDERS}的发布计划"
        ask_round(store, index, rs, text, cfg, turn=t, now_ms=BASE_MS + t)
        rs.remember_message(f"m{t}")
        rs.save()
        docs.append(_doc(rs))
        if t == 3:  # re-archive shrinks the block (a save of its own)
            rs.remove_for_rearchive(rs.ids()[:1], [], t)
            docs.append(_doc(rs))
    return store, rs, docs


def _whole_lines(data: bytes) -> int:
    return data.count(b"\n")


def test_every_save_reads_back_exactly(tmp_path: Path) -> None:
    store, _, docs = _saves(tmp_path, 8)
    log = log_path(store.paths.recall_state).read_bytes()
    base = orjson.loads(store.paths.recall_state.read_bytes())["logBase"]
    lines = [orjson.loads(line) for line in log.splitlines()]
    assert [(r["base"], r["n"]) for r in lines] == [(base, n + 1) for n in range(len(lines))]
    assert base > 1 and lines  # it compacted on the way, and appended since
    assert _doc(load_state_file(store.paths.recall_state)) == docs[-1]
    # the test covers what a round changes: entries in and out, the ledger, the block
    assert len({tuple(d["ids"]) for d in docs}) > 3
    assert any(len(d["ledger"]) > len(docs[0]["ledger"]) for d in docs)
    assert len(log) < sum(len(orjson.dumps(d)) for d in docs[-len(lines) :]) / 2


def test_a_torn_log_reads_a_committed_state_at_every_byte(tmp_path: Path) -> None:
    """Cut the log at every byte offset: the state read is the one its whole lines
    commit (the save being written when it was cut never happened), and the next save
    after such a read writes a snapshot, so no line ever follows a torn one."""
    store, _, docs = _saves(tmp_path / "a", 6)
    snapshot = store.paths.recall_state.read_bytes()
    log = log_path(store.paths.recall_state).read_bytes()
    where = tmp_path / "b" / "recall-state.json"
    where.parent.mkdir(parents=True)
    where.write_bytes(snapshot)
    at_snapshot = len(docs) - 1 - _whole_lines(log)
    assert at_snapshot >= 0 and _whole_lines(log) >= 2
    for cut in range(len(log) + 1):
        log_path(where).write_bytes(log[:cut])
        state, discarded = read_state_file(where, persist=False)
        assert discarded is None
        assert _doc(state) == docs[at_snapshot + _whole_lines(log[:cut])], cut
    for cut in (len(log) - 1, len(log) // 2):
        log_path(where).write_bytes(log[:cut])
        state = load_state_file(where)
        state.remember_message(f"after-{cut}")
        state.save()
        assert not log_path(where).exists()  # a snapshot, not a line after the torn one
        assert _doc(load_state_file(where)) == _doc(state)
        where.write_bytes(snapshot)


def test_a_line_of_garbage_or_out_of_order_stops_the_replay(tmp_path: Path) -> None:
    store, _, docs = _saves(tmp_path, 5)
    path = store.paths.recall_state
    base = orjson.loads(path.read_bytes())["logBase"]
    lines = log_path(path).read_bytes().splitlines(keepends=True)
    assert len(lines) >= 2
    first = len(docs) - len(lines)  # the document the first line commits
    wrong = orjson.dumps({"base": base, "n": 7}) + b"\n"
    for bad in (wrong, b"[1, 2]\n", b"{}\n"):
        log_path(path).write_bytes(lines[0] + bad + b"".join(lines[1:]))
        assert _doc(load_state_file(path)) == docs[first]
    # a line of another (older) base is skipped, not a stop
    other = orjson.dumps({"base": base - 1, "n": 1, "set": {"round": 99}}) + b"\n"
    log_path(path).write_bytes(other + b"".join(lines))
    assert _doc(load_state_file(path)) == docs[-1]


def test_a_crash_while_compacting_reads_one_whole_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log is due: the next save writes a snapshot. Killed before its rename, the old
    snapshot and log are read; after the rename but before the log is removed, the new
    snapshot alone (the old lines name the old base)."""
    store, rs, docs = _saves(tmp_path, 4)
    path = store.paths.recall_state
    assert rs.log_state.records >= 1 and log_path(path).exists()
    monkeypatch.setattr(state_module, "MAX_RECORDS", rs.log_state.records)
    rs.remember_message("compact")

    def killed(src: Path, dst: Path) -> None:
        raise OSError("killed before the rename")

    with monkeypatch.context() as m:
        m.setattr(jsonio.fs, "replace", killed)
        with pytest.raises(OSError):
            rs.save()
    assert _doc(load_state_file(path)) == docs[-1]
    old_log = log_path(path).read_bytes()

    def kept(p: Path) -> None:
        raise OSError("killed before the log was removed")

    with monkeypatch.context() as m:
        m.setattr(jsonio.fs, "unlink", kept)
        rs.save()
    assert log_path(path).read_bytes() == old_log
    assert _doc(load_state_file(path)) == _doc(rs)
    # the next saves go on from the new snapshot (the stale log goes first)
    rs.remember_message("next")
    rs.save()
    rs.remember_message("and next")
    rs.save()
    assert _doc(load_state_file(path)) == _doc(rs)


def test_a_failed_append_is_followed_by_a_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, rs, docs = _saves(tmp_path, 3)
    path = store.paths.recall_state
    rs.remember_message("lost")

    def full(p: Path, data: bytes) -> None:
        with p.open("ab") as fh:
            fh.write(data[: len(data) // 2])  # half a line, then the disk is full
        raise OSError("no space")

    with monkeypatch.context() as m:
        m.setattr(jsonio.fs, "append_sync", full)
        with pytest.raises(OSError):
            rs.save()
    assert _doc(load_state_file(path)) == docs[-1]
    rs.save()
    assert not log_path(path).exists()
    assert _doc(load_state_file(path)) == _doc(rs)


def test_restore_and_missing_snapshot_never_reuse_a_base(tmp_path: Path) -> None:
    """A state written again from scratch (the snapshot gone, the log still there) takes
    a base past every line, so no old line is replayed over it."""
    store, rs, _ = _saves(tmp_path, 4)
    path = store.paths.recall_state
    before = rs.snapshot()
    path.unlink()
    fresh = load_state_file(path)
    assert fresh.block == ""
    fresh.remember_message("x")
    fresh.save()
    assert _doc(load_state_file(path)) == _doc(fresh)
    again = load_state_file(path)
    again.restore(before)
    assert load_state_file(path).block == rs.block


def test_fold_leaves_one_file_with_the_whole_state(tmp_path: Path) -> None:
    store, _, docs = _saves(tmp_path, 4)
    path = store.paths.recall_state
    assert fold_state_log(path)
    assert not log_path(path).exists()
    doc = orjson.loads(path.read_bytes())
    doc.pop("logBase")
    assert doc == docs[-1]
    assert not fold_state_log(path)


def test_records_resolve_to_the_saved_documents(tmp_path: Path) -> None:
    _, _, docs = _saves(tmp_path, 8)
    for prev, doc in itertools.pairwise(docs):
        rec = orjson.loads(orjson.dumps(encode_record(copy.deepcopy(prev), doc, 1, 1)))
        assert apply_record(prev, rec) == doc
