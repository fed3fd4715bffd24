"""The surface is looked up in its memory as a whole, once per request
(``ValidatedOnce.each``, ``handlers.validated_once.recalled``): remembered nodes skip
pydantic and the shape walk, new ones are validated alone, and nothing of an answer or
a refusal changes: each outcome is compared with plain validation, byte for byte."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import handlers.params as params_module
from handlers.errors import HandlerError
from handlers.params import MAX_DEPTH, MAX_NODES, parse_params
from handlers.pre_step import KNOWN_SURFACE_NODES, PreStepParams
from handlers.validated_once import ValidatedOnce, json_values
from tests.archive_fixtures import Surface, pre_step_params


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    KNOWN_SURFACE_NODES.clear()
    yield
    KNOWN_SURFACE_NODES.clear()


def surface_params(turns: int = 4) -> dict[str, Any]:
    s = Surface()
    s.system()
    for i in range(turns):
        s.turn_pair(i, 50)
    return pre_step_params(s, session="recalled")


def wire(raw: Any) -> Any:
    with json_values():
        return parse_params(PreStepParams, orjson.loads(orjson.dumps(raw)))


def outcome(parse: Any, raw: Any) -> bytes:
    try:
        return orjson.dumps(parse(raw).model_dump())
    except HandlerError as exc:
        return orjson.dumps(exc.to_error())


def plain(raw: Any) -> Any:
    return parse_params(PreStepParams, copy.deepcopy(raw))


def test_a_grown_surface_validates_only_its_new_nodes() -> None:
    raw = surface_params(3)
    wire(raw)
    grown = surface_params(5)  # the same first nodes, then new ones
    new = len(grown["surface"]) - len(raw["surface"])
    misses, hits = KNOWN_SURFACE_NODES.misses, KNOWN_SURFACE_NODES.hits
    got = wire(grown)
    assert KNOWN_SURFACE_NODES.misses - misses == new
    assert KNOWN_SURFACE_NODES.hits - hits == len(raw["surface"])
    assert orjson.dumps(got.model_dump()) == orjson.dumps(plain(grown).model_dump())


def test_remembered_nodes_are_not_walked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = surface_params()
    wire(raw)
    walked: list[int] = []
    real = params_module.json_shape_errors

    def watching(value: Any, prefix: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        walked.append(sum(1 for n in value.get("surface", ()) if n is not None))
        return real(value, prefix)

    monkeypatch.setattr(params_module, "json_shape_errors", watching)
    wire(raw)
    assert walked == [0]


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "change",
    [
        lambda n: n.update(seq=-1),  # a model error in a new node
        lambda n: n.update(extra=_nested(MAX_DEPTH)),  # a shape error in a new node
        lambda n: n["message"].update(content=7),
    ],
)
def test_a_bad_new_node_among_remembered_ones_is_refused_as_plainly(change: Any) -> None:
    raw = surface_params()
    wire(raw)
    bad = copy.deepcopy(raw)
    node = copy.deepcopy(bad["surface"][-1])
    change(node)
    bad["surface"].insert(len(bad["surface"]) // 2, node)
    refused = outcome(plain, bad)
    assert b'"code":-32602' in refused
    assert outcome(wire, bad) == refused


def test_a_surface_past_its_bound_is_refused_as_plainly() -> None:
    raw = surface_params()
    wire(raw)
    assert len(raw["surface"]) < MAX_NODES
    long = copy.deepcopy(raw)
    long["surface"] = raw["surface"] * (MAX_NODES // len(raw["surface"]) + 1)
    assert outcome(wire, long) == outcome(plain, long)


# ---- the surface's own JSON first ------------------------------------------------------


def _count_lookups(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The keys of per-value look-ups in the surface memory from now on."""
    seen: list[bytes] = []
    real = KNOWN_SURFACE_NODES._touch

    def touch(key: bytes) -> Any:
        seen.append(key)
        return real(key)

    monkeypatch.setattr(KNOWN_SURFACE_NODES, "_touch", touch)
    return seen


