"""`context.nodes` handed on as seq -> tokens (``handlers.node_tokens``): whatever the
entries, the counts are what the models make of them and a refusal is the models' own,
byte for byte; entries of plain ints never build a model."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, ValidationError

import handlers.node_tokens as node_tokens_module
from handlers.errors import HandlerError
from handlers.node_tokens import NodeTokens, counts_of, surely_counted
from handlers.params import MAX_NODES, MAX_SAFE_INT, MAX_TOKENS, field_errors, parse_params
from handlers.pre_step import ContextInfo, PreStepParams


class _Models(BaseModel):
    """`context.nodes` as a list of models: the reference the counts are held to."""

    nodes: Annotated[list[NodeTokens], Field(max_length=MAX_NODES)]


def _reference(nodes: Any) -> bytes:
    try:
        return orjson.dumps(
            sorted(counts_of(_Models.model_validate({"nodes": nodes}).nodes).items())
        )
    except ValidationError as exc:
        return orjson.dumps(field_errors(exc))


def _ours(nodes: Any) -> bytes:
    try:
        got = ContextInfo.model_validate({"totalTokens": 1, "nodes": nodes}).nodes
        return orjson.dumps(sorted(got.items()))
    except ValidationError as exc:
        return orjson.dumps(field_errors(exc))


NUMBERS = st.one_of(
    st.integers(0, 50),
    st.sampled_from([-1, MAX_SAFE_INT, MAX_SAFE_INT + 1, MAX_TOKENS, MAX_TOKENS + 1, 2**70]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([2.0, 0.0, 1e300, 5.5]),
    st.booleans(),
    st.none(),
    st.text(max_size=2),
)
ENTRY = st.one_of(
    st.fixed_dictionaries(
        {"seq": NUMBERS}, optional={"tokens": NUMBERS, "extra": st.integers() | st.text()}
    ),
    st.fixed_dictionaries({}, optional={"tokens": NUMBERS}),
    NUMBERS,
    st.just([]),
)


@settings(max_examples=400, deadline=None)
@given(nodes=st.lists(ENTRY, max_size=6) | NUMBERS)
def test_counts_and_refusals_are_the_models_own(nodes: Any) -> None:
    assert _ours(nodes) == _reference(nodes)
    quick = surely_counted(nodes)
    if quick is not None:  # a proof, never a second opinion
        assert orjson.dumps(sorted(quick.items())) == _reference(nodes)


def test_a_later_entry_of_a_seq_wins_and_uncounted_entries_are_left_out() -> None:
    nodes = [
        {"seq": 1, "tokens": 5},
        {"seq": 2},
        {"seq": 1, "tokens": None},
        {"seq": 3, "tokens": 7},
    ]
    got = ContextInfo.model_validate({"totalTokens": 1, "nodes": nodes}).nodes
    assert got == {1: 5, 3: 7}
    nodes.append({"seq": 1, "tokens": 9})
    assert ContextInfo.model_validate({"totalTokens": 1, "nodes": nodes}).nodes == {1: 9, 3: 7}


def test_plain_int_entries_build_no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_models(_nodes: Any) -> Any:
        raise AssertionError("built the models")

    monkeypatch.setattr(node_tokens_module, "counts_of", no_models)
    nodes = [{"seq": i, "tokens": 10 * i, "note": "kept"} for i in range(400)]
    got = ContextInfo.model_validate({"totalTokens": 1, "nodes": nodes}).nodes
    assert got == {i: 10 * i for i in range(400)}


def test_a_long_list_is_refused_with_the_models_bound() -> None:
    nodes = [{"seq": 1, "tokens": 1}] * (MAX_NODES + 1)
    assert _ours(nodes) == _reference(nodes)
    assert b"too_long" in _ours(nodes)


def test_a_refusal_names_the_entry_in_the_pre_step_params() -> None:
    raw = {"session": {"id": "s"}, "context": {"totalTokens": 1, "nodes": [{"seq": 1}, 3]}}
    with pytest.raises(HandlerError) as caught:
        parse_params(PreStepParams, raw)
    errors = (caught.value.data or {})["errors"]
    assert [e["field"] for e in errors] == ["context.nodes.1"]
    assert "NodeTokens" in errors[0]["message"]  # the model's own message


def test_dumped_back_as_entries() -> None:
    info = ContextInfo.model_validate({"totalTokens": 1, "nodes": [{"seq": 4, "tokens": 2}]})
    assert info.model_dump()["nodes"] == [{"seq": 4, "tokens": 2}]
