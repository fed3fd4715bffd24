"""The candidate index's snapshot (`engine.recall.candidate_snapshot`): restored over the
entries it was built over, it is the index a fresh build gives (every structure a query
reads, every query's matches, the tag index, whole recall rounds); over any other
entries, with other parameters, or damaged, it is refused and the index is built.

Determinism guarantee: a restart that restores the index picks what a restart that
rebuilt it picks.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.recall import make_entries
from engine.config import MemoryConfig
from engine.recall import Addition, CandidateIndex, RecallState, analyze_query, run_round
from engine.recall import candidates as candidates_module
from engine.recall.candidate_snapshot import (
    SNAPSHOT_NAME,
    read_index_snapshot,
    restored_index,
    save_index_snapshot,
    snapshot_due,
    synced_index,
    write_index_snapshot,
)
from engine.recall.fair import Pick
from engine.relevance.snapshot import SnapshotError
from engine.store.index_entry import IndexEntry, entry_from_row
from tests.engine.recall_fixtures import BASE_MS, Entry, new_store, write_folders
from tests.engine.test_recall_index_incremental import (
    ALPHAS,
    CONFIGS,
    QUERIES,
    SAID,
    TITLES,
    VOCAB,
    _cfg,
    apply,
    observe,
    op_st,
    structure,
)
from tests.engine.test_relevance_snapshot import _rewritten

OWNER = "/owner"
EVENTS = ["马拉松", "发布评审", "Marathon", "", "生日会"]
PLACES = ["杭州", "我家", "Hangzhou", "公司", "杭州市"]
PEOPLE = ["Mina", "小林", "mina", "老王"]
_serial = iter(range(10**9))
"""Ids of `labelled_entry`: "mem-l…", never one of `new_entry`'s "mem-…" (a counter of
its own), so a test mixing the two never makes two folders with one id."""


def labelled_entry(
    scored: bool,
    alpha: float,
    kws: list[str],
    title: str,
    created: int,
    said: list[str] | None,
    events: list[str] | None,
    places: list[str] | None,
    people: list[str] | None,
) -> Entry:
    return Entry(
        id=f"mem-l{next(_serial):06d}",
        alpha=alpha,
        createdAt=BASE_MS + created,
        keywords=kws,
        scored=scored,
        title=title,
        assistantKeywords=said,
        events=events,
        locations=places,
        persons=people,
    )


def _labels(pool: list[str]) -> st.SearchStrategy[list[str] | None]:
    return st.none() | st.lists(st.sampled_from(pool), max_size=3)


entry_st = st.builds(
    labelled_entry,
    st.booleans(),
    st.sampled_from(ALPHAS),
    st.lists(st.sampled_from(VOCAB), max_size=5),
    st.sampled_from(TITLES),
    st.integers(0, 5),
    st.none() | st.lists(st.sampled_from(SAID), max_size=3),
    _labels(EVENTS),
    _labels(PLACES),
    _labels(PEOPLE),
)


def tags_of(ix: CandidateIndex) -> Any:
    """Everything the tag index answers, in the order it answers it."""
    t = ix.tags
    kinds = ("event", "location", "person")
    return (
        list(t.labels_by_folder().items()),
        [list(t.counts(k).items()) for k in kinds],
        [t.mentions(text, kinds, 4) for text in ("我在杭州和Mina跑马拉松", "回我家找小林", "")],
    )


def restored(tmp: Path, ix: CandidateIndex, entries: list[Any], cfg: MemoryConfig) -> Any:
    path = tmp / SNAPSHOT_NAME
    write_index_snapshot(path, ix, owner=OWNER)
    return read_index_snapshot(path, entries, cfg, owner=OWNER, version="v")


def assert_fresh(ix: CandidateIndex, entries: list[Any], cfg: MemoryConfig) -> None:
    fresh = CandidateIndex(entries, cfg)
    assert structure(ix) == structure(fresh)
    assert tags_of(ix) == tags_of(fresh)
    assert [e.id for e in ix.entries()] == [e.id for e in fresh.entries()]
    for text in QUERIES:
        for min_alpha in (0.0, 0.6):
            assert observe(ix, text, cfg, min_alpha) == observe(fresh, text, cfg, min_alpha)


@settings(max_examples=120, deadline=None)
@given(
    cfg=st.sampled_from(CONFIGS),
    entries=st.lists(entry_st, max_size=16),
    batches=st.lists(st.lists(op_st, min_size=1, max_size=4), max_size=4),
)
def test_a_restored_index_is_a_fresh_build(
    tmp_path_factory: pytest.TempPathFactory,
    cfg: MemoryConfig,
    entries: list[Entry],
    batches: list[list[tuple[Any, ...]]],
) -> None:
    """Also of an index that was updated in place before it was written (its key ids and
    label order are the updates' own: the restore gives the fresh build's)."""
    tmp = tmp_path_factory.mktemp("snap")
    ix = CandidateIndex(entries, cfg, 0)
    for batch in batches:
        for op in batch:
            entries = apply(entries, op)
        assert ix.update(entries, cfg, None, max_changes=math.inf)
    back = restored(tmp, ix, entries, cfg)
    assert back.version == "v" and back.saved and not back.unsaved
    assert_fresh(back, entries, cfg)


def store_entry(entry: Entry, beta: float) -> IndexEntry:
    """`entry` as the store holds it (an `IndexEntry`, its own recall folder), with β
    `beta`."""
    row = {k: v for k, v in dataclasses.asdict(entry).items() if v is not None}
    return entry_from_row({**row, "beta": beta})


@settings(max_examples=120, deadline=None)
@given(
    cfg=st.sampled_from(CONFIGS),
    entries=st.lists(entry_st, max_size=16),
    betas=st.lists(st.sampled_from([0.0, -0.0, 1.5, -2.0]), min_size=16, max_size=16),
    batches=st.lists(st.lists(op_st, min_size=1, max_size=4), max_size=4),
)
def test_a_restored_index_of_store_entries_is_a_fresh_build_and_updates_as_one(
    tmp_path_factory: pytest.TempPathFactory,
    cfg: MemoryConfig,
    entries: list[Entry],
    betas: list[float],
    batches: list[list[tuple[Any, ...]]],
) -> None:
    """Over the store's entries, which are their own folders (a β of -0.0 read as 0.0),
    restored with its tag tables still to be made: the fresh build's, and after each
    change applied in place (the first of which makes the tables) what the same changes
    make of a built index, and a fresh build's structures."""
    tmp = tmp_path_factory.mktemp("snap")
    rows = [store_entry(e, b) for e, b in zip(entries, betas, strict=False)]
    back = restored(tmp, CandidateIndex(rows, cfg, 0), rows, cfg)
    for folder in back.folders:
        assert math.copysign(1.0, folder.beta) > 0 or folder.beta != 0  # never -0.0
    for n, e in enumerate(back.entries()):
        f = back.folders[n]
        assert (f.id, f.alpha, f.created_at, list(f.keywords)) == (
            e.id,
            e.alpha,
            e.createdAt,
            e.keywords,
        )
        assert list(f.assistant) == (e.assistantKeywords or [])
    assert_fresh(back, rows, cfg)
    built = CandidateIndex(rows, cfg, 0)
    current = rows
    for batch in batches:
        plain = [Entry(**{k: getattr(e, k) for k in Entry.__dataclass_fields__}) for e in current]
        for op in batch:
            plain = apply(plain, op)
        current = [store_entry(e, e.beta) for e in plain]
        for ix in (back, built):
            assert ix.update(current, cfg, None, max_changes=math.inf)
        fresh = CandidateIndex(current, cfg)
        assert structure(back) == structure(built) == structure(fresh)
        # labels in the order the updates left them (a changed folder's come last)
        assert tags_of(back) == tags_of(built)
        for text in QUERIES:
            assert observe(back, text, cfg, 0.0) == observe(fresh, text, cfg, 0.0)


