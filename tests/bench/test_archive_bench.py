"""`make bench --only archive`: the pre-step cases run against a real daemon.

A quick run (3 repetitions): every case answers as the bench expects (no compaction
below the trigger, a compaction of several folders at 80 %, the pending folders listed
in the task block while they wait, the same block on the next step, the yardstick
request refused as an unknown method),
and each row carries its median, the median of reading + parsing the same request bytes,
and their ratio; the archive row also the disk's own floor for the folders it wrote.
"""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

import pytest

from bench import archive as archive_bench
from bench.archive import disk_floor, parse_floor, run_archive
from tests.e2e.harness import request_line, running_daemon


def test_floor_parses_the_request_line() -> None:
    assert parse_floor(request_line(1, "ping", {"session": {"id": "x"}})) > 0


def test_disk_floor_syncs_every_file_and_folder_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real = archive_bench._fsync

    def noting(path: str) -> None:
        synced.append(path)
        real(path)

    monkeypatch.setattr(archive_bench, "_fsync", noting)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        seconds = disk_floor([(b'{"messages": []}', b"{}")] * 3, tmp_path / "scratch", pool)
    assert seconds > 0
    names = [Path(p).name for p in synced]
    assert names.count("context.json") == names.count("meta.json") == 3
    assert sum(n.startswith(".staging-") for n in names) == 3  # each folder's directory
    assert names[-1].startswith("floor-")  # the parent, once the renames are done
    assert list((tmp_path / "scratch").iterdir()) == []


def test_archive_rows_side_by_side() -> None:
    with running_daemon(env={"ROFMD_LOG_LEVEL": "warning"}) as d:
        rows = run_archive(d.socket_path, 3, d.memory_root)
        assert not (d.memory_root.parent / "bench-disk-floor").exists()
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
    assert rows[1]["disk_ms"] > 0 and rows[1]["disk_x"] > 0
    assert all(r["disk_ms"] == r["disk_x"] == "-" for r in rows if r is not rows[1])
