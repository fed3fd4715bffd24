"""`make bench --only restart`: the first recall after a restart, on a small scale from a
fresh cache: one row per size and mode, its ratio to the goal, the daemon's CPU time,
and runs that found the snapshots the first daemon left."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.restart import GOAL_S, daemon_cpu_s, run_restart
from bench.rss import SESSION
from engine.recall.candidate_snapshot import SNAPSHOT_NAME


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_restart_rows(cache: Path) -> None:
    (row,) = run_restart((300,), 2, modes=("fair",))
    assert row["folders"] == 300 and row["mode"] == "fair" and row["reps"] == 2
    assert row["picks"] > 0  # each daemon asked something new, and recalled it
    assert row["wall_s"] > 0 and row["cpu_s"] > 0
    assert row["goal_x"] == round(row["wall_s"] / GOAL_S, 2)
    low, high = (float(x) for x in row["range_s"].split("-"))
    assert low <= row["wall_s"] <= high
    session = cache / "rss-1x300" / "mem" / "sessions" / SESSION
    assert (session / SNAPSHOT_NAME).is_file()


def test_cpu_time_of_a_process_grows_with_its_work() -> None:
    import os

    before = daemon_cpu_s(os.getpid())
    sum(i * i for i in range(2_000_000))
    assert daemon_cpu_s(os.getpid()) > before
