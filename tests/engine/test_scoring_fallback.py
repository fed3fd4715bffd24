"""The heuristic fallback policy (scoring.fallback, maxPending, autoHeuristicAfterRounds)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.archive.standalone import archive_conversation
from engine.config import load_config
from engine.heuristic import with_batch
from engine.scoring.fallback import decide, heuristic_fields
from engine.store import open_session

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


# ---- heuristic fields: keywords judged against the folders scored together ------------

TOPICS = (
    *("pottery", "hiking", "jazz", "chess", "sourdough", "kayak"),
    *("violin", "origami", "tennis", "karaoke", "bonsai", "fencing"),
)


def test_heuristic_fields_use_the_batch_stats() -> None:
    cfg = load_config(None, {}).config
    texts = [f"Starport news: we talked about {t} today" for t in TOPICS]
    stats = with_batch(None, texts, cfg.keywords.extra_stopwords)
    fields = heuristic_fields(texts[0], cfg, 123, stats)
    assert fields["scored"] and fields["beta"] == 0.0 and fields["judgedAt"] == 123
    assert fields["scoreMode"] == fields["keywordsSource"] == "heuristic"
    assert "pottery" in fields["keywords"] and "Starport" not in fields["keywords"]
    alone = heuristic_fields(texts[0], cfg, 123)
    assert "Starport" in alone["keywords"]  # nothing to compare with
    assert alone["alpha"] == fields["alpha"]  # α does not depend on the corpus


def test_standalone_archive_scores_its_folders_as_one_batch(tmp_path: Path) -> None:
    cfg = load_config(None, {}).config
    messages: list[dict[str, Any]] = []
    for t in TOPICS:
        messages.append(
            {"role": "user", "content": f"Mina: Starport news, I tried {t} and the {t} club."}
        )
        messages.append(
            {"role": "assistant", "content": f"Leo: Starport noted, {t} is a good hobby. " * 30}
        )
    store = open_session(tmp_path, "s", per_session=True)
    result = archive_conversation(
        store,
        messages,
        used_percent=70,
        window=200_000,
        now_ms=1_800_000_000_000,
        cfg=cfg,
        archiver_version="test",
    )
    assert result.archived and len(store.index) >= 4
    for entry in store.index:
        kws = {k.casefold() for k in entry.keywords}
        assert kws and kws <= set(TOPICS), kws  # no name, no word every folder shares
        assert entry.alpha < 0.5
