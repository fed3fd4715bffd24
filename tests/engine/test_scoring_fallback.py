"""The heuristic fallback policy (scoring.fallback, maxPending, autoHeuristicAfterRounds)."""

from __future__ import annotations

from typing import Any

from engine.scoring.fallback import decide

IDS = [f"mem-{i}" for i in range(5)]


def run(**kw: Any) -> Any:
    args: dict[str, Any] = {
        "fallback": "onPressure",
        "pending_oldest_first": IDS,
        "max_pending": 200,
        "under_pressure": False,
        "rounds_unjudged": 0,
        "rounds_limit": 4,
        "channel_heuristic": False,
    }
    args.update(kw)
    return decide(**args)


def test_on_pressure_quiet_does_nothing() -> None:
    d = run()
    assert d.allow_archive and d.heuristic_ids == () and d.warnings == ()


def test_on_pressure_triggers() -> None:
    assert run(max_pending=3).heuristic_ids == ("mem-0", "mem-1")
    assert run(max_pending=3).reason == "maxPending"
    assert run(under_pressure=True).heuristic_ids == tuple(IDS)
    rounds = run(rounds_unjudged=4)
    assert rounds.heuristic_ids == tuple(IDS) and rounds.reason == "rounds"
    assert run(rounds_unjudged=3).heuristic_ids == ()
    assert run(rounds_unjudged=9, rounds_limit=0).heuristic_ids == ()
    assert run(pending_oldest_first=[], under_pressure=True).heuristic_ids == ()


def test_never_pauses_archiving_above_max_pending() -> None:
    d = run(fallback="never", max_pending=3, under_pressure=True, rounds_unjudged=10)
    assert not d.allow_archive and d.heuristic_ids == ()
    assert "archiving paused" in d.warnings[0]
    assert run(fallback="never", max_pending=5).allow_archive


def test_always_and_channel_score() -> None:
    assert run(fallback="always").heuristic_ids == tuple(IDS)
    d = run(fallback="never", channel_heuristic=True)
    assert d.heuristic_ids == tuple(IDS) and d.reason == "channelScore" and d.allow_archive
