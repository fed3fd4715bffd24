"""The task block and the scoring gate read the store's counters, never the whole index.

`build_task_block` must render exactly what the previous full-scan computation rendered
(every pending folder filtered by era, sorted, ordered by `scoring.order`; re-reviews
sorted; labels counted over the index) on stores with legacy, marked, synthetic, scored
and re-review folders; and the section, the gate and the block must not touch
`store.index` at all (a scan per request is what the counters replace).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.config import MemoryConfig
from engine.scoring.eras import LEGACY_BOUNDARY_MS, SessionEraFacts, fake_window, folder_era, listed
from engine.scoring.events import existing_label_list, label_counts
from engine.scoring.task_block import (
    LIST_LIMIT,
    PendingItem,
    TaskBlock,
    TaskBlockInput,
    order_pending,
    render_task_block,
)
from engine.store import IndexEntry, SessionStore, open_session, read_jsonl
from handlers.context import RequestContext
from handlers.scoring_policy import archive_gate, readable_for
from handlers.sessions import SessionState
from handlers.tasks_section import (
    block_budget,
    build_task_block,
    review_item,
    tasks_section_text,
)
from tests.engine.scoring_fixtures import BASE_MS, assistant, pending_meta, user
from tests.engine.test_store_crash import FaultyFs, using
from tests.handlers.app_fixtures import make_app, request_ctx

NOW = BASE_MS + 5 * 86_400_000


def ctx(method: str = "agent/pre-step") -> RequestContext:
    return request_ctx(method, NOW)


@pytest.fixture(autouse=True)
def _no_fsync() -> Iterator[None]:
    with using(FaultyFs()):
        yield


def seed(tmp_path: Path, session: str, n: int, *, fake: bool) -> None:
    """``n`` folders of every kind the lists tell apart, then scores and re-reviews."""
    store = open_session(tmp_path, session)
    eras = [None, "current", "legacy", "synthetic", None, None]
    labels = [["日本旅行"], ["搬家", "日本旅行"], None, ["登录重构"], [], None]
    ids: list[str] = []
    with store.transaction("arc-seed", keep_record=False) as t:
        for i in range(n):
            created = (LEGACY_BOUNDARY_MS - 10**7 if i % 7 == 3 else BASE_MS) + i * 60_000
            fid = store.new_folder_id(created)
            extra: dict[str, Any] = {"pendingSince": created + (i % 5) * 1000}
            era = eras[i % len(eras)]
            if era is not None:
                extra["pendingEra"] = era
            events = labels[i % len(labels)]
            if events is not None:
                extra["events"] = events
            meta = pending_meta(fid, created, f"第{i}段对话", **extra)
            if era is None:
                meta = meta.model_copy(update={"pendingEra": None})
            talk = [user(f"第{i}个问题：" + "配置文件" * (i % 9)), assistant("好的" * i)]
            t.add_folder(meta, talk)
            ids.append(fid)
    changes: dict[str, dict[str, Any]] = {}
    for i, fid in enumerate(ids):
        if i % 3 == 0:
            changes[fid] = {"scored": True, "alpha": 0.5, "reason": f"理由{i}"}
        if i % 4 == 0:
            changes.setdefault(fid, {})["rescorePending"] = True
    store.update_metas(changes)
    if fake:
        store.append_stats({"type": "compress-applied", "contextWindow": 2000})


def since(e: IndexEntry) -> tuple[int, str]:
    return (e.pendingSince or e.createdAt, e.id)


def old_build(state: SessionState, cfg: MemoryConfig, now_ms: int) -> TaskBlock:
    """The previous computation: scans of the whole index."""
    store = state.store
    index = store.index
    unscored = [e for e in index if not e.scored]
    fake = fake_window(read_jsonl(store.paths.stats))
    synthetic = SessionEraFacts(fake, len(index), len(unscored)).synthetic
    listed_all = [
        e
        for e in unscored
        if listed(
            folder_era(
                created_at=e.createdAt, pending_era=e.pendingEra, session_synthetic=synthetic
            ),
            include_legacy=cfg.scoring.include_legacy,
        )
    ]
    limit = max(1, min(LIST_LIMIT, cfg.scoring.max_items_per_judge))
    pending = order_pending(listed_all, cfg.scoring.order, since)
    review = sorted(
        (e for e in index if e.scored and e.rescorePending), key=lambda e: (e.createdAt, e.id)
    )
    pending_items = [
        PendingItem(
            e.id,
            e.title,
            readable_for(state, e.id).kind,
            e.pendingSince or e.createdAt,
            readable_for(state, e.id).text,
        )
        for e in pending[:limit]
    ]
    review_items = [review_item(state, e) for e in review[:limit]]
    labels: list[tuple[str, int]] = []
    if pending_items and cfg.event.show_existing and cfg.event.mode != "off":
        counts = label_counts((e.events, e.event) for e in index)
        labels = existing_label_list(counts, cfg.event.show_existing_limit)
    return render_task_block(
        TaskBlockInput(
            pending=pending_items,
            review=review_items,
            labels=labels,
            has_recall_block=False,
            now_ms=now_ms,
            budget_tokens=block_budget(state, cfg),
            pending_total=len(pending),
            review_total=len(review),
            channel=False,
        )
    )


@pytest.mark.parametrize("order", ["newest", "oldest", "mixed"])
@pytest.mark.parametrize("include_legacy", [False, True])
@pytest.mark.parametrize("fake", [False, True])
@pytest.mark.parametrize("per_judge", [7, 100])
async def test_block_equals_the_full_scan(
    tmp_path: Path, order: str, include_legacy: bool, fake: bool, per_judge: int
) -> None:
    seed(tmp_path, "s-scan", 130, fake=fake)  # ≥ 100 folders: a fake window is synthetic
    tree = {
        "scoring": {
            "order": order,
            "includeLegacy": include_legacy,
            "maxItemsPerJudge": per_judge,
            "maxPending": 10_000,
        }
    }
    app = make_app(tmp_path, tree)
    state = await app.sessions.get("s-scan")
    cfg = app.config.config
    fast = build_task_block(state, cfg, NOW, has_recall_block=False)
    assert fast == old_build(state, cfg, NOW)
    assert fast.pending_ids and fast.review_ids
    # the block follows a judge-like change of the store
    first = fast.pending_ids[0]
    state.store.update_metas({first: {"scored": True, "alpha": 0.9}})
    again = build_task_block(state, cfg, NOW, has_recall_block=False)
    assert first not in again.pending_ids
    assert again == old_build(state, cfg, NOW)


async def test_sections_and_gate_never_scan_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(tmp_path, "s-noscan", 40, fake=True)
    seed(tmp_path, "s-empty", 0, fake=False)
    app = make_app(tmp_path, {})
    state = await app.sessions.get("s-noscan")
    empty = await app.sessions.get("s-empty")

    def no_scan(self: SessionStore) -> tuple[IndexEntry, ...]:
        raise AssertionError("store.index scanned")

    monkeypatch.setattr(SessionStore, "index", property(no_scan))
    text = await tasks_section_text(app, state, ctx("agent/inbox/inserted"))
    assert "id=mem-" in text
    assert (await archive_gate(app, state, ctx(), under_pressure=False)).allowed
    assert await tasks_section_text(app, empty, ctx()) == ""


async def test_fake_window_follows_the_telemetry(tmp_path: Path) -> None:
    """Each stats.jsonl line is parsed once; a line still being written counts once
    whole; a file replaced by a shorter one is read again."""
    seed(tmp_path, "s-tail", 110, fake=False)
    app = make_app(tmp_path, {"scoring": {"maxPending": 10_000}})
    state = await app.sessions.get("s-tail")
    cfg = app.config.config
    path = state.store.paths.stats

    def listed_count() -> int:
        return build_task_block(state, cfg, NOW, has_recall_block=False).pending_ids.__len__()

    real = listed_count()
    assert real > 0
    state.store.append_stats({"type": "compress-applied", "contextWindow": 128_000})
    assert listed_count() == real
    offset = state.scoring_fake_window[0][0] if state.scoring_fake_window else 0
    with path.open("ab") as fh:  # a torn line: not a record yet
        fh.write(b'{"type": "compress-applied", "before')
    assert listed_count() == real
    with path.open("ab") as fh:
        fh.write(b'Percent": 900}\n')
    synthetic = listed_count()
    assert synthetic < real  # unmarked recent folders became synthetic
    assert state.scoring_fake_window is not None and state.scoring_fake_window[1]
    assert state.scoring_fake_window[0][0] > offset
    path.write_bytes(b'{"type": "compress-applied", "contextWindow": 64000}\n')  # replaced
    assert listed_count() == real
    path.unlink()
    assert listed_count() == real