def test_a_surface_sent_again_is_known_from_its_own_json(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = surface_params()
    first = wire(raw)
    lookups = _count_lookups(monkeypatch)
    hits = KNOWN_SURFACE_NODES.hits
    again = wire(raw)
    assert lookups == []  # no per-node encoding or look-up
    assert KNOWN_SURFACE_NODES.hits - hits == len(raw["surface"])
    expected = orjson.dumps(plain(raw).model_dump())
    assert orjson.dumps(first.model_dump()) == orjson.dumps(again.model_dump()) == expected


def test_a_grown_surface_looks_up_only_its_new_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    wire(surface_params(3))
    grown = surface_params(5)
    lookups = _count_lookups(monkeypatch)
    got = wire(grown)
    new = grown["surface"][len(surface_params(3)["surface"]) :]
    assert new and set(lookups) == {orjson.dumps(n) for n in new}
    assert orjson.dumps(got.model_dump()) == orjson.dumps(plain(grown).model_dump())
    lookups.clear()
    wire(grown)  # remembered as a whole now
    assert lookups == []


def test_a_node_rewritten_by_validation_is_rewritten_from_the_whole_memory_too() -> None:
    raw = surface_params()
    raw["surface"][2]["seq"] = float(raw["surface"][2]["seq"])  # read as an int
    expected = orjson.dumps(plain(raw).model_dump())
    one, two = wire(raw), wire(raw)
    assert orjson.dumps(one.model_dump()) == orjson.dumps(two.model_dump()) == expected
    assert type(two.surface[2]["seq"]) is int
    assert one.surface[2] is not two.surface[2]


LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 2**54),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=3),
    st.builds(list),  # a fresh object each draw: an edit may put it inside itself
    st.builds(dict),
)
EDITS = st.lists(
    st.tuples(
        st.sampled_from(["set", "drop", "copy", "cut", "swap", "node"]),
        st.integers(0, 30),
        st.sampled_from(["seq", "time", "turn", "type", "message"]),
        LEAVES,
    ),
    max_size=4,
)


def _edited(raw: dict[str, Any], edits: list[tuple[str, int, str, Any]]) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    nodes: list[Any] = out["surface"]
    for op, at, key, leaf in edits:
        if not nodes:
            break
        i = at % len(nodes)
        if op == "set" and isinstance(nodes[i], dict):
            nodes[i][key] = leaf
        elif op == "drop":
            del nodes[i]
        elif op == "copy":
            nodes.insert(i, copy.deepcopy(nodes[-1 - i % len(nodes)]))
        elif op == "cut":
            del nodes[i:]
        elif op == "swap":
            j = (i + 1) % len(nodes)
            nodes[i], nodes[j] = nodes[j], nodes[i]
        elif op == "node":
            nodes[i] = leaf
    return out


@settings(max_examples=150, deadline=None)
@given(first=EDITS, second=EDITS)
def test_any_surface_after_any_other_reads_as_plain_validation_does(
    first: list[tuple[str, int, str, Any]], second: list[tuple[str, int, str, Any]]
) -> None:
    """Whatever the memory holds (a surface, an edited one, their nodes), an edited
    surface gets what plain validation gives it, twice in a row."""
    KNOWN_SURFACE_NODES.clear()
    raw = surface_params()
    wire(raw)
    outcome(wire, _edited(raw, first))  # remembered, or refused
    target = _edited(raw, second)
    expected = outcome(plain, target)
    assert outcome(wire, target) == expected
    assert outcome(wire, target) == expected


def test_remembered_lists_are_bounded_and_forgotten() -> None:
    memo = ValidatedOnce(max_bytes=200)

    def same(value: Any) -> Any:
        return value

    validate = memo.each(MAX_NODES)
    with json_values():
        for n in range(10):
            values = [{"n": n, "pad": "x" * 40}, {"m": n}]
            assert validate(values, lambda vs: [same(v) for v in vs]) == values
        assert sum(len(w.json) for w in memo._lists) <= 200
        assert len(memo._lists) >= 1
        memo.clear()
        assert memo._lists == [] and len(memo) == 0
