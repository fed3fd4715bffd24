"""The event / location / person index (`engine.recall.tag_index`) stays current.

It lives in the session's candidate index, which applies every store change in place:
after each archive, judge (re-score), re-archive and removal the labels it holds must be
the ones a fresh build over the same index gives, and mentions in a message must be
found longest first, once.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config import ENGINE_DEFAULTS, MemoryConfig, deep_merge
from engine.recall import CandidateIndex
from engine.recall.tag_index import TagIndex
from handlers.recall_state import candidate_index
from handlers.sessions import SessionState
from tests.engine.recall_fixtures import BASE_MS, Entry, new_store, write_folders


def _cfg(**over: Any) -> MemoryConfig:
    return MemoryConfig.model_validate(deep_merge(ENGINE_DEFAULTS, over))


CFG = _cfg()


def labels(ix: CandidateIndex) -> tuple[Any, ...]:
    """Everything the tag index answers, per kind."""
    tags = ix.tags
    return (
        tags.labels_by_folder(),
        {k: tags.counts(k) for k in ("event", "location", "person")},
        {form: sorted(owners) for form, owners in tags._forms.items()},  # mention forms
        dict(tags._form_lens),
    )


def fresh(store: Any, cfg: MemoryConfig = CFG) -> tuple[Any, ...]:
    return labels(CandidateIndex(store.index, cfg))


def test_labels_follow_archive_judge_rearchive_and_removal(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    trip = {"events": ["日本旅行"], "event": "日本旅行", "locations": ["京都"]}
    first = write_folders(
        store,
        [
            {"createdAt": BASE_MS + 1, "keywords": ["酒店"], **trip, "persons": ["小明"]},
            {"createdAt": BASE_MS + 2, "keywords": ["机场"], **trip},
            {"createdAt": BASE_MS + 3, "keywords": ["网关"], "persons": ["周岑", "小周"]},
            # unlabelled folders: each change below stays small enough to update in place
            *({"createdAt": BASE_MS + 10 + i, "keywords": [f"词{i}"]} for i in range(20)),
        ],
    )
    state = cast(
        SessionState, SimpleNamespace(store=store, recall_index=None, hygiene=None, key="s1")
    )
    ix = candidate_index(state, CFG)
    tags = ix.tags
    assert tags.folders("event", "日本旅行") == {first[0], first[1]}
    assert tags.union("person", ["小周", "小明"]) == {first[0], first[2]}
    assert labels(ix) == fresh(store)

    # archive: a new pending folder is not indexed until it is scored
    later = write_folders(
        store,
        [{"createdAt": BASE_MS + 4, "keywords": ["登录"], "scored": False}],
        txn="arc-2",
    )
    assert candidate_index(state, CFG) is ix
    assert tags.counts("event") == {"日本旅行": 2}

    # judge: the new folder gets an event, an old one changes only its persons (its
    # keywords and α unchanged), another loses its event
    store.update_metas(
        {
            later[0]: {
                "scored": True,
                "alpha": 0.7,
                "keywords": ["登录"],
                "events": ["登录重构项目"],
                "event": "登录重构项目",
            },
            first[2]: {"persons": ["岑哥"]},
            first[1]: {"events": None, "event": None},
        }
    )
    assert candidate_index(state, CFG) is ix  # updated in place
    assert tags.folders("event", "登录重构项目") == {later[0]}
    assert tags.folders("event", "日本旅行") == {first[0]}
    assert tags.folders("person", "岑哥") == {first[2]}
    assert tags.folders("person", "周岑") == frozenset()
    assert labels(ix) == fresh(store)

    # re-archive: the recall block archived again makes more folders with the labels
    again = write_folders(
        store,
        [{"createdAt": BASE_MS + 5, "keywords": ["酒店"], **trip}],
        txn="arc-3",
    )
    candidate_index(state, CFG)
    assert tags.folders("location", "京都") == {first[0], first[1], again[0]}

    # removal: archive/abort rolls the transactions back
    store.rollback_committed("arc-3")
    store.rollback_committed("arc-2")
    assert candidate_index(state, CFG) is ix
    assert tags.folders("location", "京都") == {first[0], first[1]}
    assert tags.counts("event") == {"日本旅行": 1}
    assert labels(ix) == fresh(store)


def test_a_kind_turned_off_is_not_indexed_and_labels_are_normalised() -> None:
    entries = [
        Entry("mem-a", 0.5, BASE_MS, ["家"], locations=["我家里", "小明的家"], persons=["Mina"]),
        Entry("mem-b", 0.5, BASE_MS, ["x"], events=["「日本旅行」"], persons=["mina"]),
        Entry("mem-c", 0.5, BASE_MS, ["y"], events=["空"], scored=False),
    ]
    ix = CandidateIndex(entries, CFG)
    assert ix.tags.counts("location") == {"家": 1, "小明家": 1}
    assert ix.tags.counts("person") == {"mina": 2}
    assert ix.tags.counts("event") == {"日本旅行": 1}
    off = _cfg(event={"mode": "off"}, person={"mode": "off"})
    ix_off = CandidateIndex(entries, off)
    assert ix_off.tags.counts("event") == {} and ix_off.tags.counts("person") == {}
    assert ix_off.tags.counts("location") == {"家": 1, "小明家": 1}
    # another mode is another index: the cache rebuilds instead of updating
    assert not ix.update(entries, off)


def test_mentions_longest_first_once_and_home_forms() -> None:
    tags = TagIndex(CFG)
    for fid, kind, values in [
        ("m1", "locations", ["北京"]),
        ("m2", "locations", ["北京大学"]),
        ("m3", "locations", ["家"]),
        ("m4", "locations", ["小明家"]),
        ("m5", "persons", ["小明"]),
        ("m6", "persons", ["Al"]),
        ("m7", "persons", ["小红", "小刚", "小李"]),
    ]:
        tags.add(SimpleNamespace(id=fid, **{kind: values}))

    def found(text: str, per_kind: int = 4) -> list[tuple[str, str]]:
        kinds = ("location", "person")
        return [(m.kind, m.label) for m in tags.mentions(text, kinds, per_kind)]

    assert found("我在北京大学见到了小明") == [("location", "北京大学"), ("person", "小明")]
    assert found("北京和北京大学") == [("location", "北京"), ("location", "北京大学")]
    assert found("大家好，专家说") == []  # a bare 家 is not the home
    assert found("我们回家吧") == [("location", "家")]
    assert found("去小明的家玩") == [("location", "小明家")]  # not the person 小明
    assert found("ALbum and al") == [("person", "al")]  # whole Latin words only
    assert found("小红小刚小李和小明", per_kind=2) == [("person", "小红"), ("person", "小刚")]
    assert tags.mentions("我在北京", ("person",), 4) == []


# -- property: an index updated in place equals a fresh build --------------------------
EVENTS = ["日本旅行", "日本 旅行", "登录重构项目", "空", "", "Trip"]
PLACES = ["北京", "我家", "家里", "小明的家", "Tokyo", "tokyo"]
PEOPLE = ["小明", "周岑", "小周", "Mina", "mina"]
_serial = iter(range(10**9))


def _entry(scored: bool, ev: list[str], loc: list[str], per: list[str]) -> Entry:
    e = Entry(f"mem-{next(_serial):06d}", 0.5, BASE_MS, ["k"], scored=scored)
    return dataclasses.replace(e, events=ev or None, locations=loc or None, persons=per or None)


lists = st.lists
entry_st = st.builds(
    _entry,
    st.booleans(),
    lists(st.sampled_from(EVENTS), max_size=3),
    lists(st.sampled_from(PLACES), max_size=3),
    lists(st.sampled_from(PEOPLE), max_size=3),
)
op_st = st.one_of(
    st.tuples(st.just("add"), entry_st),
    st.tuples(st.just("relabel"), st.integers(0, 99), entry_st),
    st.tuples(st.just("remove"), st.integers(0, 99)),
)


@settings(max_examples=60, deadline=None)
@given(lists(entry_st, max_size=8), lists(op_st, max_size=12))
def test_update_equals_fresh_build(start: list[Entry], ops: list[tuple[Any, ...]]) -> None:
    entries = list(start)
    ix = CandidateIndex(entries, CFG)
    for op in ops:
        if op[0] == "add":
            entries.append(op[1])
        elif entries and op[0] == "relabel":
            i = op[1] % len(entries)
            new = op[2]
            entries[i] = dataclasses.replace(
                entries[i],
                scored=new.scored,
                events=new.events,
                locations=new.locations,
                persons=new.persons,
            )
        elif entries:
            del entries[op[1] % len(entries)]
        if not ix.update(entries, CFG, max_changes=1.0):
            ix = CandidateIndex(entries, CFG)
        assert labels(ix) == labels(CandidateIndex(entries, CFG))
