"""Compact index entries: the model's validation, the row given back exactly, one copy."""

from __future__ import annotations

import copy
import pickle
import sys
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from engine.store import IndexEntry, IndexFields
from engine.store.index_entry import entry_from_row
from engine.store.indexfile import row_digest
from engine.store.records import INDEX_FIELDS

ROW: dict[str, Any] = {
    "id": "mem-20260101T000000Z-0001",
    "createdAt": 1_767_225_600_000,
    "alpha": 0.7,
    "beta": 2.0,
    "scored": True,
    "rescorePending": False,
    "keywords": ["星港项目", "gateway"],
    "title": "网关端口",
    "scoreMode": "model",
    "eventStart": 1_767_000_000_000,
    "timeTags": [{"kind": "day", "at": 1}],
    "idempotencyKey": '["s",1,2,3,"h",0]',
}


def _same_as_model(entry: IndexEntry, row: Any) -> None:
    """Every field as the pydantic model makes it (value and type), extras alike."""
    model = IndexFields.model_validate(row)
    for name in INDEX_FIELDS:
        mine, theirs = getattr(entry, name), getattr(model, name)
        assert mine == theirs and type(mine) is type(theirs), name
    assert entry.model_extra == (model.model_extra or {})


def test_a_row_reads_as_the_model_and_gives_itself_back() -> None:
    row = {**ROW, "futureField": {"x": [1, 2]}, "pendingEra": None}
    entry = entry_from_row(row)
    _same_as_model(entry, row)
    assert entry.row() == row and list(entry.row()) == list(row)
    assert row_digest(entry.row()) == row_digest(row)
    assert entry.model_extra == {"futureField": {"x": [1, 2]}}
    assert entry.keywords == ["星港项目", "gateway"] and entry.pendingSince is None


def test_an_integer_alpha_is_a_float_but_written_back_as_read() -> None:
    row = {**ROW, "alpha": 1, "beta": -3}  # as the reference plugin writes them
    entry = entry_from_row(row)
    assert entry.alpha == 1.0 and type(entry.alpha) is float and type(entry.beta) is float
    assert orjson.dumps(entry.row()) == orjson.dumps(row)
    _same_as_model(entry, row)


def test_missing_fields_take_the_model_defaults_and_stay_missing() -> None:
    row = {"id": "mem-20260101T000000Z-0002", "createdAt": 5}
    entry = entry_from_row(row)
    assert (entry.alpha, entry.beta, entry.scored, entry.rescorePending) == (0.0, 0.0, True, False)
    assert entry.keywords == [] and entry.title == ""
    assert entry.row() == row
    other = entry_from_row(dict(row))
    assert entry.keywords is not other.keywords  # never a shared mutable default


@pytest.mark.parametrize(
    "bad",
    [
        {"createdAt": 5},
        {"id": "x", "createdAt": "yesterday"},
        {"id": "x", "createdAt": 5, "keywords": None},
        {"id": None, "createdAt": 5},
        "not a row",
    ],
)
def test_what_the_model_refuses_is_refused(bad: Any) -> None:
    with pytest.raises(ValidationError):
        IndexFields.model_validate(bad)
    with pytest.raises(ValidationError):
        entry_from_row(bad)


def test_values_the_model_coerces_go_through_it() -> None:
    row = {"id": "mem-1", "createdAt": "12", "scored": 1, "eventEnd": 3.0, "alpha": True}
    entry = entry_from_row(row)
    _same_as_model(entry, row)
    assert entry.createdAt == 12 and entry.scored is True and entry.eventEnd == 3
    assert entry.row() == row  # the raw spelling is what is written back


def test_equality_is_the_models() -> None:
    a = entry_from_row(ROW)
    b = entry_from_row(dict(reversed(list(ROW.items()))))  # other key order
    assert a == b
    assert (a != b) is False  # tuple's own != would compare the key order too
    assert a != entry_from_row({**ROW, "alpha": 0.5})
    assert a != entry_from_row({**ROW, "extra": 1})
    assert IndexEntry(**ROW) == a
    with pytest.raises(TypeError):
        hash(a)


def test_entries_survive_copy_and_pickle() -> None:
    a = entry_from_row({**ROW, "extra": [1]})
    for b in (copy.copy(a), copy.deepcopy(a), pickle.loads(pickle.dumps(a))):
        assert b == a and b.row() == a.row()


def test_repeated_words_are_held_once() -> None:
    a = entry_from_row({**ROW, "keywords": ["".join(["星港", "项目"])]})
    b = entry_from_row({**ROW, "keywords": ["".join(["星", "港项目"])]})
    assert a.keywords[0] is b.keywords[0]
    assert a.scoreMode is b.scoreMode


def test_word_lists_are_held_in_lists_of_their_exact_size() -> None:
    """A parsed row's word lists take no spare slots (what a list grown from a map
    keeps: a third of a 10-word list), on the model's path too."""
    words = [f"词{i}" for i in range(10)]
    fast = entry_from_row({**ROW, "keywords": words, "persons": words[:5]})
    slow = entry_from_row({**ROW, "keywords": words, "alpha": "0.7"})  # the model coerces
    for held in (fast.keywords, fast.persons, slow.keywords):
        assert held is not None and held == words[: len(held)]
        assert sys.getsizeof(held) == sys.getsizeof(list(held))  # list(list) is exact


_text = st.text(max_size=8)
# a row comes from JSON read with orjson, which holds integers in 64 bits (a larger one
# reads as a float), so no row holds a wider integer
_int64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.floats(allow_nan=False, allow_infinity=False),
    _text,
    st.lists(_text, max_size=3),
    st.lists(st.dictionaries(_text, _int64, max_size=2), max_size=2),
    st.lists(_int64, max_size=2),
)
_keys = st.sampled_from([*INDEX_FIELDS, "messageCount", "futureField"])


@settings(max_examples=400, deadline=None)
@given(
    st.dictionaries(_keys, _values, max_size=12),
    st.integers(min_value=0, max_value=2**40),
)
def test_any_row_validates_as_the_model_does(fields: dict[str, Any], created: int) -> None:
    """The fast path and the model agree on every row: refused or not, the same values
    and types, and the row given back as it came."""
    row = {"id": "mem-20260101T000000Z-0003", "createdAt": created, **fields}
    try:
        model = IndexFields.model_validate(row)
    except ValidationError:
        with pytest.raises(ValidationError):
            entry_from_row(row)
        return
    entry = entry_from_row(row)
    _same_as_model(entry, row)
    assert entry == IndexEntry.model_validate(model.model_dump() | (model.model_extra or {}))
    assert entry.row() == row and list(entry.row()) == list(row)
    assert orjson.dumps(entry.row()) == orjson.dumps(row)
