"""The surfaced-memory ledger in the recall state (`RecallState.ledger`): held in the
form its file holds ([round, α], the round an int), so a save copies the mapping instead
of rebuilding every entry (a fair session's ledger grows to `ledger.maxEntries`, 10⁴ by
default); what a save commits and what a restart reads back stay exactly as before."""

from __future__ import annotations

from pathlib import Path

import orjson

from engine.recall import RecallState, read_state_file
from engine.recall.state_log import log_path

ENTRIES = 10_000


def _ledger_lines(path: Path) -> list[dict[str, object]]:
    lines = [orjson.loads(line) for line in log_path(path).read_bytes().splitlines()]
    return [line["ledger"] for line in lines if "ledger" in line]


def test_a_saved_ledger_reads_back_entry_for_entry(tmp_path: Path) -> None:
    path = tmp_path / "recall-state.json"
    rs = RecallState(path=path)
    for i in range(ENTRIES):
        rs.round = i // 10
        rs.surface(f"mem-{i:06d}", 0.25 + (i % 4) / 10, ENTRIES)
    rs.save()  # the snapshot
    expected = {f"mem-{i:06d}": [i // 10, 0.25 + (i % 4) / 10] for i in range(ENTRIES)}
    assert orjson.loads(path.read_bytes())["ledger"] == expected
    assert all(type(v[0]) is int for v in rs.to_json()["ledger"].values())

    rs.round = 5000
    rs.surface("mem-000007", 0.9, ENTRIES)  # surfaced again: moves to the end
    rs.surface("mem-new", 0.1, ENTRIES)  # one over the cap: the oldest lowest α goes
    rs.save()
    assert _ledger_lines(path) == [
        {"set": {"mem-000007": [5000, 0.9], "mem-new": [5000, 0.1]}, "del": ["mem-000000"]}
    ]
    back, discarded = read_state_file(path)
    assert discarded is None
    assert back.ledger == rs.ledger
    assert list(back.ledger)[-2:] == ["mem-000007", "mem-new"]
    assert back.last_surfaced("mem-000007") == 5000
    assert back.to_json() == rs.to_json()

    # what the last save committed is not changed by what the state does next
    committed = back.log_state.written
    assert committed is not None
    before = orjson.dumps(committed)
    back.round = 5001
    back.surface("mem-000008", 0.5, ENTRIES)
    assert orjson.dumps(committed) == before
    back.save()
    assert _ledger_lines(path)[-1] == {"set": {"mem-000008": [5001, 0.5]}, "del": []}
    assert read_state_file(path)[0].ledger == back.ledger


def test_a_file_with_float_rounds_reads_as_it_always_did(tmp_path: Path) -> None:
    path = tmp_path / "recall-state.json"
    doc = RecallState().to_json()
    doc["ledger"] = {"a": [3.0, 1], "b": [7.9, 0.5], "bad": [1], "c": ["x", 0.2]}
    path.write_bytes(orjson.dumps(doc))
    rs, _ = read_state_file(path)
    assert rs.ledger == {"a": [3, 1.0], "b": [7, 0.5], "c": [0, 0.2]}
    assert orjson.dumps(rs.to_json()["ledger"]) == b'{"a":[3,1.0],"b":[7,0.5],"c":[0,0.2]}'
