"""Session log reading: frames, torn tails, resumption without duplicates."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.sessionlog import (
    LogPosition,
    compress_frames,
    expand_seqs,
    read_frames,
    read_log,
    read_plain,
)


def _events(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        {"type": "user/message", "seq": start + i, "data": {"id": f"m{start + i}"}}
        for i in range(n)
    ]


def test_multi_frame_log_reads_every_event() -> None:
    batches = [_events(3, 0), _events(4, 3), _events(1, 7)]
    data = compress_frames(batches)
    chunk = read_log(data)
    assert [e["seq"] for e in chunk.events] == list(range(8))
    assert chunk.frames == 3 and not chunk.torn
    assert chunk.position == LogPosition(len(data), 0)


def test_torn_final_frame_gives_complete_lines_then_resumes() -> None:
    first = compress_frames([_events(5, 0)])
    second = compress_frames([_events(6, 5)])
    torn = first + second[: len(second) // 2]
    chunk = read_frames(torn)
    assert chunk.torn
    got = [e["seq"] for e in chunk.events]
    assert got[:5] == [0, 1, 2, 3, 4]
    assert got == list(range(len(got)))  # only complete lines, in order
    # the host finishes the frame and appends another
    full = first + second + compress_frames([_events(2, 11)])
    rest = read_frames(full, chunk.position)
    assert [e["seq"] for e in chunk.events + rest.events] == list(range(13))
    assert not rest.torn


def test_plain_jsonl_waits_for_the_partial_line() -> None:
    lines = b"".join(orjson.dumps(e) + b"\n" for e in _events(3))
    data = lines + b'{"type":"user/mess'
    chunk = read_plain(data)
    assert [e["seq"] for e in chunk.events] == [0, 1, 2] and chunk.torn
    more = read_plain(lines + orjson.dumps(_events(1, 3)[0]) + b"\n", chunk.position)
    assert [e["seq"] for e in more.events] == [3]


def test_bad_lines_are_reported_not_fatal() -> None:
    data = b'{"seq":0}\nnot json\n[1]\n{"seq":1}\n'
    chunk = read_log(data)
    assert [e["seq"] for e in chunk.events] == [0, 1]
    assert len(chunk.bad_lines) == 2


def test_expand_seqs() -> None:
    assert expand_seqs([1, [3, 5], 9]) == [1, 3, 4, 5, 9]


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=20), min_size=1, max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=6),
)
def test_reading_in_any_number_of_steps_gives_each_event_once(
    sizes: list[int], cuts: list[int]
) -> None:
    batches = []
    n = 0
    for size in sizes:
        batches.append(_events(size, n))
        n += size
    data = compress_frames(batches)
    pos = LogPosition()
    seen: list[int] = []
    for cut in [*sorted(c % (len(data) + 1) for c in cuts), len(data)]:
        chunk = read_log(data[:cut], pos)
        seen.extend(e["seq"] for e in chunk.events)
        pos = chunk.position
    assert seen == list(range(n))
