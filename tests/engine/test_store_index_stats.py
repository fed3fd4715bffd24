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
from pathlib import Path
from typing import Any

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
    make_idempotency_key,
    open_session,
)
from engine.store.index_stats import IndexStats, SortedIds
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
