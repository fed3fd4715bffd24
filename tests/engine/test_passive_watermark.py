"""`.passive-watermark.json` (reference §3.2.6, E-03): v2 buckets per DSH session id, v1
read as the directory's own session, exact ranges, damage recovered."""

from __future__ import annotations

import itertools
from pathlib import Path

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.passive.watermark import (
    WATERMARK_NAME,
    Watermark,
    load_watermark,
    parse_watermark,
    save_watermark,
)


def test_v2_round_trip_keeps_each_session_apart(tmp_path: Path) -> None:
    wm = Watermark()
    wm.mark("s1", [0, 1, 2, 3, 9, 10])
    wm.mark("s2", [0, 1])  # a rebuilt session: its seqs start at 0 again
    path = tmp_path / WATERMARK_NAME
    save_watermark(path, wm, 123)
    doc = orjson.loads(path.read_bytes())
    assert doc == {
        "version": 2,
        "entries": [
            {"sessionId": "s1", "seq": 10, "ranges": [[0, 3], [9, 10]]},
            {"sessionId": "s2", "seq": 1, "ranges": [[0, 1]]},
        ],
        "updatedAt": 123,
    }
    back = load_watermark(path, default_session="s1")
    assert back.read_version == 2 and back.marks == wm.marks
    assert back.unhandled("s1", range(12)) == [4, 5, 6, 7, 8, 11]
    assert back.unhandled("s2", range(3)) == [2]
    assert back.unhandled("s3", [0]) == [0]


def test_an_entry_without_ranges_is_a_high_water_mark() -> None:
    """The reference's own v2 entries are `{sessionId, seq}`: every seq up to it."""
    wm = parse_watermark(
        {"version": 2, "entries": [{"sessionId": "s", "seq": 7}]}, default_session="x"
    )
    assert wm.unhandled("s", range(10)) == [8, 9]
    assert wm.high("s") == 7


def test_v1_files_belong_to_the_directory_session() -> None:
    for doc in ({"version": 1, "seq": 5}, {"lastSeq": 5}, {"watermark": 5}):
        wm = parse_watermark(doc, default_session="own")
        assert wm.read_version == 1
        assert wm.unhandled("own", range(7)) == [6], doc
        assert wm.unhandled("other", [0]) == [0]
    wm = parse_watermark({"version": 1, "seqs": [1, 2, 3, 7]}, default_session="own")
    assert wm.unhandled("own", range(9)) == [0, 4, 5, 6, 8]


def test_a_damaged_file_is_an_empty_watermark(tmp_path: Path) -> None:
    path = tmp_path / WATERMARK_NAME
    path.write_bytes(b'{"version": 2, "entr')
    wm = load_watermark(path, default_session="s")
    assert wm.damage and not wm.marks
    assert load_watermark(tmp_path / "missing.json", default_session="s").damage is None
    wm = parse_watermark([1, 2], default_session="s")
    assert wm.damage and not wm.marks
    wm = parse_watermark(
        {"version": 2, "entries": [{"sessionId": "s", "ranges": [[5, 1], "x", [2, 3]]}]},
        default_session="s",
    )
    assert wm.marks == {"s": [(2, 3)]}


@settings(max_examples=80, deadline=None)
@given(batches=st.lists(st.lists(st.integers(0, 300), max_size=40), max_size=8))
def test_marks_are_exactly_the_union_of_what_was_marked(batches: list[list[int]]) -> None:
    wm = Watermark()
    seen: set[int] = set()
    for batch in batches:
        wm.mark("s", batch)
        seen |= set(batch)
    assert {s for s in range(301) if wm.handled("s", s)} == seen
    runs = wm.marks.get("s", [])
    assert all(a <= b for a, b in runs)
    assert all(b1 + 1 < a2 for (_, b1), (a2, _) in itertools.pairwise(runs))
