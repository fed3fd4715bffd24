"""The store's index counters always equal a full scan of the index.

`SessionStore.index_stats` is maintained where the index changes (new folders in a
transaction, `update_metas`, a failed commit's undo, `rollback_committed` of a committed
or reinstated transaction, recovery at load, a lazily created directory). A state
machine drives a real store through random sequences of all of them, injected failures
(commits and updates) included, and after every step compares each counter and ordered
list with what a scan of `store.index` computes with the era rules and label counting of
`engine.scoring`.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from engine.scoring.eras import LEGACY_BOUNDARY_MS, folder_era, listed
from engine.scoring.events import label_counts
from engine.store import (
    FolderMeta,
    JournalRecord,
    SessionStore,
    StoreError,
    index_snapshot,
    make_idempotency_key,
    open_session,
)
from engine.store.index_entry import IndexEntry
from engine.store.index_snapshot import save_index_snapshot
from engine.store.index_stats import IndexStats, SortedIds, StatsSeed
from tests.engine.test_store_crash import FaultyFs, Injected, using

SID = "stats"
NOW = LEGACY_BOUNDARY_MS + 10 * 86_400_000

created_at = st.sampled_from([LEGACY_BOUNDARY_MS - 5000, LEGACY_BOUNDARY_MS, NOW, NOW + 7])
since = st.sampled_from([None, 0, NOW - 3, NOW, NOW + 3])
era = st.sampled_from([None, "legacy", "synthetic", "current", "other"])
labels = st.lists(st.sampled_from(["日本旅行", "登录重构", "搬家", ""]), max_size=3)
event = st.sampled_from([None, "日本旅行", "搬家"])
folder_fields = st.fixed_dictionaries(
    {
        "createdAt": created_at,
        "pendingSince": since,
        "pendingEra": era,
        "scored": st.booleans(),
        "rescorePending": st.booleans(),
        "events": st.one_of(st.none(), labels),
        "event": event,
    }
)
changes = st.fixed_dictionaries(
    {},
    optional={
        "scored": st.booleans(),
        "rescorePending": st.one_of(st.none(), st.booleans()),
        "pendingSince": since,
        "pendingEra": era,
        "events": st.one_of(st.none(), labels),
        "event": event,
        "createdAt": created_at,
    },
)


def scan(store: SessionStore) -> dict[str, Any]:
    """Everything the counters answer, computed from the whole index."""
    index = store.index
    pending = sorted(
        (e for e in index if not e.scored), key=lambda e: (e.pendingSince or e.createdAt, e.id)
    )
    out: dict[str, Any] = {
        "unscored": sum(1 for e in index if not e.scored),
        "rescore_pending": sum(1 for e in index if e.rescorePending),
        "waiting": any(not e.scored or e.rescorePending for e in index),
        "pending": [e.id for e in pending],
        "review": [
            e.id
            for e in sorted(
                (e for e in index if e.scored and e.rescorePending),
                key=lambda e: (e.createdAt, e.id),
            )
        ],
        "labels": label_counts((e.events, e.event) for e in index),
    }
    for include in (False, True):
        for synthetic in (False, True):
            out[f"listed-{include}-{synthetic}"] = [
                e.id
                for e in pending
                if listed(
                    folder_era(
                        created_at=e.createdAt,
                        pending_era=e.pendingEra,
                        session_synthetic=synthetic,
                    ),
                    include_legacy=include,
                )
            ]
    return out


def counted(stats: IndexStats) -> dict[str, Any]:
    """The same answers, from the counters."""
    out: dict[str, Any] = {
        "unscored": stats.unscored,
        "rescore_pending": stats.rescore_pending,
        "waiting": stats.waiting,
        "pending": list(stats.pending),
        "review": list(stats.review),
        "labels": stats.label_counts(),
    }
    for include in (False, True):
        for synthetic in (False, True):
            ids = stats.pending_listed(include_legacy=include, synthetic=synthetic)
            out[f"listed-{include}-{synthetic}"] = list(ids)
    return out


class StoreWithCounters(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.base = Path(tempfile.mkdtemp(prefix="rofmd-stats-"))
        self.fs = FaultyFs()  # no fsyncs: hundreds of steps stay fast
        with using(self.fs):
            self.store = open_session(self.base, SID, create=False)
        self.records: dict[str, JournalRecord] = {}
        self.txns = 0
        self.n = 0

    def teardown(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)

    def _meta(self, fields: dict[str, Any]) -> FolderMeta:
        self.n += 1
        data = {
            "id": self.store.new_folder_id(NOW),
            "alpha": 0.5 if fields["scored"] else 0,
            "keywords": [],
            "title": f"第{self.n}段",
            "idempotencyKey": make_idempotency_key(SID, 1, self.n, self.n, f"h{self.n}", 0),
            **fields,
        }
        return FolderMeta.model_validate({k: v for k, v in data.items() if v is not None})

    @rule(
        folders=st.lists(folder_fields, min_size=1, max_size=4),
        keep=st.booleans(),
        fail_at=st.one_of(st.none(), st.integers(0, 14)),
    )
    def archive(self, folders: list[dict[str, Any]], keep: bool, fail_at: int | None) -> None:
        self.txns += 1
        txn_id = f"arc-{self.txns}"
        self.fs.count, self.fs.fail_at = 0, fail_at
        try:
            with using(self.fs), self.store.transaction(txn_id, keep_record=keep) as txn:
                for fields in folders:
                    txn.add_folder(self._meta(fields), [{"role": "user", "content": "x"}])
                record = txn.record()
            if keep:
                self.records[txn_id] = record
        except (Injected, StoreError):
            pass  # the transaction undid what it wrote (or recovery will, at reopen)
        finally:
            self.fs.fail_at = None

    @precondition(lambda self: len(self.store) > 0)
    @rule(
        data=st.data(),
        fields=st.lists(changes, min_size=1, max_size=3),
        fail_at=st.one_of(st.none(), st.integers(0, 12)),
    )
    def update(
        self, data: st.DataObject, fields: list[dict[str, Any]], fail_at: int | None
    ) -> None:
        """A memory_judge write, or one that fails part-way (log append, a meta, a fold)."""
        ids = list(self.store.index)
        batch = {}
        for change in fields:
            entry = data.draw(st.sampled_from(ids))
            batch[entry.id] = change
        self.fs.count, self.fs.fail_at = 0, fail_at
        try:
            with using(self.fs):
                self.store.update_metas(batch)
        except Injected:
            pass  # each row follows its meta as it is now (written or not)
        finally:
            self.fs.fail_at = None

    @precondition(lambda self: len(self.store.committed_transactions()) > 0)
    @rule(data=st.data())
    def rollback(self, data: st.DataObject) -> None:
        txn_id = data.draw(st.sampled_from(self.store.committed_transactions()))
        with using(self.fs):
            self.store.rollback_committed(txn_id)
        self.records.pop(txn_id, None)

    @precondition(lambda self: len(self.store.committed_transactions()) > 0)
    @rule(data=st.data())
    def finalize(self, data: st.DataObject) -> None:
        txn_id = data.draw(st.sampled_from(self.store.committed_transactions()))
        with using(self.fs):
            self.store.finalize(txn_id)
        self.records.pop(txn_id, None)

    @rule()
    def reopen(self) -> None:
        """A restart: recovery loads what is on disk (finalizing committed journals)."""
        with using(self.fs):
            self.store = open_session(self.base, SID)

    @rule()
    def reopen_from_snapshot(self) -> None:
        """A restart over the rows snapshot an unload leaves (small stores get one here):
        the counters are seeded from its columns when the entries are those it holds."""
        with using(self.fs), small_snapshots():
            save_index_snapshot(self.store.paths, self.store.index, self.store.loaded_from)
            self.store = open_session(self.base, SID)

    @precondition(lambda self: len(self.records) > 0)
    @rule(data=st.data())
    def reinstate(self, data: st.DataObject) -> None:
        """After a restart the kept record makes the archive undoable again."""
        txn_id = data.draw(st.sampled_from(sorted(self.records)))
        if txn_id not in self.store.committed_transactions():
            self.store.reinstate(self.records[txn_id])

    @invariant()
    def counters_equal_a_scan(self) -> None:
        assert counted(self.store.index_stats) == scan(self.store)

    @invariant()
    def rebuilt_counters_agree(self) -> None:
        assert counted(IndexStats(self.store.index)) == counted(self.store.index_stats)


TestStoreWithCounters = StoreWithCounters.TestCase
TestStoreWithCounters.settings = settings(
    max_examples=60,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@contextmanager
def small_snapshots() -> Iterator[None]:
    """Rows snapshots of stores of any size."""
    before = index_snapshot.SNAPSHOT_MIN_ROWS
    index_snapshot.SNAPSHOT_MIN_ROWS = 1
    try:
        yield
    finally:
        index_snapshot.SNAPSHOT_MIN_ROWS = before


def test_a_store_opened_from_its_snapshot_seeds_its_counters_by_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_session(tmp_path, SID)
    fields: list[dict[str, Any]] = [
        {"scored": False},
        {"scored": True, "rescorePending": True},
        {"scored": False, "rescorePending": True, "events": ["日本旅行"]},
        {"scored": True, "event": "搬家"},
        {"scored": True, "events": ["日本旅行", "搬家"]},
        {"scored": True},
    ]
    with store.transaction("arc-1") as txn:
        for n, extra in enumerate(fields * 3):
            data = {
                "id": store.new_folder_id(NOW),
                "createdAt": NOW + n * 60_000,
                "alpha": 0.5 if extra["scored"] else 0,
                "keywords": [],
                "title": f"第{n}段",
                "idempotencyKey": make_idempotency_key(SID, 1, n, n, f"h{n}", 0),
                **extra,
            }
            txn.add_folder(FolderMeta.model_validate(data), [{"role": "user", "content": "x"}])
    store.finalize("arc-1")
    with small_snapshots():
        assert save_index_snapshot(store.paths, store.index, store.loaded_from)
    fits: list[bool] = []
    real = StatsSeed.fits

    def spied(seed: StatsSeed, rows: Sequence[Any]) -> bool:
        fits.append(real(seed, rows))
        return fits[-1]

    monkeypatch.setattr(StatsSeed, "fits", spied)
    again = open_session(tmp_path, SID)
    assert fits == [True]
    assert counted(again.index_stats) == scan(again) == scan(store)
    assert again.index_stats.rescore_pending == 6 and again.index_stats.unscored == 6
    # a log line since the snapshot: the entries are not those it holds, nor is a seed given
    again.update_metas({again.index[0].id: {"scored": True, "alpha": 0.7}})
    fits.clear()
    third = open_session(tmp_path, SID)
    assert fits == [] and counted(third.index_stats) == scan(third) != scan(store)


def test_a_seed_of_other_entries_is_not_taken() -> None:
    rows = [IndexEntry.model_validate(r) for r in (_row(1, scored=False), _row(2))]
    other = [IndexEntry.model_validate(r) for r in (_row(1, scored=False), _row(2))]
    wrong = StatsSeed(other, [], [], [])  # says nothing is pending
    assert not wrong.fits(rows) and not wrong.fits(rows[:1])
    assert counted(IndexStats(rows, wrong)) == counted(IndexStats(rows))
    assert IndexStats(rows, wrong).unscored == 1
    assert IndexStats(rows, StatsSeed(rows, [], [], [])).unscored == 0  # taken as given


def _row(n: int, **fields: Any) -> dict[str, Any]:
    return {
        "id": f"mem-20260101T0000{n:02d}Z-0001",
        "createdAt": NOW + n,
        "alpha": 0.5,
        "beta": 0,
        "scored": True,
        "keywords": [],
        "title": f"第{n}段",
        **fields,
    }


def test_sorted_ids_slices_and_removal() -> None:
    ids = SortedIds([(3, "c"), (1, "a"), (2, "b")])
    assert list(ids) == ["a", "b", "c"] and ids[0] == "a" and ids[-1] == "c"
    assert ids[:2] == ["a", "b"] and ids[-2:] == ["b", "c"] and ids[5:] == []
    ids.add((0, "z"))
    ids.discard((2, "b"))
    ids.discard((2, "missing"))
    assert list(ids) == ["z", "a", "c"] and len(ids) == 3
    assert ids.keys() == [(0, "z"), (1, "a"), (3, "c")]


def test_label_counts_drop_to_nothing() -> None:
    stats = IndexStats()
    meta = FolderMeta.model_validate(
        {"id": "mem-20261201T000000Z-0001", "createdAt": NOW, "events": ["搬家", "搬家"]}
    )
    stats.put(None, meta)
    assert stats.label_counts() == Counter({"搬家": 1})
    stats.drop(meta)
    assert stats.label_counts() == Counter() and not stats.waiting