def _loader(index: CandidateIndex) -> Any:
    def load(p: Pick) -> Addition:
        f = index.folders[index.by_id[p.id]]
        return Addition(f.id, f.alpha, f.beta, f.created_at, keywords=list(f.keywords), body=f.id)

    return load


@pytest.mark.parametrize("mode", ["fair", "deterministic", "legacy"])
def test_rounds_are_the_same_over_a_restored_and_a_built_index(tmp_path: Path, mode: str) -> None:
    cfg = _cfg(recall={"mode": mode, "maxRecalledBlocks": 6, "firstGenMax": 4})
    base, queries = make_entries(1500, seed=3)
    entries: list[Any] = [
        dataclasses.replace(e, scored=i % 7 != 0, title=TITLES[i % len(TITLES)])
        for i, e in enumerate(base)
    ]
    built = CandidateIndex(entries, cfg)
    back = restored(tmp_path, built, entries, cfg)
    states = (RecallState(persist=False), RecallState(persist=False))
    for turn, text in enumerate([*QUERIES, *queries[:30]], 1):
        outs = []
        for index, state in zip((built, back), states, strict=True):
            out = run_round(
                None,
                index,
                state,
                analyze_query(text, cfg),
                cfg,
                now_ms=BASE_MS,
                turn=turn,
                session_key="twin",
                loader=_loader(index),
            )
            outs.append((out.recalled, out.recall_record, out.block_record, state.to_json()))
        assert outs[0] == outs[1], text


