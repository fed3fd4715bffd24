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

import handlers.params as params_module
from handlers.errors import HandlerError
from handlers.params import MAX_DEPTH, MAX_NODES, parse_params
from handlers.pre_step import KNOWN_SURFACE_NODES, PreStepParams
from handlers.validated_once import json_values
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
