"""`make bench --only archive`: the pre-step cases run against a real daemon.

A quick run (3 repetitions): every case answers as the bench expects (no compaction
below the trigger, a compaction of several folders at 80 %, the pending folders listed
in the task block while they wait, the same block on the next step, the yardstick
request refused as an unknown method),
and each row carries its median, the median of reading + parsing the same request bytes,
and their ratio.
"""

from __future__ import annotations

from bench.archive import parse_floor, run_archive
from tests.e2e.harness import request_line, running_daemon


def test_floor_parses_the_request_line() -> None:
    assert parse_floor(request_line(1, "ping", {"session": {"id": "x"}})) > 0


def test_archive_rows_side_by_side() -> None:
    with running_daemon(env={"ROFMD_LOG_LEVEL": "warning"}) as d:
        rows = run_archive(d.socket_path, 3)
    assert [r["case"] for r in rows] == [
        "no archive",
        "archive",
        f"{rows[1]['folders']} pending",
        f"{rows[1]['folders']} pending, again",
        "refused",
    ]
    assert rows[1]["folders"] > 1 and rows[2]["folders"] == rows[3]["folders"] == rows[1]["folders"]
    for row in rows:
        assert row["runs"] == 3
        assert row["p50_ms"] > 0 and row["parse_ms"] > 0
        # the ratio of the medians (the printed medians are rounded)
        assert abs(row["ratio"] - row["p50_ms"] / row["parse_ms"]) <= 0.02 * row["ratio"] + 0.1
