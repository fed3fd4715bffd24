"""`make bench --only inbox --only rss`: the rows, on a small scale, from a fresh cache.

inbox: every phase answers, and each row carries its ratios to the ping of the same
clients and what the daemon read from the device per round. rss: a fresh daemon per mode reports its resident size after load and rounds,
and a cached store is reused without what the previous run wrote.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from bench.inbox import device_read_bytes, run_inbox
from bench.rss import SESSION, run_rss
from bench.stores import StoreSpec, prepared_root


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_inbox_rows_carry_their_ratios() -> None:
    many, one = run_inbox(3, 3, sessions=2, folders=300)
    assert many["clients"] == 2 and one["clients"] == 1
    for row in (many, one):
        assert row["reps"] == 3 and row["p50_ms"] > 0 and row["ping_p50"] > 0
        assert row["p99_ms"] >= row["p50_ms"]
        low, high = (float(x) for x in row["p50_range"].split("-"))
        assert low <= row["p50/ping"] <= high
        if sys.platform == "linux":
            assert isinstance(row["disk_kB"], float) and row["disk_kB"] >= 0


@pytest.mark.skipif(sys.platform != "linux", reason="/proc/<pid>/io is Linux's")
def test_device_reads_of_a_process() -> None:
    mine = device_read_bytes(os.getpid())
    assert isinstance(mine, int) and mine >= 0
    assert device_read_bytes(2**22 + 1) is None  # above any pid Linux hands out


def test_rss_rows_and_a_reused_store(cache: Path) -> None:
    ranked, fair = run_rss(1, 3, folders=300)
    for row, mode in ((ranked, "ranked"), (fair, "fair")):
        assert row["mode"] == mode and row["folders"] == 300
        assert row["loaded_MB"] >= row["idle_MB"] > 10 and row["first_s"] > 0
        assert row["settled_MB"] > 10 and row["restart_settled_MB"] > 10
        assert row["restart_MB"] >= row["idle_MB"] and row["restart_first_s"] > 0
    # the second run reuses the built store, without the recall state the first wrote
    session = cache / "rss-1x300" / "mem" / "sessions" / SESSION
    assert (session / "recall-state.json").is_file()
    # the restart's rounds ran on messages of their own (rss-4 .. rss-7), not on ones the
    # recall state had answered already (which would run no round)
    state = b"".join(p.read_bytes() for p in session.glob("recall-state*"))
    assert b'"rss-7"' in state
    stamp = (cache / "rss-1x300" / "stamp.json").stat().st_mtime_ns
    prepared_root("rss-1x300", [StoreSpec(SESSION, 300, 7)])
    assert not (session / "recall-state.json").exists()
    assert (cache / "rss-1x300" / "stamp.json").stat().st_mtime_ns == stamp
