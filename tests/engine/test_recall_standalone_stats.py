"""A round run without a daemon (`rofmd engine recall`, `rofmd simulate`) writes its two
telemetry records as the daemon does: in one durable append, as the lines two appends
would have written."""

from __future__ import annotations

from pathlib import Path

from engine.config import build_config
from engine.recall.standalone import StandaloneRecall, append_round_stats, recall_once
from engine.store import open_session, read_jsonl
from tests.appends_fixtures import noting_appends
from tests.engine.recall_fixtures import BASE_MS, write_folders


def test_a_standalone_round_appends_its_two_records_at_once(tmp_path: Path) -> None:
    cfg = build_config([("test", {})]).config
    store = open_session(tmp_path, "standalone")
    write_folders(
        store,
        [
            {
                "createdAt": BASE_MS + i * 60_000,
                "alpha": 0.8,
                "keywords": ["星港项目", f"词{i}"],
                "messages": [{"role": "user", "content": f"星港项目第{i}条"}],
            }
            for i in range(3)
        ],
    )
    session = StandaloneRecall.open(store, cfg)
    outcome = recall_once(session, "星港项目怎么样了", now_ms=BASE_MS + 10**7, context_window=None)
    assert outcome.ran and outcome.recalled
    with noting_appends() as noted:
        append_round_stats(store, outcome, elapsedMs=3)
    assert [path for path, _ in noted.appends] == [store.paths.stats]
    records = [r for r in read_jsonl(store.paths.stats) if r["type"].startswith("recall")]
    assert [r["type"] for r in records] == ["recall", "recall-block"]
    assert records[0]["elapsedMs"] == 3