def _written(tmp: Path, n: int = 40) -> tuple[Path, list[Entry], MemoryConfig]:
    cfg = CONFIGS[1]
    entries = [
        labelled_entry(True, 0.7, [VOCAB[i % 20]], "", i, None, ["马拉松"], None, ["Mina"])
        for i in range(n)
    ]
    path = tmp / SNAPSHOT_NAME
    write_index_snapshot(path, CandidateIndex(entries, cfg), owner=OWNER)
    return path, entries, cfg


def _flip(data: bytes) -> bytes:
    out = bytearray(data)
    out[len(out) * 3 // 4] ^= 0x10
    return bytes(out)


STALE: dict[str, tuple[Any, str]] = {
    "an entry judged since": (
        lambda es: [dataclasses.replace(es[0], keywords=["灰度比例"]), *es[1:]],
        "stale",
    ),
    "an α changed since": (lambda es: [dataclasses.replace(es[0], alpha=0.2), *es[1:]], "stale"),
    "a folder archived since": (lambda es: [*es, dataclasses.replace(es[0], id="mem-x")], "stale"),
    "a folder hidden since": (lambda es: es[1:], "stale"),
    "a label changed since": (
        lambda es: [dataclasses.replace(es[0], persons=[]), *es[1:]],
        "stale",
    ),
    "entries in another order": (lambda es: es[::-1], "stale"),
}


@pytest.mark.parametrize("change", sorted(STALE))
def test_a_snapshot_over_other_entries_is_refused(tmp_path: Path, change: str) -> None:
    path, entries, cfg = _written(tmp_path)
    other, reason = STALE[change]
    with pytest.raises(SnapshotError, match=reason):
        read_index_snapshot(path, other(entries), cfg, owner=OWNER)
    # a pending folder (never indexed) changes nothing
    pending = dataclasses.replace(entries[0], id="mem-pending", scored=False)
    assert_fresh(read_index_snapshot(path, [*entries, pending], cfg, owner=OWNER), entries, cfg)


DAMAGE: dict[str, tuple[Any, str]] = {
    "truncated": (lambda d: d[: len(d) // 2], "truncated"),
    "empty": (lambda d: b"", "truncated"),
    "a flipped bit": (_flip, "checksum mismatch"),
    "a relevance snapshot": (lambda d: b"RFMDRIX\x00" + d[8:], "not a recall index snapshot"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_snapshot_is_refused(tmp_path: Path, damage: str) -> None:
    path, entries, cfg = _written(tmp_path)
    transform, reason = DAMAGE[damage]
    path.write_bytes(transform(path.read_bytes()))
    with pytest.raises(SnapshotError, match=reason):
        read_index_snapshot(path, entries, cfg, owner=OWNER)


def test_other_parameters_or_another_store_are_refused(tmp_path: Path) -> None:
    path, entries, cfg = _written(tmp_path)
    with pytest.raises(SnapshotError, match="index parameters"):
        read_index_snapshot(path, entries, CONFIGS[0], owner=OWNER)
    with pytest.raises(SnapshotError, match="another store"):
        read_index_snapshot(path, entries, cfg, owner="/elsewhere")


def test_a_store_restores_its_snapshot_and_rebuilds_a_stale_or_damaged_one(
    tmp_path: Path,
) -> None:
    cfg = CONFIGS[0]
    store = new_store(tmp_path)
    ids = write_folders(
        store,
        [
            {"createdAt": BASE_MS + i, "alpha": 0.8, "keywords": ["星港项目", f"词{i}"]}
            for i in range(300)
        ],
    )
    built, how = synced_index(None, store, store.index, cfg, 1)
    assert how == "built" and snapshot_due(built)
    assert save_index_snapshot(store, built)
    assert not snapshot_due(built)
    back, how = synced_index(None, store, store.index, cfg, 2)
    assert how == "restored" and structure(back) == structure(built)
    # judged since: stale, built again (and what the build gives is current)
    store.update_meta(ids[7], {"alpha": 0.3, "keywords": ["接口网关"]})
    again, how = synced_index(None, store, store.index, cfg, 3)
    assert how == "built: built over other entries (stale)"
    assert structure(again) == structure(CandidateIndex(store.index, cfg))
    path = store.dir / SNAPSHOT_NAME
    assert save_index_snapshot(store, again)
    path.write_bytes(path.read_bytes()[:-3])
    index, why = restored_index(store, store.index, cfg)
    assert index is None and why == "truncated or overlong"
    rebuilt, how = synced_index(None, store, store.index, cfg, 4)
    assert how.startswith("built: ") and structure(rebuilt) == structure(again)
    # an index in memory is updated in place, never replaced by the snapshot
    store.update_meta(ids[8], {"alpha": 0.4})
    same, how = synced_index(rebuilt, store, store.index, cfg, 5)
    assert same is rebuilt and how == "updated"


def test_a_small_index_is_not_written(tmp_path: Path) -> None:
    _, entries, cfg = _written(tmp_path, n=10)
    small = CandidateIndex(entries, cfg)
    assert small.unsaved == 10 and not snapshot_due(small)
    assert snapshot_due(small, unloading=True) is False


def test_a_store_as_opened_restores_its_stamped_snapshot_without_a_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot made over a store's entries as opened is stamped with what they are a
    function of (`SessionStore.loaded_from`): reopened over the same ``index.json`` it
    is taken without working out the entries' digest, and is what a build gives; once
    the store changed, the stamp no longer speaks for it."""
    from engine.recall import candidate_snapshot
    from engine.store import open_session

    cfg = CONFIGS[0]
    store = new_store(tmp_path)
    ids = write_folders(
        store,
        [
            {"createdAt": BASE_MS + i, "alpha": 0.8, "keywords": ["星港项目", f"词{i}"]}
            for i in range(300)
        ],
    )
    # judged through the index log: reopened, the entries are not index.json's alone
    assert open_session(tmp_path, store.session_id).loaded_from is None
    write_folders(store, [{"createdAt": BASE_MS + 999, "scored": False}], txn="arc-2")
    opened = open_session(tmp_path, store.session_id)  # the commit folded the log in
    assert opened.loaded_from is not None
    built, _ = synced_index(None, opened, opened.index, cfg, 1)
    assert save_index_snapshot(opened, built)
    digests: list[int] = []
    real = candidate_snapshot.entries_digest

    def counted(entries: Any) -> str:
        digests.append(1)
        return real(entries)

    monkeypatch.setattr(candidate_snapshot, "entries_digest", counted)
    again = open_session(tmp_path, store.session_id)
    assert again.loaded_from == opened.loaded_from
    back, how = synced_index(None, again, again.index, cfg, 2)
    assert how == "restored" and not digests
    assert structure(back) == structure(CandidateIndex(again.index, cfg))
    # hidden entries are not the store's as opened: the stamp does not speak for them
    visible = again.index[1:]
    _, why = restored_index(again, visible, cfg)
    assert why == "built over other entries (stale)" and digests
    # changed since it was opened: no stamp, and the snapshot is stale
    again.update_meta(ids[3], {"alpha": 0.2})
    assert again.loaded_from is None
    _, why = restored_index(again, again.index, cfg)
    assert why == "built over other entries (stale)"


def _keyword_part_made(ix: CandidateIndex) -> bool:
    return all(name in vars(ix) for name in candidates_module._KEYWORD_PART)


def test_a_restore_makes_its_keyword_part_when_first_read(tmp_path: Path) -> None:
    """What only keyword matching reads (the keys, their postings and bigrams, the
    category postings) is made from the snapshot when first read: the folders, their
    ids, the tags and the category classes of a text are there without it (what a
    ranked round that scores reads), and a match makes it whole, as a build has it."""
    path, entries, cfg = _written(tmp_path)
    back = read_index_snapshot(path, entries, cfg, owner=OWNER)
    fresh = CandidateIndex(entries, cfg)
    assert not any(name in vars(back) for name in candidates_module._KEYWORD_PART)
    assert [f.id for f in back.folders] == [f.id for f in fresh.folders]
    assert back.by_id == fresh.by_id and tags_of(back) == tags_of(fresh)
    query = analyze_query("我和 Mina 跑马拉松了吗", cfg)
    assert back.categories_in(query) == fresh.categories_in(query)
    assert not _keyword_part_made(back)
    assert back.match(query).candidates == fresh.match(query).candidates
    assert _keyword_part_made(back) and back._keywords_later is None
    assert_fresh(back, entries, cfg)
    with pytest.raises(AttributeError):
        back.no_such_attribute  # type: ignore[attr-defined]  # noqa: B018  # missing as ever


def test_keyword_sections_that_do_not_fit_are_made_again_from_the_folders(
    tmp_path: Path,
) -> None:
    """A folder number out of range in the stored postings, checksums made right (no
    writer makes that): the restore is taken, and its keyword part, made when first read,
    is the one a build makes (the rest was checked when it was read)."""
    path, entries, cfg = _written(tmp_path)

    def out_of_range(body: bytearray, header: dict[str, Any]) -> None:
        at = 0
        for name, code, count in header["sections"]:
            if name == "p.n":
                body[at : at + 4] = (2**31 - 1).to_bytes(4, "little")
            at += count * np.dtype(code).itemsize

    path.write_bytes(_rewritten(path.read_bytes(), out_of_range))
    back = read_index_snapshot(path, entries, cfg, owner=OWNER)
    assert not _keyword_part_made(back)
    with pytest.raises(ValueError, match="out of range"):
        candidates_module._keyword_part(back._keywords_later or {}, len(back.folders))
    assert_fresh(back, entries, cfg)


def test_threads_reading_a_keyword_part_first_see_it_made_once_and_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, entries, cfg = _written(tmp_path)
    back = read_index_snapshot(path, entries, cfg, owner=OWNER)
    made: list[int] = []
    real = candidates_module._keyword_part

    def slow(arrays: Any, count: int) -> Any:
        made.append(count)
        time.sleep(0.05)  # the others come in meanwhile
        return real(arrays, count)

    monkeypatch.setattr(candidates_module, "_keyword_part", slow)
    seen: list[Any] = []
    threads = [
        threading.Thread(target=lambda: seen.append((back._postings, back._key_ids)))
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert made == [len(entries)] and len(seen) == 4
    assert all(p is seen[0][0] and k is seen[0][1] for p, k in seen)
    assert_fresh(back, entries, cfg)
