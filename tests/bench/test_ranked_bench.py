"""`make bench --only ranked`: the selection against bm25s on a small scale, each of the
three timed calls taking each place in the order equally often."""

from __future__ import annotations

import pytest

from bench.ranked import _ORDERS, run_ranked_bench


def test_each_timed_call_takes_each_place_equally_often() -> None:
    names = set(_ORDERS[0])
    assert names == {"sel", "sel0", "bm"}
    for order in _ORDERS:
        assert sorted(order) == sorted(names)
    for place in range(len(names)):
        assert {order[place] for order in _ORDERS} == names


def test_ranked_rows() -> None:
    (row,) = run_ranked_bench((300,), 9)
    assert row["folders"] == 300 and row["picks/q"] > 0
    for name in ("select", "nopassage", "bm25s"):
        assert row[f"{name}_p50"] > 0
    # the ratio of the unrounded medians, two decimals; the p50s are rounded to 1 µs
    ratio = row["select_p50"] / row["bm25s_p50"]
    assert row["select/bm25s"] == pytest.approx(ratio, rel=0.03, abs=0.01)
    assert row["restart_s"] > 0 and row["snapshot_mb"] >= 0
